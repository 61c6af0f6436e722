// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_badinput - drive bad-input paths of an RDMA device from userspace
 * and check that every call fails with the right error (or the right
 * completion status) instead of crashing or succeeding.
 *
 *   rbond_badinput -d DEV [-D PEER_DEV] [-g GID_INDEX] [-u ACK_TIMEOUT]
 *                  [-W FILE | -N FILE] [-C]
 *
 * DEV is the device under test; connected-QP checks use an RC QP on DEV
 * connected to one on PEER_DEV (default: DEV itself, loopback).
 * Completion errors are what the member device gives natively, and that
 * differs between kernels (6.12's rxe flushes a WRITE from beyond its
 * local MR where 6.1's reports a local protection error): -W FILE runs
 * against a plain device, accepts any error status for a failing WQE
 * (wr_id still checked) and records the status per check in FILE; -N FILE
 * then holds the device under test to exactly the recorded status.
 * -C runs only the completion-error checks.
 * Checks that only hold for an rdma_bond device (verbs it does not
 * implement -> EOPNOTSUPP) are skipped on other devices.
 * Output is TAP-like; the exit status is non-zero if any check failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define BUF 65536
#define WAIT_MS 15000

static struct dev d, p;		/* device under test, peer */
static struct ibv_device_attr da;
static int ack_timeout = 18;

/* peer-side memory with various rights */
static void *pb_rw, *pb_ro, *pb_wo, *pb_recv, *lb;
static struct ibv_mr *pm_rw, *pm_ro, *pm_wo, *pm_recv, *lm;

static const char *en(int e)
{
	static char bufs[4][48];
	static int k;
	char *b = bufs[k++ & 3];
	const char *n = e > 0 ? strerrorname_np(e) : NULL;

	snprintf(b, sizeof(bufs[0]), "%s(%d)", e == 0 ? "0" : n ? n : "?", e);
	return b;
}

/* ret: 0 on success else errno value */
static void expect_err(int got, int want, const char *what)
{
	tap_ok(got == want, "%s -> %s (got %s)", what, en(want), en(got));
}

static void expect_err2(int got, int w1, int w2, const char *what)
{
	tap_ok(got == w1 || got == w2, "%s -> %s or %s (got %s)", what, en(w1),
	       en(w2), en(got));
}

#define PTR_ERR(call) ({ errno = 0; void *__p = (void *)(call); int __e = __p ? 0 : (errno ?: -1); __p_last = __p; __e; })
static void *__p_last;

static bool bond_only(const char *what)
{
	if (d.is_bond)
		return true;
	tap_skip("%s (rdma_bond only; %s is not a bond)", what, d.name);
	return false;
}

/* ------------------------------------------------------------------ */

struct pair {
	struct ibv_cq *ca, *cb;
	struct ibv_qp *qa, *qb;
	long long qp_up0;	/* the module's qp_up before the pair: wait_mrail() */
};

static void pair_destroy(struct pair *x)
{
	if (x->qa && ibv_destroy_qp(x->qa))
		tap_ok(false, "destroy QP after test: %s", strerror(errno));
	if (x->qb && ibv_destroy_qp(x->qb))
		tap_ok(false, "destroy peer QP after test: %s", strerror(errno));
	if (x->ca)
		ibv_destroy_cq(x->ca);
	if (x->cb)
		ibv_destroy_cq(x->cb);
	memset(x, 0, sizeof(*x));
}

static struct ibv_qp *mkqp_inl(struct dev *dv, struct ibv_cq *cq, int wr,
			       int sge, int inl)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = wr, .max_recv_wr = wr,
			 .max_send_sge = sge, .max_recv_sge = sge,
			 .max_inline_data = inl },
	};

	return ibv_create_qp(dv->pd, &a);
}

static struct ibv_qp *mkqp(struct dev *dv, struct ibv_cq *cq, int wr, int sge)
{
	return mkqp_inl(dv, cq, wr, sge, 0);
}

/*
 * A connected pair whose QP under test has @sge SGEs and @inl inline bytes,
 * its peer QP on @peer (the peer device, or a copy with another PD).
 */
static int pair_make_peer(struct pair *x, struct dev *peer, uint8_t rnr_retry,
			  int sge, int inl)
{
	struct qp_info ia, ib;
	struct conn_opts o;
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	memset(x, 0, sizeof(*x));
	x->qp_up0 = mrail_stat("qp_up");
	x->ca = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	x->cb = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	if (!x->ca || !x->cb)
		goto err;
	x->qa = mkqp_inl(&d, x->ca, 16, sge, inl);
	x->qb = mkqp(peer, x->cb, 16, 2);
	if (!x->qa || !x->qb)
		goto err;
	conn_opts_default(&o);
	o.timeout = ack_timeout;
	o.rnr_retry = rnr_retry;
	o.retry_cnt = 2;
	o.min_rnr_timer = 1;
	o.max_rd_atomic = 4;
	qp_local_info(&d, x->qa, 0x1234, &ia);
	qp_local_info(peer, x->qb, 0x5678, &ib);
	if ((errno = qp_connect(&d, x->qa, &ia, &ib, &o, acc)) ||
	    (errno = qp_connect(peer, x->qb, &ib, &ia, &o, acc)))
		goto err;
	return 0;
err:
	diag("cannot build a connected QP pair: %s", strerror(errno));
	pair_destroy(x);
	return -1;
}

static int pair_make_caps(struct pair *x, uint8_t rnr_retry, int sge, int inl)
{
	return pair_make_peer(x, &p, rnr_retry, sge, inl);
}

static int pair_make(struct pair *x, uint8_t rnr_retry)
{
	return pair_make_caps(x, rnr_retry, 2, 0);
}

static int post1(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op,
		 void *addr, uint32_t len, uint32_t lkey, uint64_t raddr,
		 uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = op, .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

static int postr(struct ibv_qp *qp, uint64_t id, void *addr, uint32_t len,
		 uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* -W: where native statuses are recorded; -N: the recorded ones */
static FILE *native_out;
static char native_tab[64][200];
static int native_st[64], native_n;

static int native_load(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[256];
	int st, off;

	if (!f)
		return -1;
	while (native_n < 64 && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%d %n", &st, &off) != 1)
			continue;
		line[strcspn(line, "\n")] = 0;
		snprintf(native_tab[native_n], sizeof(native_tab[0]), "%s",
			 line + off);
		native_st[native_n++] = st;
	}
	fclose(f);
	return 0;
}

/* The status recorded for @what with -N, or -1. */
static int native_status(const char *what)
{
	int i;

	for (i = 0; i < native_n; i++)
		if (!strcmp(native_tab[i], what))
			return native_st[i];
	return -1;
}

/*
 * Wait for one completion and check status and wr_id.  An expected error
 * is the native one when -W records (any error) or -N knows it.
 */
static void expect_wc(struct ibv_cq *cq, uint64_t id, int n_ok,
		      const enum ibv_wc_status *ok, const char *what)
{
	enum ibv_wc_status nat;
	struct ibv_wc wc;
	char want[160] = "";
	bool good = false, err = true;
	int i;

	for (i = 0; i < n_ok; i++)
		err &= ok[i] != IBV_WC_SUCCESS;
	if (err && native_status(what) >= 0) {
		nat = native_status(what);
		ok = &nat;
		n_ok = 1;
	}
	for (i = 0; i < n_ok; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "%s%s",
			 i ? " or " : "", wc_status_name(ok[i]));
	if (err && native_out)
		snprintf(want + strlen(want), sizeof(want) - strlen(want),
			 " (or the native error, recorded)");
	if (poll_n(cq, &wc, 1, WAIT_MS) != 1) {
		tap_ok(false, "%s -> completion %s (no completion in %d ms)", what,
		       want, WAIT_MS);
		return;
	}
	for (i = 0; i < n_ok; i++)
		good |= wc.status == ok[i];
	if (err && native_out && wc.status != IBV_WC_SUCCESS) {
		fprintf(native_out, "%d %s\n", wc.status, what);
		good = true;
	}
	if (wc.wr_id != id) {
		diag("wr_id 0x%llx, expected 0x%llx", (unsigned long long)wc.wr_id,
		     (unsigned long long)id);
		good = false;
	}
	tap_ok(good, "%s -> completion %s (got %s)", what, want,
	       wc_status_name(wc.status));
}

#define WC1(cq, id, s, what) do { enum ibv_wc_status __s[] = { s }; expect_wc(cq, id, 1, __s, what); } while (0)
#define WC2(cq, id, s1, s2, what) do { enum ibv_wc_status __s[] = { s1, s2 }; expect_wc(cq, id, 2, __s, what); } while (0)

/*
 * A WQE whose error is found at post time (EINVAL) or on completion with
 * status st1 (what the IB spec names) or st2 (what rxe reports instead).
 */
static void expect_post_or_wc2(struct pair *x, int post_ret, uint64_t id,
			       enum ibv_wc_status st1, enum ibv_wc_status st2,
			       const char *what)
{
	if (post_ret) {
		expect_err(post_ret, EINVAL, what);
		return;
	}
	if (st1 == st2)
		WC1(x->ca, id, st1, what);
	else
		WC2(x->ca, id, st1, st2, what);
	/* the QP is in error now: the next WQE must be flushed */
	if (!post1(x->qa, id + 1, IBV_WR_RDMA_WRITE, lb, 8, lm->lkey,
		   (uintptr_t)pb_rw, pm_rw->rkey))
		WC1(x->ca, id + 1, IBV_WC_WR_FLUSH_ERR, "  next WQE after the error");
	else
		tap_ok(true, "  next WQE after the error refused at post time");
}

static void expect_post_or_wc(struct pair *x, int post_ret, uint64_t id,
			      enum ibv_wc_status st, const char *what)
{
	expect_post_or_wc2(x, post_ret, id, st, st, what);
}

/* ------------------------------------------------------------------ */

static void t_create_limits(void)
{
	struct ibv_qp_init_attr a;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int e;

	e = PTR_ERR(ibv_create_cq(d.ctx, da.max_cqe + 1, NULL, NULL, 0));
	if (!e)
		ibv_destroy_cq(__p_last);
	expect_err(e, EINVAL, "create CQ with cqe = max_cqe + 1");

	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	if (!cq) {
		tap_ok(false, "create CQ: %s", strerror(errno));
		return;
	}
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = da.max_qp_wr + 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	e = PTR_ERR(qp = ibv_create_qp(d.pd, &a));
	if (qp)
		ibv_destroy_qp(qp);
	expect_err(e, EINVAL, "create RC QP with max_send_wr = max_qp_wr + 1");

	a.cap.max_send_wr = 1;
	a.cap.max_send_sge = da.max_sge + 1;
	e = PTR_ERR(qp = ibv_create_qp(d.pd, &a));
	if (qp)
		ibv_destroy_qp(qp);
	expect_err(e, EINVAL, "create RC QP with max_send_sge = max_sge + 1");

	if (bond_only("unsupported QP types -> EOPNOTSUPP")) {
		static const struct { enum ibv_qp_type t; const char *n; } ts[] = {
			{ IBV_QPT_UC, "UC" },
			{ IBV_QPT_RAW_PACKET, "RAW_PACKET" },
			{ IBV_QPT_XRC_SEND, "XRC_SEND" },
			{ IBV_QPT_DRIVER, "DRIVER" },
		};
		char what[64];
		unsigned int i;

		a.cap.max_send_sge = 1;
		for (i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
			a.qp_type = ts[i].t;
			e = PTR_ERR(qp = ibv_create_qp(d.pd, &a));
			if (qp)
				ibv_destroy_qp(qp);
			snprintf(what, sizeof(what), "create %s QP", ts[i].n);
			expect_err(e, EOPNOTSUPP, what);
		}
	}
	ibv_destroy_cq(cq);
}

/* An SRQ with these attributes must be refused with EINVAL. */
static void srq_refused(uint32_t wr, uint32_t sge, uint32_t limit,
			const char *what)
{
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = wr, .max_sge = sge, .srq_limit = limit },
	};
	struct ibv_srq *srq;
	int e;

	e = PTR_ERR(srq = ibv_create_srq(d.pd, &sa));
	if (srq)
		ibv_destroy_srq(srq);
	expect_err(e, EINVAL, what);
}

