/* Declarations shared by dtnkit's BPF congestion controls (struct_ops programs for the kernel's
 * tcp_congestion_ops).
 *
 * Nothing here comes from kernel headers: every kernel structure is declared with only the fields the
 * programs use and marked preserve_access_index, so clang records each field access as a BTF (CO-RE)
 * relocation and the loader (libbpf inside bpftool) fixes the offsets against the running kernel's BTF
 * (/sys/kernel/btf/vmlinux). One object therefore loads on any kernel with BTF and struct_ops, whatever
 * its configuration; only clang is needed to build it.
 */
#ifndef DTK_BPF_H
#define DTK_BPF_H

typedef unsigned char u8;
typedef unsigned int u32;
typedef int s32;
typedef unsigned long long u64;

#define SEC(name) __attribute__((section(name), used))
#define CORE __attribute__((preserve_access_index))
#define INLINE static inline __attribute__((always_inline))

/* The kernel's struct tcp_sock embeds inet_connection_sock, which embeds inet_sock, which embeds sock: a
 * struct_ops program's `struct sock *` argument is the tcp_sock (the verifier treats it so). */
struct sock {
	u32 __unused_sock;
} CORE;

struct inet_connection_sock {
	u64 icsk_ca_priv[13];
} CORE;

struct tcp_sock {
	u32 srtt_us;          /* smoothed RTT << 3, µs */
	u32 snd_ssthresh;
	u32 snd_cwnd;
	u32 snd_cwnd_cnt;
	u32 snd_cwnd_clamp;
	u32 prior_cwnd;
	u32 max_packets_out;
	u32 total_retrans;
	u8 is_cwnd_limited : 1;
} CORE;

struct ack_sample {
	u32 pkts_acked;
	s32 rtt_us;
	u32 in_flight;
} CORE;

#define TCP_CA_NAME_MAX 16
#define TCP_CONG_NON_RESTRICTED 0x1

/* The members dtnkit fills; libbpf matches them to the kernel's by name. */
struct tcp_congestion_ops {
	u32 (*ssthresh)(struct sock *sk);
	void (*cong_avoid)(struct sock *sk, u32 ack, u32 acked);
	void (*set_state)(struct sock *sk, u8 new_state);
	void (*pkts_acked)(struct sock *sk, const struct ack_sample *sample);
	u32 (*undo_cwnd)(struct sock *sk);
	void (*init)(struct sock *sk);
	u32 flags;
	char name[TCP_CA_NAME_MAX];
} CORE;

#define TCP_INFINITE_SSTHRESH 0x7fffffff

/* A bit-field read relocated like the other fields (clang's field-info builtins). */
enum { FIELD_BYTE_OFFSET = 0, FIELD_BYTE_SIZE = 1, FIELD_LSHIFT_U64 = 4, FIELD_RSHIFT_U64 = 5 };
#define READ_BITFIELD(s, field)                                                                    \
	({                                                                                         \
		const void *p__ = (const void *)(s) +                                              \
				  __builtin_preserve_field_info((s)->field, FIELD_BYTE_OFFSET);    \
		u64 v__ = 0;                                                                       \
		switch (__builtin_preserve_field_info((s)->field, FIELD_BYTE_SIZE)) {              \
		case 1: v__ = *(const u8 *)p__; break;                                             \
		case 2: v__ = *(const unsigned short *)p__; break;                                 \
		case 4: v__ = *(const u32 *)p__; break;                                            \
		case 8: v__ = *(const u64 *)p__; break;                                            \
		}                                                                                  \
		v__ <<= __builtin_preserve_field_info((s)->field, FIELD_LSHIFT_U64);               \
		v__ >>= __builtin_preserve_field_info((s)->field, FIELD_RSHIFT_U64);               \
		v__;                                                                               \
	})

INLINE struct tcp_sock *tcp_sk(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

INLINE void *ca_priv(struct sock *sk)
{
	return (void *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

INLINE int in_slow_start(const struct tcp_sock *tp)
{
	return tp->snd_cwnd < tp->snd_ssthresh;
}

/* Whether the sender is limited by its congestion window (the kernel's rule: growth is pointless when the
 * application or the receiver's window limits what is in flight). */
INLINE int cwnd_limited(const struct tcp_sock *tp)
{
	if (READ_BITFIELD(tp, is_cwnd_limited))
		return 1;
	if (in_slow_start(tp))
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return 0;
}

/* struct_ops programs receive their arguments as an array of u64. */
#define ARG(ctx, i) ((ctx)[i])

#endif
