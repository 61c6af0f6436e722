// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_fuzz - seeded random sequences of verbs calls through an RDMA
 * device (the bond and its provider), with boundary values taken from
 * ibv_query_device and from the caps each QP was granted.
 *
 *   rbond_fuzz -d DEV [-D PEER_DEV] [-g GID_INDEX] [-s SEED]
 *              [-n CALLS | -t SECONDS] [-u ACK_TIMEOUT] [-v]
 *
 * The seed is printed first ("# rbond_fuzz seed=S ...").  The same seed,
 * device pair and -n give the same sequence of calls, up to outcomes that
 * depend on timing (what a poll finds, when a QP went to error).
 *
 * Objects live in two or more device contexts: DEV's and PEER_DEV's
 * (default: DEV itself, loopback), plus contexts opened and closed at
 * random.  RC QPs are connected across (DEV <-> PEER_DEV) so that real
 * traffic flows; others stay unconnected or in random states.  Mixed in:
 * dereg_mr, destroy_qp/cq, dealloc_pd with WRs in flight, close of a
 * context with live objects, fork() (the child exits at once, or uses the
 * parent's objects, or builds its own and exits without cleanup), SIGKILL
 * of a child, and, for some seeds, exit without cleanup.
 *
 * The fuzzer never fails on an error a verbs call may legitimately return.
 * It fails (exit 1, "VIOLATION" lines) only on what a user would notice:
 * an error that is not an errno, a bad_wr outside the posted list, a
 * completion whose wr_id was never posted (or was refused at post time, or
 * arrives twice), on the wrong CQ or QP, with an invalid status or opcode,
 * out of posting order, a successful completion of a WR that used a key of
 * another PD or an MR without the needed access, fewer caps granted than
 * requested, dealloc/destroy succeeding on an object still in use, a
 * cleanup that fails, a child that crashed or hung.  Kernel reports (oops,
 * KASAN, lockdep, kmemleak) are the harness's to catch.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/ib_user_verbs.h>

#include "common.h"

#define NCTX	6
#define NPD	8
#define NMR	32
#define NCQ	12
#define NQP	16
#define NAH	8
#define NSTALE	32
#define NCHILD	2
#define ARENA	(4u << 20)
#define MAXWR	5000
#define MAXSGE	(1u << 16)
#define BIGSGE	4096
#define MAXVIOL	20

#define TAG_MAIN	0xb5u
#define TAG_CHILD	0xc0u	/* | generation (0..63) */

/* ---- random numbers (splitmix64) ----------------------------------- */

static uint64_t rs;

static uint64_t rnd(void)
{
	uint64_t z = (rs += 0x9E3779B97F4A7C15ull);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint32_t rn(uint32_t n)	/* 0..n-1 */
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static bool pct(unsigned int p)
{
	return rn(100) < p;
}

/* pick(w, n): index i with probability w[i] / sum(w) */
static int pick(const unsigned int *w, int n)
{
	unsigned int sum = 0, r;
	int i;

	for (i = 0; i < n; i++)
		sum += w[i];
	r = rn(sum);
	for (i = 0; i < n; i++) {
		if (r < w[i])
			return i;
		r -= w[i];
	}
	return n - 1;
}

/* ---- world ---------------------------------------------------------- */

struct xctx {
	struct ibv_context *ctx;
	struct dev d;			/* gid, port, gid_index (no PD) */
	int side;			/* 0: DEV, 1: PEER_DEV */
	struct ibv_comp_channel *ch;
	bool mine;			/* opened by this process */
};

struct xpd { struct ibv_pd *pd; int c; };

struct xmr {
	struct ibv_mr *mr;
	int p, c, side;
	char *addr;
	size_t len;
	int access;
};

struct xcq {
	struct ibv_cq *cq;
	int c;
	uint32_t uid;
	int cqe;
	bool overrun;	/* reported IBV_EVENT_CQ_ERR: its contents are void */
};

struct xqp {
	struct ibv_qp *qp;
	int c, p, scq, rcq;
	uint32_t uid;
	struct ibv_qp_cap cap;
	int state;
	int peer;			/* index of the connected QP, -1 */
	uint32_t peer_uid;
	uint64_t last_s, last_r;	/* own wr_id counters seen last */
};

struct xah { struct ibv_ah *ah; int p; };

struct stale { uint32_t key; int side; };

static struct xctx X[NCTX];
static struct xpd P[NPD];
static struct xmr M[NMR];
static struct xcq C[NCQ];
static struct xqp Q[NQP];
static struct xah A[NAH];
static struct stale S[NSTALE];
static unsigned int nstale;

static const char *devname[2];
static int gid_index = 1;
static int ack_timeout = 18;
static bool verbose;
static char *arena[2];
static char *ro_page;		/* read-only mapping (reg with LOCAL_WRITE) */
static struct ibv_device_attr DA;
static uint32_t next_uid = 1;

/* statistics */
static uint64_t calls, ops, wrs_posted, wcs, wc_errs, forks, closes;
static uint64_t nviol;
static const char *cur_op = "setup";
static uint64_t seed;

/* process */
static bool is_child;
static uint8_t my_tag = TAG_MAIN;
static uint64_t fork_ctr;	/* child: counters below it are the parent's */
static pid_t child[NCHILD];

#define CALL(name) (cur_op = (name), calls++)

static void show_hist(void);

static void viol(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void viol(const char *fmt, ...)
{
	va_list ap;

	nviol++;
	printf("VIOLATION%s (seed %" PRIu64 ", call %" PRIu64 ", %s): ",
	       is_child ? " in child" : "", seed, calls, cur_op);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	show_hist();
	fflush(stdout);
}

/*
 * The last HIST call descriptions, printed with the first violation (-v
 * prints them all as they happen).
 */
#define HIST 48
static char hist[HIST][160];
static unsigned int nhist;
static int hist_shown;

static void vlog(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void vlog(const char *fmt, ...)
{
	char *h = hist[nhist++ % HIST];
	va_list ap;
	int n;

	n = snprintf(h, sizeof(hist[0]), "#%s %" PRIu64 " ", is_child ? " child" : "", calls);
	va_start(ap, fmt);
	vsnprintf(h + n, sizeof(hist[0]) - n, fmt, ap);
	va_end(ap);
	if (verbose)
		printf("%s\n", h);
}

static void show_hist(void)
{
	unsigned int i = nhist > HIST ? nhist - HIST : 0;

	if (hist_shown >= 3 || verbose)
		return;
	hist_shown++;
	printf("# the last %u calls before it:\n", nhist - i);
	for (; i < nhist; i++)
		printf("%s\n", hist[i % HIST]);
}

/* An error a verbs call returns must be an errno value. */
static void check_errno(int e, const char *what)
{
	if (e <= 0 || e > 133)
		viol("%s failed with %d, not an errno", what, e);
}

/* ---- wr_id bookkeeping ---------------------------------------------- */

enum { WI_NONE, WI_POSTED, WI_DONE };
#define WF_RECV		1
#define WF_MUSTFAIL	2	/* used a foreign-PD key or a missing right */

struct winfo {
	uint32_t qp_uid, cq_uid, qpn, len;
	uint32_t mf_off;	/* receive: byte offset of its first bad SGE */
	uint8_t st, op, flags, st1;
};

static struct winfo *wi;
static uint64_t nctr, wi_cap;

/* why a WR was marked WF_MUSTFAIL (the last 256 such WRs) */
static char mf_why[160];
static uint32_t mf_off;		/* for new_ctr(): see struct winfo */
static struct { uint64_t ctr; char why[160]; } mfr[256];
static unsigned int nmfr;

static const char *mf_reason(uint64_t c)
{
	unsigned int i;

	for (i = 0; i < 256; i++)
		if (mfr[i].ctr == c && mfr[i].why[0])
			return mfr[i].why;
	return "?";
}

static uint8_t h8(uint64_t ctr, uint8_t tag)
{
	uint64_t x = (ctr ^ ((uint64_t)tag << 52)) * 0x9E3779B97F4A7C15ull;

	return (uint8_t)(x >> 56);
}

static uint64_t mk_wrid(uint64_t ctr)
{
	return ((uint64_t)my_tag << 56) | ((uint64_t)h8(ctr, my_tag) << 48) | ctr;
}

/* A new counter and its record (st WI_NONE until the post succeeds). */
static uint64_t new_ctr(const struct xqp *q, bool recv, int op, uint32_t len,
			bool mustfail)
{
	uint64_t c = nctr++;
	struct winfo *w;

	if (c >= wi_cap) {
		uint64_t n = wi_cap ? wi_cap * 2 : 65536;
		struct winfo *p = n <= (1u << 24) ? realloc(wi, n * sizeof(*wi)) : NULL;

		if (!p)
			return c;	/* untracked */
		memset(p + wi_cap, 0, (n - wi_cap) * sizeof(*wi));
		wi = p;
		wi_cap = n;
	}
	w = &wi[c];
	w->qp_uid = q->uid;
	w->cq_uid = (recv ? q->rcq : q->scq) < 0 ? 0 : C[recv ? q->rcq : q->scq].uid;
	w->qpn = q->qp->qp_num;
	w->len = len;
	w->st = WI_NONE;
	w->op = (uint8_t)op;
	w->flags = (recv ? WF_RECV : 0) | (mustfail ? WF_MUSTFAIL : 0);
	w->mf_off = recv ? mf_off : 0;
	if (mustfail) {
		mfr[nmfr % 256].ctr = c;
		memcpy(mfr[nmfr % 256].why, mf_why, sizeof(mf_why));
		nmfr++;
	}
	return c;
}

static void mark_posted(uint64_t c)
{
	if (c < wi_cap)
		wi[c].st = WI_POSTED;
}

static struct xqp *qp_by_uid(uint32_t uid)
{
	int i;

	for (i = 0; i < NQP; i++)
		if (Q[i].qp && Q[i].uid == uid)
			return &Q[i];
	return NULL;
}

static int wc_op_of(int wr_op)
{
	switch (wr_op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
		return IBV_WC_SEND;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return -1;
	}
}

static bool cq_overran(const struct xcq *cq);

static void check_wc(const struct xcq *cq, const struct ibv_wc *wc)
{
	uint8_t tag = wc->wr_id >> 56, h = (wc->wr_id >> 48) & 0xff;
	uint64_t c = wc->wr_id & ((1ull << 48) - 1);
	struct winfo *w;
	struct xqp *q;

	wcs++;
	if (wc->status != IBV_WC_SUCCESS)
		wc_errs++;
	if (wc->status > IBV_WC_TM_RNDV_INCOMPLETE) {
		viol("completion wr_id 0x%" PRIx64 " has invalid status %d",
		     wc->wr_id, wc->status);
		return;
	}
	if ((tag != TAG_MAIN && (tag & 0xc0) != TAG_CHILD) || h != h8(c, tag)) {
		viol("completion with a wr_id never posted: 0x%" PRIx64
		     " (status %s, qp 0x%x)", wc->wr_id,
		     ibv_wc_status_str(wc->status), wc->qp_num);
		return;
	}
	if (tag == my_tag && is_child && (c < fork_ctr || c >= nctr))
		return;		/* an earlier child's with the same tag */
	if (tag != my_tag && !(is_child && tag == TAG_MAIN && c < fork_ctr))
		return;		/* another process's: only its shape is known */
	if (c >= nctr) {
		viol("completion with wr_id 0x%" PRIx64 " from the future",
		     wc->wr_id);
		return;
	}
	if (c >= wi_cap)
		return;		/* untracked */
	w = &wi[c];
	if (w->st == WI_NONE) {
		viol("completion for wr_id 0x%" PRIx64 " whose post was refused (status %s)",
		     wc->wr_id, ibv_wc_status_str(wc->status));
		return;
	}
	if (w->st == WI_DONE && cq_overran(cq)) {
		vlog("  (second completion for wr %" PRIu64 " on CQ #%u after its overrun)",
		     c, cq->uid);
		return;
	}
	if (w->st == WI_DONE) {
		viol("second completion for wr_id 0x%" PRIx64 " (wr opcode %d, QP 0x%x): %s, the first was %s",
		     wc->wr_id, w->op, wc->qp_num, ibv_wc_status_str(wc->status),
		     ibv_wc_status_str(w->st1));
		return;
	}
	w->st = WI_DONE;
	w->st1 = wc->status;
	/*
	 * A forked child's view of the parent's objects goes stale: the
	 * parent may destroy a QP and get its uverbs handle back for a new
	 * one, and the child's posts then land there.  Identity and order
	 * are only checked in the process that owns the objects.
	 */
	if (is_child)
		return;
	if (w->cq_uid && w->cq_uid != cq->uid)
		viol("completion for wr_id 0x%" PRIx64 " on CQ #%u, its QP's %s CQ is #%u",
		     wc->wr_id, cq->uid, w->flags & WF_RECV ? "receive" : "send",
		     w->cq_uid);
	if (wc->qp_num != w->qpn)
		viol("completion for wr_id 0x%" PRIx64 " names QP 0x%x, posted on 0x%x",
		     wc->wr_id, wc->qp_num, w->qpn);
	if (wc->status == IBV_WC_SUCCESS) {
		/*
		 * A receive's SGEs are used only as far as the SEND's data
		 * goes (rxe checks each one as it reaches it), and not at all
		 * by a WRITE with immediate: it must fail only if the data
		 * reached its first bad SGE.
		 */
		if ((w->flags & WF_MUSTFAIL) &&
		    (!(w->flags & WF_RECV) ||
		     (wc->opcode == IBV_WC_RECV && wc->byte_len > w->mf_off)))
			viol("wr_id 0x%" PRIx64 " (wr %" PRIu64 ", opcode %d, QP 0x%x) used a key of another PD or an MR without the access it needs, and completed with success: %s",
			     wc->wr_id, c, w->op, w->qpn, mf_reason(c));
		if (w->flags & WF_RECV) {
			if (wc->opcode != IBV_WC_RECV &&
			    wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM)
				viol("receive wr_id 0x%" PRIx64 " completed with opcode %d",
				     wc->wr_id, wc->opcode);
			/* (RDMA WRITE with immediate: byte_len is the WRITE's) */
			if (wc->opcode == IBV_WC_RECV && wc->byte_len > w->len)
				viol("receive wr_id 0x%" PRIx64 " got %u bytes into %u",
				     wc->wr_id, wc->byte_len, w->len);
		} else if ((int)wc->opcode != wc_op_of(w->op)) {
			viol("send wr_id 0x%" PRIx64 " (wr opcode %d) completed with opcode %d",
			     wc->wr_id, w->op, wc->opcode);
		}
	}
	if (tag != my_tag)
		return;
	/* RC: each queue completes in posting order */
	q = qp_by_uid(w->qp_uid);
	if (!q)
		return;
	if (w->flags & WF_RECV) {
		if (c < q->last_r && q->last_r && !cq_overran(cq))
			viol("receive completions out of order on QP 0x%x (wr %" PRIu64 " after %" PRIu64 ")",
			     w->qpn, c, q->last_r);
		q->last_r = c;
	} else {
		if (c < q->last_s && q->last_s && !cq_overran(cq))
			viol("send completions out of posting order on QP 0x%x (wr %" PRIu64 " after %" PRIu64 ")",
			     w->qpn, c, q->last_s);
		q->last_s = c;
	}
}

/* ---- object helpers ----------------------------------------------- */

static int free_slot(void *arr, size_t elsz, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!*(void **)((char *)arr + i * elsz))
			return i;
	return -1;
}

static int rand_slot(void *arr, size_t elsz, int n, int (*ok)(int))
{
	int idx[64], k = 0, i;

	for (i = 0; i < n; i++)
		if (*(void **)((char *)arr + i * elsz) && (!ok || ok(i)))
			idx[k++] = i;
	return k ? idx[rn(k)] : -1;
}

#define FREE(arr) free_slot(arr, sizeof(arr[0]), (int)(sizeof(arr) / sizeof(arr[0])))
#define RAND(arr, ok) rand_slot(arr, sizeof(arr[0]), (int)(sizeof(arr) / sizeof(arr[0])), ok)

static int want_ctx = -1, want_side = -1, want_pd = -1;
/*
 * A child creates objects only in contexts it opened itself: it shares the
 * parent's uverbs files, where what it left would outlive it, unknown to
 * the parent (whose dealloc_pd then fails EBUSY; seed 5348682489890).
 */
static bool ctx_mine(int c) { return !is_child || X[c].mine; }
static int ctx_ok(int i)
{
	return (want_side < 0 || X[i].side == want_side) && ctx_mine(i);
}
static int pd_ok(int i) { return want_ctx < 0 || P[i].c == want_ctx; }
static int cq_ok(int i) { return want_ctx < 0 || C[i].c == want_ctx; }
static int mr_in_pd(int i) { return M[i].p == want_pd; }
static int mr_other_pd(int i) { return M[i].p != want_pd; }

static int rand_ctx(int side) { want_side = side; return RAND(X, ctx_ok); }
static int rand_pd(int c) { want_ctx = c; return RAND(P, pd_ok); }
static int rand_cq(int c) { want_ctx = c; return RAND(C, cq_ok); }

/* forget every object of context c (closed, or the child's view) */
static void forget_ctx(int c)
{
	int i;

	for (i = 0; i < NQP; i++)
		if (Q[i].qp && Q[i].c == c)
			Q[i].qp = NULL;
	for (i = 0; i < NQP; i++)
		if (Q[i].qp && Q[i].peer >= 0 && !Q[Q[i].peer].qp)
			Q[i].peer = -1;
	for (i = 0; i < NAH; i++)
		if (A[i].ah && P[A[i].p].c == c)
			A[i].ah = NULL;
	for (i = 0; i < NMR; i++)
		if (M[i].mr && M[i].c == c)
			M[i].mr = NULL;
	for (i = 0; i < NCQ; i++)
		if (C[i].cq && C[i].c == c)
			C[i].cq = NULL;
	for (i = 0; i < NPD; i++)
		if (P[i].pd && P[i].c == c)
			P[i].pd = NULL;
	memset(&X[c], 0, sizeof(X[c]));
}

static void stale_push(uint32_t key, int side)
{
	S[nstale % NSTALE] = (struct stale){ key, side };
	nstale++;
}

static uint32_t stale_key(int side)
{
	int i, n = nstale < NSTALE ? (int)nstale : NSTALE;

	for (i = 0; i < 4 && n; i++) {
		struct stale *s = &S[rn(n)];

		if (s->side == side)
			return s->key;
	}
	return (uint32_t)rnd();
}

/* ---- setup ops -------------------------------------------------------- */

static int op_open_ctx(int side)
{
	struct ibv_device **list;
	struct xctx *x;
	int c = FREE(X), i, n;

	if (c < 0)
		return -1;
	x = &X[c];
	CALL("get_device_list");
	list = ibv_get_device_list(&n);
	if (!list)
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), devname[side]))
			break;
	if (i < n) {
		CALL("open_device");
		x->ctx = ibv_open_device(list[i]);
		if (!x->ctx)
			check_errno(errno, "open_device");
	}
	ibv_free_device_list(list);
	if (!x->ctx)
		return -1;
	x->side = side;
	x->mine = true;
	x->d.ctx = x->ctx;
	x->d.name = devname[side];
	x->d.gid_index = gid_index;
	{
		char path[256];

		snprintf(path, sizeof(path), "/sys/class/infiniband/%s/bond", devname[side]);
		x->d.is_bond = access(path, F_OK) == 0;
	}
	CALL("query_port");
	if (ibv_query_port(x->ctx, 1, &x->d.port))
		check_errno(errno, "query_port");
	CALL("query_gid");
	if (ibv_query_gid(x->ctx, 1, gid_index, &x->d.gid))
		check_errno(errno, "query_gid");
	if (pct(50)) {
		CALL("create_comp_channel");
		x->ch = ibv_create_comp_channel(x->ctx);
		if (x->ch)
			fcntl(x->ch->fd, F_SETFL, O_NONBLOCK);
	}
	fcntl(x->ctx->async_fd, F_SETFL, O_NONBLOCK);
	vlog("open %s as ctx %d", devname[side], c);
	return c;
}