/* SRQ: the limits granted, post-time checks, attach rules. */
static void t_srq(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_recv_wr wr = {}, *bad;
	struct ibv_sge sge[2] = {};
	struct ibv_srq_attr qa = {};
	struct ibv_qp_init_attr ia = {};
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	uint32_t i, n;
	int e;

	if (!bond_only("SRQ limits and post-time checks as the bond grants them"))
		return;
	srq_refused(da.max_srq_wr + 1, 1, 0, "create SRQ with max_wr = max_srq_wr + 1");
	srq_refused(4, da.max_srq_sge + 1, 0, "create SRQ with max_sge = max_srq_sge + 1");
	srq_refused(0, 1, 0, "create SRQ with max_wr 0");
	srq_refused(4, 1, 5, "create SRQ with srq_limit > max_wr");
	srq = ibv_create_srq(d.pd, &sa);
	if (!srq) {
		tap_ok(false, "create SRQ max_wr 4 max_sge 1: %s", strerror(errno));
		return;
	}
	n = sa.attr.max_wr;
	tap_ok(n >= 4 && n <= (uint32_t)da.max_srq_wr && sa.attr.max_sge == 1,
	       "create SRQ: granted max_wr %u, max_sge %u", n, sa.attr.max_sge);

	sge[0].addr = (uintptr_t)lb;
	sge[0].length = 64;
	sge[0].lkey = lm->lkey;
	sge[1] = sge[0];
	wr.sg_list = sge;
	wr.num_sge = 2;
	expect_err(ibv_post_srq_recv(srq, &wr, &bad), EINVAL,
		   "post SRQ receive with 2 SGEs (1 granted)");
	wr.num_sge = 1;
	sge[0].lkey = lm->lkey ^ 0x5a5a00;
	expect_err(ibv_post_srq_recv(srq, &wr, &bad), EINVAL,
		   "post SRQ receive with an invalid lkey");
	sge[0].lkey = lm->lkey;
	for (i = 0, e = 0; i < n && !e; i++) {
		wr.wr_id = i;
		e = ibv_post_srq_recv(srq, &wr, &bad);
	}
	tap_ok(!e && i == n, "post exactly the granted %u SRQ receives (%u ok)",
	       n, e ? i - 1 : i);
	expect_err(ibv_post_srq_recv(srq, &wr, &bad), ENOMEM,
		   "post one SRQ receive more than granted");

	qa.max_wr = 2 * n;
	expect_err(ibv_modify_srq(srq, &qa, IBV_SRQ_MAX_WR), EOPNOTSUPP,
		   "resize SRQ (not supported)");
	qa.srq_limit = n + 1;
	expect_err(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), EINVAL,
		   "arm SRQ limit above max_wr");
	qa.srq_limit = 1;
	expect_err(ibv_modify_srq(srq, &qa, IBV_SRQ_LIMIT), 0, "arm SRQ limit 1");
	memset(&qa, 0, sizeof(qa));
	e = ibv_query_srq(srq, &qa);
	tap_ok(!e && qa.max_wr == n && qa.max_sge == 1 && qa.srq_limit == 1,
	       "query SRQ: max_wr %u max_sge %u srq_limit %u", qa.max_wr,
	       qa.max_sge, qa.srq_limit);

	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = cq;
	ia.srq = srq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	qp = cq ? ibv_create_qp(d.pd, &ia) : NULL;
	tap_ok(qp != NULL, "create RC QP on the SRQ%s%s", qp ? "" : ": ",
	       qp ? "" : strerror(errno));
	if (qp) {
		expect_err(ibv_post_recv(qp, &wr, &bad), EINVAL,
			   "post a receive to a QP on an SRQ");
		expect_err(ibv_destroy_srq(srq), EBUSY,
			   "destroy an SRQ a QP is attached to");
		ibv_destroy_qp(qp);
	}
	if (cq)
		ibv_destroy_cq(cq);
	expect_err(ibv_destroy_srq(srq), 0, "destroy the SRQ with receives posted");
}

/* Wait up to @ms for async event @type on @ctx (others are skipped). */
static bool wait_async(struct ibv_context *ctx, enum ibv_event_type type,
		       void *elem, int ms)
{
	struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int fl = fcntl(ctx->async_fd, F_GETFL);
	bool found = false;
	uint64_t t0 = now_ms();

	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	while (!found && now_ms() - t0 < (uint64_t)ms) {
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		while (!found && !ibv_get_async_event(ctx, &ev)) {
			found = ev.event_type == type && ev.element.srq == elem;
			if (!found)
				diag("async event %s skipped",
				     ibv_event_type_str(ev.event_type));
			ibv_ack_async_event(&ev);
		}
	}
	fcntl(ctx->async_fd, F_SETFL, fl);
	return found;
}

/*
 * Traffic through an SRQ on the device under test: four receives, SENDs
 * from the peer consume them in order with their data, the limit event
 * fires when fewer than the armed limit are left, and with no receive left
 * a SEND gets RNR (rnr_retry 0): what a native SRQ does.
 */
static void t_srq_traffic(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 8, .max_sge = 1 } };
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_cq *ca = NULL, *cb = NULL;
	struct ibv_qp *qa = NULL, *qb = NULL;
	struct ibv_srq_attr la = { .srq_limit = 2 };
	struct ibv_qp_init_attr ia = {};
	struct ibv_sge sge = {};
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_srq *srq;
	struct qp_info ma, mb;
	struct conn_opts o;
	struct ibv_wc wc;
	bool ok = true;
	uint8_t *buf;
	long off;
	int i;

	srq = ibv_create_srq(d.pd, &sa);
	if (!srq) {
		tap_ok(false, "SRQ traffic: create SRQ: %s", strerror(errno));
		return;
	}
	ca = ibv_create_cq(d.ctx, 64, NULL, NULL, 0);
	cb = ibv_create_cq(p.ctx, 64, NULL, NULL, 0);
	ia.qp_type = IBV_QPT_RC;
	ia.send_cq = ia.recv_cq = ca;
	ia.srq = srq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	qa = ca ? ibv_create_qp(d.pd, &ia) : NULL;
	qb = cb ? mkqp(&p, cb, 16, 1) : NULL;
	conn_opts_default(&o);
	o.timeout = ack_timeout;
	o.rnr_retry = 0;
	o.retry_cnt = 2;
	o.min_rnr_timer = 1;
	if (!qa || !qb) {
		tap_ok(false, "SRQ traffic: QPs: %s", strerror(errno));
		goto out;
	}
	qp_local_info(&d, qa, 0x2345, &ma);
	qp_local_info(&p, qb, 0x6789, &mb);
	if (qp_connect(&d, qa, &ma, &mb, &o, acc) ||
	    qp_connect(&p, qb, &mb, &ma, &o, acc)) {
		tap_ok(false, "SRQ traffic: connect");
		goto out;
	}
	memset((uint8_t *)lb + 1024, 0, 4 * 256);
	for (i = 0; i < 4; i++) {
		sge.addr = (uintptr_t)lb + 1024 + i * 256;
		sge.length = 256;
		sge.lkey = lm->lkey;
		wr.wr_id = 100 + i;
		ok &= !ibv_post_srq_recv(srq, &wr, &bad);
	}
	ok &= !ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT);
	tap_ok(ok, "SRQ traffic: 4 receives posted, limit 2 armed");
	for (i = 0; i < 3; i++) {
		memset((uint8_t *)pb_rw + i * 256, 0x40 + i, 200);
		post1(qb, 200 + i, IBV_WR_SEND, (uint8_t *)pb_rw + i * 256, 200,
		      pm_rw->lkey, 0, 0);
	}
	for (i = 0; i < 3; i++) {
		buf = (uint8_t *)lb + 1024 + i * 256;
		if (poll_n(ca, &wc, 1, WAIT_MS) != 1) {
			tap_ok(false, "SRQ receive %d: no completion", i);
			goto out;
		}
		for (off = 0; off < 200 && buf[off] == 0x40 + i; off++)
			;
		tap_ok(wc.status == IBV_WC_SUCCESS && wc.wr_id == 100u + i &&
		       wc.opcode == IBV_WC_RECV && wc.byte_len == 200 &&
		       wc.qp_num == qa->qp_num && off == 200,
		       "SRQ receive %d: %s, wr_id %llu, %u bytes, QP 0x%x, data %s",
		       i, wc_status_name(wc.status),
		       (unsigned long long)wc.wr_id, wc.byte_len, wc.qp_num,
		       off == 200 ? "intact" : "wrong");
	}
	for (i = 0; i < 3; i++)
		WC1(cb, 200 + i, IBV_WC_SUCCESS, "  the peer's SEND");
	tap_ok(wait_async(d.ctx, IBV_EVENT_SRQ_LIMIT_REACHED, srq, 5000),
	       "SRQ limit event after the third receive (1 left, limit 2)");
	post1(qb, 203, IBV_WR_SEND, pb_rw, 16, pm_rw->lkey, 0, 0);
	WC1(ca, 103, IBV_WC_SUCCESS, "the last SRQ receive");
	WC1(cb, 203, IBV_WC_SUCCESS, "  the peer's SEND");
	post1(qb, 204, IBV_WR_SEND, pb_rw, 16, pm_rw->lkey, 0, 0);
	WC1(cb, 204, IBV_WC_RNR_RETRY_EXC_ERR,
	    "a SEND with the SRQ empty, rnr_retry 0");
