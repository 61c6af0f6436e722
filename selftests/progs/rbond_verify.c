// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_verify - data-integrity check of an RC connection between two RDMA
 * devices (a bond, or any verbs device), moving patterned data with
 * SEND/RECV, RDMA WRITE (+ a SEND that must land after the WRITEs, as RC
 * promises) and RDMA READ in both directions, checking every byte, wr_id,
 * opcode, length and status.  TCP carries the connection handshake.
 *
 *   server:  rbond_verify -d DEV [options]
 *   client:  rbond_verify -d DEV [options] SERVER_ADDR
 *
 * Options: -g GID_INDEX (1)  -p TCP_PORT (18515)  -s CHUNK (65536)
 *          -n COUNT (64)  -u ACK_TIMEOUT (18)  -R (MRs relaxed-ordered)
 *          -e (wait with completion events)  -T SECONDS (60, per phase)
 * Output is TAP-like; exit status 0 only if every check passed.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define WR_SEND   0x1000000u
#define WR_RECV   0x2000000u
#define WR_WRITE  0x3000000u
#define WR_FENCE  0x3ffffffu
#define WR_DRECV  0x3fffffeu
#define WR_READ   0x4000000u

struct wire {
	struct qp_wire qp;
	uint32_t rkey;
	uint64_t addr, len;
} __attribute__((packed));

static struct {
	const char *dev, *server;
	int gid, port, n, timeout_s;
	size_t chunk;
	int ack_timeout;
	bool relaxed, events;
} opt = { .gid = 1, .port = 18515, .n = 64, .chunk = 65536,
	  .ack_timeout = 18, .timeout_s = 60 };

static struct dev d;
static struct ibv_comp_channel *chan;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr_send, *mr_recv, *mr_tgt, *mr_read;
static uint8_t *b_send, *b_recv, *b_tgt, *b_read;
static int sock = -1;
static uint32_t my_seed, peer_seed;
static struct wire peer;

/* Wait for n completions, with events if asked for. */
static int wait_n(struct ibv_wc *wc, int n)
{
	uint64_t end = now_ms() + opt.timeout_s * 1000ull;
	int got = 0, r;

	if (!opt.events)
		return poll_n(cq, wc, n, opt.timeout_s * 1000);
	while (got < n) {
		struct pollfd pfd = { .fd = chan->fd, .events = POLLIN };
		struct ibv_cq *ev_cq;
		void *ev_ctx;

		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0)
			return got;
		got += r;
		if (r > 0)
			continue;
		if (ibv_req_notify_cq(cq, 0)) {
			diag("ibv_req_notify_cq: %s", strerror(errno));
			return got;
		}
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r > 0) {
			got += r;
			continue;
		}
		if (now_ms() > end)
			break;
		if (poll(&pfd, 1, 1000) <= 0)
			continue;
		if (ibv_get_cq_event(chan, &ev_cq, &ev_ctx)) {
			diag("ibv_get_cq_event: %s", strerror(errno));
			return got;
		}
		if (ev_cq != cq)
			diag("event for an unknown CQ %p", (void *)ev_cq);
		ibv_ack_cq_events(ev_cq, 1);
	}
	return got;
}

static size_t send_len(int i)
{
	if (i == opt.n - 1)
		return opt.chunk;
	return 1 + ((size_t)i * 7919 + 13) % opt.chunk;
}