static int op_alloc_pd(int c)
{
	int p = FREE(P);

	if (p < 0 || c < 0)
		return -1;
	CALL("alloc_pd");
	P[p].pd = ibv_alloc_pd(X[c].ctx);
	if (!P[p].pd) {
		check_errno(errno, "alloc_pd");
		return -1;
	}
	P[p].c = c;
	return p;
}

static const int ACC_ALL = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

static int reg_mr(int p, char *addr, size_t len, int access)
{
	int m = FREE(M);

	if (m < 0 || p < 0 || !ctx_mine(P[p].c))
		return -1;
	CALL("reg_mr");
	M[m].mr = ibv_reg_mr(P[p].pd, addr, len, access);
	vlog("reg_mr pd %d %p+%zu access 0x%x -> %s", p, (void *)addr, len,
	     access, M[m].mr ? "ok" : strerror(errno));
	if (!M[m].mr) {
		check_errno(errno, "reg_mr");
		return -1;
	}
	M[m].p = p;
	M[m].c = P[p].c;
	M[m].side = X[P[p].c].side;
	M[m].addr = addr;
	M[m].len = len;
	M[m].access = access;
	return m;
}

static int op_create_cq(int c, bool sane)
{
	static const int cqes[] = { -1, 0, 1, 2, 16, 64, 256, 1024 };
	struct ibv_comp_channel *ch = NULL;
	int k = FREE(C), cqe, vec = 0;

	if (k < 0 || c < 0)
		return -1;
	if (sane)
		cqe = 256;
	else if (pct(10))
		cqe = pct(50) ? DA.max_cqe : DA.max_cqe + 1;
	else
		cqe = cqes[rn(sizeof(cqes) / sizeof(cqes[0]))];
	if (X[c].ch && pct(50))
		ch = X[c].ch;
	if (!sane && pct(5))
		vec = pct(50) ? 1 : 1000;
	CALL("create_cq");
	C[k].cq = ibv_create_cq(X[c].ctx, cqe, NULL, ch, vec);
	vlog("create_cq ctx %d cqe %d -> %s", c, cqe, C[k].cq ? "ok" : strerror(errno));
	if (!C[k].cq) {
		check_errno(errno, "create_cq");
		return -1;
	}
	C[k].c = c;
	C[k].uid = next_uid++;
	C[k].cqe = cqe;
	C[k].overrun = false;
	if (C[k].cq->cqe < cqe)
		viol("create_cq(%d) granted %d entries", cqe, C[k].cq->cqe);
	return k;
}