out:
	if (qa)
		ibv_destroy_qp(qa);
	if (qb)
		ibv_destroy_qp(qb);
	if (ca)
		ibv_destroy_cq(ca);
	if (cb)
		ibv_destroy_cq(cb);
	ibv_destroy_srq(srq);
}

static void t_unsupported(void)
{
	struct ibv_cq_init_attr_ex ca = { .cqe = 16,
		.wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_xrcd_init_attr xa = { .comp_mask = IBV_XRCD_INIT_ATTR_FD |
					 IBV_XRCD_INIT_ATTR_OFLAGS,
					 .fd = -1, .oflags = O_CREAT };
	struct ibv_cq *cq;
	int e;

	if (!bond_only("verbs rdma_bond does not implement -> EOPNOTSUPP"))
		return;
	e = PTR_ERR(ibv_alloc_mw(d.pd, IBV_MW_TYPE_1));
	expect_err(e, EOPNOTSUPP, "alloc MW");
	e = PTR_ERR(ibv_create_cq_ex(d.ctx, &ca));
	expect_err(e, EOPNOTSUPP, "create CQ_EX");
	e = PTR_ERR(ibv_open_xrcd(d.ctx, &xa));
	expect_err(e, EOPNOTSUPP, "open XRCD");
	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	if (cq) {
		expect_err(ibv_resize_cq(cq, 64), EOPNOTSUPP, "resize CQ");
		ibv_destroy_cq(cq);
	}
	{
		struct ibv_cq *c2 = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
		struct ibv_qp_init_attr_ex qa = {
			.qp_type = IBV_QPT_RC, .send_cq = c2, .recv_cq = c2,
			.cap = { .max_send_wr = 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 },
			.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
			.pd = d.pd, .send_ops_flags = IBV_QP_EX_WITH_SEND,
		};

		e = PTR_ERR(ibv_create_qp_ex(d.ctx, &qa));
		if (!e)
			ibv_destroy_qp(__p_last);
		expect_err(e, EOPNOTSUPP, "create QP with the new post-send API (send_ops_flags)");
		if (c2)
			ibv_destroy_cq(c2);
	}
}

/* --- UD: traffic with data checked, and what a UD QP refuses ----------- */

#define UD_QKEY		0x11111111
#define UD_GRH		40
#define UD_LEN		256

static struct ibv_qp *ud_qp(struct dev *dv, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr m = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = UD_QKEY };
	struct ibv_qp *qp = ibv_create_qp(dv->pd, &a);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		goto err;
	m.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE))
		goto err;
	m.qp_state = IBV_QPS_RTS;
	m.sq_psn = 0;
	if (ibv_modify_qp(qp, &m, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto err;
	return qp;
err:
	ibv_destroy_qp(qp);
	return NULL;
}

static struct ibv_ah *ud_ah(struct ibv_pd *pd, struct dev *to)
{
	struct ibv_ah_attr a = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = to->gid, .sgid_index = (uint8_t)d.gid_index,
			 .hop_limit = 64 },
	};

	return ibv_create_ah(pd, &a);
}

static int ud_send(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t rqpn,
		   enum ibv_wr_opcode op, uint64_t id, void *buf, uint32_t len,
		   uint32_t lkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len,
			       .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ah, .remote_qpn = rqpn, .remote_qkey = UD_QKEY },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad) ? errno : 0;
}

/*
 * A UD work request the QP type cannot carry.  The bond refuses it at post
 * time with EINVAL and leaves no completion; a plain member (rxe) may take
 * the post and complete it in error instead, which is its native answer.
 */
static void ud_refused(struct ibv_cq *cq, int ret, uint64_t wr_id,
		       const char *what)
{
	struct ibv_wc wc;
	int n;

	if (d.is_bond || ret) {
		expect_err(ret, EINVAL, what);
		return;
	}
	n = poll_n(cq, &wc, 1, 5000);
	tap_ok(n == 1 && wc.wr_id == wr_id && wc.status != IBV_WC_SUCCESS,
	       "%s -> %s natively: posted, completed in error (n %d, %s)",
	       what, d.name, n, n == 1 ? wc_status_name(wc.status) : "-");
}

static void t_ud(void)
{
	struct ibv_cq *ca = ibv_create_cq(d.ctx, 32, NULL, NULL, 0);
	struct ibv_cq *cb = ibv_create_cq(p.ctx, 32, NULL, NULL, 0);
	struct ibv_pd *pd2 = ibv_alloc_pd(d.ctx);
	struct ibv_qp *qa = NULL, *qb = NULL;
	struct ibv_ah *ah = NULL, *ah2 = NULL;
	struct ibv_mr *rmr = NULL;
	uint8_t *rbuf = NULL;
	struct ibv_wc wc;
	int i, e, n;

	if (ca && cb) {
		qa = ud_qp(&d, ca);
		qb = ud_qp(&p, cb);
	}
	tap_ok(qa && qb, "UD: a UD QP on %s and on %s, at RTS", d.name, p.name);
	if (!qa || !qb)
		goto out;
	ah = ud_ah(d.pd, &p);
	ah2 = pd2 ? ud_ah(pd2, &p) : NULL;
	tap_ok(ah && ah2, "UD: address handles to %s in two PDs", p.name);
	rbuf = calloc(1, 4 * (UD_GRH + UD_LEN));
	rmr = rbuf ? ibv_reg_mr(p.pd, rbuf, 4 * (UD_GRH + UD_LEN),
				IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!ah || !ah2 || !rmr)
		goto out;

	for (i = 0; i < 3; i++)
		postr(qb, 300 + i, rbuf + i * (UD_GRH + UD_LEN),
		      UD_GRH + UD_LEN, rmr->lkey);
	/* three messages with a pattern each: data, src_qp, GRH flag */
	for (i = 0, e = 0; i < 3; i++) {
		pat_fill(lb, UD_LEN, 77 + i, 0);
		e |= ud_send(qa, ah, qb->qp_num, IBV_WR_SEND, 200 + i, lb,
			     UD_LEN, lm->lkey);
		n = poll_n(ca, &wc, 1, 5000);
		e |= n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 200u + i;
	}
	tap_ok(!e, "UD: 3 SENDs of %d B posted and completed in order with their wr_ids",
	       UD_LEN);
	for (i = 0, e = 0; i < 3; i++) {
		n = poll_n(cb, &wc, 1, 5000);
		if (n != 1 || wc.status != IBV_WC_SUCCESS || wc.wr_id != 300u + i ||
		    wc.byte_len != UD_GRH + UD_LEN || wc.src_qp != qa->qp_num ||
		    !(wc.wc_flags & IBV_WC_GRH) ||
		    pat_check(rbuf + i * (UD_GRH + UD_LEN) + UD_GRH, UD_LEN,
			      77 + i, 0) >= 0) {
			diag("UD receive %d: n %d status %s wr_id %llu len %u src_qp 0x%x flags 0x%x",
			     i, n, n == 1 ? wc_status_name(wc.status) : "-",
			     (unsigned long long)wc.wr_id, wc.byte_len, wc.src_qp,
			     wc.wc_flags);
			e = 1;
		}
	}
	tap_ok(!e, "UD: the peer received them in order: data intact, byte_len = 40 + %d, src_qp = the bond QP, GRH flag",
	       UD_LEN);

	ud_refused(ca, ud_send(qa, ah, qb->qp_num, IBV_WR_RDMA_WRITE, 901, lb, 8,
				lm->lkey), 901, "UD: post RDMA_WRITE on a UD QP");
	ud_refused(ca, ud_send(qa, ah, qb->qp_num, IBV_WR_ATOMIC_FETCH_AND_ADD,
				902, lb, 8, lm->lkey), 902,
		   "UD: post FETCH_ADD on a UD QP");
	if (bond_only("UD: an AH of another PD -> EINVAL"))
		expect_err(ud_send(qa, ah2, qb->qp_num, IBV_WR_SEND, 903, lb, 8,
				   lm->lkey), EINVAL,
			   "UD: post a SEND with an AH of another PD");
	ud_refused(ca, ud_send(qa, ah, qb->qp_num, IBV_WR_SEND, 904, lb, 8,
				0xdeadbeef), 904, "UD: post a SEND with a bad lkey");
	if (d.is_bond) {
		n = poll_n(ca, &wc, 1, 300);
		tap_ok(n == 0, "UD: refused posts left no completion (%d)", n);
	}
out:
	if (qa) ibv_destroy_qp(qa);
	if (qb) ibv_destroy_qp(qb);
	if (ah) ibv_destroy_ah(ah);
	if (ah2) ibv_destroy_ah(ah2);
	if (rmr) ibv_dereg_mr(rmr);
	free(rbuf);
	if (pd2) ibv_dealloc_pd(pd2);
	if (ca) ibv_destroy_cq(ca);
	if (cb) ibv_destroy_cq(cb);
}

