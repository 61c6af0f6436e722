// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_stream - a long-running integrity stream over one RC QP, for
 * faults injected while it runs (failover tests).  The client repeats,
 * for sequence numbers 0, 1, 2, ...:
 *
 *   RDMA WRITE   CHUNK bytes of pattern(seq) into the server's slot
 *                seq % SLOTS;
 *   SEND         { seq, slot, checksum of those bytes } - the server
 *                checks it is the next sequence number (nothing lost,
 *                duplicated or reordered) and that the slot holds exactly
 *                the bytes announced (RC: a SEND is seen after the WRITEs
 *                before it);
 *   FETCH_ADD    +1 on the server's counter: the value it returns must be
 *                seq (every add executed exactly once, in order);
 *   RDMA READ    (every 4th) the slot back, checked against pattern(seq);
 *
 * with at most WINDOW iterations in flight, every completion checked
 * (status, wr_id, order).  After SECONDS (or COUNT iterations) a final
 * SEND carries the count; the server checks its counter equals it.
 * On a bond with relaxed-ordered MRs (-R) and -w 1, each WRITE (and READ)
 * is split over the rails; with a deeper window the SENDs and atomics in
 * flight are ordering points that keep the WRITEs behind them on the home
 * rail (Documentation/rdma_bond.rst, "Ordering and striping").
 *
 *   server:  rbond_stream -d DEV [options]
 *   client:  rbond_stream -d DEV [options] SERVER_ADDR
 *
 * Options: -g GID_INDEX (1)  -p TCP_PORT (18515)  -s CHUNK (262144)
 *          -w WINDOW (8)  -t SECONDS (20)  -n COUNT (0: by time)
 *          -u ACK_TIMEOUT (18)  -R (MRs relaxed-ordered)
 *          (SIGUSR1 ends the client's stream early, as its time would:
 *          a test stops it once its faults are over, however slow the
 *          machine was to get there)
 *          -r (both ends: after the stream, the QP to RESET, connected
 *          again to the same peer QP, and 8 more iterations checked the
 *          same way - a bond QP whose home rail moved goes back to its
 *          first home member)
 *          -X (client: before the final SEND, a RESET that must be
 *          refused with EIO - the QP's first home member's device was
 *          removed under the stream, its QPN gone - and leave the QP as
 *          it was: still RTS, and the final SEND goes through)
 * Output is TAP-like; exit status 0 only if every check passed.
 *
 * One error is the bond's documented answer to a failed home rail
 * (Documentation/rdma_bond.rst, "The home rail"): a FETCH_ADD that ran on
 * the old home but whose reply was lost with it completes with "retry
 * exceeded" - its result cannot be known and it must not run twice.  The
 * client then tells the server over TCP, the server checks that every
 * SEND up to it arrived and that its counter says the atomic ran exactly
 * once, and both exit with status 3 (not 0: the stream ended early).
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "common.h"

#define SLOTS		32
#define MSG_SZ		64
#define FIN		0xffffffffu
#define LOST		0x4c4f5354u	/* TCP: a FETCH_ADD's reply was lost */
#define EXIT_LOST	3
#define AGAIN_COUNT	8	/* -r: iterations after the reconnect */
#define QP_ACCESS	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

enum { OP_WRITE, OP_SEND, OP_FADD, OP_READ, OP_FIN };

struct msg {
	uint32_t seq, slot;
	uint64_t csum;
};

struct wire {
	struct qp_wire qp;
	uint32_t rkey, ckey;
	uint64_t addr, caddr;
} __attribute__((packed));

static struct {
	const char *dev, *server;
	int gid, port, window, secs, ack_timeout;
	long count;
	size_t chunk;
	bool relaxed, again, refused_reset;
} opt = { .gid = 1, .port = 18515, .window = 8, .secs = 20,
	  .ack_timeout = 18, .chunk = 262144 };

static struct dev d;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct wire peer;
static int sock = -1;