static uint32_t pick_wr_count(bool sane)
{
	static const uint32_t v[] = { 0, 1, 2, 16, 64, 256 };

	if (sane)
		return 64;
	if (pct(8))
		return pct(50) ? (uint32_t)DA.max_qp_wr : (uint32_t)DA.max_qp_wr + 1;
	if (pct(2))
		return 0xffffffffu;
	return v[rn(sizeof(v) / sizeof(v[0]))];
}

static uint32_t pick_sge_count(bool sane)
{
	static const uint32_t v[] = { 0, 1, 2, 3, 4, 16, 17, 32 };

	if (sane)
		return 1 + rn(4);
	if (pct(20))
		return pct(70) ? (uint32_t)DA.max_sge : (uint32_t)DA.max_sge + 1;
	return v[rn(sizeof(v) / sizeof(v[0]))];
}

static uint32_t pick_inline(bool sane)
{
	static const uint32_t v[] = { 0, 1, 16, 64, 128, 220, 256, 400, 512,
				      513, 1024, 4096, 65536, 0xffffffffu };

	if (sane)
		return pct(50) ? 0 : 64 << rn(4);
	return v[rn(sizeof(v) / sizeof(v[0]))];
}

static int op_create_qp(int c, bool sane)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RAW_PACKET, IBV_QPT_XRC_SEND,
		IBV_QPT_XRC_RECV, IBV_QPT_DRIVER, (enum ibv_qp_type)77,
	};
	struct ibv_qp_init_attr a;
	struct ibv_qp_cap req;
	int k = FREE(Q), p, s, r, x;

	if (k < 0 || c < 0)
		return -1;
	p = rand_pd(c);
	s = rand_cq(c);
	r = pct(70) ? s : rand_cq(c);
	if (p < 0 || s < 0 || r < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.send_cq = C[s].cq;
	a.recv_cq = C[r].cq;
	if (!sane && pct(3) && (x = RAND(C, NULL)) >= 0 && C[x].c != c) {
		/* a CQ of another context: its handle means something else */
		a.send_cq = C[x].cq;
		s = r = -1;	/* which CQ it ends up on is unknown */
	}
	a.qp_type = (sane || pct(93)) ? IBV_QPT_RC : types[rn(sizeof(types) / sizeof(types[0]))];
	a.sq_sig_all = pct(20);
	a.cap.max_send_wr = pick_wr_count(sane);
	a.cap.max_recv_wr = pick_wr_count(sane);
	a.cap.max_send_sge = pick_sge_count(sane);
	a.cap.max_recv_sge = pick_sge_count(sane);
	a.cap.max_inline_data = pick_inline(sane);
	req = a.cap;
	CALL("create_qp");
	Q[k].qp = ibv_create_qp(P[p].pd, &a);
	vlog("create_qp ctx %d pd %d wr %u/%u sge %u/%u inline %u -> %s (sge %u/%u inline %u)",
	     c, p, req.max_send_wr, req.max_recv_wr, req.max_send_sge,
	     req.max_recv_sge, req.max_inline_data,
	     Q[k].qp ? "ok" : strerror(errno), a.cap.max_send_sge,
	     a.cap.max_recv_sge, a.cap.max_inline_data);
	if (!Q[k].qp) {
		check_errno(errno, "create_qp");
		return -1;
	}
	if (a.cap.max_send_wr < req.max_send_wr ||
	    a.cap.max_recv_wr < req.max_recv_wr ||
	    a.cap.max_send_sge < req.max_send_sge ||
	    a.cap.max_recv_sge < req.max_recv_sge ||
	    a.cap.max_inline_data < req.max_inline_data)
		viol("create_qp granted less than asked: wr %u/%u sge %u/%u inline %u for wr %u/%u sge %u/%u inline %u",
		     a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge,
		     a.cap.max_recv_sge, a.cap.max_inline_data,
		     req.max_send_wr, req.max_recv_wr, req.max_send_sge,
		     req.max_recv_sge, req.max_inline_data);
	Q[k].c = c;
	Q[k].p = p;
	Q[k].scq = s;
	Q[k].rcq = r;
	Q[k].uid = next_uid++;
	Q[k].cap = a.cap;
	Q[k].state = IBV_QPS_RESET;
	Q[k].peer = -1;
	Q[k].last_s = Q[k].last_r = 0;
	return k;
}

static const int QP_ACC = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