static void t_mr(void)
{
	void *buf = malloc(BUF), *hole;
	struct ibv_mr *mr;
	int e;

	e = PTR_ERR(mr = ibv_reg_mr(d.pd, buf, BUF, IBV_ACCESS_REMOTE_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	expect_err(e, EINVAL, "reg MR REMOTE_WRITE without LOCAL_WRITE");

	e = PTR_ERR(mr = ibv_reg_mr(d.pd, buf, BUF, IBV_ACCESS_REMOTE_ATOMIC));
	if (mr)
		ibv_dereg_mr(mr);
	expect_err(e, EINVAL, "reg MR REMOTE_ATOMIC without LOCAL_WRITE");

	hole = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole, 8192);
	e = PTR_ERR(mr = ibv_reg_mr(d.pd, hole, 8192, IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	expect_err(e, EFAULT, "reg MR over unmapped memory");

	e = PTR_ERR(mr = ibv_reg_mr(d.pd, buf, SIZE_MAX - (uintptr_t)buf + 4096,
				    IBV_ACCESS_LOCAL_WRITE));
	if (mr)
		ibv_dereg_mr(mr);
	expect_err2(e, EINVAL, ENOMEM, "reg MR whose end wraps around the address space");

	mr = ibv_reg_mr(d.pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	tap_ok(mr != NULL, "reg MR with IBV_ACCESS_RELAXED_ORDERING accepted (%s)",
	       mr ? "ok" : strerror(errno));
	if (mr)
		ibv_dereg_mr(mr);
	free(buf);
}

static void t_busy(void)
{
	struct ibv_pd *pd = ibv_alloc_pd(d.ctx);
	void *buf = malloc(BUF);
	struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
				  .grh = { .hop_limit = 64, .sgid_index = d.gid_index } };
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
	struct ibv_qp_init_attr a;

	if (!pd) {
		tap_ok(false, "alloc PD: %s", strerror(errno));
		return;
	}
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		tap_ok(false, "reg MR: %s", strerror(errno));
	} else {
		expect_err(ibv_dealloc_pd(pd), EBUSY, "dealloc PD that has an MR");
		tap_ok(ibv_dereg_mr(mr) == 0, "dereg that MR");
	}

	cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	memset(&a, 0, sizeof(a));
	a.send_cq = a.recv_cq = cq;
	a.qp_type = IBV_QPT_RC;
	a.cap.max_send_wr = a.cap.max_recv_wr = 4;
	a.cap.max_send_sge = a.cap.max_recv_sge = 1;
	qp = cq ? ibv_create_qp(pd, &a) : NULL;
	if (!qp) {
		tap_ok(false, "create CQ+QP: %s", strerror(errno));
	} else {
		expect_err(ibv_destroy_cq(cq), EBUSY, "destroy CQ that a QP uses");
		expect_err(ibv_dealloc_pd(pd), EBUSY, "dealloc PD that has a QP");
		tap_ok(ibv_destroy_qp(qp) == 0, "destroy that QP");
	}
	if (cq)
		tap_ok(ibv_destroy_cq(cq) == 0, "destroy the CQ once idle");

	aa.grh.dgid = p.gid;
	ah = ibv_create_ah(pd, &aa);
	if (!ah) {
		tap_ok(false, "create AH to the peer GID: %s", strerror(errno));
	} else {
		expect_err(ibv_dealloc_pd(pd), EBUSY, "dealloc PD that has an AH");
		tap_ok(ibv_destroy_ah(ah) == 0, "destroy that AH");
	}
	/* an empty slot of the GID table, then an index past its end */
	aa.grh.sgid_index = d.port.gid_tbl_len > 201 ? 200 : d.port.gid_tbl_len - 1;
	expect_err(PTR_ERR(ibv_create_ah(pd, &aa)), ENODATA, "create AH with an empty sgid_index");
	if (d.port.gid_tbl_len < 256) {
		aa.grh.sgid_index = d.port.gid_tbl_len;
		expect_err(PTR_ERR(ibv_create_ah(pd, &aa)), EINVAL,
			   "create AH with sgid_index = gid_tbl_len");
	}
	aa.grh.sgid_index = d.gid_index;
	aa.port_num = 2;
	expect_err(PTR_ERR(ibv_create_ah(pd, &aa)), EINVAL, "create AH on port 2 (one-port device)");

	tap_ok(ibv_dealloc_pd(pd) == 0, "dealloc the PD once empty");
	free(buf);
}

static void t_states(void)
{
	struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	int ret;

	qp = cq ? mkqp(&d, cq, 4, 1) : NULL;
	if (!qp) {
		tap_ok(false, "create QP: %s", strerror(errno));
		goto out;
	}
	ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	tap_ok(!ret && a.qp_state == IBV_QPS_RESET, "new QP is in RESET (query_qp)");
	expect_err(post1(qp, 1, IBV_WR_SEND, lb, 8, lm->lkey, 0, 0), EINVAL,
		   "post_send on a RESET QP");
	expect_err(postr(qp, 1, lb, 8, lm->lkey), EINVAL, "post_recv on a RESET QP");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "modify RESET -> RTR");
	a.qp_state = IBV_QPS_RTS;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "modify RESET -> RTS");
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 2;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT |
				 IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS),
		   EINVAL, "modify -> INIT on port 2");
	a.qp_state = IBV_QPS_INIT;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL,
		   "modify -> INIT without port/pkey/access");
	tap_ok(qp_to_init(&d, qp, IBV_ACCESS_LOCAL_WRITE) == 0, "modify RESET -> INIT");
	expect_err(post1(qp, 2, IBV_WR_SEND, lb, 8, lm->lkey, 0, 0), EINVAL,
		   "post_send on an INIT QP");
	a.qp_state = IBV_QPS_RTS;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL, "modify INIT -> RTS");
	a.qp_state = IBV_QPS_RTR;
	expect_err(ibv_modify_qp(qp, &a, IBV_QP_STATE), EINVAL,
		   "modify INIT -> RTR without AV/MTU/dest QPN/PSN");
	ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
	tap_ok(!ret && a.qp_state == IBV_QPS_INIT, "QP still in INIT after refused transitions");
	{
		/* READ/atomic depth: the device's values pass, one more fails */
		struct qp_info me;
		struct conn_opts o;

		conn_opts_default(&o);
		o.timeout = ack_timeout;
		qp_local_info(&d, qp, 0x42, &me);
		me.qpn = 0xabcde;	/* nobody: no traffic, no peer bond QP */
		o.max_rd_atomic = da.max_qp_rd_atom + 1;
		expect_err(qp_connect(&d, qp, &me, &me, &o, IBV_ACCESS_LOCAL_WRITE),
			   EINVAL, "modify -> RTR with max_dest_rd_atomic = max_qp_rd_atom + 1");
		ret = ibv_query_qp(qp, &a, IBV_QP_STATE, &ia);
		if (!ret && a.qp_state != IBV_QPS_RESET) {
			a.qp_state = IBV_QPS_RESET;
			ibv_modify_qp(qp, &a, IBV_QP_STATE);
		}
		o.max_rd_atomic = da.max_qp_rd_atom < da.max_qp_init_rd_atom ?
				  da.max_qp_rd_atom : da.max_qp_init_rd_atom;
		tap_ok(qp_connect(&d, qp, &me, &me, &o, IBV_ACCESS_LOCAL_WRITE) == 0,
		       "connect with max_rd_atomic = max_dest_rd_atomic = %d (the device's)",
		       o.max_rd_atomic);
	}
	tap_ok(ibv_destroy_qp(qp) == 0, "destroy QP");
out:
	if (cq)
		ibv_destroy_cq(cq);
}

/*
 * The send queue holds exactly the max_send_wr granted, however the device
 * splits WQEs internally: with the peer QP in RESET nothing completes, so
 * a chain of 256 stops at the granted depth.  The bond's multi-rail QPs
 * once took as many as their shadow slots (4x: room for chunks).
 */
static void t_sq_depth(void)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	struct ibv_send_wr chain[256], *bad;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_sge sg;
	struct ibv_wc wc[256];
	struct pair x;
	int i, ret, posted, n, cap;
	bool ok;

	if (pair_make(&x, 7)) {
		tap_ok(false, "connected QP pair for the send queue depth");
		return;
	}
	ibv_query_qp(x.qa, &qa, IBV_QP_CAP, &qia);
	cap = qia.cap.max_send_wr;
	/* the responder is gone: nothing is acknowledged */
	ibv_modify_qp(x.qb, &a, IBV_QP_STATE);
	sg = (struct ibv_sge){ (uintptr_t)lb, BUF, lm->lkey };
	memset(chain, 0, sizeof(chain));
	for (i = 0; i < 256; i++) {
		chain[i].wr_id = 0x800 + i;
		chain[i].sg_list = &sg;
		chain[i].num_sge = 1;
		chain[i].opcode = IBV_WR_RDMA_WRITE;
		chain[i].send_flags = i & 1 ? IBV_SEND_SIGNALED : 0;
		chain[i].wr.rdma.remote_addr = (uintptr_t)pb_rw;
		chain[i].wr.rdma.rkey = pm_rw->rkey;
		chain[i].next = i < 255 ? &chain[i + 1] : NULL;
	}
	bad = NULL;
	ret = ibv_post_send(x.qa, chain, &bad);
	posted = bad ? (int)(bad - chain) : 256;
	tap_ok(ret == ENOMEM && posted == cap,
	       "chain of 256 x 64 KiB WRITEs, peer unresponsive: exactly the granted max_send_wr %d accepted, then ENOMEM (got %s, %d accepted)",
	       cap, en(ret), posted);
	/* they fail (retries exhausted), the first with its error, in order */
	n = poll_n(x.ca, wc, posted, 4 * WAIT_MS);
	ok = n == posted;
	for (i = 0; ok && i < n; i++)
		ok = wc[i].wr_id == 0x800u + i && wc[i].status != IBV_WC_SUCCESS;
	tap_ok(ok, "the %d accepted complete in error, in order (%d completions%s%s)",
	       posted, n, n > 0 ? ", first " : "",
	       n > 0 ? ibv_wc_status_str(wc[0].status) : "");
	pair_destroy(&x);
}