static int post_recv_slot(uint64_t wr_id, void *addr, size_t len, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static int post_send_op(uint64_t wr_id, enum ibv_wr_opcode op, void *addr,
			size_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/* Check completions of one posting stream: wr_ids base+0..k-1 in order. */
static bool check_stream(const char *what, struct ibv_wc *wc, int k,
			 uint64_t base, enum ibv_wc_opcode op)
{
	int i;

	for (i = 0; i < k; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			diag("%s #%d: status %s (wr_id 0x%llx)", what, i,
			     wc_status_name(wc[i].status),
			     (unsigned long long)wc[i].wr_id);
			return false;
		}
		if (wc[i].wr_id != base + i) {
			diag("%s #%d: wr_id 0x%llx, expected 0x%llx", what, i,
			     (unsigned long long)wc[i].wr_id,
			     (unsigned long long)(base + i));
			return false;
		}
		if (wc[i].opcode != op) {
			diag("%s #%d: opcode %d, expected %d", what, i,
			     wc[i].opcode, op);
			return false;
		}
		if (wc[i].qp_num != qp->qp_num) {
			diag("%s #%d: qp_num %u, expected %u", what, i,
			     wc[i].qp_num, qp->qp_num);
			return false;
		}
	}
	return true;
}

static void split(struct ibv_wc *all, int got, struct ibv_wc *snd, int *ns,
		  struct ibv_wc *rcv, int *nr)
{
	int i;

	*ns = *nr = 0;
	for (i = 0; i < got; i++) {
		if ((all[i].wr_id >= WR_RECV && all[i].wr_id < WR_WRITE) ||
		    all[i].wr_id == WR_DRECV)
			rcv[(*nr)++] = all[i];
		else
			snd[(*ns)++] = all[i];
	}
}

static void phase_send_recv(void)
{
	int n = opt.n, i, got, ns, nr;
	struct ibv_wc *all = calloc(2 * n, sizeof(*all));
	struct ibv_wc *snd = calloc(2 * n, sizeof(*snd));
	struct ibv_wc *rcv = calloc(2 * n, sizeof(*rcv));
	bool ok = true;
	long bad;

	memset(b_recv, 0, n * opt.chunk);
	for (i = 0; i < n; i++) {
		pat_fill(b_send + i * opt.chunk, send_len(i), my_seed, (uint64_t)i << 32);
		if (post_recv_slot(WR_RECV + i, b_recv + i * opt.chunk, opt.chunk,
				   mr_recv->lkey)) {
			diag("post_recv %d: %s", i, strerror(errno));
			ok = false;
		}
	}
	if (!sync_ok(sock, true))
		ok = false;
	for (i = 0; ok && i < n; i++)
		if (post_send_op(WR_SEND + i, IBV_WR_SEND, b_send + i * opt.chunk,
				 send_len(i), mr_send->lkey, 0, 0)) {
			diag("post_send %d: %s", i, strerror(errno));
			ok = false;
		}
	got = ok ? wait_n(all, 2 * n) : 0;
	if (ok && got != 2 * n) {
		diag("SEND/RECV: %d of %d completions", got, 2 * n);
		ok = false;
	}
	split(all, got, snd, &ns, rcv, &nr);
	tap_ok(ok && ns == n && check_stream("send", snd, ns, WR_SEND, IBV_WC_SEND),
	       "SEND: %d completions in posting order, status/opcode/qp ok", n);
	ok = ok && nr == n && check_stream("recv", rcv, nr, WR_RECV, IBV_WC_RECV);
	for (i = 0; ok && i < n; i++) {
		if (rcv[i].byte_len != send_len(i)) {
			diag("recv #%d: byte_len %u, expected %zu", i, rcv[i].byte_len, send_len(i));
			ok = false;
			break;
		}
		bad = pat_check(b_recv + i * opt.chunk, send_len(i), peer_seed, (uint64_t)i << 32);
		if (bad >= 0) {
			diag("recv #%d: byte %ld differs", i, bad);
			ok = false;
		}
	}
	tap_ok(ok, "RECV: %d messages (1..%zu bytes), wr_id, byte_len and every byte ok",
	       n, opt.chunk);
	free(all);
	free(snd);
	free(rcv);
}

static void phase_write(void)
{
	int n = opt.n, i, got, ns, nr;
	struct ibv_wc *all = calloc(2 * n + 4, sizeof(*all));
	struct ibv_wc *snd = calloc(2 * n + 4, sizeof(*snd));
	struct ibv_wc *rcv = calloc(2 * n + 4, sizeof(*rcv));
	bool ok = true, sok;
	long bad;

	memset(b_tgt, 0, n * opt.chunk);
	pat_fill(b_send, n * opt.chunk, my_seed + 100, 0);
	if (post_recv_slot(WR_DRECV, b_recv, opt.chunk, mr_recv->lkey))
		ok = false;
	if (!sync_ok(sock, true))
		ok = false;
	for (i = 0; ok && i < n; i++)
		if (post_send_op(WR_WRITE + i, IBV_WR_RDMA_WRITE, b_send + i * opt.chunk,
				 opt.chunk, mr_send->lkey,
				 peer.addr + i * opt.chunk, peer.rkey)) {
			diag("post WRITE %d: %s", i, strerror(errno));
			ok = false;
		}
	/* RC: this SEND is seen by the peer only after all WRITE data. */
	if (ok && post_send_op(WR_FENCE, IBV_WR_SEND, b_send, 4, mr_send->lkey, 0, 0))
		ok = false;
	/* Collect one completion at a time so the written region is checked
	 * at the moment the peer's SEND is seen.
	 */
	bad = -2;
	for (got = 0; ok && got < n + 2; got++) {
		if (wait_n(all + got, 1) != 1) {
			diag("WRITE: %d of %d completions", got, n + 2);
			ok = false;
			break;
		}
		if (all[got].wr_id == WR_DRECV && all[got].status == IBV_WC_SUCCESS)
			bad = pat_check(b_tgt, n * opt.chunk, peer_seed + 100, 0);
	}
	split(all, got, snd, &ns, rcv, &nr);
	sok = ok && ns == n + 1 && check_stream("write", snd, n, WR_WRITE, IBV_WC_RDMA_WRITE) &&
	      check_stream("send-after-write", snd + n, 1, WR_FENCE, IBV_WC_SEND);
	tap_ok(sok, "RDMA WRITE: %d x %zu bytes + SEND, completions in order", n, opt.chunk);
	ok = ok && nr == 1 && check_stream("recv-after-write", rcv, 1, WR_DRECV, IBV_WC_RECV);
	if (bad >= 0)
		diag("written region: byte %ld (chunk %ld) differs when the SEND arrived",
		     bad, bad / (long)opt.chunk);
	tap_ok(ok && bad == -1,
	       "RDMA WRITE: all %zu bytes written by the peer present when its later SEND arrived",
	       n * opt.chunk);
	free(all);
	free(snd);
	free(rcv);
}

static void phase_read(void)
{
	int n = opt.n, i, got;
	struct ibv_wc *wc = calloc(n, sizeof(*wc));
	bool ok = true;
	long bad;

	pat_fill(b_tgt, n * opt.chunk, my_seed + 200, 0);
	memset(b_read, 0, n * opt.chunk);
	if (!sync_ok(sock, true))
		ok = false;
	for (i = 0; ok && i < n; i++)
		if (post_send_op(WR_READ + i, IBV_WR_RDMA_READ, b_read + i * opt.chunk,
				 opt.chunk, mr_read->lkey,
				 peer.addr + i * opt.chunk, peer.rkey)) {
			diag("post READ %d: %s", i, strerror(errno));
			ok = false;
		}
	got = ok ? wait_n(wc, n) : 0;
	if (ok && got != n) {
		diag("READ: %d of %d completions", got, n);
		ok = false;
	}
	ok = ok && check_stream("read", wc, n, WR_READ, IBV_WC_RDMA_READ);
	for (i = 0; ok && i < n; i++)
		if (wc[i].byte_len != opt.chunk && wc[i].byte_len != 0) {
			diag("read #%d: byte_len %u", i, wc[i].byte_len);
			ok = false;
		}
	tap_ok(ok, "RDMA READ: %d x %zu bytes, completions in order", n, opt.chunk);
	bad = ok ? pat_check(b_read, n * opt.chunk, peer_seed + 200, 0) : -2;
	if (bad >= 0)
		diag("read data: byte %ld (chunk %ld) differs", bad, bad / (long)opt.chunk);
	tap_ok(ok && bad == -1, "RDMA READ: every byte of the peer's region ok");
	sync_ok(sock, true);	/* peer must not tear down while we read */
	free(wc);
}

static struct ibv_mr *reg(void **buf, size_t len, int access)
{
	struct ibv_mr *mr;

	if (posix_memalign(buf, 4096, len))
		return NULL;
	memset(*buf, 0, len);
	mr = ibv_reg_mr(d.pd, *buf, len, access);
	if (!mr)
		diag("ibv_reg_mr(%zu, 0x%x): %s", len, access, strerror(errno));
	return mr;
}

int main(int argc, char **argv)
{
	struct conn_opts co;
	struct qp_info me, pi;
	struct wire w;
	size_t len;
	int c, acc;

	while ((c = getopt(argc, argv, "d:g:p:s:n:u:T:Reh")) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 's': opt.chunk = strtoul(optarg, NULL, 0); break;
		case 'n': opt.n = atoi(optarg); break;
		case 'u': opt.ack_timeout = atoi(optarg); break;
		case 'T': opt.timeout_s = atoi(optarg); break;
		case 'R': opt.relaxed = true; break;
		case 'e': opt.events = true; break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-g GIDX] [-p PORT] [-s CHUNK] [-n COUNT] [-u ACK_TIMEOUT] [-T SEC] [-R] [-e] [SERVER]\n", argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (!opt.dev || opt.n < 1 || opt.chunk < 8 || opt.chunk > (1u << 30)) {
		fprintf(stderr, "%s: -d DEV required, COUNT >= 1, 8 <= CHUNK <= 1 GiB\n", argv[0]);
		return 2;
	}
	my_seed = opt.server ? 2 : 1;
	peer_seed = opt.server ? 1 : 2;
	printf("TAP version 13\n");
	diag("%s on %s, %d x %zu bytes%s%s", opt.server ? "client" : "server",
	     opt.dev, opt.n, opt.chunk, opt.relaxed ? ", relaxed ordering" : "",
	     opt.events ? ", completion events" : "");

	if (dev_open(&d, opt.dev, opt.gid)) {
		tap_ok(false, "open %s", opt.dev);
		goto out;
	}
	diag("%s: %s device", opt.dev, d.is_bond ? "rdma_bond" : "plain");
	if (opt.events) {
		chan = ibv_create_comp_channel(d.ctx);
		if (!chan) {
			tap_ok(false, "ibv_create_comp_channel: %s", strerror(errno));
			goto out;
		}
		fcntl(chan->fd, F_SETFL, fcntl(chan->fd, F_GETFL) | O_NONBLOCK);
	}
	cq = ibv_create_cq(d.ctx, 2 * opt.n + 16, NULL, chan, 0);
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = opt.n + 8, .max_recv_wr = opt.n + 8,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = cq ? ibv_create_qp(d.pd, &qa) : NULL;
	}
	if (!cq || !qp) {
		tap_ok(false, "create CQ/QP: %s", strerror(errno));
		goto out;
	}
	len = opt.n * opt.chunk;
	acc = IBV_ACCESS_LOCAL_WRITE | (opt.relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
	mr_send = reg((void **)&b_send, len, acc);
	mr_recv = reg((void **)&b_recv, len, acc);
	mr_read = reg((void **)&b_read, len, acc);
	mr_tgt = reg((void **)&b_tgt, len, acc | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ);
	if (!mr_send || !mr_recv || !mr_read || !mr_tgt) {
		tap_ok(false, "register buffers");
		goto out;
	}

	memset(&w, 0, sizeof(w));
	sock = tcp_begin(opt.server, opt.port, &d, qp, &me, &w.qp);
	if (sock < 0)
		goto out;
	w.rkey = htobe32(mr_tgt->rkey);
	w.addr = htobe64((uintptr_t)b_tgt);
	w.len = htobe64(len);
	if (xfer(sock, &w, &peer, sizeof(peer))) {
		tap_ok(false, "exchange connection data");
		goto out;
	}
	peer.rkey = be32toh(peer.rkey);
	peer.addr = be64toh(peer.addr);
	peer.len = be64toh(peer.len);
	if (peer.len != len) {
		tap_ok(false, "peer region %llu bytes, ours %zu: same -n/-s on both ends",
		       (unsigned long long)peer.len, len);
		goto out;
	}
	qp_wire_unpack(&peer.qp, &pi);
	diag("local qpn 0x%x rkey 0x%x, peer qpn 0x%x rkey 0x%x", me.qpn,
	     mr_tgt->rkey, pi.qpn, peer.rkey);
	conn_opts_default(&co);
	co.timeout = opt.ack_timeout;
	co.max_rd_atomic = 16;
	if ((errno = qp_connect(&d, qp, &me, &pi, &co,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ))) {
		tap_ok(false, "connect QP (INIT/RTR/RTS): %s", strerror(errno));
		goto out;
	}
	tap_ok(sync_ok(sock, true), "QP connected (RTS on both ends)");

	phase_send_recv();
	phase_write();
	phase_read();
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (mr_send) ibv_dereg_mr(mr_send);
	if (mr_recv) ibv_dereg_mr(mr_recv);
	if (mr_read) ibv_dereg_mr(mr_read);
	if (mr_tgt) ibv_dereg_mr(mr_tgt);
	if (cq)
		ibv_destroy_cq(cq);
	if (chan)
		ibv_destroy_comp_channel(chan);
	if (d.ctx)
		dev_close(&d);
	if (sock >= 0)
		close(sock);
	return tap_end();
}