static int qp_rtr(int k, const struct qp_info *me, const struct qp_info *peer,
		  const struct conn_opts *o)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = o->max_rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	return ibv_modify_qp(Q[k].qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int qp_rts(int k, const struct qp_info *me, const struct conn_opts *o)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = me->psn;
	a.max_rd_atomic = o->max_rd_atomic;
	return ibv_modify_qp(Q[k].qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Connect QPs a and b to each other (RESET first when asked). */
static int connect_pair(int a, int b, bool reset)
{
	struct qp_info ia, ib;
	struct conn_opts o;
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	int e;

	conn_opts_default(&o);
	o.timeout = pct(80) ? (uint32_t)ack_timeout : 8 + rn(12);
	o.retry_cnt = rn(8);
	o.rnr_retry = pct(70) ? rn(3) : rn(8);
	o.min_rnr_timer = 1 + rn(4);
	o.max_rd_atomic = 1 + rn(4);
	if (reset) {
		CALL("modify_qp(RESET)");
		if ((e = ibv_modify_qp(Q[a].qp, &r, IBV_QP_STATE)))
			check_errno(e, "modify_qp RESET");
		CALL("modify_qp(RESET)");
		if ((e = ibv_modify_qp(Q[b].qp, &r, IBV_QP_STATE)))
			check_errno(e, "modify_qp RESET");
	}
	qp_local_info(&X[Q[a].c].d, Q[a].qp, (uint32_t)rnd(), &ia);
	qp_local_info(&X[Q[b].c].d, Q[b].qp, (uint32_t)rnd(), &ib);
	/*
	 * Both to RTR before either goes to RTS: a bond QP's modify(RTS)
	 * waits (upgrade_wait_ms) for the peer's module to answer, which it
	 * can only do once the peer QP is at RTR.
	 */
	CALL("modify_qp(INIT)");
	e = qp_to_init(&X[Q[a].c].d, Q[a].qp, QP_ACC);
	CALL("modify_qp(INIT)");
	if (!e)
		e = qp_to_init(&X[Q[b].c].d, Q[b].qp, QP_ACC);
	CALL("modify_qp(RTR)");
	if (!e)
		e = qp_rtr(a, &ia, &ib, &o);
	CALL("modify_qp(RTR)");
	if (!e)
		e = qp_rtr(b, &ib, &ia, &o);
	CALL("modify_qp(RTS)");
	if (!e)
		e = qp_rts(a, &ia, &o);
	CALL("modify_qp(RTS)");
	if (!e)
		e = qp_rts(b, &ib, &o);
	vlog("connect qp %d <-> %d (0x%x <-> 0x%x): %s", a, b, ia.qpn, ib.qpn,
	     e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "connect");
		Q[a].state = Q[b].state = -1;
		return -1;
	}
	Q[a].state = Q[b].state = IBV_QPS_RTS;
	Q[a].peer = b;
	Q[b].peer = a;
	Q[a].peer_uid = Q[b].uid;
	Q[b].peer_uid = Q[a].uid;
	return 0;
}

/* Make sure both sides have a context, a PD, a full MR, a CQ; then a new
 * connected RC pair DEV <-> PEER_DEV (or, now and then, DEV <-> DEV). */
static void pair_on(int c0, int c1, bool sane)
{
	int a, b, s;

	if (c0 < 0 || c1 < 0)
		return;
	for (s = 0; s < 2; s++) {
		int c = s ? c1 : c0, p = rand_pd(c);

		if (p < 0)
			p = op_alloc_pd(c);
		if (p < 0)
			return;
		want_pd = p;
		if (RAND(M, mr_in_pd) < 0)
			reg_mr(p, arena[X[c].side], ARENA, ACC_ALL);
		if (rand_cq(c) < 0)
			op_create_cq(c, true);
	}
	a = op_create_qp(c0, sane || pct(70));
	if (a < 0)
		return;
	b = op_create_qp(c1, sane || pct(70));
	if (b < 0)
		return;
	if (Q[a].qp->qp_type == IBV_QPT_RC && Q[b].qp->qp_type == IBV_QPT_RC)
		connect_pair(a, b, false);
}

static void op_new_pair(bool sane)
{
	int c0, c1, s;

	c0 = rand_ctx(0);
	if (c0 < 0)
		c0 = op_open_ctx(0);
	s = (!sane && pct(5)) ? 0 : 1;
	c1 = rand_ctx(s);
	if (c1 < 0)
		c1 = op_open_ctx(s);
	pair_on(c0, c1, sane);
}

/* ---- scatter lists --------------------------------------------------- */

static struct ibv_sge sgp[MAXSGE];
static unsigned int sgn;
static struct ibv_send_wr swr[MAXWR];
static struct ibv_recv_wr rwr[MAXWR];

enum { LK_VALID, LK_OTHERPD, LK_STALE, LK_RANDOM, LK_ZERO, LK_MIXED, LK_N };

static uint32_t pick_len(size_t room)
{
	static const uint32_t big[] = { 1u << 31, 0xffffffffu, 1u << 20, 1u << 16 };
	unsigned int w[] = { 5, 5, 35, 30, 10, 4, 3, 8 };

	switch (pick(w, 8)) {
	case 0: return 0;
	case 1: return 1;
	case 2: return 1 + rn(64);
	case 3: return 1 + rn(4096);
	case 4: return room ? 1 + rn(room > (1u << 20) ? 1u << 20 : (uint32_t)room) : 0;
	case 5: return room > 0xffffffffu ? 0xffffffffu : (uint32_t)room;
	case 6: return room + 1 > 0xffffffffu ? 0xffffffffu : (uint32_t)room + 1;
	default: return big[rn(4)];
	}
}

/*
 * Fill one SGE for PD p on side `side` (MRs with right `need` are the
 * valid ones).  *mustfail is set when the SGE can never be legal.
 */
static void fill_sge(struct ibv_sge *s, int mode, int p, int side, int need,
		     const struct ibv_sge *prev, bool *mustfail)
{
	int m = -1;
	size_t off = 0;

	if (mode == LK_MIXED)
		mode = rn(LK_MIXED);
	if (mode == LK_VALID || mode == LK_OTHERPD) {
		want_pd = p;
		m = RAND(M, mode == LK_VALID ? mr_in_pd : mr_other_pd);
		if (m < 0)
			mode = LK_RANDOM;
	}
	if (m >= 0) {
		off = M[m].len ? rn(M[m].len) : 0;
		if (pct(60))
			off &= ~(size_t)63;
		s->addr = (uintptr_t)M[m].addr + off;
		s->length = pick_len(M[m].len - off);
		s->lkey = M[m].mr->lkey;
		if (s->length && M[m].side == side &&
		    (mode == LK_OTHERPD || (need && (M[m].access & need) != need))) {
			*mustfail = true;
			snprintf(mf_why, sizeof(mf_why),
				 "local SGE 0x%" PRIx64 "+%u lkey 0x%x: MR #%d of PD #%d (QP's PD #%d), access 0x%x, needs 0x%x",
				 (uint64_t)s->addr, s->length, s->lkey, m, M[m].p, p,
				 M[m].access, need);
		}
	} else {
		s->addr = (uintptr_t)arena[side] + rn(ARENA);
		s->length = pick_len(ARENA);
		s->lkey = mode == LK_STALE ? stale_key(side) :
			  mode == LK_ZERO ? 0 : (uint32_t)rnd();
	}
	if (prev && pct(10)) {
		/* overlapping: same or partly same bytes as the previous one */
		s->addr = prev->addr + (pct(50) ? 0 : rn(prev->length + 1));
	}
	if (pct(3))
		s->addr |= 1 + rn(7);	/* unaligned */
	if (pct(1))
		s->addr = pct(50) ? 0 : ~0ull - rn(4096);
}

static int pick_sge_mode(void)
{
	unsigned int w[LK_N] = { 75, 6, 4, 4, 2, 9 };

	return pick(w, LK_N);
}

static int pick_num_sge(uint32_t cap, bool big_list)
{
	unsigned int w[] = { 50, 5, 15, 12, 6, 3, 2, 4, 3 };

	if (big_list)
		return pct(90) ? 1 : rn(3);
	switch (pick(w, 9)) {
	case 0: return 1;
	case 1: return 0;
	case 2: return 2 + rn(3);
	case 3: return cap;
	case 4: return cap + 1;
	case 5: return DA.max_sge;
	case 6: return DA.max_sge + 1;
	case 7: { static const int v[] = { 16, 17, 32, 33 }; return v[rn(4)]; }
	default: return pct(50) ? 1024 : BIGSGE;
	}
}

static uint32_t pick_wr_list(void)
{
	unsigned int w[] = { 80, 12, 5, 2, 1 };

	switch (pick(w, 5)) {
	case 0: return 1;
	case 1: return 2 + rn(15);
	case 2: return 17 + rn(240);
	case 3: return 1000 + rn(2600);
	default: return MAXWR;
	}
}

/* ---- data path ops ------------------------------------------------------ */

static int qp_posting_ok(int i) { return Q[i].qp->qp_type == IBV_QPT_RC; }
static int qp_connected(int i) { return Q[i].peer >= 0 && Q[Q[i].peer].qp; }

static int pick_opcode(void)
{
	static const int bad[] = { 12, 13, 14, 16, 0x55, -1, 0x7fffffff };
	unsigned int w[] = { 25, 5, 15, 5, 15, 5, 5, 2, 2, 2, 2, 2, 2, 3 };
	int k = pick(w, 14);

	switch (k) {
	case 0: return IBV_WR_RDMA_WRITE;
	case 1: return IBV_WR_RDMA_WRITE_WITH_IMM;
	case 2: return IBV_WR_SEND;
	case 3: return IBV_WR_SEND_WITH_IMM;
	case 4: return IBV_WR_RDMA_READ;
	case 5: return IBV_WR_ATOMIC_CMP_AND_SWP;
	case 6: return IBV_WR_ATOMIC_FETCH_AND_ADD;
	case 7: return IBV_WR_LOCAL_INV;
	case 8: return IBV_WR_BIND_MW;
	case 9: return IBV_WR_SEND_WITH_INV;
	case 10: return IBV_WR_TSO;
	case 11: return IBV_WR_DRIVER1;
	case 12: return IBV_WR_ATOMIC_WRITE;
	default: return bad[rn(sizeof(bad) / sizeof(bad[0]))];
	}
}

/* remote address + rkey for QP q, right `need`; may set *mustfail */
static void pick_remote(const struct xqp *q, int need, uint64_t *raddr,
			uint32_t *rkey, uint32_t len, bool atomic,
			bool *mustfail)
{
	unsigned int w[] = { 75, 7, 5, 5, 5, 3 };
	int rs_side = X[q->c].side ^ 1, rp = -1, m = -1, mode;

	if (q->peer >= 0 && Q[q->peer].qp) {
		rp = Q[q->peer].p;
		rs_side = X[Q[q->peer].c].side;
	}
	mode = pick(w, 6);
	if (rp >= 0 && mode <= 2) {
		want_pd = rp;
		m = RAND(M, mode == 1 ? mr_other_pd : mr_in_pd);
	}
	if (m >= 0) {
		size_t off = M[m].len ? rn(M[m].len) : 0;

		if (atomic && pct(90))
			off &= ~(size_t)7;
		else if (pct(60))
			off &= ~(size_t)63;
		*raddr = (uintptr_t)M[m].addr + off;
		*rkey = M[m].mr->rkey;
		if (pct(3))
			*raddr = (uintptr_t)M[m].addr + M[m].len - rn(16);
		if (len && M[m].side == rs_side &&
		    (mode == 1 || (M[m].access & need) != need)) {
			*mustfail = true;
			snprintf(mf_why, sizeof(mf_why),
				 "remote 0x%" PRIx64 "+%u rkey 0x%x: MR #%d [0x%" PRIx64 "+%zu] of PD #%d (peer QP's PD #%d), access 0x%x, needs 0x%x",
				 *raddr, len, *rkey, m, (uint64_t)(uintptr_t)M[m].addr,
				 M[m].len, M[m].p, rp, M[m].access, need);
		}
	} else {
		*raddr = (uintptr_t)arena[rs_side] + rn(ARENA);
		*rkey = mode == 3 ? stale_key(rs_side) : mode == 5 ? 0 : (uint32_t)rnd();
	}
	if (pct(1))
		*raddr = pct(50) ? 0 : ~0ull - rn(4096);
}

static int mr_full(int i)
{
	return M[i].p == want_pd && (M[i].access & ACC_ALL) == ACC_ALL &&
	       M[i].len >= (1u << 20);
}

/* An MR of PD p with every right and at least 1 MiB (registers one). */
static int full_mr(int p)
{
	int m;

	want_pd = p;
	m = RAND(M, mr_full);
	if (m < 0)
		m = reg_mr(p, arena[X[P[p].c].side], ARENA, ACC_ALL);
	return m;
}

/*
 * A legal SGE in PD p: len bytes (0 < len <= 1 MiB) at an align-aligned
 * offset of a full-rights MR.  Returns false when there is no such MR.
 */
static bool valid_sge(struct ibv_sge *s, int p, uint32_t len, uint32_t align)
{
	int m = full_mr(p);
	size_t off;

	if (m < 0)
		return false;
	off = rn(M[m].len - len) & ~(size_t)(align - 1);
	s->addr = (uintptr_t)M[m].addr + off;
	s->length = len;
	s->lkey = M[m].mr->lkey;
	return true;
}

/* post n receives on QP k (list), sane: valid 64 KiB buffers */
static void post_recv_list(int k, uint32_t n, bool sane)
{
	struct xqp *q = &Q[k];
	struct ibv_recv_wr *bad = NULL;
	uint64_t ctr[MAXWR];
	uint32_t i;
	int e, j;

	if (n > MAXWR)
		n = MAXWR;
	sgn = 0;
	for (i = 0; i < n; i++) {
		struct ibv_recv_wr *w = &rwr[i];
		bool mf = false;
		int mode = sane ? LK_VALID : pick_sge_mode();
		int ns = sane ? 1 : pick_num_sge(q->cap.max_recv_sge, n > 16);
		uint64_t len = 0;

		if (sgn + ns > MAXSGE)
			ns = 0;
		memset(w, 0, sizeof(*w));
		w->sg_list = &sgp[sgn];
		w->num_sge = ns;
		mf_off = 0;
		for (j = 0; j < ns; j++) {
			bool bad = mf;

			if (sane && valid_sge(&sgp[sgn + j], q->p, 65536, 64))
				mode = LK_VALID;
			else
				fill_sge(&sgp[sgn + j], mode, q->p, X[q->c].side,
					 IBV_ACCESS_LOCAL_WRITE, j ? &sgp[sgn + j - 1] : NULL, &mf);
			if (mf && !bad)
				mf_off = len > 0xffffffffu ? 0xffffffffu : (uint32_t)len;
			len += sgp[sgn + j].length;
		}
		sgn += ns;
		ctr[i] = new_ctr(q, true, 0, len > 0xffffffffu ? 0xffffffffu : (uint32_t)len, mf);
		w->wr_id = mk_wrid(ctr[i]);
		w->next = i + 1 < n ? &rwr[i + 1] : NULL;
	}
	CALL("post_recv");
	e = ibv_post_recv(q->qp, rwr, &bad);
	vlog("post_recv qp %d (0x%x) x%u from wr %" PRIu64 ": %s", k, q->qp->qp_num, n,
	     ctr[0], e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "post_recv");
		if (!bad || bad < rwr || bad >= rwr + n) {
			if (!X[q->c].d.is_bond)
				return;	/* (rdma-core's rxe provider leaves it NULL) */
			viol("post_recv failed (%d) with bad_wr %p outside the list", e, (void *)bad);
			return;
		}
		n = bad - rwr;
	}
	for (i = 0; i < n; i++)
		mark_posted(ctr[i]);
}