static void t_post_checks(void)
{
	struct ibv_sge sg[8];
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_recv_wr rwr, *rbad = NULL;
	struct ibv_send_wr chain[256];
	struct pair x;
	struct ibv_wc wc[256];
	int i, ret, posted;

	if (pair_make(&x, 7)) {
		tap_ok(false, "connected QP pair for post-time checks");
		return;
	}
	memset(&wr, 0, sizeof(wr));
	sg[0] = (struct ibv_sge){ (uintptr_t)lb, 8, lm->lkey };
	wr.wr_id = 7;
	wr.sg_list = sg;
	wr.num_sge = 1;
	wr.opcode = (enum ibv_wr_opcode)0x55;
	ret = ibv_post_send(x.qa, &wr, &bad);
	if (ret || d.is_bond) {
		tap_ok(ret == EINVAL && bad == &wr,
		       "post_send opcode 0x55 -> EINVAL, bad_wr = it (got %s)", en(ret));
	} else {
		/* user-space providers (rxe) queue it unchecked: it must then
		 * complete in error, and the QP is unusable: start afresh
		 */
		struct ibv_wc w;

		tap_ok(poll_n(x.ca, &w, 1, WAIT_MS) == 1 && w.wr_id == 7 &&
		       w.status != IBV_WC_SUCCESS,
		       "post_send opcode 0x55 accepted by %s's user-space provider, completes in error",
		       d.name);
		pair_destroy(&x);
		if (pair_make(&x, 7)) {
			tap_ok(false, "connected QP pair for post-time checks");
			return;
		}
	}

	for (i = 0; i < 8; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)lb + i * 8, 8, lm->lkey };
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.num_sge = 3;	/* QP has max_send_sge 2 (the device may round up) */
	{
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		ibv_query_qp(x.qa, &qa, IBV_QP_CAP, &qia);
		wr.num_sge = qia.cap.max_send_sge + 1;
		if (wr.num_sge > 8)
			wr.num_sge = 8;
	}
	wr.wr.rdma.remote_addr = (uintptr_t)pb_rw;
	wr.wr.rdma.rkey = pm_rw->rkey;
	bad = NULL;
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(ret == EINVAL && bad == &wr, "post_send with num_sge > max_send_sge -> EINVAL (got %s)", en(ret));

	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = sg;
	rwr.num_sge = 8;
	ret = ibv_post_recv(x.qa, &rwr, &rbad);
	tap_ok(ret == EINVAL && rbad == &rwr, "post_recv with num_sge > max_recv_sge -> EINVAL (got %s)", en(ret));

	/* A chain longer than the send queue: ENOMEM at the first WQE that
	 * does not fit, everything before it executes.
	 */
	memset(chain, 0, sizeof(chain));
	for (i = 0; i < 256; i++) {
		chain[i].wr_id = 1000 + i;
		chain[i].sg_list = sg;
		chain[i].num_sge = 1;
		chain[i].opcode = IBV_WR_RDMA_WRITE;
		chain[i].send_flags = IBV_SEND_SIGNALED;
		chain[i].wr.rdma.remote_addr = (uintptr_t)pb_rw;
		chain[i].wr.rdma.rkey = pm_rw->rkey;
		chain[i].next = i < 255 ? &chain[i + 1] : NULL;
	}
	bad = NULL;
	ret = ibv_post_send(x.qa, chain, &bad);
	posted = bad ? (int)(bad - chain) : 256;
	tap_ok(ret == ENOMEM && bad && posted >= 16 && posted < 256,
	       "post_send chain of 256 on a 16-deep SQ -> ENOMEM, bad_wr = first that did not fit (got %s, %d posted)",
	       en(ret), posted);
	ret = poll_n(x.ca, wc, posted, WAIT_MS);
	{
		bool ok = ret == posted;

		for (i = 0; ok && i < ret; i++)
			ok = wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == 1000u + i;
		tap_ok(ok, "the %d WQEs that fit complete in order with success (%d completions)",
		       posted, ret);
	}
	pair_destroy(&x);
}

/*
 * On a multi-rail QP an inline WRITE posted behind a striped 1 MiB WRITE is
 * an ordering point: it waits in the bond until the stripe completed, long
 * after post_send returned and the buffer was reused.
 */
static void t_inline_behind_stripe(struct pair *x)
{
	const size_t big = 1 << 20;
	struct ibv_mr *pm = NULL, *bm = NULL;
	void *pbuf = NULL, *bbuf = NULL;
	struct ibv_send_wr wr[9], *bad;
	struct ibv_sge sg[9];
	uint8_t ubuf[8][64];
	struct ibv_wc wc[9];
	int i, ret, n;
	bool ok;

	if (posix_memalign(&pbuf, 4096, big + 4096) ||
	    posix_memalign(&bbuf, 4096, big))
		goto out;
	memset(pbuf, 0, big + 4096);
	pat_fill(bbuf, big, 21, 0);
	pm = ibv_reg_mr(p.pd, pbuf, big + 4096, IBV_ACCESS_LOCAL_WRITE |
			IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING);
	bm = ibv_reg_mr(d.pd, bbuf, big, IBV_ACCESS_LOCAL_WRITE);
	if (!pm || !bm)
		goto out;
	memset(wr, 0, sizeof(wr));
	sg[0] = (struct ibv_sge){ (uintptr_t)bbuf, big, bm->lkey };
	wr[0].sg_list = &sg[0];
	wr[0].num_sge = 1;
	wr[0].opcode = IBV_WR_RDMA_WRITE;
	wr[0].wr.rdma.remote_addr = (uintptr_t)pbuf;
	wr[0].wr.rdma.rkey = pm->rkey;
	for (i = 1; i < 9; i++) {
		pat_fill(ubuf[i - 1], 64, 30 + i, 0);
		sg[i] = (struct ibv_sge){ (uintptr_t)ubuf[i - 1], 64, 0 };
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_INLINE;
		wr[i].wr.rdma.remote_addr = (uintptr_t)pbuf + big + 64 * (i - 1);
		wr[i].wr.rdma.rkey = pm->rkey;
	}
	for (i = 0; i < 9; i++) {
		wr[i].wr_id = 0x400 + i;
		wr[i].send_flags |= IBV_SEND_SIGNALED;
		wr[i].next = i < 8 ? &wr[i + 1] : NULL;
	}
	ret = ibv_post_send(x->qa, wr, &bad);
	memset(ubuf, 0xcc, sizeof(ubuf));
	n = ret ? 0 : poll_n(x->ca, wc, 9, WAIT_MS);
	ok = !ret && n == 9;
	for (i = 0; ok && i < 9; i++)
		ok = wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == 0x400u + i;
	for (i = 0; ok && i < 8; i++)
		ok = pat_check((uint8_t *)pbuf + big + 64 * i, 64, 31 + i, 0) < 0;
	tap_ok(ok && pat_check(pbuf, big, 21, 0) < 0,
	       "a striped 1 MiB WRITE then 8 inline WRITEs, buffers reused at once: in order, data as posted (post %s, %d completions)",
	       en(ret), n);
out:
	if (!pm || !bm)
		tap_ok(false, "register 1 MiB buffers: %s", strerror(errno));
	if (pm)
		ibv_dereg_mr(pm);
	if (bm)
		ibv_dereg_mr(bm);
	free(pbuf);
	free(bbuf);
}

/*
 * The caps a QP was granted are the caps it enforces, at their boundary
 * values, and IBV_SEND_INLINE data is the WQE's from the moment of posting.
 * Before the fix, rdma_bond passed rxe's answer through (max_inline_data 512
 * gives max_send_sge 32) and a WRITE with 32 SGEs overflowed a 16-entry
 * array on the kernel stack ("stack-protector: Kernel stack is corrupted
 * in: rbond_post_one_send"); user inline data was read through the MR when
 * the member sent it (a buffer reused at once sent the new data, and an
 * unregistered buffer gave EINVAL).
 */
