// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_teardown - traffic for the teardown-under-load tests
 * (selftests/test_teardown_load.sh).  The client keeps a window of RDMA
 * WRITEs and READs (runs of 8, so there are ordering points and WQEs wait
 * in the bond's pending queue) in flight to the server's relaxed-ordering
 * MR; the server only owns the memory.
 *
 * Stream mode (default): the client posts until -t SECONDS pass, SIGTERM or
 * SIGUSR1 arrives, a completion has an error or a post is refused; then it
 * posts nothing more and waits (-T SECONDS) for the completion of every
 * WQE it posted.  It checks that completions arrive exactly in posting
 * order with the right wr_id and opcode, that no WQE succeeds after the
 * first error (RC: the rest are flushed) and that none is missing.
 * Exit 0 when all of that holds, 1 on a violation or a missing completion,
 * 3 when the device went away under it (rmmod: nothing to check).
 * With -F FILE the client creates FILE once completions flow.
 *
 * In stream mode the client also posts 4 WQEs after the first error: they
 * must complete flushed, in order, like the rest.
 *
 * Destroy mode (-D ROUNDS): per round, both sides create and connect a
 * fresh QP; the client posts a full window, waits a little (0-20 ms) and
 * destroys the QP and its CQ with the WQEs still pending.
 *
 * Error mode (-E): after a warm-up (striped WRITEs complete), the server
 * moves its QP to the error state; the client WRITEs new data, which must
 * fail, and the server checks that none of it reached its memory (over no
 * rail).  Then both QPs go to RESET, are connected again and the client
 * WRITEs a third pattern: every WQE succeeds, in order, striped again
 * (mrail_stats), and the server sees all of it.
 *
 *   server:  rbond_teardown -d DEV [options]
 *   client:  rbond_teardown -d DEV [options] SERVER_ADDR
 *
 * Options: -g GID_INDEX (1)  -p TCP_PORT (18515)  -s WQE_BYTES (262144)
 *          -n WINDOW (32)  -u ACK_TIMEOUT (18)  -t SECONDS (30)
 *          -T DRAIN_SECONDS (60)  -F FILE  -D ROUNDS  -E
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

#define SLOTS	16	/* server memory: SLOTS WQEs' worth */

struct wire {
	struct qp_wire qp;
	uint32_t rkey, pad;
	uint64_t addr, len;
} __attribute__((packed));

static struct {
	const char *dev, *server, *flag_file;
	int gid, port, window, ack_timeout, secs, drain_s, rounds;
	int reset_delay_ms;	/* -E server: RESET this much after the client */
	size_t size;
	bool error;
} opt = { .gid = 1, .port = 18515, .window = 32, .ack_timeout = 18,
	  .secs = 30, .drain_s = 60, .size = 256 * 1024 };

static volatile sig_atomic_t stop_req;
static struct dev d;
static struct ibv_mr *mr;
static uint8_t *buf;
static int sock = -1;

static void on_signal(int sig)
{
	(void)sig;
	stop_req = 1;
}

struct conn {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct wire peer;
};

/* exchange connection data with the peer, connect c->qp (at RESET) */
static int conn_connect(struct conn *c)
{
	struct qp_info me, pi;
	struct conn_opts co;
	struct wire w;

	qp_local_info(&d, c->qp, (getpid() * 2654435761u + now_ms()) & 0xffffff,
		      &me);
	memset(&w, 0, sizeof(w));
	qp_wire_pack(&w.qp, &me);
	w.rkey = htobe32(mr->rkey);
	w.addr = htobe64((uintptr_t)buf);
	w.len = htobe64(SLOTS * opt.size);
	if (xfer(sock, &w, &c->peer, sizeof(c->peer))) {
		diag("exchange connection data");
		return -1;
	}
	c->peer.rkey = be32toh(c->peer.rkey);
	c->peer.addr = be64toh(c->peer.addr);
	if (be64toh(c->peer.len) != SLOTS * opt.size) {
		diag("peer region differs: same -s on both ends");
		return -1;
	}
	qp_wire_unpack(&c->peer.qp, &pi);
	conn_opts_default(&co);
	co.timeout = opt.ack_timeout;
	co.max_rd_atomic = 16;
	/* rxe retries for ever with retry_cnt 7: a peer in error must fail */
	if (opt.error)
		co.retry_cnt = 2;
	errno = qp_connect(&d, c->qp, &me, &pi, &co, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (errno) {
		diag("connect QP: %s", strerror(errno));
		return -1;
	}
	return sync_ok(sock, true) ? 0 : -1;
}

static int conn_up(struct conn *c)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = opt.window, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	memset(c, 0, sizeof(*c));
	c->cq = ibv_create_cq(d.ctx, opt.window + 8, NULL, NULL, 0);
	qa.send_cq = qa.recv_cq = c->cq;
	c->qp = c->cq ? ibv_create_qp(d.pd, &qa) : NULL;
	if (!c->qp) {
		diag("create CQ/QP: %s", strerror(errno));
		return -1;
	}
	return conn_connect(c);
}

static int qp_to(struct conn *c, enum ibv_qp_state st)
{
	struct ibv_qp_attr a = { .qp_state = st };

	errno = ibv_modify_qp(c->qp, &a, IBV_QP_STATE);
	if (errno)
		diag("modify_qp to %d: %s", st, strerror(errno));
	return errno;
}

static void conn_down(struct conn *c)
{
	if (c->qp && ibv_destroy_qp(c->qp))
		diag("ibv_destroy_qp: %s", strerror(errno));
	if (c->cq && ibv_destroy_cq(c->cq))
		diag("ibv_destroy_cq: %s", strerror(errno));
	c->qp = NULL;
	c->cq = NULL;
}

static bool only_writes;

/* WQE @seq: runs of 8 WRITEs and 8 READs over the server's slots. */
static enum ibv_wr_opcode seq_op(uint64_t seq)
{
	return (seq / 8) & 1 && !only_writes ? IBV_WR_RDMA_READ :
					       IBV_WR_RDMA_WRITE;
}

static int post_seq(struct conn *c, uint64_t seq)
{
	size_t off = (seq % SLOTS) * opt.size;
	struct ibv_sge sge = { .addr = (uintptr_t)buf + off,
			       .length = opt.size, .lkey = mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = seq, .sg_list = &sge, .num_sge = 1,
		.opcode = seq_op(seq), .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = c->peer.addr + off;
	wr.wr.rdma.rkey = c->peer.rkey;
	return ibv_post_send(c->qp, &wr, &bad);
}

static int client_stream(void)
{
	uint64_t posted = 0, done = 0, ok = 0, flushed = 0, other = 0;
	uint64_t end, last = now_ms();
	int64_t first_err = -1;
	bool stopping = false, order_ok = true, flowing = false;
	int after_err = 0;
	enum ibv_wc_status err_status = IBV_WC_SUCCESS;
	struct ibv_wc wc[16];
	struct conn c;
	int n, i, ret;

	if (conn_up(&c))
		return 1;
	end = now_ms() + opt.secs * 1000ull;
	for (;;) {
		if (!stopping && (stop_req || now_ms() > end)) {
			diag("stop posting (%s)", stop_req ? "signal" : "time");
			stopping = true;
		}
		while (!stopping && posted - done < (uint64_t)opt.window) {
			ret = post_seq(&c, posted);
			if (ret) {
				diag("post %llu refused: %s: stop posting",
				     (unsigned long long)posted, strerror(ret));
				stopping = true;
				break;
			}
			posted++;
		}
		/* in error: new WQEs complete flushed (never executed) */
		while (first_err >= 0 && after_err < 4 &&
		       posted - done < (uint64_t)opt.window) {
			ret = post_seq(&c, posted);
			if (ret) {
				diag("post %llu in the error state refused: %s",
				     (unsigned long long)posted, strerror(ret));
				after_err = 4;
				break;
			}
			posted++;
			after_err++;
		}
		n = ibv_poll_cq(c.cq, 16, wc);
		if (n < 0) {
			diag("ibv_poll_cq: %d: device gone? (%llu posted, %llu completed)",
			     n, (unsigned long long)posted,
			     (unsigned long long)done);
			return 3;
		}
		for (i = 0; i < n; i++, done++) {
			if (wc[i].wr_id != done ||
			    (wc[i].status == IBV_WC_SUCCESS &&
			     wc[i].opcode != (seq_op(done) == IBV_WR_RDMA_READ ?
					      IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE))) {
				if (order_ok)
					diag("completion %llu: wr_id %llu opcode %d status %s: out of order or wrong opcode",
					     (unsigned long long)done,
					     (unsigned long long)wc[i].wr_id,
					     wc[i].opcode,
					     wc_status_name(wc[i].status));
				order_ok = false;
			}
			if (wc[i].status == IBV_WC_SUCCESS) {
				ok++;
				if (first_err >= 0) {
					if (order_ok)
						diag("completion %llu succeeded after the error at %lld",
						     (unsigned long long)done,
						     (long long)first_err);
					order_ok = false;
				}
				continue;
			}
			if (first_err < 0) {
				first_err = done;
				err_status = wc[i].status;
				diag("first error at %llu: %s: stop posting",
				     (unsigned long long)done,
				     wc_status_name(wc[i].status));
				stopping = true;
			}
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				flushed++;
			else
				other++;
		}
		if (n > 0)
			last = now_ms();
		if (!flowing && done >= 2 * (uint64_t)opt.window) {
			flowing = true;
			if (opt.flag_file) {
				FILE *f = fopen(opt.flag_file, "w");

				if (f)
					fclose(f);
			}
		}
		if (stopping && done == posted &&
		    (first_err < 0 || after_err >= 4))
			break;
		if (now_ms() - last > opt.drain_s * 1000ull) {
			diag("no completion for %d s: %llu of %llu WQEs never completed",
			     opt.drain_s, (unsigned long long)(posted - done),
			     (unsigned long long)posted);
			printf("result posted %llu completed %llu missing %llu\n",
			       (unsigned long long)posted,
			       (unsigned long long)done,
			       (unsigned long long)(posted - done));
			return 1;
		}
		if (n == 0)
			usleep(200);
	}
	printf("result posted %llu completed %llu ok %llu flushed %llu other_errors %llu first_error %lld (%s) order %s\n",
	       (unsigned long long)posted, (unsigned long long)done,
	       (unsigned long long)ok, (unsigned long long)flushed,
	       (unsigned long long)other, (long long)first_err,
	       first_err >= 0 ? wc_status_name(err_status) : "none",
	       order_ok ? "ok" : "VIOLATED");
	conn_down(&c);
	return order_ok ? 0 : 1;
}

static int client_destroy(void)
{
	struct conn c;
	uint64_t t0, worst = 0;
	int r, posted;
	char b = 0;

	for (r = 0; r < opt.rounds; r++) {
		if (conn_up(&c))
			return 1;
		for (posted = 0; posted < opt.window; posted++)
			if (post_seq(&c, posted))
				break;
		usleep((r * 7919 % 21) * 1000);
		t0 = now_ms();
		conn_down(&c);
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
		if (xfer(sock, &b, &b, 1))
			return 1;
		diag("round %d: destroyed with %d WQEs posted", r, posted);
	}
	printf("result rounds %d destroy_worst_ms %llu\n", opt.rounds,
	       (unsigned long long)worst);
	return 0;
}

/* post @n WRITEs, wait for all; counts of successes; false if order broke */
static bool batch(struct conn *c, int n, int *ok)
{
	struct ibv_wc wc[16];
	int posted = 0, done = 0, got, i;
	uint64_t last = now_ms();
	bool order = true;

	*ok = 0;
	while (done < n) {
		while (posted < n && posted - done < opt.window &&
		       !post_seq(c, posted))
			posted++;
		got = ibv_poll_cq(c->cq, 16, wc);
		if (got < 0)
			return false;
		for (i = 0; i < got; i++, done++) {
			if (wc[i].wr_id != (uint64_t)done)
				order = false;
			if (wc[i].status == IBV_WC_SUCCESS)
				(*ok)++;
			else if (*ok == done)
				diag("first error at %d: %s", done,
				     wc_status_name(wc[i].status));
		}
		if (got)
			last = now_ms();
		else if (now_ms() - last > opt.drain_s * 1000ull ||
			 (posted < n && posted == done))
			break;	/* missing completions, or refused posts */
		else
			usleep(200);
	}
	if (done < n)
		diag("%d of %d WQEs posted, %d completed", posted, n, done);
	return order && done == n;
}

/* wait (30 s at most) until the bond counted @n more QPs multi-rail */
static void wait_up(long long u0, int n)
{
	int i;

	for (i = 0; i < 300 && mrail_stat("qp_up") < u0 + n; i++)
		usleep(100000);
}

static int client_error(void)
{
	long long s0, u0 = mrail_stat("qp_up");
	struct conn c;
	bool order;
	int ok;

	only_writes = true;
	if (conn_up(&c))
		return 1;
	wait_up(u0, 2);
	memset(buf, 0xa1, SLOTS * opt.size);
	s0 = mrail_stat("striped");
	order = batch(&c, 48, &ok);
	tap_ok(order && ok == 48 && mrail_stat("striped") > s0,
	       "warm-up: 48 WRITEs (%d ok), striped (+%lld)", ok,
	       mrail_stat("striped") - s0);
	if (!sync_ok(sock, true) || !sync_ok(sock, true)) {
		tap_ok(false, "server's QP to the error state");
		return 1;
	}
	memset(buf, 0xb2, SLOTS * opt.size);
	order = batch(&c, 16, &ok);
	tap_ok(order && !ok, "16 WRITEs to the peer's QP in error: all complete, none succeeds (%d ok)",
	       ok);
	sync_ok(sock, true);
	tap_ok(sync_ok(sock, true),
	       "peer's memory unchanged: nothing reached it over any rail");
	u0 = mrail_stat("qp_up");
	if (qp_to(&c, IBV_QPS_RESET) || conn_connect(&c)) {
		tap_ok(false, "RESET and connect again");
		return 1;
	}
	wait_up(u0, 2);
	memset(buf, 0xc3, SLOTS * opt.size);
	s0 = mrail_stat("striped");
	order = batch(&c, 64, &ok);
	tap_ok(order && ok == 64, "after RESET and reconnect: 64 WRITEs succeed in order (%d ok)",
	       ok);
	tap_ok(mrail_stat("qp_up") >= u0 + 2 && mrail_stat("striped") > s0,
	       "renegotiated and striped again (qp_up +%lld, striped +%lld)",
	       mrail_stat("qp_up") - u0, mrail_stat("striped") - s0);
	sync_ok(sock, true);
	tap_ok(sync_ok(sock, true), "peer's memory holds the new data");
	conn_down(&c);
	return tap_failed ? 1 : 0;
}

static size_t count_bytes(uint8_t v, bool equal)
{
	size_t i, n = 0;

	for (i = 0; i < SLOTS * opt.size; i++)
		n += (buf[i] == v) == equal;
	return n;
}

static int server_error(void)
{
	struct conn c;
	size_t bad;

	if (conn_up(&c))
		return 1;
	if (!sync_ok(sock, true) ||
	    !sync_ok(sock, qp_to(&c, IBV_QPS_ERR) == 0))
		return 1;
	sync_ok(sock, true);	/* the client's WRITEs completed */
	bad = count_bytes(0xb2, true);
	if (bad)
		diag("%zu bytes of the WRITEs after the error reached memory",
		     bad);
	sync_ok(sock, !bad);
	/* -W: the client's new connection asks our QP before it is reset */
	if (opt.reset_delay_ms)
		usleep(opt.reset_delay_ms * 1000);
	if (qp_to(&c, IBV_QPS_RESET) || conn_connect(&c))
		return 1;
	sync_ok(sock, true);	/* the client's last WRITEs completed */
	bad = count_bytes(0xc3, false);
	if (bad)
		diag("%zu bytes of memory without the last data", bad);
	sync_ok(sock, !bad);
	conn_down(&c);
	return bad ? 1 : 0;
}

static int server(void)
{
	struct conn c;
	char b;
	int r;

	if (!opt.rounds) {
		if (conn_up(&c))
			return 1;
		/* until the client is done (or killed) */
		while (read(sock, &b, 1) > 0)
			;
		conn_down(&c);
		return 0;
	}
	for (r = 0; r < opt.rounds; r++) {
		if (conn_up(&c))
			return 1;
		if (xfer(sock, &b, &b, 1))
			return 1;
		conn_down(&c);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	int c, ret = 1;

	while ((c = getopt(argc, argv, "d:g:p:s:n:u:t:T:F:D:EW:h")) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 's': opt.size = strtoul(optarg, NULL, 0); break;
		case 'n': opt.window = atoi(optarg); break;
		case 'u': opt.ack_timeout = atoi(optarg); break;
		case 't': opt.secs = atoi(optarg); break;
		case 'T': opt.drain_s = atoi(optarg); break;
		case 'F': opt.flag_file = optarg; break;
		case 'D': opt.rounds = atoi(optarg); break;
		case 'E': opt.error = true; break;
		case 'W': opt.reset_delay_ms = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-g GIDX] [-p PORT] [-s BYTES] [-n WINDOW] [-u ACK_TIMEOUT] [-t SEC] [-T DRAIN_SEC] [-F FILE] [-D ROUNDS] [-E [-W MS]] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (!opt.dev || opt.window < 1 || opt.window > 1024 || !opt.size ||
	    opt.size > (1u << 24) || opt.rounds < 0 ||
	    opt.reset_delay_ms < 0 || opt.reset_delay_ms > 60000) {
		fprintf(stderr, "%s: -d DEV required, 1 <= WINDOW <= 1024, 1 <= BYTES <= 16 MiB\n",
			argv[0]);
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (dev_open(&d, opt.dev, opt.gid)) {
		diag("open %s failed", opt.dev);
		return 1;
	}
	if (posix_memalign((void **)&buf, 4096, SLOTS * opt.size))
		return 1;
	memset(buf, 0x5a, SLOTS * opt.size);
	mr = ibv_reg_mr(d.pd, buf, SLOTS * opt.size, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			IBV_ACCESS_RELAXED_ORDERING);
	if (!mr) {
		diag("ibv_reg_mr: %s", strerror(errno));
		goto out;
	}
	sock = tcp_connect(opt.server, opt.port, 20000);
	if (sock < 0)
		goto out;
	diag("%s on %s: %s", opt.server ? "client" : "server", opt.dev,
	     opt.error ? "error, reset and reuse" :
	     opt.rounds ? "destroy rounds" : "stream");
	if (opt.error)
		ret = opt.server ? client_error() : server_error();
	else if (!opt.server)
		ret = server();
	else if (opt.rounds)
		ret = client_destroy();
	else
		ret = client_stream();
out:
	if (sock >= 0)
		close(sock);
	if (mr)
		ibv_dereg_mr(mr);
	dev_close(&d);
	return ret;
}