static void op_post_send(bool valid_bias)
{
	struct ibv_send_wr *bad = NULL;
	static uint64_t ctr[MAXWR];
	uint32_t n = pick_wr_list(), i;
	int k = RAND(Q, qp_posting_ok), e, j;
	struct xqp *q;

	if (k < 0)
		return;
	q = &Q[k];
	if (valid_bias && q->peer >= 0 && Q[q->peer].qp && pct(50))
		post_recv_list(q->peer, 1 + rn(4), true);
	sgn = 0;
	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &swr[i];
		int op = pick_opcode(), mode = pick_sge_mode();
		int ns = pick_num_sge(q->cap.max_send_sge, n > 16), need = 0;
		bool mf = false, atomic;
		uint64_t len = 0;

		memset(w, 0, sizeof(*w));
		atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP ||
			 op == IBV_WR_ATOMIC_FETCH_AND_ADD;
		if (atomic && pct(90))
			ns = 1;
		if (op == IBV_WR_RDMA_READ || atomic)
			need = IBV_ACCESS_LOCAL_WRITE;
		if (sgn + ns > MAXSGE)
			ns = 0;
		w->send_flags = 0;
		if (pct(70) || q->qp->qp_type != IBV_QPT_RC)
			w->send_flags |= IBV_SEND_SIGNALED;
		if (pct(10))
			w->send_flags |= IBV_SEND_FENCE;
		if (pct(10))
			w->send_flags |= IBV_SEND_SOLICITED;
		if (pct(15))
			w->send_flags |= IBV_SEND_INLINE;
		if (pct(3))
			w->send_flags |= IBV_SEND_IP_CSUM;
		if (pct(2))
			w->send_flags |= (uint32_t)rnd();
		w->sg_list = &sgp[sgn];
		w->num_sge = ns;
		for (j = 0; j < ns; j++) {
			fill_sge(&sgp[sgn + j], mode, q->p, X[q->c].side, need,
				 j ? &sgp[sgn + j - 1] : NULL, &mf);
			if (atomic && pct(90))
				sgp[sgn + j].length = 8;
		}
		if ((w->send_flags & IBV_SEND_INLINE) && ns > 0) {
			/* total 0, max_inline, max_inline + 1, or random */
			uint32_t mi = q->cap.max_inline_data, tot;
			unsigned int pw[] = { 10, 30, 30, 30 };

			switch (pick(pw, 4)) {
			case 0: tot = 0; break;
			case 1: tot = mi; break;
			case 2: tot = mi + 1; break;
			default: tot = rn(mi + 1); break;
			}
			for (j = 0; j < ns; j++) {
				uint32_t l = j == ns - 1 ? tot : rn(tot + 1);

				sgp[sgn + j].length = l;
				tot -= l;
			}
		}
		for (j = 0; j < ns; j++)
			len += sgp[sgn + j].length;
		sgn += ns;
		/* inline data need not come through an lkey */
		if (w->send_flags & IBV_SEND_INLINE)
			mf = false;
		w->opcode = (enum ibv_wr_opcode)op;
		w->imm_data = (uint32_t)rnd();
		if (op == IBV_WR_SEND_WITH_INV)
			w->invalidate_rkey = (uint32_t)rnd();
		if (atomic) {
			pick_remote(q, IBV_ACCESS_REMOTE_ATOMIC, &w->wr.atomic.remote_addr,
				    &w->wr.atomic.rkey, len ? 8 : 0, true, &mf);
			w->wr.atomic.compare_add = rnd();
			w->wr.atomic.swap = rnd();
		} else if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ||
			   op == IBV_WR_RDMA_READ) {
			pick_remote(q, op == IBV_WR_RDMA_READ ? IBV_ACCESS_REMOTE_READ :
				    IBV_ACCESS_REMOTE_WRITE, &w->wr.rdma.remote_addr,
				    &w->wr.rdma.rkey, len > 0xffffffffu ? 0xffffffffu : (uint32_t)len,
				    false, &mf);
		}
		if (len > 0xffffffffu)
			mf = false;	/* a message that large is an error anyway */
		ctr[i] = new_ctr(q, false, op, 0, mf);
		w->wr_id = mk_wrid(ctr[i]);
		w->next = i + 1 < n ? &swr[i + 1] : NULL;
	}
	CALL("post_send");
	e = ibv_post_send(q->qp, swr, &bad);
	vlog("post_send qp %d (0x%x) x%u from wr %" PRIu64 " (first: op %d num_sge %d flags 0x%x): %s",
	     k, q->qp->qp_num, n, ctr[0], swr[0].opcode, swr[0].num_sge, swr[0].send_flags, e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "post_send");
		if (!bad || bad < swr || bad >= swr + n) {
			if (!X[q->c].d.is_bond)
				return;	/* (rdma-core's rxe provider leaves it NULL) */
			viol("post_send failed (%d) with bad_wr %p outside the list", e, (void *)bad);
			return;
		}
		n = bad - swr;
	}
	wrs_posted += n;
	for (i = 0; i < n; i++)
		mark_posted(ctr[i]);
}

/*
 * Legal traffic on a connected pair (so that data really flows, multi-rail
 * included): the QP is brought (back) to RTS first, receives are posted for
 * what consumes them, keys and lengths are valid; num_sge is 1, a few, or
 * exactly the granted max_send_sge (the boundary a bond must implement).
 */
static void op_traffic(void)
{
	static const int ops_[] = {
		IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE,
		IBV_WR_SEND, IBV_WR_SEND, IBV_WR_SEND_WITH_IMM,
		IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ, IBV_WR_RDMA_READ,
		IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
		IBV_WR_ATOMIC_FETCH_AND_ADD,
	};
	static uint64_t ctr[256];
	struct ibv_send_wr *bad = NULL;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	uint32_t n, i, consume = 0;
	int k, pk, e, j, rm;
	struct xqp *q;

	want_pd = -1;
	k = RAND(Q, qp_connected);
	if (k < 0)
		return;
	q = &Q[k];
	pk = q->peer;
	CALL("query_qp");
	if (!ibv_query_qp(q->qp, &qa, IBV_QP_STATE, &qia))
		q->state = qa.qp_state;
	if (q->state != IBV_QPS_RTS && connect_pair(k, pk, true))
		return;
	rm = full_mr(Q[pk].p);
	if (rm < 0 || full_mr(q->p) < 0)
		return;
	n = pct(80) ? 1 + rn(8) : 1 + rn(64);
	if (n > q->cap.max_send_wr / 2 + 1)
		n = q->cap.max_send_wr / 2 + 1;
	sgn = 0;
	for (i = 0; i < n; i++) {
		struct ibv_send_wr *w = &swr[i];
		int op = ops_[rn(sizeof(ops_) / sizeof(ops_[0]))];
		bool atomic = op == IBV_WR_ATOMIC_CMP_AND_SWP ||
			      op == IBV_WR_ATOMIC_FETCH_AND_ADD;
		uint32_t maxs = op == IBV_WR_RDMA_READ && (uint32_t)DA.max_sge_rd < q->cap.max_send_sge ?
				(uint32_t)DA.max_sge_rd : q->cap.max_send_sge;
		uint32_t ns = atomic ? 1 : pct(60) ? 1 : pct(60) ? 1 + rn(maxs < 4 ? maxs : 4) : maxs;
		uint32_t tot = atomic ? 8 : pct(5) ? 1u << 20 : pct(50) ? 1 + rn(4096) : 1 + rn(65536);
		uint64_t len = 0;

		if (!ns)
			ns = 1;
		memset(w, 0, sizeof(*w));
		w->sg_list = &sgp[sgn];
		w->num_sge = ns;
		for (j = 0; j < (int)ns; j++) {
			uint32_t l = tot / ns + (j == (int)ns - 1 ? tot % ns : 0);

			if (!l)
				l = 1;
			valid_sge(&sgp[sgn + j], q->p, l, atomic ? 8 : 1);
			len += l;
		}
		sgn += ns;
		w->opcode = (enum ibv_wr_opcode)op;
		w->send_flags = pct(80) || q->cap.max_send_wr < 4 ? IBV_SEND_SIGNALED : 0;
		if (pct(5))
			w->send_flags |= IBV_SEND_FENCE;
		if (pct(5))
			w->send_flags |= IBV_SEND_SOLICITED;
		if (!atomic && op != IBV_WR_RDMA_READ && len <= q->cap.max_inline_data && pct(20))
			w->send_flags |= IBV_SEND_INLINE;
		w->imm_data = (uint32_t)rnd();
		if (atomic) {
			w->wr.atomic.remote_addr = ((uintptr_t)M[rm].addr + rn(M[rm].len - 8)) & ~7ull;
			w->wr.atomic.rkey = M[rm].mr->rkey;
			w->wr.atomic.compare_add = rnd();
			w->wr.atomic.swap = rnd();
		} else {
			w->wr.rdma.remote_addr = (uintptr_t)M[rm].addr + rn(M[rm].len - len);
			w->wr.rdma.rkey = M[rm].mr->rkey;
		}
		if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
		    op == IBV_WR_RDMA_WRITE_WITH_IMM)
			consume++;
		ctr[i] = new_ctr(q, false, op, 0, false);
		w->wr_id = mk_wrid(ctr[i]);
		w->next = i + 1 < n ? &swr[i + 1] : NULL;
	}
	if (consume)
		post_recv_list(pk, consume, true);
	CALL("post_send (traffic)");
	e = ibv_post_send(q->qp, swr, &bad);
	vlog("traffic qp %d (0x%x) x%u from wr %" PRIu64 " (first: op %d num_sge %d len %u): %s",
	     k, q->qp->qp_num, n, ctr[0], swr[0].opcode, swr[0].num_sge, swr[0].sg_list[0].length,
	     e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "post_send");
		if (!bad || bad < swr || bad >= swr + n) {
			if (!X[q->c].d.is_bond)
				return;	/* (rdma-core's rxe provider leaves it NULL) */
			viol("post_send failed (%d) with bad_wr %p outside the list", e, (void *)bad);
			return;
		}
		n = bad - swr;
	}
	wrs_posted += n;
	for (i = 0; i < n; i++)
		mark_posted(ctr[i]);
}

static void op_post_recv(void)
{
	int k = RAND(Q, qp_posting_ok);

	if (k >= 0)
		post_recv_list(k, pick_wr_list(), pct(30));
}

/*
 * A post through the uverbs write interface itself, with counts libibverbs
 * would never build (num_sge 2^31, 2^32-1, sge_count that does not add up,
 * odd wqe_size): libibverbs would crash on them in userspace.
 */
static void op_raw_post(void)
{
	static const uint32_t nums[] = { 0x80000000u, 0xffffffffu, 0x7fffffffu,
					 0x0ffffff0u, 0x0ffffffbu, 1, 0, 2 };
	/* header, command (post_send and post_recv: 24 bytes), WRs, SGEs */
	uint64_t buf[(8 + 24 + 3 * 80 + 8 * 16) / 8];
	uint8_t *b = (uint8_t *)buf;
	struct ib_uverbs_cmd_hdr *hdr = (void *)b;
	struct ib_uverbs_post_send *cs = (void *)(b + 8);
	struct ib_uverbs_post_send_resp resp = { 0 };
	struct ib_uverbs_sge *sg;
	int k = RAND(Q, qp_posting_ok), i, wrc = 1 + rn(3);
	bool recv = pct(30);
	uint32_t wqe, sgec = rn(9);
	uint64_t first = nctr;
	size_t size;
	ssize_t ret;

	if (k < 0)
		return;
	memset(buf, 0, sizeof(buf));
	wqe = recv ? sizeof(struct ib_uverbs_recv_wr) : sizeof(struct ib_uverbs_send_wr);
	if (pct(20))
		wqe = pct(50) ? 0 : wqe + 8 * rn(3);
	size = 8 + 24 + wqe * wrc + sgec * sizeof(struct ib_uverbs_sge);
	for (i = 0; i < wrc && wqe >= 16; i++) {
		uint8_t *w = b + 8 + 24 + i * wqe;
		int op = rn(12);
		uint64_t id = mk_wrid(new_ctr(&Q[k], recv, op, 0, false));
		uint32_t ns = nums[rn(sizeof(nums) / sizeof(nums[0]))];

		memcpy(w, &id, 8);
		memcpy(w + 8, &ns, 4);
		if (!recv && wqe >= sizeof(struct ib_uverbs_send_wr)) {
			struct ib_uverbs_send_wr *sw = (void *)w;

			sw->opcode = op;
			sw->send_flags = IBV_SEND_SIGNALED;
			sw->wr.rdma.remote_addr = (uintptr_t)arena[1];
			sw->wr.rdma.rkey = (uint32_t)rnd();
		}
	}
	sg = (void *)(b + 8 + 24 + wqe * wrc);
	for (i = 0; i < (int)sgec; i++) {
		sg[i].addr = (uintptr_t)arena[X[Q[k].c].side] + rn(4096);
		sg[i].length = rn(4096);
		sg[i].lkey = (uint32_t)rnd();
	}
	hdr->command = recv ? IB_USER_VERBS_CMD_POST_RECV : IB_USER_VERBS_CMD_POST_SEND;
	hdr->in_words = size / 4;
	hdr->out_words = sizeof(resp) / 4;
	/* struct ib_uverbs_post_recv has the same first five fields */
	cs->response = (uintptr_t)&resp;
	cs->qp_handle = Q[k].qp->handle;
	cs->wr_count = pct(90) ? (uint32_t)wrc : (uint32_t)rnd();
	cs->sge_count = pct(80) ? sgec : (uint32_t)rnd();
	cs->wqe_size = wqe;
	CALL("raw post (uverbs write)");
	ret = write(Q[k].qp->context->cmd_fd, buf, size);
	vlog("raw %s qp %d wr %d sge %u wqe %u: %zd %s", recv ? "post_recv" : "post_send",
	     k, wrc, sgec, wqe, ret, ret < 0 ? strerror(errno) : "");
	if (ret < 0)
		check_errno(errno, "raw post");
	/* posted: all on success, those before resp.bad_wr on failure */
	if (ret >= 0) {
		for (; first < nctr; first++)
			mark_posted(first);
	} else if (resp.bad_wr > 1) {
		uint64_t end = first + resp.bad_wr - 1;

		for (; first < end && first < nctr; first++)
			mark_posted(first);
	}
}