static void t_caps_inline(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_sge sg[64];
	uint8_t ubuf[512], ubuf2[200];
	struct pair x;
	int i, ret, nsge, inl_max;
	long badoff;

	if (pair_make_caps(&x, 7, 1, 512)) {
		tap_ok(false, "connected QP pair with max_inline_data 512");
		return;
	}
	ibv_query_qp(x.qa, &qa, IBV_QP_CAP, &qia);
	nsge = qia.cap.max_send_sge;
	inl_max = qia.cap.max_inline_data;
	tap_ok(nsge >= 1 && nsge <= da.max_sge && (!d.is_bond || nsge == 1),
	       "QP with max_send_sge 1, max_inline_data 512: granted max_send_sge %d (device max_sge %d%s)",
	       nsge, da.max_sge, d.is_bond ? ", bond: exactly as asked" : "");
	tap_ok(inl_max >= 512, "granted max_inline_data %d >= 512", inl_max);
	if (nsge > 64)
		nsge = 64;

	/* every granted SGE, each on the same registered buffer */
	memset(lb, 0x5a, 8 * 64);
	for (i = 0; i < nsge; i++)
		sg[i] = (struct ibv_sge){ (uintptr_t)lb + i * 8, 8, lm->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 0x100;
	wr.sg_list = sg;
	wr.num_sge = nsge;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)pb_rw;
	wr.wr.rdma.rkey = pm_rw->rkey;
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(!ret, "post WRITE with num_sge = granted max_send_sge %d (got %s)",
	       nsge, en(ret));
	if (!ret)
		WC1(x.ca, 0x100, IBV_WC_SUCCESS, "  WRITE with every granted SGE");

	if (d.is_bond) {
		for (i = 0; i < 64; i++)
			sg[i] = (struct ibv_sge){ (uintptr_t)lb, 8, lm->lkey };
		for (i = 0; i < 3; i++) {
			static const int n[] = { 2, 17, 32 };

			wr.num_sge = n[i];
			bad = NULL;
			ret = ibv_post_send(x.qa, &wr, &bad);
			tap_ok(ret == EINVAL && bad == &wr,
			       "post WRITE with num_sge %d > granted %d -> EINVAL (got %s)",
			       n[i], nsge, en(ret));
		}
	}

	/* inline: captured at post time, from memory that is not registered */
	pat_fill(ubuf, sizeof(ubuf), 11, 0);
	memset((uint8_t *)pb_rw + 4096, 0, 1024);
	sg[0] = (struct ibv_sge){ (uintptr_t)ubuf, 512, 0 };
	wr.wr_id = 0x200;
	wr.num_sge = 1;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = (uintptr_t)pb_rw + 4096;
	ret = ibv_post_send(x.qa, &wr, &bad);
	memset(ubuf, 0xee, sizeof(ubuf));	/* reuse at once: legal for inline */
	tap_ok(!ret, "post inline WRITE of 512 bytes from an unregistered buffer (got %s)",
	       en(ret));
	if (!ret) {
		WC1(x.ca, 0x200, IBV_WC_SUCCESS, "  inline WRITE 512");
		badoff = pat_check((uint8_t *)pb_rw + 4096, 512, 11, 0);
		tap_ok(badoff < 0, "  the peer got the data as it was at post time (first bad byte %ld)",
		       badoff);
	}

	/* inline gathered from every granted SGE */
	if (nsge > 1) {
		pat_fill(ubuf2, sizeof(ubuf2), 12, 0);
		sg[0] = (struct ibv_sge){ (uintptr_t)ubuf2, 100, 0 };
		for (i = 1; i < nsge; i++)
			sg[i] = (struct ibv_sge){ (uintptr_t)ubuf2 + 100, 0, 0 };
		sg[nsge - 1].length = 100;
		wr.num_sge = nsge;
		wr.wr_id = 0x201;
		ret = ibv_post_send(x.qa, &wr, &bad);
		memset(ubuf2, 0, sizeof(ubuf2));
		if (!ret)
			WC1(x.ca, 0x201, IBV_WC_SUCCESS, "  gathered inline WRITE");
		tap_ok(!ret && pat_check((uint8_t *)pb_rw + 4096, 200, 12, 0) < 0,
		       "inline WRITE gathered from %d SGEs arrives intact (post %s)",
		       nsge, en(ret));
	}

	/* one byte over the granted inline size */
	sg[0] = (struct ibv_sge){ (uintptr_t)ubuf, inl_max + 1, 0 };
	wr.num_sge = 1;
	wr.wr_id = 0x202;
	bad = NULL;
	sg[0].addr = (uintptr_t)lb;	/* registered, big enough */
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(ret == EINVAL && bad == &wr,
	       "post inline WRITE of max_inline_data + 1 = %d bytes -> EINVAL (got %s)",
	       inl_max + 1, en(ret));
	if (bond_only("inline from a bad user address -> EFAULT")) {
		sg[0] = (struct ibv_sge){ 8, 64, 0 };
		bad = NULL;
		ret = ibv_post_send(x.qa, &wr, &bad);
		tap_ok(ret == EFAULT && bad == &wr,
		       "post inline WRITE from an unmapped address -> EFAULT (got %s)",
		       en(ret));
	}
	/* the QP is still usable */
	ret = post1(x.qa, 0x300, IBV_WR_RDMA_WRITE, lb, 8, lm->lkey,
		    (uintptr_t)pb_rw, pm_rw->rkey);
	if (!ret)
		WC1(x.ca, 0x300, IBV_WC_SUCCESS, "a WRITE after the refused ones");
	else
		tap_ok(false, "a WRITE after the refused ones: post %s", en(ret));
	t_inline_behind_stripe(&x);
	pair_destroy(&x);

	{
		struct ibv_cq *cq = ibv_create_cq(d.ctx, 4, NULL, NULL, 0);
		struct ibv_qp *qp = NULL;

		ret = cq ? PTR_ERR(qp = mkqp_inl(&d, cq, 4, 1, 513)) : errno;
		if (qp)
			ibv_destroy_qp(qp);
		expect_err(ret, EINVAL, "create RC QP with max_inline_data 513");
		if (cq)
			ibv_destroy_cq(cq);
	}
}

/*
 * A WQE of more bytes than the port's max_msg_sz (the sum of its SGEs past
 * 32 bits: two SGEs of 2 GiB each).  The bond refuses it at post time; its
 * multi-rail path once divided by the low 32 bits of the length (zero) and
 * oopsed ("divide error" in rbond_mrail_post_send, found by rbond_fuzz).
 * Plain rxe 6.1 sums the lengths in 32 bits: bond only.
 */
static void t_msg_size(void)
{
	struct ibv_port_attr pa;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg[2];
	struct pair x;
	int ret;

	if (!bond_only("a WQE longer than max_msg_sz -> EINVAL"))
		return;
	if (ibv_query_port(d.ctx, 1, &pa)) {
		tap_ok(false, "query_port: %s", strerror(errno));
		return;
	}
	/* the members' (rxe: 8 MiB, not enforced by rxe); the bond's own limit is 2 GiB */
	tap_ok(pa.max_msg_sz > 0 && pa.max_msg_sz <= 0x80000000u,
	       "bond port max_msg_sz 0x%x: at most 2 GiB", pa.max_msg_sz);
	if (pair_make(&x, 7)) {
		tap_ok(false, "connected QP pair with max_send_sge 2");
		return;
	}
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = sg;
	wr.num_sge = 2;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)pb_rw;
	wr.wr.rdma.rkey = pm_rw->rkey;
	sg[0] = (struct ibv_sge){ (uintptr_t)lb, 0x80000000u, lm->lkey };
	sg[1] = sg[0];
	wr.wr_id = 0x700;
	bad = NULL;
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(ret == EINVAL && bad == &wr,
	       "post WRITE of 2 SGEs x 2 GiB (4 GiB) -> EINVAL (got %s)", en(ret));
	sg[1].length = 1;
	wr.wr_id = 0x701;
	bad = NULL;
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(ret == EINVAL && bad == &wr,
	       "post WRITE of 2 GiB + 1 byte -> EINVAL (got %s)", en(ret));
	wr.opcode = IBV_WR_RDMA_READ;
	wr.wr_id = 0x702;
	bad = NULL;
	ret = ibv_post_send(x.qa, &wr, &bad);
	tap_ok(ret == EINVAL && bad == &wr,
	       "post READ of 2 GiB + 1 byte -> EINVAL (got %s)", en(ret));
	/* the QP is still usable */
	ret = post1(x.qa, 0x703, IBV_WR_RDMA_WRITE, lb, 8, lm->lkey,
		    (uintptr_t)pb_rw, pm_rw->rkey);
	if (!ret)
		WC1(x.ca, 0x703, IBV_WC_SUCCESS, "a WRITE after the refused ones");
	else
		tap_ok(false, "a WRITE after the refused ones: post %s", en(ret));
	pair_destroy(&x);
}

/*
 * Posts racing a RESET from another thread (the fuzzer's forked children
 * do this).  modify_qp does not take the post lock: a post whose member
 * post failed because a RESET came in between must not undo a slot the
 * RESET had already dropped.  Before the fix it did, the shadow queue's
 * head fell behind its tail, and at the next RTS old slots were delivered
 * again ("second completion", "completion for a WR whose post was
 * refused": rbond_fuzz seed 15260148822499).  Timing-dependent: the
 * counts show how often the race was run.  Bond only: plain rxe, whose
 * user-space provider writes the send queue without the kernel, fails it
 * badly (2026-12-01, rdma-core 44 + 6.1 rxe: 4494 completions of refused
 * or already completed WRs in 6 s, 170 RESET cycles).
 */
#define RACE_WR0 0x100000ull
#define RACE_N 20000

struct race {
	struct pair *x;
	struct qp_info ia;
	struct qp_info ib;
	struct conn_opts o;
	volatile int stop;
	unsigned int cycles;
};

static void *race_resetter(void *arg)
{
	struct race *r = arg;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	while (!r->stop) {
		ibv_modify_qp(r->x->qa, &a, IBV_QP_STATE);
		qp_connect(&d, r->x->qa, &r->ia, &r->ib, &r->o,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		r->cycles++;
		usleep(rand() % 2000);
	}
	return NULL;
}

static void t_post_vs_reset(void)
{
	unsigned int posted = 0, refused = 0, ncomp = 0, bad = 0, i;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };
	static uint8_t st[RACE_N];	/* 0 refused, 1 accepted, 2 completed */
	struct ibv_wc wc[16];
	struct race r = {};
	struct pair x;
	pthread_t th;
	time_t t0;
	int n, k, ret;

	if (!bond_only("posts racing RESET/connect"))
		return;
	if (pair_make(&x, 7)) {
		tap_ok(false, "connected QP pair for the RESET race");
		return;
	}
	r.x = &x;
	conn_opts_default(&r.o);
	r.o.timeout = ack_timeout;
	r.o.retry_cnt = 2;
	r.o.rnr_retry = 7;
	r.o.max_rd_atomic = 4;
	qp_local_info(&d, x.qa, 0x1234, &r.ia);
	qp_local_info(&p, x.qb, 0x5678, &r.ib);
	memset(st, 0, sizeof(st));
	if (pthread_create(&th, NULL, race_resetter, &r)) {
		tap_ok(false, "pthread_create");
		pair_destroy(&x);
		return;
	}
	t0 = time(NULL);
	for (i = 0; i < RACE_N && time(NULL) - t0 < 6; i++) {
		ret = post1(x.qa, RACE_WR0 + i, IBV_WR_RDMA_WRITE, lb, 8,
			    lm->lkey, (uintptr_t)pb_rw, pm_rw->rkey);
		st[i] = !ret;
		posted += !ret;
		refused += !!ret;
		n = ibv_poll_cq(x.ca, 16, wc);
		for (k = 0; k < n; k++) {
			uint64_t c = wc[k].wr_id - RACE_WR0;

			ncomp++;
			if (wc[k].wr_id < RACE_WR0 || c > i || st[c] != 1) {
				if (bad++ < 5)
					diag("completion for wr %lld (%s), %s",
					     (long long)c,
					     ibv_wc_status_str(wc[k].status),
					     c > i ? "never posted" :
					     st[c] ? "a second time" :
					     "its post was refused");
				continue;
			}
			st[c] = 2;
		}
	}
	r.stop = 1;
	pthread_join(th, NULL);
	tap_ok(!bad && r.cycles > 0,
	       "posts racing RESET/connect: %u posted, %u refused, %u completions, %u RESET cycles: none for a refused WR, none twice (%u bad)",
	       posted, refused, ncomp, r.cycles, bad);
	/* connected again, the QP works */
	ibv_modify_qp(x.qa, &a, IBV_QP_STATE);
	while (ibv_poll_cq(x.ca, 16, wc) > 0)
		;
	ret = qp_connect(&d, x.qa, &r.ia, &r.ib, &r.o,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!ret)
		ret = post1(x.qa, 0x704, IBV_WR_RDMA_WRITE, lb, 8, lm->lkey,
			    (uintptr_t)pb_rw, pm_rw->rkey);
	tap_ok(!ret, "after the race: reconnect and post a WRITE (%s)", en(ret));
	pair_destroy(&x);
}

