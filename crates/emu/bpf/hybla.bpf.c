/* TCP Hybla (C. Caini, R. Firrincieli, "TCP Hybla: a TCP enhancement for heterogeneous networks",
 * International Journal of Satellite Communications and Networking, 2004) as a kernel congestion control.
 *
 * Hybla makes a long-RTT connection's window grow, in time, as a connection with the reference round trip
 * RTT0 = 25 ms would. With rho = RTT / RTT0 (at least 1):
 *   - the initial window is rho times the connection's initial window;
 *   - slow start:           cwnd += 2^rho - 1        per acknowledged segment (x 2^rho per RTT);
 *   - congestion avoidance: cwnd += rho^2 / cwnd     per acknowledged segment (+ rho^2 per RTT);
 *   - a loss halves the window as in NewReno (the kernel's SACK recovery does the rest).
 * With rho = 1 (RTT <= 25 ms) this is NewReno. The paper counts ACKs, each acknowledging one segment in its
 * model; counting acknowledged segments keeps the rule with delayed ACKs. rho follows the smallest RTT
 * measured (propagation, not queueing); the slow-start exponent is capped at 16 (2^16 segments per ACK), so
 * a window cannot overflow. Windows grow in 1/256-segment steps kept in the connection's private area.
 */
#include "dtk_bpf.h"

#ifndef DTK_TAG
#define DTK_TAG dev
#endif
#define PASTE2(a, b) a##_##b
#define PASTE(a, b) PASTE2(a, b)

char _license[] SEC("license") = "Dual BSD/GPL";

#define RTT0_US 25000u
#define RHO_ONE 256u              /* rho in 1/256 */
#define RHO_MAX (256u * 1024u)    /* RTT up to 25.6 s */
#define SS_EXP_MAX 16u

struct hybla {
	u32 rho;        /* rho x 256, >= 256 */
	u32 min_rtt_us; /* 0: none measured yet */
	u32 frac;       /* growth not yet applied, 1/256 segment */
};

INLINE struct hybla *hybla_of(struct sock *sk)
{
	return ca_priv(sk);
}

INLINE u32 rho_of_rtt(u32 rtt_us)
{
	u64 r = (u64)rtt_us * RHO_ONE / RTT0_US;
	if (r < RHO_ONE)
		r = RHO_ONE;
	if (r > RHO_MAX)
		r = RHO_MAX;
	return (u32)r;
}

/* 2^(x / 256) x 256 for x <= 16 x 256: 2^integer part times a cubic for 2^fraction (relative error < 1e-4). */
INLINE u64 pow2_256(u32 x)
{
	u32 i = x >> 8;
	u64 f = x & 255; /* fraction, 1/256 */
	/* 2^f ~ 1 + 0.695556 f + 0.226173 f^2 + 0.078271 f^3, coefficients x 65536 */
	u64 p = 65536 + (45584 * f) / 256 + (14822 * f * f) / 65536 + (5130 * f * f * f) / 16777216;
	return (p << i) >> 8;
}

INLINE u32 clamp_cwnd(const struct tcp_sock *tp, u64 cwnd)
{
	u32 clamp = tp->snd_cwnd_clamp;
	if (cwnd > clamp)
		cwnd = clamp;
	if (cwnd < 2)
		cwnd = 2;
	return (u32)cwnd;
}

SEC("struct_ops/hybla_init")
void hybla_init(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	struct tcp_sock *tp = tcp_sk(sk);
	struct hybla *h = hybla_of(sk);
	u32 rtt = tp->srtt_us >> 3; /* the handshake's RTT, 0 if none */

	h->min_rtt_us = rtt;
	h->rho = rtt ? rho_of_rtt(rtt) : RHO_ONE;
	h->frac = 0;
	/* The kernel has set the initial window (route initcwnd, else 10) before calling init. */
	tp->snd_cwnd = clamp_cwnd(tp, ((u64)tp->snd_cwnd * h->rho + RHO_ONE - 1) / RHO_ONE);
	tp->snd_cwnd_cnt = 0;
}

SEC("struct_ops/hybla_pkts_acked")
void hybla_pkts_acked(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	const struct ack_sample *s = (const struct ack_sample *)ARG(ctx, 1);
	struct hybla *h = hybla_of(sk);
	s32 rtt = s->rtt_us;

	if (rtt > 0 && (h->min_rtt_us == 0 || (u32)rtt < h->min_rtt_us)) {
		h->min_rtt_us = rtt;
		h->rho = rho_of_rtt(rtt);
	}
}

SEC("struct_ops/hybla_cong_avoid")
void hybla_cong_avoid(u64 *ctx)
{
	struct sock *sk = (struct sock *)ARG(ctx, 0);
	u32 acked = (u32)ARG(ctx, 2);
	struct tcp_sock *tp = tcp_sk(sk);
	struct hybla *h = hybla_of(sk);
	u32 cwnd = tp->snd_cwnd;
	u64 per_segment, growth;

	if (!cwnd_limited(tp) || acked == 0)
		return;
	if (cwnd < tp->snd_ssthresh) {
		u32 e = h->rho;
		if (e > SS_EXP_MAX * RHO_ONE)
			e = SS_EXP_MAX * RHO_ONE;
		per_segment = pow2_256(e) - RHO_ONE; /* 2^rho - 1, x 256 */
	} else {
		u64 rho = h->rho;
		per_segment = (rho * rho / RHO_ONE) / (cwnd ? cwnd : 1); /* rho^2 / cwnd, x 256 */
	}
	growth = per_segment * acked + h->frac;
	h->frac = growth & 255;
	tp->snd_cwnd = clamp_cwnd(tp, (u64)cwnd + (growth >> 8));
}

SEC("struct_ops/hybla_ssthresh")
u32 hybla_ssthresh(u64 *ctx)
{
	struct tcp_sock *tp = tcp_sk((struct sock *)ARG(ctx, 0));
	u32 half = tp->snd_cwnd >> 1;
	return half > 2 ? half : 2;
}

SEC("struct_ops/hybla_undo_cwnd")
u32 hybla_undo_cwnd(u64 *ctx)
{
	struct tcp_sock *tp = tcp_sk((struct sock *)ARG(ctx, 0));
	return tp->snd_cwnd > tp->prior_cwnd ? tp->snd_cwnd : tp->prior_cwnd;
}

SEC(".struct_ops")
struct tcp_congestion_ops PASTE(hybla, DTK_TAG) = {
	.init = (void *)hybla_init,
	.pkts_acked = (void *)hybla_pkts_acked,
	.cong_avoid = (void *)hybla_cong_avoid,
	.ssthresh = (void *)hybla_ssthresh,
	.undo_cwnd = (void *)hybla_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = "hybla",
};
