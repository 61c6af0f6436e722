/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * Helpers shared by the rdma_bond selftest programs (plain public verbs).
 */
#ifndef RBOND_PROGS_COMMON_H
#define RBOND_PROGS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* TAP-like output */
extern int tap_n, tap_failed, tap_skipped;
void tap_ok(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the TAP plan and summary; exit status: 1 if a check failed or none ran */
int tap_end(void);
void tap_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

struct dev {
	const char *name;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_port_attr port;
	union ibv_gid gid;
	int gid_index;
	bool is_bond;	/* /sys/class/infiniband/<name>/bond exists */
};

int dev_open(struct dev *d, const char *name, int gid_index);
void dev_close(struct dev *d);

/* Connection parameters of one RC QP end. */
struct qp_info {
	uint32_t qpn;
	uint32_t psn;
	union ibv_gid gid;
	uint16_t lid;
	uint8_t mtu; /* enum ibv_mtu */
};

/*
 * Connection data of one QP end as sent to the peer (network byte order).
 * Each program's own wire struct starts with it and appends its extras.
 */
struct qp_wire {
	uint32_t qpn, psn;
	uint8_t gid[16];
	uint16_t lid;
	uint8_t mtu, pad;
} __attribute__((packed));

void qp_wire_pack(struct qp_wire *w, const struct qp_info *in);
void qp_wire_unpack(const struct qp_wire *w, struct qp_info *out);

struct conn_opts {
	uint8_t timeout;	/* local ACK timeout (IB encoding) */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t min_rnr_timer;
	uint8_t max_rd_atomic;
};

void conn_opts_default(struct conn_opts *o);
void qp_local_info(struct dev *d, struct ibv_qp *qp, uint32_t psn,
		   struct qp_info *out);
/* RESET -> INIT -> RTR -> RTS; returns errno or 0 */
int qp_connect(struct dev *d, struct ibv_qp *qp, const struct qp_info *me,
	       const struct qp_info *peer, const struct conn_opts *o,
	       int access);
int qp_to_init(struct dev *d, struct ibv_qp *qp, int access);

/* A counter of rdma_bond's module-wide mrail_stats, or -1 (not loaded). */
long long mrail_stat(const char *key);

/* Poll until n completions (or timeout_ms); returns the number got. */
int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms);

/* Deterministic data pattern: byte at absolute offset off for stream seed. */
static inline uint8_t pat_byte(uint32_t seed, uint64_t off)
{
	uint64_t x = off * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xBF58476D1CE4E5B9ull;

	x ^= x >> 29;
	x *= 0x94D049BB133111EBull;
	x ^= x >> 32;
	return (uint8_t)x;
}
void pat_fill(void *buf, size_t len, uint32_t seed, uint64_t off);
/* Returns the index of the first bad byte, or -1 */
long pat_check(const void *buf, size_t len, uint32_t seed, uint64_t off);

/*
 * TCP rendezvous.  With server set, connect to server:port, retrying until
 * timeout_ms; without, listen on port and accept one peer.  Returns the
 * socket or -1.
 */
int tcp_connect(const char *server, int port, int timeout_ms);
/*
 * tcp_connect() with the usual 20 s, then @me = @qp's local info (a
 * per-process initial PSN) packed into @w (the caller zeroed the message
 * @w is the head of).  Returns the socket, or -1 after a failed TAP check.
 */
int tcp_begin(const char *server, int port, struct dev *d, struct ibv_qp *qp,
	      struct qp_info *me, struct qp_wire *w);
/* Send len bytes of out, then receive len bytes into in; 0 or -1. */
int xfer(int sock, const void *out, void *in, size_t len);
/* Exchange one status byte: true only if both sides are ok. */
bool sync_ok(int sock, bool ok);

const char *wc_status_name(enum ibv_wc_status s);
uint64_t now_ms(void);

#endif