static void op_poll(int k)
{
	static const int batch[] = { 0, 1, 2, 3, 8, 16, 64, 256, -1 };
	static struct ibv_wc wc[256];
	int n, r, i;

	if (k < 0)
		k = RAND(C, NULL);
	if (k < 0)
		return;
	n = batch[rn(sizeof(batch) / sizeof(batch[0]))];
	if (n > 0 && pct(50))
		n = 1 + rn(n);
	CALL("poll_cq");
	r = ibv_poll_cq(C[k].cq, n, wc);
	if (r < 0) {
		/* (a child's copy of the tables may name a CQ the parent destroyed) */
		if (n >= 0 && !is_child)
			viol("poll_cq(%d) on a live CQ returned %d (errno %d)", n, r, errno);
		return;
	}
	if (r > (n > 0 ? n : 0)) {
		viol("poll_cq(%d) returned %d completions", n, r);
		return;
	}
	vlog("poll_cq cq %d n %d -> %d", k, n, r);
	for (i = 0; i < r; i++) {
		if (wc[i].status)
			vlog("  wc wr %" PRIu64 " (0x%" PRIx64 ") qp 0x%x %s",
			     (uint64_t)(wc[i].wr_id & ((1ull << 48) - 1)), wc[i].wr_id,
			     wc[i].qp_num, ibv_wc_status_str(wc[i].status));
		check_wc(&C[k], &wc[i]);
	}
}

/* Read (and ack at once) the async events of context c. */
static void async_events(int c)
{
	struct pollfd pf = { .fd = X[c].ctx->async_fd, .events = POLLIN };
	int i;

	while (poll(&pf, 1, 0) == 1) {
		struct ibv_async_event ev;

		CALL("get_async_event");
		if (ibv_get_async_event(X[c].ctx, &ev))
			break;
		if ((unsigned int)ev.event_type > IBV_EVENT_WQ_FATAL)
			viol("async event of type %d", ev.event_type);
		if (ev.event_type == IBV_EVENT_CQ_ERR) {
			for (i = 0; i < NCQ; i++)
				if (C[i].cq && C[i].cq == ev.element.cq)
					break;
			if (i < NCQ)
				C[i].overrun = true;
			vlog("async event %s: cq %d", ibv_event_type_str(ev.event_type),
			     i < NCQ ? i : -1);
		} else {
			vlog("async event %s", ibv_event_type_str(ev.event_type));
		}
		ibv_ack_async_event(&ev);
	}
}

/*
 * A CQ that overran (more completions than entries) is in error: the verbs
 * say nothing more about what it holds.  Read pending events first.
 */
static bool cq_overran(const struct xcq *cq)
{
	if (!is_child && !cq->overrun && X[cq->c].ctx)
		async_events(cq->c);
	return cq->overrun;
}

static void op_notify_and_events(void)
{
	int k = RAND(C, NULL), c;
	struct pollfd pf;

	if (k >= 0) {
		int e;

		CALL("req_notify_cq");
		e = ibv_req_notify_cq(C[k].cq, pct(30));
		if (e)
			check_errno(e, "req_notify_cq");
	}
	c = RAND(X, NULL);
	/*
	 * Not in a child: an event it reads (and acks in its own memory only)
	 * would make the parent's destroy of that QP/CQ wait for an ack forever.
	 */
	if (c < 0 || is_child)
		return;
	if (X[c].ch) {
		pf = (struct pollfd){ .fd = X[c].ch->fd, .events = POLLIN };
		while (poll(&pf, 1, 0) == 1) {
			struct ibv_cq *cq;
			void *cctx;

			CALL("get_cq_event");
			if (ibv_get_cq_event(X[c].ch, &cq, &cctx))
				break;
			ibv_ack_cq_events(cq, 1);
		}
	}
	async_events(c);
}

/* ---- control ops -------------------------------------------------------- */

static void op_modify_random(void)
{
	static const int masks[] = {
		IBV_QP_STATE, IBV_QP_CUR_STATE, IBV_QP_EN_SQD_ASYNC_NOTIFY,
		IBV_QP_ACCESS_FLAGS, IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_QKEY,
		IBV_QP_AV, IBV_QP_PATH_MTU, IBV_QP_TIMEOUT, IBV_QP_RETRY_CNT,
		IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_MAX_QP_RD_ATOMIC,
		IBV_QP_ALT_PATH, IBV_QP_MIN_RNR_TIMER, IBV_QP_SQ_PSN,
		IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_PATH_MIG_STATE, IBV_QP_CAP,
		IBV_QP_DEST_QPN, IBV_QP_RATE_LIMIT,
	};
	int k = RAND(Q, NULL), mask = 0, e;
	unsigned int i;
	struct ibv_qp_attr a;
	struct xqp *q;

	if (k < 0)
		return;
	q = &Q[k];
	memset(&a, 0, sizeof(a));
	a.qp_state = pct(95) ? (enum ibv_qp_state)rn(7) : (enum ibv_qp_state)rn(256);
	a.cur_qp_state = (enum ibv_qp_state)rn(8);
	a.path_mtu = pct(80) ? X[q->c].d.port.active_mtu : (enum ibv_mtu)rn(8);
	a.qp_access_flags = pct(80) ? QP_ACC : (unsigned int)rnd();
	a.pkey_index = pct(80) ? 0 : rn(65536);
	a.port_num = pct(80) ? 1 : rn(4);
	a.qkey = (uint32_t)rnd();
	a.ah_attr.is_global = pct(90);
	a.ah_attr.port_num = pct(90) ? 1 : rn(4);
	a.ah_attr.grh.hop_limit = rn(256);
	a.ah_attr.grh.sgid_index = pct(85) ? (uint32_t)gid_index : pct(50) ? 0 : rn(256);
	if (q->peer >= 0 && Q[q->peer].qp && pct(80))
		a.ah_attr.grh.dgid = X[Q[q->peer].c].d.gid;
	else if (pct(50))
		a.ah_attr.grh.dgid = X[q->c].d.gid;
	else if (pct(50)) {
		a.ah_attr.grh.dgid = X[q->c].d.gid;	/* 10.0.x.y, another y */
		a.ah_attr.grh.dgid.raw[15] = rn(256);
	}
	a.dest_qp_num = q->peer >= 0 && Q[q->peer].qp && pct(80) ?
			Q[q->peer].qp->qp_num : (pct(50) ? q->qp->qp_num : rn(1 << 24));
	a.rq_psn = rn(1 << 24);
	a.sq_psn = rn(1 << 24);
	a.timeout = pct(80) ? (uint32_t)ack_timeout : rn(32);
	a.retry_cnt = rn(8);
	a.rnr_retry = rn(8);
	a.min_rnr_timer = rn(32);
	a.max_rd_atomic = pct(80) ? 1 + rn(4) : rn(256);
	a.max_dest_rd_atomic = pct(80) ? 1 + rn(4) : rn(256);
	a.cap.max_send_wr = rn(1024);
	a.cap.max_recv_wr = rn(1024);
	a.en_sqd_async_notify = rn(2);
	a.rate_limit = rn(100000);
	if (pct(90))
		mask |= IBV_QP_STATE;
	for (i = 1; i < sizeof(masks) / sizeof(masks[0]); i++)
		if (pct(25))
			mask |= masks[i];
	if (pct(1))
		mask = (int)rnd();
	CALL("modify_qp(random)");
	e = ibv_modify_qp(q->qp, &a, mask);
	vlog("modify_qp qp %d -> state %d mask 0x%x: %s", k, a.qp_state, mask,
	     e ? strerror(e) : "ok");
	if (e)
		check_errno(e, "modify_qp");
	else if (mask & IBV_QP_STATE)
		q->state = a.qp_state;
}

static void op_modify_state(void)
{
	int k = RAND(Q, NULL), e;
	struct ibv_qp_attr a = { 0 };
	unsigned int w[] = { 30, 10, 25, 35 };

	if (k < 0)
		return;
	switch (pick(w, 4)) {
	case 0: a.qp_state = IBV_QPS_ERR; break;
	case 1: a.qp_state = IBV_QPS_SQD; break;
	case 2: a.qp_state = IBV_QPS_RESET; break;
	default:
		/* reconnect a pair (RESET, INIT, RTR, RTS) */
		if (Q[k].peer >= 0 && Q[Q[k].peer].qp) {
			connect_pair(k, Q[k].peer, true);
			return;
		}
		if (Q[k].state != IBV_QPS_RESET)
			return;
		CALL("modify_qp(INIT)");
		e = qp_to_init(&X[Q[k].c].d, Q[k].qp, QP_ACC);
		if (e)
			check_errno(e, "modify_qp INIT");
		else
			Q[k].state = IBV_QPS_INIT;
		return;
	}
	CALL("modify_qp(state)");
	e = ibv_modify_qp(Q[k].qp, &a, IBV_QP_STATE);
	vlog("modify_qp qp %d -> %d: %s", k, a.qp_state, e ? strerror(e) : "ok");
	if (e)
		check_errno(e, "modify_qp");
	else
		Q[k].state = a.qp_state;
}