static uint64_t csum(const uint8_t *p, size_t len)
{
	uint64_t h = 1469598103934665603ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

static struct ibv_mr *reg(void **buf, size_t len, int access)
{
	if (posix_memalign(buf, 4096, len))
		return NULL;
	memset(*buf, 0, len);
	return ibv_reg_mr(d.pd, *buf, len, access);
}

static uint64_t wrid(uint32_t seq, int op)
{
	return ((uint64_t)seq << 3) | op;
}

static int post(struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret)
		diag("ibv_post_send (wr_id 0x%llx): %s",
		     (unsigned long long)wr->wr_id, strerror(ret));
	return ret;
}

/*
 * Client: one completion, which must be the next expected one (posting
 * order); checks the atomic's value and the READ's bytes.  0, or -1.
 */
static uint64_t next_wr;	/* wr_id expected next */
static long bad;
static long lost_fadd = -1;	/* the FETCH_ADD whose reply was lost */

static int client_wc(const struct ibv_wc *wc, const uint64_t *fadd,
		     const uint8_t *rbuf)
{
	uint32_t seq = wc->wr_id >> 3;
	int op = wc->wr_id & 7;

	if (wc->status == IBV_WC_RETRY_EXC_ERR && op == OP_FADD &&
	    wc->wr_id == next_wr) {
		diag("FETCH_ADD %u: %s: it ran on a failed home rail and its reply was lost with it",
		     seq, wc_status_name(wc->status));
		lost_fadd = seq;
		return -1;
	}
	if (wc->status != IBV_WC_SUCCESS) {
		diag("wr_id 0x%llx: %s", (unsigned long long)wc->wr_id,
		     wc_status_name(wc->status));
		return -1;
	}
	if (wc->wr_id != next_wr) {
		diag("completion 0x%llx, expected 0x%llx: out of order",
		     (unsigned long long)wc->wr_id,
		     (unsigned long long)next_wr);
		return -1;
	}
	if (op == OP_FADD && fadd[seq % SLOTS] != seq) {
		diag("FETCH_ADD %u returned %llu: executed %s (at %llu ms, CLOCK_MONOTONIC)",
		     seq, (unsigned long long)fadd[seq % SLOTS],
		     fadd[seq % SLOTS] > seq ? "twice" : "lost",
		     (unsigned long long)now_ms());
		bad++;
	}
	if (op == OP_READ &&
	    pat_check(rbuf + (seq % SLOTS) * opt.chunk, opt.chunk, seq, 0) >= 0) {
		diag("READ of seq %u: bytes differ", seq);
		bad++;
	}
	/* the next in posting order: W S F [R] of seq, then W of seq + 1 */
	if (op == OP_WRITE)
		next_wr = wrid(seq, OP_SEND);
	else if (op == OP_SEND)
		next_wr = wrid(seq, OP_FADD);
	else if (op == OP_FADD && !(seq % 4))
		next_wr = wrid(seq, OP_READ);
	else
		next_wr = wrid(seq + 1, OP_WRITE);
	return 0;
}

/*
 * -X: the RESET must be refused (EIO) and change nothing: query_qp still
 * says RTS.  0, or -1 (reported).
 */
static int refused_reset(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_init_attr ia;
	int ret, q;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	q = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	tap_ok(ret == EIO && !q && a.qp_state == IBV_QPS_RTS,
	       "client: RESET with the first home member's device gone: %s (want EIO), then query_qp: %s, state %d (want RTS %d)",
	       ret ? strerror(ret) : "accepted", q ? strerror(q) : "ok",
	       a.qp_state, IBV_QPS_RTS);
	return ret == EIO && !q && a.qp_state == IBV_QPS_RTS ? 0 : -1;
}

static volatile sig_atomic_t stop_now;	/* SIGUSR1: the stream ends */

static void on_usr1(int sig)
{
	(void)sig;
	stop_now = 1;
}

