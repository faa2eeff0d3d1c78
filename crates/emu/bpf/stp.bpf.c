/* STP, the satellite transport protocol of the splitting gateway in Caini et al.'s LEO/GEO study (its
 * STP-IW86-320K): TCP NewReno with SACK whose congestion window is a constant equal to the path's
 * bandwidth-delay product.
 *   - no slow start: the connection sends its whole window W from the first RTT;
 *   - the window never grows beyond W and is not cut by a loss: the recovery (the kernel's SACK recovery)
 *     works within W, and when it ends — or at the first ACK after a retransmission timeout — the window is
 *     W again.
 * W is the connection's initial window: the route's `initcwnd` (dtnkit: [ip.node.X] initcwnd, or
 * tcp.initcwnd in an experiment), bounded by the connection's window clamp (snd_cwnd_clamp: the route's
 * `cwnd lock` where the kernel applies it). When the kernel cut the initial window to 1 because the SYN was
 * retransmitted, W is that clamp if one is set, else the kernel's default initial window (10). The buffers
 * (320 KB in the paper) are socket options.
 */
#include "dtk_bpf.h"

#ifndef DTK_TAG
#define DTK_TAG dev
#endif
#define PASTE2(a, b) a##_##b
#define PASTE(a, b) PASTE2(a, b)

char _license[] SEC("license") = "Dual BSD/GPL";

#define KERNEL_INIT_CWND 10u

struct stp {
	u32 window;
};

INLINE u32 stp_window(struct sock *sk)
{
	u32 w = ((struct stp *)ca_priv(sk))->window;
	return w ? w : KERNEL_INIT_CWND;
}

SEC("struct_ops/stp_init")
void stp_init(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	struct tcp_sock *tp = tcp_sk(sk);
	struct stp *s = ca_priv(sk);
	u32 clamp = tp->snd_cwnd_clamp;
	u32 w = tp->snd_cwnd; /* the initial window the kernel just set */

	if (w <= 1)
		w = clamp < 0xffff ? clamp : KERNEL_INIT_CWND;
	if (w > clamp)
		w = clamp;
	if (w < 2)
		w = 2;
	s->window = w;
	tp->snd_cwnd = w;
	tp->snd_ssthresh = w; /* not in slow start: cwnd >= ssthresh */
	tp->snd_cwnd_cnt = 0;
}

SEC("struct_ops/stp_cong_avoid")
void stp_cong_avoid(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	struct tcp_sock *tp = tcp_sk(sk);
	u32 w = stp_window(sk);

	/* Called on every ACK outside recovery, also after a timeout has set the window to 1. */
	tp->snd_cwnd = w;
	tp->snd_ssthresh = w;
}

#define TCP_CA_OPEN 0

SEC("struct_ops/stp_set_state")
void stp_set_state(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	u8 new_state = (u8)ARG(ctx, 1);
	struct tcp_sock *tp = tcp_sk(sk);
	u32 w;

	/* Leaving a recovery. The kernel sets the window to ssthresh (W) only when the recovery can still be
	 * undone; otherwise it keeps the window proportional rate reduction left (W minus a few segments) until
	 * the next ACK of new data calls cong_avoid. The window is W from the moment the connection is open. */
	if (new_state != TCP_CA_OPEN)
		return;
	w = stp_window(sk);
	tp->snd_cwnd = w;
	tp->snd_ssthresh = w;
}

SEC("struct_ops/stp_ssthresh")
u32 stp_ssthresh(u64 *ctx)
{
	/* The window the recovery ends at: W (no multiplicative decrease). */
	return stp_window((struct sock *)ARG(ctx, 0));
}

SEC("struct_ops/stp_undo_cwnd")
u32 stp_undo_cwnd(u64 *ctx)
{
	return stp_window((struct sock *)ARG(ctx, 0));
}

SEC(".struct_ops")
struct tcp_congestion_ops PASTE(stp, DTK_TAG) = {
	.init = (void *)stp_init,
	.cong_avoid = (void *)stp_cong_avoid,
	.set_state = (void *)stp_set_state,
	.ssthresh = (void *)stp_ssthresh,
	.undo_cwnd = (void *)stp_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "stp",
};