static void op_query(void)
{
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	union ibv_gid gid;
	uint16_t pkey;
	int c = RAND(X, NULL), k, e;

	if (c < 0)
		return;
	switch (rn(5)) {
	case 0:
		CALL("query_device");
		if ((e = ibv_query_device(X[c].ctx, &da)))
			check_errno(e, "query_device");
		break;
	case 1:
		CALL("query_port");
		if ((e = ibv_query_port(X[c].ctx, pct(80) ? 1 : rn(256), &pa)))
			check_errno(e, "query_port");
		break;
	case 2:
		CALL("query_gid");
		if (ibv_query_gid(X[c].ctx, 1, pct(50) ? rn(4) : rn(1 << 16), &gid) &&
		    errno)
			check_errno(errno, "query_gid");
		break;
	case 3:
		CALL("query_pkey");
		ibv_query_pkey(X[c].ctx, 1, rn(4), &pkey);
		break;
	default:
		k = RAND(Q, NULL);
		if (k < 0)
			break;
		CALL("query_qp");
		e = ibv_query_qp(Q[k].qp, &qa, pct(80) ? IBV_QP_STATE | IBV_QP_CAP : (int)rnd(), &qia);
		if (e) {
			check_errno(e, "query_qp");
			break;
		}
		if (qa.qp_state <= IBV_QPS_ERR)
			Q[k].state = qa.qp_state;
		else
			viol("query_qp: state %d", qa.qp_state);
		break;
	}
}

static void op_reg_mr(void)
{
	unsigned int w[] = { 40, 25, 10, 5, 5, 5, 5, 5 };
	int c = rand_ctx(-1), p, acc;
	char *base;
	size_t off = 0, len;

	if (c < 0)
		return;
	p = (pct(95) || is_child) ? rand_pd(c) : RAND(P, NULL);
	if (p < 0)
		return;
	base = arena[X[c].side];
	switch (pick(w, 8)) {
	case 0: off = rn(ARENA / 4096) * 4096; len = 4096 * (1 + rn(64)); break;
	case 1: off = rn(ARENA); len = 1 + rn(65536); break;
	case 2: len = ARENA; break;
	case 3: len = 0; break;
	case 4: off = ARENA - 4096; len = 8192; break;	/* past the end */
	case 5: len = 1ull << 40; break;
	case 6: base = ro_page; len = 4096; break;
	default: len = 1; off = rn(ARENA); break;
	}
	if (off + len > ARENA && len < ARENA && base != ro_page)
		len = ARENA - off;
	if (off == ARENA - 4096 && len == 4096)
		len = 8192;
	acc = pct(50) ? ACC_ALL : (int)(rnd() & (ACC_ALL | IBV_ACCESS_RELAXED_ORDERING));
	if (pct(3))
		acc = (int)rnd();
	reg_mr(p, base + off, len, acc);
}

static void op_dereg_mr(void)
{
	int m = RAND(M, NULL), e;

	if (m < 0)
		return;
	CALL("dereg_mr");
	{
		uint32_t lk = M[m].mr->lkey, rk = M[m].mr->rkey;

		e = ibv_dereg_mr(M[m].mr);
		vlog("dereg_mr %d: %s", m, e ? strerror(e) : "ok");
		if (e) {
			check_errno(e, "dereg_mr");
			return;
		}
		stale_push(lk, M[m].side);
		stale_push(rk, M[m].side);
	}
	M[m].mr = NULL;
}

static void op_destroy_qp(void)
{
	int k = RAND(Q, NULL), e;

	if (k < 0)
		return;
	CALL("destroy_qp");
	e = ibv_destroy_qp(Q[k].qp);
	vlog("destroy_qp %d: %s", k, e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "destroy_qp");
		return;
	}
	Q[k].qp = NULL;
	if (Q[k].peer >= 0)
		Q[Q[k].peer].peer = -1;
}

static void op_destroy_cq(void)
{
	int k = RAND(C, NULL), e, i;
	bool used = false;

	if (k < 0)
		return;
	for (i = 0; i < NQP; i++)
		used |= Q[i].qp && (Q[i].scq == k || Q[i].rcq == k);
	CALL("destroy_cq");
	e = ibv_destroy_cq(C[k].cq);
	vlog("destroy_cq %d: %s", k, e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "destroy_cq");
		return;
	}
	if (used)
		viol("destroy_cq succeeded on a CQ that a live QP uses");
	C[k].cq = NULL;
	/* (a QP created on another context's handle may point here) */
	for (i = 0; i < NQP; i++)
		if (Q[i].qp && (Q[i].scq == k || Q[i].rcq == k))
			Q[i].scq = Q[i].rcq = -1;
}

static void op_dealloc_pd(void)
{
	int k = RAND(P, NULL), e, i;
	bool used = false;

	if (k < 0)
		return;
	for (i = 0; i < NMR; i++)
		used |= M[i].mr && M[i].p == k;
	for (i = 0; i < NQP; i++)
		used |= Q[i].qp && Q[i].p == k;
	for (i = 0; i < NAH; i++)
		used |= A[i].ah && A[i].p == k;
	CALL("dealloc_pd");
	e = ibv_dealloc_pd(P[k].pd);
	vlog("dealloc_pd %d: %s", k, e ? strerror(e) : "ok");
	if (e) {
		check_errno(e, "dealloc_pd");
		return;
	}
	if (used)
		viol("dealloc_pd succeeded on a PD with live objects");
	P[k].pd = NULL;
}

static void op_ah(void)
{
	int k, p, e;
	struct ibv_ah_attr aa;

	k = RAND(A, NULL);
	/*
	 * Not in a forked child: the parent's AHs live in the uverbs file
	 * the child shares, a child's destroy would pull them from under the
	 * parent (its own destroy then fails ENOENT, or hits a reused handle).
	 */
	if (k >= 0 && !is_child && pct(50)) {
		CALL("destroy_ah");
		e = ibv_destroy_ah(A[k].ah);
		if (e)
			check_errno(e, "destroy_ah");
		else
			A[k].ah = NULL;
		return;
	}
	k = FREE(A);
	p = rand_ctx(-1);
	if (k < 0 || p < 0)
		return;
	p = rand_pd(p);
	if (p < 0)
		return;
	memset(&aa, 0, sizeof(aa));
	aa.is_global = pct(90);
	aa.port_num = pct(90) ? 1 : rn(4);
	aa.dlid = rn(65536);
	aa.grh.hop_limit = 64;
	aa.grh.sgid_index = pct(85) ? (uint32_t)gid_index : rn(256);
	aa.grh.dgid = X[P[p].c].d.gid;
	if (pct(50))
		aa.grh.dgid.raw[15] ^= 3;	/* the other host of rail 0 */
	CALL("create_ah");
	A[k].ah = ibv_create_ah(P[p].pd, &aa);
	if (!A[k].ah)
		check_errno(errno, "create_ah");
	A[k].p = p;
}

static void op_close_ctx(void)
{
	int c = RAND(X, NULL), e;

	if (c < 0)
		return;
	/* keep one context per side most of the time */
	want_side = X[c].side;
	if (pct(70) && RAND(X, ctx_ok) == c) {
		int i, n = 0;

		for (i = 0; i < NCTX; i++)
			n += X[i].ctx && X[i].side == X[c].side;
		if (n < 2)
			return;
	}
	CALL("close_device");
	/* channels and events: acked as they came; the channel stays open
	 * (ibv_close_device does not need it closed) */
	e = ibv_close_device(X[c].ctx);
	vlog("close ctx %d with live objects: %s", c, e ? strerror(errno) : "ok");
	if (e)
		check_errno(errno, "close_device");
	closes++;
	forget_ctx(c);
}

/* ---- fork ------------------------------------------------------------- */

static void run_ops(uint64_t n_ops, double t_end);

static void child_exit(int st)
{
	fflush(stdout);
	_exit(nviol ? 1 : st);
}

static void op_fork(void)
{
	int i, slot;
	pid_t pid;

	for (slot = 0; slot < NCHILD && child[slot]; slot++)
		;
	if (slot == NCHILD)
		return;
	fflush(stdout);
	CALL("fork");
	pid = fork();
	if (pid < 0)
		return;
	if (pid) {
		child[slot] = pid;
		forks++;
		vlog("fork: child %d", pid);
		return;
	}
	/* child */
	is_child = true;
	my_tag = TAG_CHILD | (forks & 0x3f);
	for (i = 0; i < NCTX; i++)
		X[i].mine = false;
	fork_ctr = nctr;
	nviol = 0;
	memset(child, 0, sizeof(child));
	rs ^= 0xC0FFEEull * (uint64_t)getpid();
	alarm(120);
	switch (rn(3)) {
	case 0:
		_exit(0);	/* exits at once */
	case 1:
		run_ops(20 + rn(200), 0);	/* uses the parent's objects */
		child_exit(0);
		break;
	default:
		/* builds its own objects too and exits without cleanup */
		pair_on(op_open_ctx(0), op_open_ctx(1), true);
		run_ops(10 + rn(100), 0);
		child_exit(0);
	}
}

static void reap(bool wait_all)
{
	int i, st;

	for (i = 0; i < NCHILD; i++) {
		pid_t r;

		if (!child[i])
			continue;
		if (wait_all) {
			uint64_t end = now_ms() + 150000;

			while ((r = waitpid(child[i], &st, WNOHANG)) == 0 && now_ms() < end)
				usleep(10000);
			if (!r) {
				viol("child %d still running after 150 s (hung in the kernel?)", child[i]);
				kill(child[i], SIGKILL);
				r = waitpid(child[i], &st, 0);
			}
		} else {
			if (pct(3)) {
				CALL("kill child");
				kill(child[i], SIGKILL);
			}
			r = waitpid(child[i], &st, WNOHANG);
		}
		if (r <= 0)
			continue;
		if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL)
			viol("child %d died of signal %d", child[i], WTERMSIG(st));
		else if (WIFEXITED(st) && WEXITSTATUS(st))
			viol("child %d exited with %d", child[i], WEXITSTATUS(st));
		child[i] = 0;
	}
}

/* ---- main loop ----------------------------------------------------------- */

enum {
	OP_TRAFFIC, OP_SEND, OP_RECV, OP_POLL, OP_NOTIFY, OP_MODRAND, OP_MODSTATE, OP_PAIR,
	OP_CREATE_QP, OP_DESTROY_QP, OP_CREATE_CQ, OP_DESTROY_CQ, OP_REG_MR,
	OP_DEREG_MR, OP_ALLOC_PD, OP_DEALLOC_PD, OP_QUERY, OP_RAW, OP_AH,
	OP_OPEN, OP_CLOSE, OP_FORK, OP_N
};