static int run_client(void)
{
	size_t len = SLOTS * opt.chunk;
	uint8_t *src, *rbuf, *sbuf;
	uint64_t *fadd, end = now_ms() + opt.secs * 1000ull;
	struct ibv_mr *msrc, *mrd, *msnd, *mfa;
	int acc = IBV_ACCESS_LOCAL_WRITE |
		  (opt.relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
	uint32_t seq = 0, done = 0;
	uint64_t deadline;
	struct ibv_wc wc[16];
	int i, n;

	msrc = reg((void **)&src, len, acc);
	mrd = reg((void **)&rbuf, len, acc);
	msnd = reg((void **)&sbuf, SLOTS * MSG_SZ + MSG_SZ, acc);
	mfa = reg((void **)&fadd, SLOTS * 8, acc);
	if (!msrc || !mrd || !msnd || !mfa) {
		tap_ok(false, "register buffers");
		return -1;
	}
	next_wr = wrid(0, OP_WRITE);
	for (;;) {
		bool more = opt.count ? seq < opt.count :
			    now_ms() < end && !stop_now;

		/* post while the window has room */
		while (more && seq - done < (uint32_t)opt.window) {
			uint32_t slot = seq % SLOTS;
			uint8_t *chunk = src + slot * opt.chunk;
			struct msg *m = (struct msg *)(sbuf + slot * MSG_SZ);
			struct ibv_sge sw = { (uintptr_t)chunk, opt.chunk, msrc->lkey };
			struct ibv_sge ss = { (uintptr_t)m, sizeof(*m), msnd->lkey };
			struct ibv_sge sf = { (uintptr_t)&fadd[slot], 8, mfa->lkey };
			struct ibv_sge sr = { (uintptr_t)(rbuf + slot * opt.chunk),
					      opt.chunk, mrd->lkey };
			struct ibv_send_wr w = {}, s = {}, f = {}, r = {};

			pat_fill(chunk, opt.chunk, seq, 0);
			m->seq = htobe32(seq);
			m->slot = htobe32(slot);
			m->csum = htobe64(csum(chunk, opt.chunk));
			memset(rbuf + slot * opt.chunk, 0, opt.chunk);
			w.wr_id = wrid(seq, OP_WRITE);
			w.sg_list = &sw;
			w.num_sge = 1;
			w.opcode = IBV_WR_RDMA_WRITE;
			w.send_flags = IBV_SEND_SIGNALED;
			w.wr.rdma.remote_addr = peer.addr + slot * opt.chunk;
			w.wr.rdma.rkey = peer.rkey;
			s.wr_id = wrid(seq, OP_SEND);
			s.sg_list = &ss;
			s.num_sge = 1;
			s.opcode = IBV_WR_SEND;
			s.send_flags = IBV_SEND_SIGNALED;
			f.wr_id = wrid(seq, OP_FADD);
			f.sg_list = &sf;
			f.num_sge = 1;
			f.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
			f.send_flags = IBV_SEND_SIGNALED;
			f.wr.atomic.remote_addr = peer.caddr;
			f.wr.atomic.rkey = peer.ckey;
			f.wr.atomic.compare_add = 1;
			w.next = &s;
			s.next = &f;
			if (!(seq % 4)) {
				r = w;
				r.wr_id = wrid(seq, OP_READ);
				r.next = NULL;
				r.sg_list = &sr;
				r.opcode = IBV_WR_RDMA_READ;
				f.next = &r;
			}
			if (post(&w))
				return -1;
			seq++;
			more = opt.count ? seq < opt.count : now_ms() < end;
		}
		if (!more && done == seq)
			break;
		deadline = now_ms() + 60000;
		do {
			n = ibv_poll_cq(cq, 16, wc);
		} while (!n && now_ms() < deadline);
		if (n <= 0) {
			diag("no completion for 60 s (%u posted, %u done)", seq, done);
			return -1;
		}
		for (i = 0; i < n; i++) {
			uint32_t s = wc[i].wr_id >> 3;

			if (client_wc(&wc[i], fadd, rbuf))
				return -1;
			if (next_wr == wrid(s + 1, OP_WRITE))
				done = s + 1;
		}
	}
	if (opt.refused_reset && refused_reset() < 0)
		return -1;
	/* the end: the count, which the server's counter must equal */
	{
		struct msg *m = (struct msg *)(sbuf + SLOTS * MSG_SZ);
		struct ibv_sge ss = { (uintptr_t)m, sizeof(*m), msnd->lkey };
		struct ibv_send_wr s = { .wr_id = wrid(seq, OP_FIN), .sg_list = &ss,
					 .num_sge = 1, .opcode = IBV_WR_SEND,
					 .send_flags = IBV_SEND_SIGNALED };

		m->seq = htobe32(FIN);
		m->slot = htobe32(seq);
		m->csum = 0;
		if (post(&s) || poll_n(cq, wc, 1, 60000) != 1 ||
		    wc[0].status != IBV_WC_SUCCESS) {
			tap_ok(false, "final SEND");
			return -1;
		}
	}
	diag("client: %u iterations (%.1f MB written)", seq,
	     seq * (double)opt.chunk / 1e6);
	tap_ok(!bad, "client: %u FETCH_ADDs returned their sequence number, every READ matched (%ld bad)",
	       seq, bad);
	return 0;
}

static int post_recv(uint8_t *buf, struct ibv_mr *mr, uint32_t i)
{
	struct ibv_sge sg = { (uintptr_t)(buf + i * MSG_SZ), MSG_SZ, mr->lkey };
	struct ibv_recv_wr r = { .wr_id = i, .sg_list = &sg, .num_sge = 1 };
	struct ibv_recv_wr *badr;

	return ibv_post_recv(qp, &r, &badr);
}

/*
 * Server: the next completion, or what the client said over TCP while
 * none came: 1 a completion, 0 the client's FETCH_ADD @lost ran but its
 * reply was lost (it stopped; asked once only), -1 nothing for @secs or
 * the client gone.
 */
static int server_next(struct ibv_wc *wc, int secs, uint32_t *lost)
{
	uint64_t end = now_ms() + secs * 1000ull;
	struct pollfd pfd = { .fd = sock, .events = POLLIN };
	uint32_t m[2];

	while (now_ms() < end) {
		if (poll_n(cq, wc, 1, 100) == 1)
			return 1;
		if (*lost != FIN || poll(&pfd, 1, 0) != 1)
			continue;
		if (recv(sock, m, sizeof(m), MSG_WAITALL) != sizeof(m) ||
		    be32toh(m[0]) != LOST) {
			diag("server: the client went away");
			return -1;
		}
		*lost = be32toh(m[1]);
		return 0;
	}
	if (*lost == FIN)
		diag("server: no SEND for %d s", secs);
	return -1;
}

static int run_server(uint8_t *tgt, uint64_t *counter)
{
	uint32_t expect = 0, nrecv = opt.window * 2 + 2, i;
	struct ibv_mr *mr;
	uint8_t *rb;
	struct ibv_wc wc;
	uint32_t lost = FIN;
	int got;

	mr = reg((void **)&rb, nrecv * MSG_SZ, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return -1;
	for (i = 0; i < nrecv; i++)
		if (post_recv(rb, mr, i))
			return -1;
	/* told it is ready after this (sync_ok in main) */
	if (!sync_ok(sock, true))
		return -1;
	for (;;) {
		struct msg *m;
		uint32_t seq, slot;

		got = server_next(&wc, lost == FIN ? opt.secs + 120 : 2, &lost);
		if (!got)
			continue;	/* told of a lost reply: 2 s for the SENDs still on their way */
		if (got < 0 && lost != FIN) {
			tap_ok(expect == lost + 1, "server: %u SENDs in order, the last one just before the client's FETCH_ADD %u whose reply was lost",
			       expect, lost);
			tap_ok(*counter == lost + 1, "server: counter %llu == %u: every FETCH_ADD up to that one ran exactly once",
			       (unsigned long long)*counter, lost + 1);
			return EXIT_LOST;
		}
		if (got != 1) {
			tap_ok(false, "server: no SEND after seq %u", expect);
			return -1;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
			tap_ok(false, "server: receive completion %s (opcode %d)",
			       wc_status_name(wc.status), wc.opcode);
			return -1;
		}
		m = (struct msg *)(rb + wc.wr_id * MSG_SZ);
		seq = be32toh(m->seq);
		slot = be32toh(m->slot);
		if (seq == FIN) {
			tap_ok(slot == expect, "server: %u SENDs in order, none lost or duplicated (client says %u)",
			       expect, slot);
			tap_ok(*counter == expect, "server: counter %llu == %u FETCH_ADDs",
			       (unsigned long long)*counter, expect);
			return 0;
		}
		if (seq != expect || slot != seq % SLOTS) {
			tap_ok(false, "server: SEND seq %u slot %u, expected %u: %s",
			       seq, slot, expect, seq < expect ? "duplicate" : "lost");
			return -1;
		}
		if (csum(tgt + slot * opt.chunk, opt.chunk) != be64toh(m->csum) ||
		    pat_check(tgt + slot * opt.chunk, opt.chunk, seq, 0) >= 0) {
			tap_ok(false, "server: slot %u of seq %u not the bytes the SEND announced",
			       slot, seq);
			return -1;
		}
		expect++;
		if (post_recv(rb, mr, wc.wr_id))
			return -1;
	}
}

/*
 * After the stream (and whatever failed over under it, the home rail
 * too): query_qp gives what the application set - the peer's QPN and GID,
 * the ACK timeout - and the QP is still at RTS.
 */
static void check_path(struct ibv_qp *qp, const struct qp_info *peer,
		       uint8_t timeout)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	ret = ibv_query_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN |
			   IBV_QP_TIMEOUT, &ia);
	tap_ok(!ret && a.qp_state == IBV_QPS_RTS &&
	       a.dest_qp_num == peer->qpn && a.timeout == timeout &&
	       !memcmp(&a.ah_attr.grh.dgid, &peer->gid, sizeof(peer->gid)),
	       "query_qp after the stream: %s, state %d, dest QPN 0x%x (set 0x%x), timeout %u (set %u), dgid %s",
	       ret ? strerror(ret) : "ok", a.qp_state, a.dest_qp_num,
	       peer->qpn, a.timeout, timeout,
	       memcmp(&a.ah_attr.grh.dgid, &peer->gid, sizeof(peer->gid)) ?
	       "not the one set" : "as set");
}