/*
 * A QP pair of two bonds negotiates its extra rails after RTS: wait (up to
 * 5 s) until the module counts both ends multi-rail up, so that what
 * follows runs on a multi-rail QP.  Nothing to wait for otherwise.
 */
static void wait_mrail(struct pair *x)
{
	long long up0 = x->qp_up0;
	int i;

	if (!d.is_bond || !p.is_bond || up0 < 0)
		return;
	for (i = 0; i < 500 && mrail_stat("qp_up") < up0 + 2; i++)
		usleep(10000);
	if (mrail_stat("qp_up") < up0 + 2)
		diag("the QP pair did not come up multi-rail in 5 s");
}

/* The module's failovers and home moves so far; -1: no module loaded. */
static long long bond_failovers(void)
{
	long long f = mrail_stat("failovers"), h = mrail_stat("home_moves");

	return f < 0 || h < 0 ? -1 : f + h;
}

/*
 * The device under test's scheduler policy (sysfs bond/policy): @set, the
 * old one into @old (empty: not a bond).
 */
static void bond_policy(const char *set, char *old, size_t n)
{
	char path[256];
	FILE *f;

	old[0] = 0;
	if (!d.is_bond || !set[0])
		return;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/bond/policy", d.name);
	f = fopen(path, "r");
	if (!f || !fgets(old, n, f))
		old[0] = 0;
	if (f)
		fclose(f);
	/* "adaptive [round-robin] weighted ...": the one in brackets */
	if (strchr(old, '['))
		memmove(old, strchr(old, '[') + 1, strlen(strchr(old, '[')));
	old[strcspn(old, "]\n")] = 0;
	f = fopen(path, "w");
	if (!f || fputs(set, f) < 0 || fclose(f))
		tap_ok(false, "%s: cannot set %s", path, set);
}

/*
 * A request the responder will refuse: the pair multi-rail up first and
 * a receive (@rid) posted on the responder, which its error must flush.
 */
static int refused_prep(struct pair *x, uint64_t rid)
{
	int r;

	wait_mrail(x);
	r = postr(x->qb, rid, pb_recv, 64, pm_recv->lkey);
	if (r)
		tap_ok(false, "post_recv on the responder: %s", en(r));
	return r;
}

/* Counter railN_@what of the device under test, summed over its rails but rail 0 (-1: none) */
static long long extra_rail_stat(const char *what)
{
	long long n = -1, v;
	char path[256];
	FILE *f;
	int i;

	for (i = 1; i < 4; i++) {
		snprintf(path, sizeof(path),
			 "/sys/class/infiniband/%s/ports/1/hw_counters/rail%d_%s", d.name, i, what);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%lld", &v) == 1)
			n = (n < 0 ? 0 : n) + v;
		fclose(f);
	}
	return n;
}

static long long extra_rail_errors(void)
{
	return extra_rail_stat("errors");
}

/* ...its outcome: REM_ACCESS_ERR, and the responder's receive flushed */
static void refused_check(struct pair *x, int post_ret, uint64_t id,
			  const char *what)
{
	if (post_ret) {
		pair_destroy(x);
		return;
	}
	expect_post_or_wc(x, 0, id, IBV_WC_REM_ACCESS_ERR, what);
	WC1(x->cb, id + 1, IBV_WC_WR_FLUSH_ERR, "  the receive the responder had posted");
	pair_destroy(x);
}

/*
 * One refused request (@op of 64 bytes to @raddr with @rkey): REM_ACCESS_ERR
 * and the responder's receive flushed.  @extra: the bond may put it on an
 * extra rail (its key is good for the access; one the peer's MR does not
 * allow stays on the home rail, rbond_rkey_rails()): then, between two
 * bonds, under round-robin, until it went on an extra rail (the
 * requester's rail counters say; the peer's bond cannot see that case for
 * itself), up to 8 pairs 250 ms apart: the pick depends on whether the
 * peer's key is translated yet.
 */
static void refused_case(uint64_t id, enum ibv_wr_opcode op, void *raddr,
			 uint32_t rkey, bool extra, const char *what)
{
	int t, r, tries = extra && d.is_bond && p.is_bond && extra_rail_errors() >= 0 ? 8 : 1;
	long long e0, hits0 = mrail_stat("rkey_hits"), miss0 = mrail_stat("rkey_misses");
	struct pair x;

	for (t = 0; t < tries; t++) {
		/*
		 * A key refused or not answered yet is asked again
		 * RBOND_RKEY_RETRY (0.5 s) later, for the QP asking then:
		 * give it time between tries.
		 */
		if (t)
			usleep(250000);
		if (pair_make(&x, 7))
			return;
		e0 = extra_rail_errors();
		r = refused_prep(&x, id + 1);
		r = r ? r : post1(x.qa, id, op, lb, 64, lm->lkey, (uintptr_t)raddr, rkey);
		refused_check(&x, r, id, what);
		if (r || tries == 1)
			return;
		if (extra_rail_errors() > e0) {
			tap_ok(true, "  ... on an extra rail (try %d)", t + 1);
			return;
		}
	}
	diag("rkey_hits +%lld, rkey_misses +%lld, conn_renewed %lld, ctrl_half_open %lld",
	     mrail_stat("rkey_hits") - hits0, mrail_stat("rkey_misses") - miss0,
	     mrail_stat("conn_renewed"), mrail_stat("ctrl_half_open"));
	tap_ok(false, "  ... on an extra rail: never in %d tries", tries);
}

/*
 * Errors of the application's WQEs: each with the member's native status,
 * none taken for a rail failure (6.12's rxe completes a WQE whose local
 * buffer lies outside its MR flushed, as if its member had failed).
 */
static void t_completion_errors(void)
{
	long long fo = d.is_bond ? bond_failovers() : -1;
	struct pair x;
	uint8_t *pend = (uint8_t *)pb_rw + BUF;
	char pol[128], pol2[128];
	int r;

	/* invalid lkey */
	if (!pair_make(&x, 7)) {
		r = post1(x.qa, 10, IBV_WR_RDMA_WRITE, lb, 64, lm->lkey ^ 0x5a5a00,
			  (uintptr_t)pb_rw, pm_rw->rkey);
		expect_post_or_wc2(&x, r, 10, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR,
				   "RDMA WRITE from an invalid lkey");
		pair_destroy(&x);
	}
	/* local sge beyond the MR */
	if (!pair_make(&x, 7)) {
		r = post1(x.qa, 20, IBV_WR_RDMA_WRITE, (uint8_t *)lb + BUF - 16, 64,
			  lm->lkey, (uintptr_t)pb_rw, pm_rw->rkey);
		expect_post_or_wc(&x, r, 20, IBV_WC_LOC_PROT_ERR, "RDMA WRITE from beyond the end of the local MR");
		pair_destroy(&x);
	}
	/*
	 * Requests the responder refuses: it NAKs them and its QP goes to
	 * error, flushing the receive it had posted - a bond peer must not
	 * take that for a rail failure (a home move), once the QP pair is
	 * multi-rail, and must be in error although the request may have
	 * gone on an extra rail, whose member alone refused it
	 * (Documentation/rdma_bond.rst, "Errors of the peer's requests").
	 */
	if (!pair_make(&x, 7)) {
		r = refused_prep(&x, 31);
		r = r ? r : post1(x.qa, 30, IBV_WR_RDMA_WRITE, lb, 64, lm->lkey,
				  (uintptr_t)pb_rw, pm_rw->rkey ^ 0x5a5a00);
		refused_check(&x, r, 30, "RDMA WRITE to an invalid rkey");
	}
	/* the refused request on an extra rail too: refused_case() */
	bond_policy("round-robin", pol, sizeof(pol));
	refused_case(40, IBV_WR_RDMA_WRITE, pend - 16, pm_rw->rkey, true,
		     "RDMA WRITE across the end of the remote MR");
	refused_case(50, IBV_WR_RDMA_READ, pb_wo, pm_wo->rkey, false,
		     "RDMA READ from an MR without REMOTE_READ");
	refused_case(60, IBV_WR_RDMA_WRITE, pb_ro, pm_ro->rkey, false,
		     "RDMA WRITE to an MR without REMOTE_WRITE");
	bond_policy(pol, pol2, sizeof(pol2));
	/* ATOMIC on an unaligned address */
	if (!pair_make(&x, 7)) {
		r = post1(x.qa, 70, IBV_WR_ATOMIC_FETCH_AND_ADD, lb, 8, lm->lkey,
			  (uintptr_t)pb_rw + 3, pm_rw->rkey);
		if (r)
			expect_err(r, EINVAL, "ATOMIC FETCH_AND_ADD on an unaligned address");
		else
			WC2(x.ca, 70, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_ACCESS_ERR,
			    "ATOMIC FETCH_AND_ADD on an unaligned address");
		pair_destroy(&x);
	}
	/* SEND longer than the posted receive */
	if (!pair_make(&x, 7)) {
		r = postr(x.qb, 80, pb_recv, 16, pm_recv->lkey);
		if (r)
			tap_ok(false, "post_recv 16 bytes: %s", en(r));
		r = post1(x.qa, 81, IBV_WR_SEND, lb, 256, lm->lkey, 0, 0);
		expect_post_or_wc2(&x, r, 81, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_OP_ERR,
				   "SEND of 256 bytes into a 16-byte receive");
		WC2(x.cb, 80, IBV_WC_LOC_LEN_ERR, IBV_WC_LOC_QP_OP_ERR, "  the receive side of it");
		pair_destroy(&x);
	}
	/*
	 * A receive beyond the end of its MR, a good one behind it: the
	 * first fails, the second is flushed (not a rail failure: its
	 * completion must come, flushed, not be moved elsewhere)
	 */
	if (!pair_make(&x, 7)) {
		r = postr(x.qb, 82, (uint8_t *)pb_recv + BUF - 16, 64, pm_recv->lkey) ||
		    postr(x.qb, 83, pb_recv, 64, pm_recv->lkey);
		if (r)
			tap_ok(false, "post_recv beyond the MR's end, then a good one: %s", en(r));
		r = post1(x.qa, 84, IBV_WR_SEND, lb, 64, lm->lkey, 0, 0);
		if (r)
			tap_ok(false, "SEND into a receive beyond its MR: post %s", en(r));
		else
			WC2(x.ca, 84, IBV_WC_REM_OP_ERR, IBV_WC_REM_ACCESS_ERR,
			    "SEND into a receive beyond the end of its MR");
		WC2(x.cb, 82, IBV_WC_LOC_PROT_ERR, IBV_WC_LOC_QP_OP_ERR,
		    "  the receive beyond the end of its MR");
		WC1(x.cb, 83, IBV_WC_WR_FLUSH_ERR, "  the good receive behind it");
		pair_destroy(&x);
	}
	/* SEND without a receive, rnr_retry 0 */
	if (!pair_make(&x, 0)) {
		r = post1(x.qa, 90, IBV_WR_SEND, lb, 64, lm->lkey, 0, 0);
		expect_post_or_wc(&x, r, 90, IBV_WC_RNR_RETRY_EXC_ERR, "SEND with no receive posted, rnr_retry 0");
		pair_destroy(&x);
	}
	if (fo >= 0)
		tap_ok(bond_failovers() == fo,
		       "no failover or home move for any of these errors (%lld)",
		       bond_failovers() - fo);
}