static const char *const op_names[OP_N] = {
	"traffic", "post_send", "post_recv", "poll_cq", "notify", "modify_qp(random)",
	"modify_qp(state)", "new pair", "create_qp", "destroy_qp", "create_cq",
	"destroy_cq", "reg_mr", "dereg_mr", "alloc_pd", "dealloc_pd", "query",
	"raw post", "ah", "open ctx", "close ctx", "fork",
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double op_secs[OP_N];
static uint64_t op_count[OP_N];

static bool have_pair(void)
{
	int i;

	for (i = 0; i < NQP; i++)
		if (Q[i].qp && Q[i].peer >= 0 && Q[i].state == IBV_QPS_RTS)
			return true;
	return false;
}

static void run_ops(uint64_t n_ops, double t_end)
{
	/* weights: the data path most, teardown and chaos now and then */
	unsigned int w[OP_N] = {
		[OP_TRAFFIC] = 150, [OP_SEND] = 200, [OP_RECV] = 60, [OP_POLL] = 250, [OP_NOTIFY] = 20,
		[OP_MODRAND] = 40, [OP_MODSTATE] = 30, [OP_PAIR] = 15,
		[OP_CREATE_QP] = 20, [OP_DESTROY_QP] = 15, [OP_CREATE_CQ] = 10,
		[OP_DESTROY_CQ] = 8, [OP_REG_MR] = 30, [OP_DEREG_MR] = 25,
		[OP_ALLOC_PD] = 5, [OP_DEALLOC_PD] = 5, [OP_QUERY] = 20,
		[OP_RAW] = 8, [OP_AH] = 5, [OP_OPEN] = 3, [OP_CLOSE] = 3,
		[OP_FORK] = 3,
	};
	uint64_t i;

	if (is_child) {
		w[OP_FORK] = 0;
		w[OP_CLOSE] = 0;
		w[OP_DESTROY_QP] = w[OP_DESTROY_CQ] = w[OP_DEALLOC_PD] = 0;
		w[OP_DEREG_MR] = 0;
	}
	for (i = 0; i < n_ops || (t_end && now_s() < t_end); i++) {
		double t;
		int op;

		if (!n_ops && !t_end)
			break;
		if (n_ops && i >= n_ops)
			break;
		if (nviol >= MAXVIOL)
			break;
		ops++;
		op = pick(w, OP_N);
		if (!have_pair() && pct(30))
			op = OP_PAIR;
		cur_op = op_names[op];
		t = now_s();
		switch (op) {
		case OP_TRAFFIC: op_traffic(); break;
		case OP_SEND: op_post_send(true); break;
		case OP_RECV: op_post_recv(); break;
		case OP_POLL: op_poll(-1); break;
		case OP_NOTIFY: op_notify_and_events(); break;
		case OP_MODRAND: op_modify_random(); break;
		case OP_MODSTATE: op_modify_state(); break;
		case OP_PAIR: op_new_pair(pct(60)); break;
		case OP_CREATE_QP: {
			int c = rand_ctx(-1);

			if (c >= 0)
				op_create_qp(c, false);
			break;
		}
		case OP_DESTROY_QP: op_destroy_qp(); break;
		case OP_CREATE_CQ: op_create_cq(rand_ctx(-1), false); break;
		case OP_DESTROY_CQ: op_destroy_cq(); break;
		case OP_REG_MR: op_reg_mr(); break;
		case OP_DEREG_MR: op_dereg_mr(); break;
		case OP_ALLOC_PD: op_alloc_pd(rand_ctx(-1)); break;
		case OP_DEALLOC_PD: op_dealloc_pd(); break;
		case OP_QUERY: op_query(); break;
		case OP_RAW: op_raw_post(); break;
		case OP_AH: op_ah(); break;
		case OP_OPEN: op_open_ctx(rn(2)); break;
		case OP_CLOSE: op_close_ctx(); break;
		case OP_FORK: op_fork(); break;
		}
		op_secs[op] += now_s() - t;
		op_count[op]++;
		if (!is_child && (ops & 15) == 0)
			reap(false);
		if (verbose)
			fflush(stdout);
	}
}

static void cleanup(void)
{
	int i, e;

	cur_op = "cleanup";
	for (i = 0; i < NQP; i++)
		if (Q[i].qp) {
			CALL("destroy_qp (cleanup)");
			if ((e = ibv_destroy_qp(Q[i].qp)))
				viol("cleanup: destroy_qp failed: %s", strerror(e));
			Q[i].qp = NULL;
		}
	for (i = 0; i < NAH; i++)
		if (A[i].ah) {
			CALL("destroy_ah (cleanup)");
			if ((e = ibv_destroy_ah(A[i].ah)))
				viol("cleanup: destroy_ah failed: %s", strerror(e));
		}
	for (i = 0; i < NMR; i++)
		if (M[i].mr) {
			CALL("dereg_mr (cleanup)");
			if ((e = ibv_dereg_mr(M[i].mr)))
				viol("cleanup: dereg_mr failed: %s", strerror(e));
		}
	for (i = 0; i < NCQ; i++)
		if (C[i].cq) {
			CALL("destroy_cq (cleanup)");
			if ((e = ibv_destroy_cq(C[i].cq)))
				viol("cleanup: destroy_cq failed: %s", strerror(e));
		}
	for (i = 0; i < NPD; i++)
		if (P[i].pd) {
			CALL("dealloc_pd (cleanup)");
			if ((e = ibv_dealloc_pd(P[i].pd))) {
				viol("cleanup: dealloc_pd %d (context %d) failed: %s",
				     i, P[i].c, strerror(e));
				/* what is still in it, as the kernel sees it */
				fflush(stdout);
				if (system("rdma resource show qp; rdma resource show mr; rdma resource show cq; rdma resource show pd") < 0)
					perror("system");
			}
		}
	for (i = 0; i < NCTX; i++) {
		if (!X[i].ctx)
			continue;
		if (X[i].ch) {
			CALL("destroy_comp_channel (cleanup)");
			if ((e = ibv_destroy_comp_channel(X[i].ch)))
				viol("cleanup: destroy_comp_channel failed: %s", strerror(errno));
		}
		CALL("close_device (cleanup)");
		if (ibv_close_device(X[i].ctx))
			viol("cleanup: close_device failed: %s", strerror(errno));
	}
}

/*
 * An arena and, after it, a page nobody may touch: the "past the end" MR
 * (op_reg_mr) must fail, not cover whatever the process mapped next,
 * where traffic into it would overwrite the process's own data (the likely
 * cause of a SIGSEGV in ibv_dealloc_pd once, seed 15260148822499).
 */
static char *map_arena(void)
{
	char *a = mmap(NULL, ARENA + 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (a != MAP_FAILED && mprotect(a + ARENA, 4096, PROT_NONE)) {
		munmap(a, ARENA + 4096);
		return MAP_FAILED;
	}
	return a;
}

static void on_alarm(int sig)
{
	char b[256];
	int n;

	(void)sig;
	n = snprintf(b, sizeof(b), "VIOLATION%s (seed %" PRIu64 "): hung for too long in call %" PRIu64 " (%s)\n",
		     is_child ? " in child" : "", seed, calls, cur_op);
	if (write(1, b, n) < 0)
		_exit(4);
	_exit(3);
}

static void on_crash(int sig, siginfo_t *si, void *uc)
{
	char b[256];
	int n;

	(void)uc;
	n = snprintf(b, sizeof(b), "VIOLATION%s (seed %" PRIu64 "): fuzzer crashed (signal %d, address %p) in call %" PRIu64 " (%s)\n",
		     is_child ? " in child" : "", seed, sig, si->si_addr, calls, cur_op);
	if (write(1, b, n) < 0)
		_exit(4);
	raise(sig);
}

int main(int argc, char **argv)
{
	uint64_t ncalls = 0;
	double secs = 0, t0;
	bool seeded = false, no_cleanup;
	int c;

	devname[0] = devname[1] = NULL;
	while ((c = getopt(argc, argv, "d:D:g:s:n:t:u:vh")) != -1) {
		switch (c) {
		case 'd': devname[0] = optarg; break;
		case 'D': devname[1] = optarg; break;
		case 'g': gid_index = atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); seeded = true; break;
		case 'n': ncalls = strtoull(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'u': ack_timeout = atoi(optarg); break;
		case 'v': verbose = true; break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-D PEER_DEV] [-g GID_INDEX] [-s SEED] [-n CALLS | -t SECONDS] [-u ACK_TIMEOUT] [-v]\n",
				argv[0]);
			return 2;
		}
	}
	if (!devname[0]) {
		fprintf(stderr, "%s: -d DEV required\n", argv[0]);
		return 2;
	}
	if (!devname[1])
		devname[1] = devname[0];
	if (!seeded) {
		FILE *f = fopen("/dev/urandom", "r");

		if (!f || fread(&seed, sizeof(seed), 1, f) != 1)
			seed = now_ms();
		if (f)
			fclose(f);
		seed &= 0xffffffffffffull;
	}
	if (!ncalls && !secs)
		ncalls = 2000;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ncalls)
		printf("# rbond_fuzz seed=%" PRIu64 " dev=%s peer=%s calls=%" PRIu64 "\n",
		       seed, devname[0], devname[1], ncalls);
	else
		printf("# rbond_fuzz seed=%" PRIu64 " dev=%s peer=%s seconds=%g\n",
		       seed, devname[0], devname[1], secs);
	rs = seed;
	no_cleanup = (seed % 3) == 0;

	signal(SIGALRM, on_alarm);
	{
		struct sigaction sa = { .sa_sigaction = on_crash,
					.sa_flags = SA_SIGINFO | SA_RESETHAND };

		sigaction(SIGSEGV, &sa, NULL);
		sigaction(SIGBUS, &sa, NULL);
		sigaction(SIGABRT, &sa, NULL);
		sigaction(SIGFPE, &sa, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
	alarm((unsigned int)(secs ? secs : 600) + 300);

	arena[0] = map_arena();
	arena[1] = map_arena();
	ro_page = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena[0] == MAP_FAILED || arena[1] == MAP_FAILED || ro_page == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	memset(arena[0], 0x5a, ARENA);
	memset(arena[1], 0xa5, ARENA);

	if (op_open_ctx(0) < 0 || op_open_ctx(1) < 0) {
		printf("# cannot open %s / %s\n", devname[0], devname[1]);
		return 2;
	}
	CALL("query_device");
	if ((c = ibv_query_device(X[0].ctx, &DA))) {
		printf("# query_device: %s\n", strerror(c));
		return 2;
	}
	printf("# %s: max_qp_wr %d max_sge %d max_sge_rd %d max_cqe %d max_qp_rd_atom %d\n",
	       devname[0], DA.max_qp_wr, DA.max_sge, DA.max_sge_rd, DA.max_cqe,
	       DA.max_qp_rd_atom);
	op_new_pair(true);

	t0 = now_s();
	if (ncalls) {
		while (calls < ncalls && nviol < MAXVIOL)
			run_ops(1, 0);
	} else {
		run_ops(0, t0 + secs);
	}
	reap(true);
	if (no_cleanup) {
		printf("# exit without cleanup (seed %% 3 == 0)\n");
	} else {
		cleanup();
	}
	printf("# seed %" PRIu64 ": %" PRIu64 " calls (%" PRIu64 " ops) in %.1f s, %" PRIu64
	       " WRs posted, %" PRIu64 " completions (%" PRIu64 " in error), %" PRIu64
	       " forks, %" PRIu64 " context closes, %" PRIu64 " violations\n",
	       seed, calls, ops, now_s() - t0, wrs_posted, wcs, wc_errs, forks,
	       closes, nviol);
	printf("# time per op (count, ms):");
	for (c = 0; c < OP_N; c++)
		if (op_count[c])
			printf(" %s %" PRIu64 " %.0f;", op_names[c], op_count[c],
			       op_secs[c] * 1000);
	printf("\n");
	if (nviol)
		printf("# reproduce: %s -d %s -D %s -g %d -u %d -s %" PRIu64 " -n %" PRIu64 "\n",
		       argv[0], devname[0], devname[1], gid_index, ack_timeout,
		       seed, calls);
	fflush(stdout);
	_exit(nviol ? 1 : 0);
}