/*
 * -r: the QP to RESET (query_qp must say so), connected again to the same
 * peer QP once both ends were reset, and a short stream over it.  0, or
 * as run_client() / run_server().
 */
static int again(struct qp_info *me, struct qp_info *pi,
		 const struct conn_opts *co, uint8_t *tgt, uint64_t *counter)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct ibv_qp_init_attr ia;
	int ret;

	/*
	 * New PSNs, as a new connection takes (both ends shift both the
	 * same way): packets of the first connection still on a wire must
	 * not fit the second one.
	 */
	me->psn = (me->psn + 0x800000) & 0xffffff;
	pi->psn = (pi->psn + 0x800000) & 0xffffff;

	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE);
	memset(&a, 0, sizeof(a));
	if (!ret)
		ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	tap_ok(!ret && a.qp_state == IBV_QPS_RESET,
	       "%s: RESET after the stream: %s, state %d",
	       opt.server ? "client" : "server", ret ? strerror(ret) : "ok",
	       a.qp_state);
	if (ret || a.qp_state != IBV_QPS_RESET)
		return -1;
	if (counter)
		*counter = 0;
	/* both ends in RESET before either connects again */
	if (!sync_ok(sock, true))
		return -1;
	errno = qp_connect(&d, qp, me, pi, co, QP_ACCESS);
	tap_ok(!errno, "%s: connected again after the RESET: %s",
	       opt.server ? "client" : "server", strerror(errno));
	if (errno || !sync_ok(sock, true))
		return -1;
	opt.count = AGAIN_COUNT;
	lost_fadd = -1;
	bad = 0;
	if (!opt.server)
		return run_server(tgt, counter);
	if (!sync_ok(sock, true))	/* the server's receives are posted */
		return -1;
	return run_client();
}