static struct ibv_mr *preg(struct dev *dv, void **b, int acc)
{
	struct ibv_mr *mr;

	if (posix_memalign(b, 4096, BUF))
		return NULL;
	memset(*b, 0, BUF);
	mr = ibv_reg_mr(dv->pd, *b, BUF, acc);
	if (!mr)
		diag("reg MR on %s (access 0x%x): %s", dv->name, acc, strerror(errno));
	return mr;
}

/*
 * A remote key refused for one QP pair stays usable for the others on the
 * same pair of hosts: the peer's MR lies in a second PD, a QP pair of the
 * first PD writes to it (refused, natively too), then a QP pair of the MR's
 * own PD writes to it, round-robin - its WRITEs must reach the extra rails
 * within 3 s (the key translated for that pair), all intact.
 */
static void t_rkey_other_asker(void)
{
	struct dev p2 = p;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	char pol[128], pol2[128];
	long long tx0;
	struct pair x;
	void *buf;
	int i, r, n_ok = 0, extra_at = -1;

	if (!d.is_bond || !p.is_bond || extra_rail_stat("tx_wqes") < 0)
		return;
	p2.pd = ibv_alloc_pd(p.ctx);
	if (!p2.pd) {
		tap_ok(false, "alloc a second PD on %s: %s", p.name, strerror(errno));
		return;
	}
	mr = preg(&p2, &buf, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr) {
		tap_ok(false, "register an MR in the second PD");
		goto out_pd;
	}
	bond_policy("round-robin", pol, sizeof(pol));
	/* a QP pair of the first PD: its WRITE to the key is refused */
	if (!pair_make(&x, 7)) {
		wait_mrail(&x);
		r = post1(x.qa, 90, IBV_WR_RDMA_WRITE, lb, 64, lm->lkey,
			  (uintptr_t)buf, mr->rkey);
		if (r)
			tap_ok(false, "WRITE to another PD's MR: post %s", en(r));
		else if (poll_n(x.ca, &wc, 1, WAIT_MS) != 1)
			tap_ok(false, "WRITE to another PD's MR: no completion in %d ms", WAIT_MS);
		else
			tap_ok(wc.status != IBV_WC_SUCCESS, "WRITE to another PD's MR refused (%s)",
			       wc_status_name(wc.status));
		pair_destroy(&x);
	}
	/* one of the MR's own PD: striped once its key is translated */
	if (pair_make_peer(&x, &p2, 7, 2, 0))
		goto out_pol;
	wait_mrail(&x);
	tx0 = extra_rail_stat("tx_wqes");
	for (i = 0; i < 60 && extra_at < 0; i++) {
		memset(lb, 0x40 + i, 64);
		r = post1(x.qa, 100 + i, IBV_WR_RDMA_WRITE, lb, 64, lm->lkey,
			  (uintptr_t)buf + 64 * i, mr->rkey);
		if (r || poll_n(x.ca, &wc, 1, WAIT_MS) != 1 ||
		    wc.status != IBV_WC_SUCCESS || wc.wr_id != 100 + (uint64_t)i)
			break;
		n_ok++;
		if (extra_rail_stat("tx_wqes") > tx0)
			extra_at = i;
		else
			usleep(50000);
	}
	tap_ok(n_ok == i, "WRITEs of the MR's own PD complete successfully (%d of %d)",
	       n_ok, i);
	for (r = 0; r < n_ok && ((uint8_t *)buf)[64 * r] == 0x40 + r &&
	     ((uint8_t *)buf)[64 * r + 63] == 0x40 + r; r++)
		;
	tap_ok(r == n_ok, "their data arrived intact (%d of %d)", r, n_ok);
	tap_ok(extra_at >= 0,
	       "a key refused for another PD's QP pair is translated for the MR's own: on an extra rail %s",
	       extra_at >= 0 ? "" : "never in 3 s");
	if (extra_at >= 0)
		diag("first WRITE on an extra rail: #%d (~%d ms)", extra_at, 50 * extra_at);
	pair_destroy(&x);
out_pol:
	bond_policy(pol, pol2, sizeof(pol2));
	ibv_dereg_mr(mr);
	free(buf);
out_pd:
	ibv_dealloc_pd(p2.pd);
}

int main(int argc, char **argv)
{
	const char *dev = NULL, *peer = NULL;
	int gid = 1, c;
	bool only_wc = false;

	while ((c = getopt(argc, argv, "d:D:g:u:W:N:Ch")) != -1) {
		switch (c) {
		case 'd': dev = optarg; break;
		case 'D': peer = optarg; break;
		case 'g': gid = atoi(optarg); break;
		case 'u': ack_timeout = atoi(optarg); break;
		case 'C': only_wc = true; break;
		case 'W':
			native_out = fopen(optarg, "w");
			if (!native_out) {
				perror(optarg);
				return 2;
			}
			setvbuf(native_out, NULL, _IOLBF, 0);
			break;
		case 'N':
			if (native_load(optarg)) {
				perror(optarg);
				return 2;
			}
			break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-D PEER_DEV] [-g GID_INDEX] [-u ACK_TIMEOUT] [-W FILE | -N FILE] [-C]\n", argv[0]);
			return 2;
		}
	}
	if (!dev) {
		fprintf(stderr, "%s: -d DEV required\n", argv[0]);
		return 2;
	}
	if (!peer)
		peer = dev;
	printf("TAP version 13\n");
	if (dev_open(&d, dev, gid) || dev_open(&p, peer, gid) ||
	    ibv_query_device(d.ctx, &da)) {
		tap_ok(false, "open %s and %s", dev, peer);
		goto out;
	}
	diag("device under test %s (%s), peer %s", dev,
	     d.is_bond ? "rdma_bond" : "not a bond", peer);
	lm = preg(&d, &lb, IBV_ACCESS_LOCAL_WRITE);
	pm_rw = preg(&p, &pb_rw, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	pm_ro = preg(&p, &pb_ro, IBV_ACCESS_REMOTE_READ);
	pm_wo = preg(&p, &pb_wo, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	pm_recv = preg(&p, &pb_recv, IBV_ACCESS_LOCAL_WRITE);
	if (!lm || !pm_rw || !pm_ro || !pm_wo || !pm_recv) {
		tap_ok(false, "register test buffers");
		goto out;
	}

	if (native_n)
		diag("%d completion errors held to the member's native status",
		     native_n);
	if (!only_wc) {
		t_create_limits();
		t_unsupported();
		t_srq();
		t_srq_traffic();
		t_ud();
		t_mr();
		t_busy();
		t_states();
		t_post_checks();
		t_sq_depth();
		t_caps_inline();
		t_msg_size();
		t_post_vs_reset();
	}
	t_completion_errors();
	t_rkey_other_asker();
out:
	if (native_out)
		fclose(native_out);
	if (lm) ibv_dereg_mr(lm);
	if (pm_rw) ibv_dereg_mr(pm_rw);
	if (pm_ro) ibv_dereg_mr(pm_ro);
	if (pm_wo) ibv_dereg_mr(pm_wo);
	if (pm_recv) ibv_dereg_mr(pm_recv);
	if (p.ctx)
		dev_close(&p);
	if (d.ctx)
		dev_close(&d);
	return tap_end();
}