int main(int argc, char **argv)
{
	struct conn_opts co;
	struct qp_info me, pi;
	struct ibv_mr *mtgt = NULL, *mcnt = NULL;
	uint8_t *tgt = NULL;
	uint64_t *counter = NULL;
	struct wire w;
	int c, ret = -1;

	while ((c = getopt(argc, argv, "d:g:p:s:w:t:n:u:RrXh")) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 's': opt.chunk = strtoul(optarg, NULL, 0); break;
		case 'w': opt.window = atoi(optarg); break;
		case 't': opt.secs = atoi(optarg); break;
		case 'n': opt.count = atol(optarg); break;
		case 'u': opt.ack_timeout = atoi(optarg); break;
		case 'R': opt.relaxed = true; break;
		case 'r': opt.again = true; break;
		case 'X': opt.refused_reset = true; break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-g GIDX] [-p PORT] [-s CHUNK] [-w WINDOW] [-t SECONDS] [-n COUNT] [-u ACK_TIMEOUT] [-R] [-r] [-X] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (!opt.dev || opt.chunk < 64 || opt.chunk > (64u << 20) ||
	    opt.window < 1 || opt.window > SLOTS - 1) {
		fprintf(stderr, "%s: -d DEV required, 64 <= CHUNK <= 64 MiB, 1 <= WINDOW < %d\n",
			argv[0], SLOTS);
		return 2;
	}
	signal(SIGUSR1, on_usr1);
	printf("TAP version 13\n");
	if (dev_open(&d, opt.dev, opt.gid)) {
		tap_ok(false, "open %s", opt.dev);
		goto out;
	}
	cq = ibv_create_cq(d.ctx, 8 * opt.window + 16, NULL, NULL, 0);
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4 * opt.window + 4,
				 .max_recv_wr = 2 * opt.window + 2,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = cq ? ibv_create_qp(d.pd, &qa) : NULL;
	}
	if (!cq || !qp) {
		tap_ok(false, "create CQ/QP: %s", strerror(errno));
		goto out;
	}
	if (!opt.server) {
		int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ |
			  (opt.relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);

		mtgt = reg((void **)&tgt, SLOTS * opt.chunk, acc);
		mcnt = reg((void **)&counter, 8, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_ATOMIC);
		if (!mtgt || !mcnt) {
			tap_ok(false, "register buffers");
			goto out;
		}
	}
	memset(&w, 0, sizeof(w));
	sock = tcp_begin(opt.server, opt.port, &d, qp, &me, &w.qp);
	if (sock < 0)
		goto out;
	if (mtgt) {
		w.rkey = htobe32(mtgt->rkey);
		w.addr = htobe64((uintptr_t)tgt);
		w.ckey = htobe32(mcnt->rkey);
		w.caddr = htobe64((uintptr_t)counter);
	}
	if (xfer(sock, &w, &peer, sizeof(peer))) {
		tap_ok(false, "exchange connection data");
		goto out;
	}
	peer.rkey = be32toh(peer.rkey);
	peer.addr = be64toh(peer.addr);
	peer.ckey = be32toh(peer.ckey);
	peer.caddr = be64toh(peer.caddr);
	qp_wire_unpack(&peer.qp, &pi);
	conn_opts_default(&co);
	co.timeout = opt.ack_timeout;
	co.max_rd_atomic = 16;
	if ((errno = qp_connect(&d, qp, &me, &pi, &co, QP_ACCESS))) {
		tap_ok(false, "connect QP: %s", strerror(errno));
		goto out;
	}
	if (!sync_ok(sock, true)) {
		tap_ok(false, "QP connected on both ends");
		goto out;
	}
	if (opt.server) {
		/* wait until the server's receives are posted */
		if (!sync_ok(sock, true)) {
			tap_ok(false, "server ready");
			goto out;
		}
		ret = run_client();
	} else {
		ret = run_server(tgt, counter);
	}
	if (ret && opt.server && lost_fadd >= 0) {
		uint32_t m[2] = { htobe32(LOST), htobe32(lost_fadd) };

		tap_ok(write(sock, m, sizeof(m)) == sizeof(m),
		       "client: stream ended by FETCH_ADD %ld, its reply lost with the failed home rail (told the server)",
		       lost_fadd);
		ret = EXIT_LOST;
	} else if (ret && ret != EXIT_LOST) {
		tap_ok(false, "%s stream", opt.server ? "client" : "server");
	} else if (!ret) {
		check_path(qp, &pi, co.timeout);
	}
	if (!ret && opt.again) {
		ret = again(&me, &pi, &co, tgt, counter);
		if (ret)
			tap_ok(false, "%s stream after the reconnect",
			       opt.server ? "client" : "server");
		else
			check_path(qp, &pi, co.timeout);
	}
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (d.ctx)
		dev_close(&d);
	if (sock >= 0)
		close(sock);
	c = tap_end();
	return !c && ret == EXIT_LOST ? EXIT_LOST : c;
}
