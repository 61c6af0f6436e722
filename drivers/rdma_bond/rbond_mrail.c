// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: multi-rail.
 *
 * Negotiation: when a bond QP reaches RTR, its work item (rbond_wq) creates
 * one member QP per extra rail, connects the control channel from its home
 * rail address to the peer's primary address, and sends QP_REQ naming the
 * peer bond QP by (connection = primary GID, dst_qpn = the dest_qp_num the
 * application set).  The peer module answers with its own member QPNs,
 * PSNs and rail addresses once its QP is at RTR and connected back to us
 * (authentication by the connection).  Each side pairs each local rail
 * with the peer rail that the routing table reaches through that rail's
 * netdev and brings its member QPs to RTR/RTS with the application's
 * attributes.  A side uses its extra rails only after a positive QP_RSP
 * (the peer's members are at RTR towards ours), and switches to the
 * multi-rail data path at an idle point of its send queue.
 *
 * Remote keys: a per-connection cache maps the peer's primary rkey to its
 * per-rail rkeys, access flags and relaxed-ordering flag; a miss queues an
 * RKEY_REQ while the WQE goes out on the home rail.  The owner remembers
 * which connection got which key; dereg_mr sends INVAL and waits (bounded)
 * for INVAL_ACK, which the holder sends after dropping the entry and an RCU
 * grace period (every post that could have used it finished).  On timeout
 * the owner forces its own extra-rail member QPs towards that peer to the
 * error state, so the alias keys can no longer reach memory.
 *
 * Ordering: see rbond_mrail_decide().  Locks: mq->lock (mutex, the work) ->
 * bond->lock -> ...; rbond_mq_mutex (registry) -> bond->lock; data-path
 * state of the QP under qp->sq_lock.
 */
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_cm.h>
#include <rdma/rdma_netlink.h>

#include "rbond_ctrl.h"
#include "rbond_sched.h"

bool rbond_multirail = true;
module_param_named(multirail, rbond_multirail, bool, 0644);
MODULE_PARM_DESC(multirail,
		 "Negotiate extra rails with bond peers for QPs created while set (default on)");

static unsigned int rbond_upgrade_wait_ms = 1000;
module_param_named(upgrade_wait_ms, rbond_upgrade_wait_ms, uint, 0644);
MODULE_PARM_DESC(upgrade_wait_ms,
		 "How long modify_qp(RTS) waits for the extra rails (ms, default 1000, 0: not at all)");

struct rbond_mstats rbond_mstats;

#define RBOND_MQ_RETRY_MS	200
#define RBOND_MQ_MAX_TRIES	50
#define RBOND_RKEY_MAX		1024
#define RBOND_RKEY_RETRY	(HZ / 2)
#define RBOND_RKEY_TRIES	8
#define RBOND_RKEY_NEG_TTL	(10 * HZ)	/* a refused key is asked again */
#define RBOND_INVAL_TIMEOUT	(2 * HZ)
#define RBOND_RAIL_PEND		0xff

enum rbond_mstate {
	RBOND_M_NONE,
	RBOND_M_INIT,
	RBOND_M_RTR,
	RBOND_M_RTS,
	RBOND_M_ERR,
};

struct rbond_member_qp {
	struct ib_qp *qp;
	u32 psn;
	u8 state;		/* enum rbond_mstate */
	s8 peer;		/* index into peer rails, -1 unpaired */
	bool published;		/* owned by qp->member[] */
	__be32 addr;
};

struct rbond_pend {
	u32 seq;
	int num_sge;
	u64 bytes;
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
	} wr;
	struct ib_sge sge[RBOND_MAX_SGE];
};

struct rbond_mqp {
	struct rbond_qp *qp;
	struct rbond_dev *bond;
	struct hlist_node hnode;	/* rbond_mq_hash, rbond_mq_mutex */
	bool registered;
	struct ib_device *home_dev;
	struct mutex lock;		/* the work's state */
	struct delayed_work work;
	struct work_struct fail_work;	/* members to error, see qp_failed */
	bool dead;
	bool sized;			/* counted in its CQs' mrail_wr */

	spinlock_t attr_lock;		/* app attrs, inbox */
	struct ib_qp_attr app;
	int app_mask;
	bool have_rtr, have_rts;
	__be32 peer_addr;
	u32 peer_qpn;
	u8 nonce[8];			/* ours, random, constant */
	/* inbox from the control channel */
	bool req_pending;
	struct rbond_conn *req_conn;
	struct rbond_msg req;
	bool rsp_pending;
	struct rbond_conn *rsp_conn;
	struct rbond_msg rsp;
	/* the peer QP's nonce (attr_lock to write; set once) */
	bool have_peer_nonce;
	u8 peer_nonce[8];

	/* work state (mq->lock) */
	struct rbond_conn *conn;	/* our active connection */
	unsigned int tries;
	bool rsp_ok, gave_up, created;
	wait_queue_head_t up_wq;	/* up or gave_up: rbond_mrail_wait_up() */
	bool have_peer;
	u8 peer_nrails;
	struct rbond_msg_rail peer_rail[RBOND_MAX_RAILS];
	struct rbond_member_qp m[RBOND_MAX_RAILS];

	/* data path (qp->sq_lock) */
	bool want_up;
	bool up;
	struct rbond_sched s;		/* rbond_sched.c */
	u32 up_seq;
	struct rbond_pend *pend;
	u32 pend_head, pend_tail, pend_size;
	/* a waiting inline WQE's data, per pend slot (rbond_inl_stride) */
	u8 *pend_inl;
};

struct rbond_rkey {
	struct hlist_node node;
	struct rcu_head rcu;
	u32 rkey;
	u32 src_qpn, dst_qpn;
	u8 echo[8];		/* the owner QP's nonce, for RKEY_REQ */
	u8 state;
	u8 tries;
	bool relaxed;
	u8 rail_valid;
	u32 access;
	unsigned long stamp;
	u32 rail_rkey[RBOND_MAX_RAILS];
};

enum { RBOND_RK_PENDING, RBOND_RK_SENT, RBOND_RK_VALID, RBOND_RK_NEG };

struct rbond_handed {
	struct hlist_node node;
	u32 rkey;
	struct rbond_mr *mr;
};

struct rbond_invw {
	struct list_head list;
	u32 rkey;
	bool done;
};

static DEFINE_MUTEX(rbond_mq_mutex);
static DEFINE_HASHTABLE(rbond_mq_hash, 8);
static DECLARE_WAIT_QUEUE_HEAD(rbond_inval_wq);

static u32 rbond_inl_stride(const struct rbond_qp *qp)
{
	return ALIGN(qp->cap.max_inline_data, 8);
}

static inline u64 rbond_mr_wrid(const struct rbond_qp *qp, u32 seq)
{
	return ((u64)qp->id << RBOND_WRID_ID_SHIFT) | seq;
}

static int rbond_mstats_get(char *buf, const struct kernel_param *kp)
{
	struct rbond_mstats *s = &rbond_mstats;

	return sysfs_emit(buf,
			  "probes_failed %lld\nqp_up %lld\nrkey_hits %lld\nrkey_misses %lld\nrkey_invals %lld\ninval_timeouts %lld\nbad_msgs %lld\nstriped %lld\nchunks %lld\nwaits %lld\nqp_failed %lld\n",
			  atomic64_read(&s->probes_failed),
			  atomic64_read(&s->qp_up),
			  atomic64_read(&s->rkey_hits),
			  atomic64_read(&s->rkey_misses),
			  atomic64_read(&s->rkey_invals),
			  atomic64_read(&s->inval_timeouts),
			  atomic64_read(&s->bad_msgs),
			  atomic64_read(&s->striped),
			  atomic64_read(&s->chunks),
			  atomic64_read(&s->waits),
			  atomic64_read(&s->qp_failed));
}

static const struct kernel_param_ops rbond_mstats_ops = {
	.get = rbond_mstats_get,
};

module_param_cb(mrail_stats, &rbond_mstats_ops, NULL, 0444);
MODULE_PARM_DESC(mrail_stats, "Multi-rail counters (read only)");

static __be32 rbond_gid_ipv4(const u8 *gid)
{
	const struct in6_addr *a = (const struct in6_addr *)gid;

	return ipv6_addr_v4mapped(a) ? a->s6_addr32[3] : 0;
}

/* --- registry -------------------------------------------------------------- */

static struct rbond_mqp *rbond_mq_find(struct ib_device *dev, u32 qpn)
{
	struct rbond_mqp *mq;

	lockdep_assert_held(&rbond_mq_mutex);
	hash_for_each_possible(rbond_mq_hash, mq, hnode, qpn)
		if (mq->registered && mq->home_dev == dev &&
		    mq->qp->ibqp.qp_num == qpn)
			return mq;
	return NULL;
}

static void rbond_mq_kick(struct rbond_mqp *mq, unsigned long delay)
{
	mod_delayed_work(rbond_wq, &mq->work, delay);
}

/* --- QP hooks --------------------------------------------------------------- */

static void rbond_mq_work(struct work_struct *work);
static void rbond_mq_fail_work(struct work_struct *work);

/* The QP no longer counts for its CQs' member sizes.  bond->lock held. */
static void rbond_mrail_unsize(struct rbond_qp *qp, struct rbond_mqp *mq)
{
	if (!mq->sized)
		return;
	qp->scq->mrail_wr -= qp->slot_cap;
	qp->rcq->mrail_wr -= qp->cap.max_recv_wr;
	mq->sized = false;
}

void rbond_mrail_qp_create(struct rbond_qp *qp)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	__be32 addrs[RBOND_MAX_RAILS] = {};
	struct rbond_mqp *mq;
	unsigned int i, n = 0;

	if (!READ_ONCE(rbond_multirail))
		return;
	mq = kzalloc(sizeof(*mq), GFP_KERNEL);
	if (!mq)
		return;		/* single-rail */
	mq->qp = qp;
	mq->bond = bond;
	get_random_bytes(mq->nonce, sizeof(mq->nonce));
	mq->s.bond = bond;
	mq->s.home = qp->home;
	mq->s.qpn = qp->ibqp.qp_num;
	mutex_init(&mq->lock);
	spin_lock_init(&mq->attr_lock);
	INIT_DELAYED_WORK(&mq->work, rbond_mq_work);
	INIT_WORK(&mq->fail_work, rbond_mq_fail_work);
	init_waitqueue_head(&mq->up_wq);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		mq->m[i].peer = -1;

	mutex_lock(&bond->lock);
	mq->home_dev = bond->rails[qp->home].ibdev;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!rbond_rail_present(bond, i))
			continue;
		addrs[i] = rbond_ndev_ipv4(bond->rails[i].ndev);
		n++;
	}
	if (n >= 2) {
		/* member CQs for all-signaled member WQEs (rbond_cq_fit) */
		qp->scq->mrail_wr += qp->slot_cap;
		qp->rcq->mrail_wr += qp->cap.max_recv_wr;
		mq->sized = true;
		if (rbond_cq_fit(qp->scq) || rbond_cq_fit(qp->rcq)) {
			rbond_mrail_unsize(qp, mq);
			n = 0;		/* stays single-rail */
		}
	}
	mutex_unlock(&bond->lock);
	if (n < 2) {
		kfree(mq);
		return;
	}
	/* Listeners first: the peer may ask as soon as it knows our QPN. */
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_ctrl_listen(addrs[i]);

	qp->mrail = mq;
	mutex_lock(&rbond_mq_mutex);
	hash_add(rbond_mq_hash, &mq->hnode, qp->ibqp.qp_num);
	mq->registered = true;
	mutex_unlock(&rbond_mq_mutex);
}

/*
 * modify_qp (bond->lock held, the home member modified): the extra-rail
 * members follow the application's error state and access rights, so that
 * a QP moved to error or stripped of remote access no longer gives the
 * peer access over the other rails either.  Never atomics (see
 * rbond_mq_create_members).  A member that cannot take the new rights
 * (no such transition in its state) goes to error if rights were revoked
 * (@old: the application's rights before).
 */
static void rbond_mrail_mirror(struct rbond_qp *qp,
			       const struct ib_qp_attr *attr, int mask,
			       int old)
{
	struct rbond_mqp *mq = qp->mrail;
	struct ib_qp_attr a = {};
	bool revoke = false;
	unsigned int i;
	int ret;

	if ((mask & IB_QP_STATE) && attr->qp_state == IB_QPS_ERR) {
		a.qp_state = IB_QPS_ERR;
		mask = IB_QP_STATE;
	} else if ((mask & IB_QP_ACCESS_FLAGS) &&
		   attr->qp_access_flags != old) {
		a.qp_access_flags = attr->qp_access_flags &
				    ~IB_ACCESS_REMOTE_ATOMIC;
		mask = IB_QP_ACCESS_FLAGS;
		revoke = old & ~attr->qp_access_flags;
	} else {
		return;
	}
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];
		struct ib_qp *mqp = m->published ? qp->member[i] : m->qp;

		if (i == qp->home || !mqp || m->state == RBOND_M_ERR)
			continue;
		ret = ib_modify_qp(mqp, &a, mask);
		if (ret && mask == IB_QP_ACCESS_FLAGS && !revoke)
			continue;	/* keeps what it had, no more */
		if (ret && mask == IB_QP_ACCESS_FLAGS) {
			a.qp_state = IB_QPS_ERR;
			ret = ib_modify_qp(mqp, &a, IB_QP_STATE);
			a.qp_state = 0;
			m->state = RBOND_M_ERR;
		}
		if (ret)
			ibdev_dbg(&mq->bond->ibdev,
				  "QP 0x%x: rail %u: mirror 0x%x failed: %d\n",
				  qp->ibqp.qp_num, i, mask, ret);
		if (mask == IB_QP_STATE)
			m->state = RBOND_M_ERR;
	}
}

/* From modify_qp (bond->lock held): remember the application's attributes. */
void rbond_mrail_qp_modified(struct rbond_qp *qp, const struct ib_qp_attr *attr,
			     int mask)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned long flags;
	bool kick = false;
	int old_access;

	if (!mq)
		return;
	spin_lock_irqsave(&mq->attr_lock, flags);
	old_access = mq->app.qp_access_flags;
	if (mask & IB_QP_ACCESS_FLAGS)
		mq->app.qp_access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PATH_MTU)
		mq->app.path_mtu = attr->path_mtu;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		mq->app.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		mq->app.min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_TIMEOUT)
		mq->app.timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		mq->app.retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		mq->app.rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		mq->app.max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_DEST_QPN)
		mq->peer_qpn = attr->dest_qp_num;
	if (mask & IB_QP_AV) {
		mq->app.ah_attr.grh.traffic_class =
			attr->ah_attr.grh.traffic_class;
		if (attr->ah_attr.ah_flags & IB_AH_GRH)
			mq->peer_addr =
				rbond_gid_ipv4(attr->ah_attr.grh.dgid.raw);
	}
	mq->app_mask |= mask;
	if ((mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTR) {
		mq->have_rtr = true;
		kick = true;
	}
	if ((mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTS) {
		mq->have_rts = true;
		kick = true;
	}
	spin_unlock_irqrestore(&mq->attr_lock, flags);
	rbond_mrail_mirror(qp, attr, mask, old_access);
	if (kick)
		rbond_mq_kick(mq, 0);
}

/* mq->lock, which orders before bond->lock, for modify_qp(RESET) */
void rbond_mrail_lock(struct rbond_qp *qp)
{
	if (qp->mrail)
		mutex_lock(&qp->mrail->lock);
}

void rbond_mrail_unlock(struct rbond_qp *qp)
{
	if (qp->mrail)
		mutex_unlock(&qp->mrail->lock);
}

/*
 * modify_qp(RESET) (mq->lock and bond->lock held; the shadow queues are
 * empty, the published extra-rail members destroyed by rbond_qp_reset()):
 * back to a QP that has not negotiated, so that one connected again
 * (maybe to another peer) renegotiates from scratch - new members, new
 * control connection, nothing of the old peer's.
 */
/*
 * RESET, the send queue's part (sq_post_lock and sq_lock held, the shadow
 * queue just emptied): back to the home rail, nothing waiting, nothing in
 * flight.
 */
void rbond_mrail_qp_reset_sq(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	lockdep_assert_held(&qp->sq_lock);
	if (!mq)
		return;
	WRITE_ONCE(mq->up, false);
	mq->want_up = false;
	mq->pend_tail = mq->pend_head;
	rbond_sched_release(&mq->s);
	mq->s.rails_up = 0;
	memset(mq->s.inflight_cl, 0, sizeof(mq->s.inflight_cl));
	memset(mq->s.rd_inflight, 0, sizeof(mq->s.rd_inflight));
}

/* RESET, the rest (after rbond_mrail_qp_reset_sq, no spinlock held). */
void rbond_mrail_qp_reset(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_conn *conn, *req_conn, *rsp_conn;
	unsigned long flags;
	unsigned int i;

	if (!mq)
		return;

	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (m->qp && !m->published)
			ib_destroy_qp(m->qp);
		memset(m, 0, sizeof(*m));
		m->peer = -1;
	}
	mq->created = false;
	mq->rsp_ok = false;
	mq->have_peer = false;
	mq->peer_nrails = 0;
	mq->tries = 0;
	conn = mq->conn;
	mq->conn = NULL;
	WRITE_ONCE(mq->gave_up, false);

	spin_lock_irqsave(&mq->attr_lock, flags);
	mq->have_rtr = false;
	mq->have_rts = false;
	mq->peer_addr = 0;
	mq->peer_qpn = 0;
	mq->req_pending = false;
	mq->rsp_pending = false;
	req_conn = mq->req_conn;
	mq->req_conn = NULL;
	rsp_conn = mq->rsp_conn;
	mq->rsp_conn = NULL;
	/* a new connection, new nonces: the old peer's echo is void */
	mq->have_peer_nonce = false;
	memset(mq->peer_nonce, 0, sizeof(mq->peer_nonce));
	get_random_bytes(mq->nonce, sizeof(mq->nonce));
	spin_unlock_irqrestore(&mq->attr_lock, flags);
	rbond_conn_put(conn);
	rbond_conn_put(req_conn);
	rbond_conn_put(rsp_conn);
}

/* Before destroy: nothing of ours may touch the QP afterwards. */
void rbond_mrail_qp_destroy(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	unsigned int i;

	if (!mq)
		return;
	mutex_lock(&rbond_mq_mutex);
	if (mq->registered)
		hash_del(&mq->hnode);
	mq->registered = false;
	mutex_unlock(&rbond_mq_mutex);
	cancel_delayed_work_sync(&mq->work);
	mutex_lock(&mq->lock);
	WRITE_ONCE(mq->dead, true);	/* also: no new fail_work */
	mutex_unlock(&mq->lock);

	mutex_lock(&bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (mq->m[i].qp && !mq->m[i].published)
			ib_destroy_qp(mq->m[i].qp);
		mq->m[i].qp = NULL;
	}
	mutex_unlock(&bond->lock);
}

void rbond_mrail_qp_free(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	if (!mq)
		return;
	/*
	 * Only now: the QP is out of qp_xa and its CQs' locks were taken
	 * since, so no completion is being processed that could queue the
	 * work again (rbond_mrail_qp_failed).
	 */
	cancel_work_sync(&mq->fail_work);
	mutex_lock(&mq->bond->lock);
	rbond_mrail_unsize(qp, mq);
	mutex_unlock(&mq->bond->lock);
	qp->mrail = NULL;
	rbond_sched_release(&mq->s);
	rbond_conn_put(mq->conn);
	rbond_conn_put(mq->req_conn);
	rbond_conn_put(mq->rsp_conn);
	kvfree(mq->pend);
	kvfree(mq->pend_inl);
	kfree(mq);
}

/* bond->lock held: @rail's member device goes away. */
void rbond_mrail_qp_remove_rail(struct rbond_qp *qp, unsigned int rail)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned long flags;

	if (!mq)
		return;
	/* no WQE goes to @rail from now on (rbond_sched_pick, post_slot) */
	spin_lock_irqsave(&qp->sq_lock, flags);
	mq->s.rails_up &= ~BIT(rail);
	if (rail == qp->home) {
		/* the QP is lost: nothing waiting is posted any more */
		mq->s.rails_up = 0;
		mq->pend_tail = mq->pend_head;
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (mq->m[rail].qp && !mq->m[rail].published)
		ib_destroy_qp(mq->m[rail].qp);
	mq->m[rail].qp = NULL;
	mq->m[rail].state = RBOND_M_ERR;
}

/*
 * RC after an error: the QP is in error and every later WQE completes with
 * a flush error.  The completion path (rbond_qp.c) flushes in posting order
 * from the first error it delivers; here every member QP (home and extra
 * rails: the failed rail may not be the home rail) goes to error too, so
 * the receive queue flushes, query_qp says so, and new WQEs (posted on the
 * home rail from now on) flush.  Runs once everything posted before the
 * failed WQE has completed: no earlier WQE is flushed by it.
 */
static void rbond_mq_fail_work(struct work_struct *work)
{
	struct rbond_mqp *mq = container_of(work, struct rbond_mqp, fail_work);
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct rbond_qp *qp = mq->qp;
	unsigned int i;
	int ret;

	mutex_lock(&mq->bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!qp->member[i])
			continue;
		ret = ib_modify_qp(qp->member[i], &attr, IB_QP_STATE);
		if (ret)
			ibdev_dbg(&mq->bond->ibdev,
				  "QP 0x%x: rail %u to error: %d\n",
				  qp->ibqp.qp_num, i, ret);
	}
	qp->state = IB_QPS_ERR;
	mutex_unlock(&mq->bond->lock);
}

/* sq_lock held: the first error completion was just delivered. */
void rbond_mrail_qp_failed(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_swqe *e;
	struct rbond_pend *p;

	if (!mq)
		return;		/* single rail: the member QP flushes itself */
	/* Waiting WQEs were posted after the failed one: never posted now. */
	while (mq->pend_tail != mq->pend_head) {
		p = &mq->pend[mq->pend_tail++ & (mq->pend_size - 1)];
		e = &qp->sq[p->seq & (qp->sq_size - 1)];
		e->status = IB_WC_WR_FLUSH_ERR;
		e->flags |= RBOND_SWQE_DONE;
	}
	atomic64_inc(&rbond_mstats.qp_failed);
	if (!READ_ONCE(mq->dead))	/* destroy_qp cancels it later */
		queue_work(system_unbound_wq, &mq->fail_work);
}

/*
 * Process context, no lock held, right after the application moved the QP
 * to RTS: give the negotiation a bounded chance to finish before the first
 * WQE.  Otherwise every WQE posted before it finishes runs on the home rail
 * (the upgrade ramp), which for an application that posts its whole
 * transfer at once (perftest with a deep queue) is all of it.  A peer that
 * is not a bond gives up at once (negative cache) or within the wait; one
 * whose QP is not yet at RTR (it connects after us) costs at most the wait.
 */
void rbond_mrail_wait_up(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	if (!mq || !READ_ONCE(rbond_upgrade_wait_ms))
		return;
	wait_event_killable_timeout(mq->up_wq, READ_ONCE(mq->up) ||
				    READ_ONCE(mq->gave_up),
				    msecs_to_jiffies(READ_ONCE(rbond_upgrade_wait_ms)));
}

/* The data path switches to the rails (sq_lock held, any context). */
static void rbond_mq_set_up(struct rbond_mqp *mq)
{
	WRITE_ONCE(mq->up, true);
	wake_up_all(&mq->up_wq);
}

/* The QP stays single-rail (mq->lock held). */
static void rbond_mq_give_up(struct rbond_mqp *mq)
{
	WRITE_ONCE(mq->gave_up, true);
	wake_up_all(&mq->up_wq);
}

bool rbond_mrail_active(const struct rbond_qp *qp)
{
	return qp->mrail && READ_ONCE(qp->mrail->up);
}

/* --- member QPs (work, mq->lock and bond->lock held) ------------------------ */

static void rbond_member_event(struct ib_event *ev, void *ctx)
{
	pr_debug("rdma_bond: extra-rail member QP event %d\n", ev->event);
}

static int rbond_mq_create_members(struct rbond_mqp *mq)
{
	struct rbond_dev *bond = mq->bond;
	struct rbond_qp *qp = mq->qp;
	struct ib_qp_attr attr = {};
	unsigned int i;
	int n = 0;

	if (qp->state == IB_QPS_ERR)
		return 0;	/* went to error before we got here */
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];
		struct ib_qp_init_attr init = {};
		struct ib_qp *mqp;

		if (i == qp->home || !rbond_rail_present(bond, i) ||
		    m->qp || m->state == RBOND_M_ERR)
			continue;
		if (!qp->pd->member[i] || !qp->scq->member[i] ||
		    !qp->rcq->member[i])
			continue;
		m->addr = rbond_ndev_ipv4(bond->rails[i].ndev);
		if (!m->addr)
			continue;
		init.qp_type = IB_QPT_RC;
		init.send_cq = qp->scq->member[i];
		init.recv_cq = qp->rcq->member[i];
		init.qp_context = qp;
		init.event_handler = rbond_member_event;
		init.sq_sig_type = IB_SIGNAL_REQ_WR;
		init.cap.max_send_wr = qp->slot_cap;
		init.cap.max_send_sge = qp->cap.max_send_sge;
		init.cap.max_inline_data = qp->cap.max_inline_data;
		init.cap.max_recv_wr = 1;
		init.cap.max_recv_sge = 1;
		init.port_num = bond->rails[i].port;
		mqp = ib_create_qp(qp->pd->member[i], &init);
		if (IS_ERR(mqp)) {
			m->state = RBOND_M_ERR;
			continue;
		}
		attr.qp_state = IB_QPS_INIT;
		attr.pkey_index = 0;
		attr.port_num = bond->rails[i].port;
		/*
		 * Never atomics: a peer atomic on an extra rail would not be
		 * atomic with respect to those on the home rail.
		 */
		attr.qp_access_flags = ((mq->app_mask & IB_QP_ACCESS_FLAGS) ?
			mq->app.qp_access_flags :
			IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ) &
			~IB_ACCESS_REMOTE_ATOMIC;
		if (ib_modify_qp(mqp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
				 IB_QP_PORT | IB_QP_ACCESS_FLAGS)) {
			ib_destroy_qp(mqp);
			m->state = RBOND_M_ERR;
			continue;
		}
		m->qp = mqp;
		m->psn = get_random_u32() & 0xffffff;
		m->state = RBOND_M_INIT;
		n++;
	}
	return n;
}

struct rbond_resolve_ctx {
	struct completion comp;
	int status;
};

static void rbond_resolve_cb(int status, struct sockaddr *src,
			     struct rdma_dev_addr *addr, void *context)
{
	struct rbond_resolve_ctx *ctx = context;

	ctx->status = status;
	complete(&ctx->comp);
}

/*
 * Neighbour resolution of a peer rail address (blocks up to 1 s, the peer
 * chooses the address): no lock held.  Out of the rail's netdev, like
 * resolution by its GID would (set_addr_netns_by_gid_rcu()).
 */
static int rbond_resolve_dmac(int ifindex, __be32 saddr, __be32 daddr,
			      u8 *dmac, int *hoplimit)
{
	struct sockaddr_in src = { .sin_family = AF_INET,
				   .sin_addr.s_addr = saddr };
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_addr.s_addr = daddr };
	struct rdma_dev_addr dev_addr = {};
	struct rbond_resolve_ctx ctx;
	int ret;

	dev_addr.net = &init_net;
	dev_addr.bound_dev_if = ifindex;
	init_completion(&ctx.comp);
	ret = rdma_resolve_ip((struct sockaddr *)&src,
			      (struct sockaddr *)&dst, &dev_addr, 1000,
			      rbond_resolve_cb, false, &ctx);
	if (ret)
		return ret;
	wait_for_completion(&ctx.comp);
	if (ctx.status)
		return ctx.status;
	memcpy(dmac, dev_addr.dst_dev_addr, ETH_ALEN);
	*hoplimit = dev_addr.hoplimit;
	return 0;
}

/*
 * How to bring one member QP to RTR, worked out under bond->lock, its
 * neighbour resolved without it (rbond_mq_resolve()).
 */
struct rbond_rtr_plan {
	s8 peer;		/* index into mq->peer_rail, -1: nothing to do */
	bool resolved;
	int ifindex;
	__be32 daddr;
	int hop;
	u8 dmac[ETH_ALEN];
};

/* Pair rail @i with a peer rail reachable through its netdev. */
static int rbond_mq_pair(struct rbond_mqp *mq, unsigned int i,
			 unsigned long used)
{
	struct rbond_dev *bond = mq->bond;
	unsigned int j, k;

	for (k = 0; k < RBOND_MAX_RAILS; k++)
		if (k != i && mq->m[k].peer >= 0)
			used |= BIT(mq->m[k].peer);
	for (j = 1; j < mq->peer_nrails; j++) {
		__be32 pa = rbond_gid_ipv4(mq->peer_rail[j].gid);

		if (!pa || (used & BIT(j)))
			continue;
		if (rbond_route_via(bond->rails[i].ndev, mq->m[i].addr, pa))
			return j;
	}
	return -1;
}

/* A rail's share for the scheduler: its port's signalling rate. */
static u32 rbond_port_weight(const struct ib_port_attr *pattr)
{
	int width = ib_width_enum_to_int(pattr->active_width);

	return pattr->active_speed && width > 0 ?
	       pattr->active_speed * width : 1;
}

/* bond->lock held: which peer rail each member in INIT pairs with. */
static void rbond_mq_plan(struct rbond_mqp *mq,
			  struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	struct rbond_dev *bond = mq->bond;
	unsigned long used = 0;
	unsigned int i;
	int j;

	lockdep_assert_held(&bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		plan[i].peer = -1;
		plan[i].resolved = false;
		if (!mq->have_peer || !m->qp || m->state != RBOND_M_INIT ||
		    !bond->rails[i].ndev)
			continue;
		j = rbond_mq_pair(mq, i, used);
		if (j < 0)
			continue;
		used |= BIT(j);
		plan[i].peer = j;
		plan[i].ifindex = bond->rails[i].ndev->ifindex;
		plan[i].daddr = rbond_gid_ipv4(mq->peer_rail[j].gid);
	}
}

/* No lock held (mq->lock only): the neighbours of the planned rails. */
static void rbond_mq_resolve(struct rbond_mqp *mq,
			     struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_rtr_plan *p = &plan[i];

		if (p->peer < 0)
			continue;
		p->hop = 64;
		p->resolved = !rbond_resolve_dmac(p->ifindex, mq->m[i].addr,
						  p->daddr, p->dmac, &p->hop);
	}
}

static int rbond_mq_rtr(struct rbond_mqp *mq, unsigned int i,
			const struct rbond_rtr_plan *plan)
{
	struct rbond_dev *bond = mq->bond;
	struct rbond_member_qp *m = &mq->m[i];
	const struct rbond_msg_rail *pr;
	const struct ib_gid_attr *sgid;
	struct ib_qp_attr attr = {};
	struct ib_port_attr pattr;
	union ib_gid gid;
	int ret, j = plan->peer;

	/* the rail may have gone (or come) while we resolved unlocked */
	if (j < 0 || !plan->resolved || !bond->rails[i].ndev ||
	    bond->rails[i].ndev->ifindex != plan->ifindex)
		return -ENOENT;
	pr = &mq->peer_rail[j];
	ipv6_addr_set_v4mapped(m->addr, (struct in6_addr *)gid.raw);
	sgid = rdma_find_gid_by_port(bond->rails[i].ibdev, &gid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP,
				     bond->rails[i].port, NULL);
	if (IS_ERR(sgid))
		return PTR_ERR(sgid);
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, bond->rails[i].port);
	attr.ah_attr.ah_flags = IB_AH_GRH;
	memcpy(attr.ah_attr.grh.dgid.raw, pr->gid, 16);
	attr.ah_attr.grh.sgid_attr = sgid;
	attr.ah_attr.grh.sgid_index = sgid->index;
	attr.ah_attr.grh.traffic_class = mq->app.ah_attr.grh.traffic_class;
	memcpy(attr.ah_attr.roce.dmac, plan->dmac, ETH_ALEN);
	attr.ah_attr.grh.hop_limit = plan->hop;
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = mq->app.path_mtu;
	if (!ib_query_port(bond->rails[i].ibdev, bond->rails[i].port,
			   &pattr) && pattr.active_mtu < attr.path_mtu)
		attr.path_mtu = pattr.active_mtu;
	attr.dest_qp_num = be32_to_cpu(pr->qpn);
	attr.rq_psn = be32_to_cpu(pr->psn);
	attr.max_dest_rd_atomic = mq->app.max_dest_rd_atomic;
	attr.min_rnr_timer = mq->app.min_rnr_timer;
	ret = ib_modify_qp(m->qp, &attr, IB_QP_STATE | IB_QP_AV |
			   IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (!ret) {
		m->state = RBOND_M_RTR;
		m->peer = j;
		mq->s.weight[i] = rbond_port_weight(&pattr);
	}
	rdma_put_gid_attr(sgid);
	return ret;
}

static int rbond_mq_rts(struct rbond_mqp *mq, unsigned int i)
{
	struct rbond_member_qp *m = &mq->m[i];
	struct ib_qp_attr attr = {};
	int ret;

	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = m->psn;
	attr.timeout = mq->app.timeout;
	attr.retry_cnt = mq->app.retry_cnt;
	attr.rnr_retry = mq->app.rnr_retry;
	attr.max_rd_atomic = mq->app.max_rd_atomic;
	ret = ib_modify_qp(m->qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN |
			   IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			   IB_QP_MAX_QP_RD_ATOMIC);
	if (!ret)
		m->state = RBOND_M_RTS;
	return ret;
}

/* Bring every member as far as the information goes (bond->lock held). */
static void rbond_mq_advance(struct rbond_mqp *mq, bool rts,
			     const struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	unsigned int i;

	if (!mq->have_peer)
		return;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (!m->qp)
			continue;
		if (m->state == RBOND_M_INIT && rbond_mq_rtr(mq, i, &plan[i])) {
			ibdev_dbg(&mq->bond->ibdev,
				  "QP 0x%x: rail %u stays unused (no peer rail)\n",
				  mq->qp->ibqp.qp_num, i);
			continue;
		}
		if (rts && m->state == RBOND_M_RTR && rbond_mq_rts(mq, i))
			m->state = RBOND_M_ERR;
	}
}

static void rbond_mq_fill_rails(struct rbond_mqp *mq, struct rbond_msg *msg,
				bool rtr_only)
{
	struct rbond_dev *bond = mq->bond;
	struct net_device *home = bond->rails[mq->qp->home].ndev;
	unsigned int i, n = 1;
	struct rbond_msg_rail *r;

	lockdep_assert_held(&bond->lock);
	r = &msg->qp.rail[0];
	ipv6_addr_set_v4mapped(home ? rbond_ndev_ipv4(home) : 0,
			       (struct in6_addr *)r->gid);
	r->qpn = cpu_to_be32(mq->qp->ibqp.qp_num);
	r->index = mq->qp->home;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (!m->qp || m->state == RBOND_M_ERR ||
		    (rtr_only && m->state < RBOND_M_RTR))
			continue;
		r = &msg->qp.rail[n++];
		ipv6_addr_set_v4mapped(m->addr, (struct in6_addr *)r->gid);
		r->qpn = cpu_to_be32(m->qp->qp_num);
		r->psn = cpu_to_be32(m->psn);
		r->index = i;
	}
	msg->qp.nrails = n;
	msg->src_qpn = cpu_to_be32(mq->qp->ibqp.qp_num);
}

static void rbond_mq_take_peer(struct rbond_mqp *mq, const struct rbond_msg *m)
{
	unsigned int n = min_t(unsigned int, m->qp.nrails, RBOND_MAX_RAILS);

	if (mq->have_peer || n < 2)
		return;
	memcpy(mq->peer_rail, m->qp.rail, sizeof(mq->peer_rail));
	mq->peer_nrails = n;
	mq->have_peer = true;
}

/* Switch the data path to multi-rail (mq->lock and bond->lock held). */
static void rbond_mq_publish(struct rbond_mqp *mq)
{
	struct rbond_qp *qp = mq->qp;
	unsigned long flags, rails = BIT(qp->home);
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (mq->m[i].qp && mq->m[i].state == RBOND_M_RTS &&
		    !mq->m[i].published)
			rails |= BIT(i);
	if (rails == BIT(qp->home))
		return;
	if (!mq->pend) {
		if (qp->cap.max_inline_data) {
			mq->pend_inl = kvcalloc(qp->sq_size,
						rbond_inl_stride(qp),
						GFP_KERNEL_ACCOUNT);
			if (!mq->pend_inl)
				return;
		}
		mq->pend = kvcalloc(qp->sq_size, sizeof(*mq->pend),
				    GFP_KERNEL_ACCOUNT);
		if (!mq->pend) {
			kvfree(mq->pend_inl);
			mq->pend_inl = NULL;
			return;
		}
		mq->pend_size = qp->sq_size;
	}
	/* the home rail on the same scale as the members (rbond_mq_rtr) */
	if (!mq->s.weight[qp->home]) {
		struct ib_port_attr pattr;
		struct rbond_rail *home = &mq->bond->rails[qp->home];

		mq->s.weight[qp->home] =
			home->ibdev && !ib_query_port(home->ibdev, home->port,
						      &pattr) ?
			rbond_port_weight(&pattr) : 1;
	}
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (!mq->s.weight[i])
			mq->s.weight[i] = mq->s.weight[qp->home];

	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!(rails & BIT(i)) || i == qp->home)
			continue;
		qp->member[i] = mq->m[i].qp;
		mq->m[i].published = true;
	}
	spin_unlock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	mq->s.rails_up |= rails;
	if (!mq->want_up) {
		mq->want_up = true;
		mq->up_seq = qp->sq_head;
	}
	if (qp->sq_head == qp->sq_tail)
		rbond_mq_set_up(mq);
	spin_unlock(&qp->sq_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
	atomic64_inc(&rbond_mstats.qp_up);
	ibdev_dbg(&mq->bond->ibdev, "QP 0x%x: multi-rail up, rails 0x%lx\n",
		  qp->ibqp.qp_num, rails);
}

/* The peer QP's nonce, from the first message that carries it (set once). */
static void rbond_mq_learn_nonce(struct rbond_mqp *mq, const u8 *nonce)
{
	static const u8 zero[sizeof(mq->peer_nonce)];
	unsigned long flags;

	if (!memcmp(nonce, zero, sizeof(zero)))
		return;
	spin_lock_irqsave(&mq->attr_lock, flags);
	if (!mq->have_peer_nonce) {
		memcpy(mq->peer_nonce, nonce, sizeof(mq->peer_nonce));
		/* nonce before flag: rbond_rkey_get() reads without the lock */
		smp_store_release(&mq->have_peer_nonce, true);
	}
	spin_unlock_irqrestore(&mq->attr_lock, flags);
}

/*
 * A QP_RSP is about our QP only if it answers our own QP_REQ: it came on
 * the connection we asked on (to the peer the application connected to),
 * from the peer QP the application named, echoing our nonce.
 */
static bool rbond_mq_rsp_ours(struct rbond_mqp *mq, struct rbond_conn *conn,
			      const struct rbond_msg *rsp, __be32 peer_addr,
			      u32 peer_qpn)
{
	return conn && conn == mq->conn && conn->raddr == peer_addr &&
	       be32_to_cpu(rsp->src_qpn) == peer_qpn &&
	       !memcmp(rsp->echo, mq->nonce, sizeof(mq->nonce));
}

/* A QP_REQ is from our peer QP: on a connection it opened from its address. */
static bool rbond_mq_req_ours(struct rbond_conn *conn,
			      const struct rbond_msg *req, __be32 peer_addr,
			      u32 peer_qpn)
{
	return conn && !conn->active && conn->raddr == peer_addr &&
	       be32_to_cpu(req->src_qpn) == peer_qpn;
}

static void rbond_mq_work(struct work_struct *work)
{
	struct rbond_mqp *mq = container_of(to_delayed_work(work),
					    struct rbond_mqp, work);
	struct rbond_dev *bond = mq->bond;
	struct rbond_rtr_plan plan[RBOND_MAX_RAILS];
	struct rbond_conn *req_conn = NULL, *rsp_conn = NULL;
	struct rbond_msg *msg, req, rsp;
	bool req_pending, rsp_pending, have_rtr, have_rts, ok;
	unsigned long flags;
	__be32 peer_addr, home_addr = 0;
	u32 peer_qpn, status;

	msg = kzalloc(sizeof(*msg), GFP_KERNEL);
	if (!msg) {
		rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));
		return;
	}
	mutex_lock(&mq->lock);
	if (mq->dead)
		goto out_unlock;

	spin_lock_irqsave(&mq->attr_lock, flags);
	have_rtr = mq->have_rtr;
	have_rts = mq->have_rts;
	peer_addr = mq->peer_addr;
	peer_qpn = mq->peer_qpn;
	req_pending = mq->req_pending;
	mq->req_pending = false;
	if (req_pending) {
		req = mq->req;
		req_conn = mq->req_conn;
		mq->req_conn = NULL;
	}
	rsp_pending = mq->rsp_pending;
	mq->rsp_pending = false;
	if (rsp_pending) {
		rsp = mq->rsp;
		rsp_conn = mq->rsp_conn;
		mq->rsp_conn = NULL;
	}
	spin_unlock_irqrestore(&mq->attr_lock, flags);

	if (!have_rtr) {
		/* Answer later: keep the request until we reach RTR. */
		if (req_pending) {
			spin_lock_irqsave(&mq->attr_lock, flags);
			if (!mq->req_pending) {
				mq->req_pending = true;
				mq->req = req;
				mq->req_conn = req_conn;
				req_conn = NULL;
			}
			spin_unlock_irqrestore(&mq->attr_lock, flags);
		}
		goto out_unlock;
	}
	if (mq->gave_up || !peer_addr)
		goto answer;

	mutex_lock(&bond->lock);
	if (!rbond_rail_present(bond, mq->qp->home)) {
		/* The QP is dead with its home rail: nothing to negotiate. */
		rbond_mq_give_up(mq);
		mutex_unlock(&bond->lock);
		goto answer;
	}
	home_addr = rbond_ndev_ipv4(bond->rails[mq->qp->home].ndev);
	if (!mq->created) {
		mq->created = true;
		if (!rbond_mq_create_members(mq))
			rbond_mq_give_up(mq);
	}
	if (rsp_pending)
		ibdev_dbg(&bond->ibdev, "QP 0x%x: QP_RSP from 0x%x: status %u%s\n",
			  mq->qp->ibqp.qp_num, be32_to_cpu(rsp.src_qpn),
			  be32_to_cpu(rsp.status),
			  rsp_conn == mq->conn ? "" : ", not our connection");
	if (rsp_pending &&
	    rbond_mq_rsp_ours(mq, rsp_conn, &rsp, peer_addr, peer_qpn)) {
		switch (be32_to_cpu(rsp.status)) {
		case RBOND_ST_OK:
			rbond_mq_learn_nonce(mq, rsp.nonce);
			rbond_mq_take_peer(mq, &rsp);
			mq->rsp_ok = true;
			break;
		case RBOND_ST_NOT_READY:
			rbond_mq_learn_nonce(mq, rsp.nonce);
			break;
		default:
			rbond_mq_give_up(mq);
		}
	}
	if (req_pending && rbond_mq_req_ours(req_conn, &req, peer_addr,
					     peer_qpn)) {
		rbond_mq_learn_nonce(mq, req.nonce);
		rbond_mq_take_peer(mq, &req);
	}
	/* Not under bond->lock: a neighbour the peer names may not answer. */
	rbond_mq_plan(mq, plan);
	mutex_unlock(&bond->lock);
	rbond_mq_resolve(mq, plan);
	mutex_lock(&bond->lock);
	if (!rbond_rail_present(bond, mq->qp->home)) {
		rbond_mq_give_up(mq);
		mutex_unlock(&bond->lock);
		goto answer;
	}
	rbond_mq_advance(mq, have_rts, plan);
	if (mq->rsp_ok && have_rts && !mq->gave_up)
		rbond_mq_publish(mq);
	mutex_unlock(&bond->lock);

	/* Our own request, until the peer said yes (or we give up). */
	if (!mq->rsp_ok && !mq->gave_up) {
		if (!mq->conn) {
			mq->conn = rbond_ctrl_connect(home_addr, peer_addr);
			if (!mq->conn)
				rbond_mq_give_up(mq);	/* not a bond peer */
		}
		if (mq->conn) {
			enum rbond_conn_state st = READ_ONCE(mq->conn->state);

			if (st == RBOND_CONN_FAILED || st == RBOND_CONN_DEAD ||
			    ++mq->tries > RBOND_MQ_MAX_TRIES) {
				rbond_mq_give_up(mq);
			} else if (st == RBOND_CONN_UP) {
				memset(msg, 0, sizeof(*msg));
				mutex_lock(&bond->lock);
				rbond_mq_fill_rails(mq, msg, false);
				mutex_unlock(&bond->lock);
				msg->dst_qpn = cpu_to_be32(peer_qpn);
				memcpy(msg->nonce, mq->nonce, sizeof(msg->nonce));
				rbond_ctrl_send(mq->conn, msg,
						RBOND_MSG_QP_REQ,
						RBOND_ST_OK);
			}
			if (!mq->gave_up)
				rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));
		}
		if (mq->gave_up)
			ibdev_dbg(&bond->ibdev, "QP 0x%x stays single-rail\n",
				  mq->qp->ibqp.qp_num);
	}
	if (mq->rsp_ok && !have_rts)
		rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));

answer:
	if (req_pending && req_conn) {
		ok = !mq->gave_up &&
		     rbond_mq_req_ours(req_conn, &req, peer_addr, peer_qpn);
		memset(msg, 0, sizeof(*msg));
		status = RBOND_ST_NOENT;
		if (ok) {
			mutex_lock(&bond->lock);
			ok = rbond_rail_present(bond, mq->qp->home);
			if (ok)
				rbond_mq_fill_rails(mq, msg, true);
			mutex_unlock(&bond->lock);
		}
		if (ok) {
			memcpy(msg->nonce, mq->nonce, sizeof(msg->nonce));
			status = msg->qp.nrails > 1 ? RBOND_ST_OK :
						      RBOND_ST_NOT_READY;
		} else {
			/* the same answer as for no such QP */
			memset(msg, 0, sizeof(*msg));
			msg->src_qpn = req.dst_qpn;
		}
		msg->dst_qpn = req.src_qpn;
		memcpy(msg->echo, req.nonce, sizeof(msg->echo));
		rbond_ctrl_send(req_conn, msg, RBOND_MSG_QP_RSP, status);
	}
out_unlock:
	mutex_unlock(&mq->lock);
	rbond_conn_put(req_conn);
	rbond_conn_put(rsp_conn);
	kfree(msg);
}

/* --- control messages -------------------------------------------------------- */

/*
 * QP_REQ arrives on connections the peer opened (passive), QP_RSP on ours
 * (active).  Whatever cannot be about the named QP is dropped here, before
 * it can take the one-slot inbox; a QP_REQ gets the same NOENT answer
 * whether the QP does not exist or is not connected to the asker.
 */
static void rbond_handle_qp_msg(struct rbond_conn *conn,
				const struct rbond_msg *m)
{
	bool is_req = m->type == RBOND_MSG_QP_REQ;
	struct rbond_conn *old = NULL;
	struct rbond_msg rsp = {};
	struct rbond_mqp *mq;
	unsigned long flags;
	bool take = false;

	if (conn->active == is_req) {
		atomic64_inc(&rbond_mstats.bad_msgs);
		return;
	}
	mutex_lock(&rbond_mq_mutex);
	mq = rbond_mq_find(conn->dmadev, be32_to_cpu(m->dst_qpn));
	if (mq) {
		spin_lock_irqsave(&mq->attr_lock, flags);
		if (is_req) {
			/* before RTR the peer is not known yet: check later */
			take = !mq->have_rtr ||
			       rbond_mq_req_ours(conn, m, mq->peer_addr,
						 mq->peer_qpn);
			if (take && !mq->req_pending) {
				mq->req_pending = true;
				mq->req = *m;
				old = mq->req_conn;
				rbond_conn_get(conn);
				mq->req_conn = conn;
			}
		} else {
			take = conn->raddr == mq->peer_addr &&
			       be32_to_cpu(m->src_qpn) == mq->peer_qpn &&
			       !memcmp(m->echo, mq->nonce, sizeof(mq->nonce));
			if (take && !mq->rsp_pending) {
				mq->rsp_pending = true;
				mq->rsp = *m;
				old = mq->rsp_conn;
				rbond_conn_get(conn);
				mq->rsp_conn = conn;
			}
		}
		spin_unlock_irqrestore(&mq->attr_lock, flags);
		if (take)
			rbond_mq_kick(mq, 0);
	}
	mutex_unlock(&rbond_mq_mutex);
	rbond_conn_put(old);
	if (take)
		return;
	if (is_req) {
		rsp.dst_qpn = m->src_qpn;
		rsp.src_qpn = m->dst_qpn;
		memcpy(rsp.echo, m->nonce, sizeof(rsp.echo));
		rbond_ctrl_send(conn, &rsp, RBOND_MSG_QP_RSP, RBOND_ST_NOENT);
	} else {
		atomic64_inc(&rbond_mstats.bad_msgs);
		pr_debug("rdma_bond: QP_RSP for QP 0x%x from %pI4 QP 0x%x dropped\n",
			 be32_to_cpu(m->dst_qpn), &conn->raddr,
			 be32_to_cpu(m->src_qpn));
	}
}

/* conn->lock held: has @mr's key already been handed out on @conn? */
static bool rbond_handed_has(struct rbond_conn *conn, u32 rkey,
			     const struct rbond_mr *mr)
{
	struct rbond_handed *h;

	hash_for_each_possible(conn->handed, h, node, rkey)
		if (h->rkey == rkey && h->mr == mr)
			return true;
	return false;
}

/*
 * The peer asks for the alias keys of one of our keys.  Answered only about
 * a QP connected to the asker (its address, its QPN, the nonce our QP gave
 * it), for a remotely accessible MR of that QP's PD, and only if we can
 * track it for dereg.  Every refusal is the same NOENT with no key material.
 * Bounded cost: one xarray lookup (bond rkey == lkey, the primary member's).
 */
static void rbond_handle_rkey_req(struct rbond_conn *conn,
				  const struct rbond_msg *m)
{
	u32 rkey = be32_to_cpu(m->key.rkey);
	struct rbond_msg rsp = {};
	struct rbond_handed *h;
	struct rbond_mqp *mq;
	struct rbond_dev *bond;
	struct rbond_mr *mr;
	unsigned long flags;
	u32 status = RBOND_ST_NOENT;
	unsigned int i;
	bool ok;

	rsp.dst_qpn = m->src_qpn;
	rsp.src_qpn = m->dst_qpn;
	rsp.key.rkey = m->key.rkey;
	if (conn->active)
		goto out;	/* requests come on connections the peer opened */
	h = kzalloc(sizeof(*h), GFP_KERNEL);
	if (!h)
		goto out;	/* cannot track it: hand out nothing */

	mutex_lock(&rbond_mq_mutex);
	mq = rbond_mq_find(conn->dmadev, be32_to_cpu(m->dst_qpn));
	if (!mq)
		goto out_unlock;
	spin_lock_irqsave(&mq->attr_lock, flags);
	ok = mq->have_rtr && mq->peer_addr == conn->raddr &&
	     mq->peer_qpn == be32_to_cpu(m->src_qpn) &&
	     !memcmp(m->echo, mq->nonce, sizeof(mq->nonce));
	spin_unlock_irqrestore(&mq->attr_lock, flags);
	if (!ok)
		goto out_unlock;
	bond = mq->bond;
	mutex_lock(&bond->lock);
	/* under bond->lock: dereg takes the MR off mr_xa before revoking */
	mr = xa_load(&mq->qp->pd->mr_xa, rkey);
	if (mr && !mr->dma && mr->pd == mq->qp->pd && mr->ibmr.rkey == rkey &&
	    (mr->access & (IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE |
			   IB_ACCESS_REMOTE_ATOMIC))) {
		spin_lock_irqsave(&conn->lock, flags);
		if (rbond_handed_has(conn, rkey, mr)) {
			status = RBOND_ST_OK;	/* tracked already */
		} else if (conn->nr_handed < RBOND_RKEY_MAX) {
			h->rkey = rkey;
			h->mr = mr;
			hash_add(conn->handed, &h->node, rkey);
			WRITE_ONCE(conn->nr_handed, conn->nr_handed + 1);
			h = NULL;
			status = RBOND_ST_OK;
		}
		spin_unlock_irqrestore(&conn->lock, flags);
		if (status == RBOND_ST_OK) {
			rsp.key.access = cpu_to_be32(mr->access);
			for (i = 0; i < RBOND_MAX_RAILS; i++) {
				if (!mr->member[i])
					continue;
				rsp.key.rail_rkey[i] =
					cpu_to_be32(mr->member[i]->rkey);
				rsp.key.rail_valid |= BIT(i);
			}
		}
	}
	mutex_unlock(&bond->lock);
out_unlock:
	mutex_unlock(&rbond_mq_mutex);
	kfree(h);
out:
	if (status != RBOND_ST_OK)
		pr_debug("rdma_bond: RKEY_REQ 0x%x for QP 0x%x from %pI4 QP 0x%x refused\n",
			 rkey, be32_to_cpu(m->dst_qpn), &conn->raddr,
			 be32_to_cpu(m->src_qpn));
	rbond_ctrl_send(conn, &rsp, RBOND_MSG_RKEY_RSP, status);
}

static struct rbond_rkey *rbond_rkey_find(struct rbond_conn *conn, u32 rkey)
{
	struct rbond_rkey *e;

	hash_for_each_possible_rcu(conn->rkeys, e, node, rkey)
		if (e->rkey == rkey)
			return e;
	return NULL;
}

static void rbond_handle_rkey_rsp(struct rbond_conn *conn,
				  const struct rbond_msg *m)
{
	u32 rkey = be32_to_cpu(m->key.rkey);
	struct rbond_rkey *e;
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&conn->lock, flags);
	e = rbond_rkey_find(conn, rkey);
	if (e && e->state == RBOND_RK_SENT) {
		if (be32_to_cpu(m->status) == RBOND_ST_OK) {
			e->access = be32_to_cpu(m->key.access);
			e->relaxed = e->access & IB_ACCESS_RELAXED_ORDERING;
			for (i = 0; i < RBOND_MAX_RAILS; i++)
				e->rail_rkey[i] = be32_to_cpu(m->key.rail_rkey[i]);
			e->rail_valid = m->key.rail_valid;
			smp_wmb();	/* fields before state */
			WRITE_ONCE(e->state, RBOND_RK_VALID);
		} else {
			e->stamp = jiffies;
			WRITE_ONCE(e->state, RBOND_RK_NEG);
		}
	} else {
		pr_debug("rdma_bond: RKEY_RSP 0x%x status %u: %s\n", rkey,
			 be32_to_cpu(m->status), e ? "not asked" : "no entry");
	}
	spin_unlock_irqrestore(&conn->lock, flags);
}

static void rbond_handle_inval(struct rbond_conn *conn,
			       const struct rbond_msg *m)
{
	u32 rkey = be32_to_cpu(m->key.rkey);
	struct rbond_msg ack = {};
	struct rbond_rkey *e;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	e = rbond_rkey_find(conn, rkey);
	if (e) {
		hash_del_rcu(&e->node);
		conn->nr_rkeys--;
		kfree_rcu(e, rcu);
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	atomic64_inc(&rbond_mstats.rkey_invals);
	/* Every post that could have read the entry has finished. */
	synchronize_rcu();
	ack.key.rkey = m->key.rkey;
	rbond_ctrl_send(conn, &ack, RBOND_MSG_INVAL_ACK, RBOND_ST_OK);
}

static void rbond_handle_inval_ack(struct rbond_conn *conn,
				   const struct rbond_msg *m)
{
	u32 rkey = be32_to_cpu(m->key.rkey);
	struct rbond_invw *w;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	list_for_each_entry(w, &conn->invals, list)
		if (w->rkey == rkey)
			w->done = true;
	spin_unlock_irqrestore(&conn->lock, flags);
	wake_up_all(&rbond_inval_wq);
}

void rbond_mrail_handle_msg(struct rbond_conn *conn, const struct rbond_msg *m)
{
	switch (m->type) {
	case RBOND_MSG_QP_REQ:
	case RBOND_MSG_QP_RSP:
		rbond_handle_qp_msg(conn, m);
		break;
	case RBOND_MSG_RKEY_REQ:
		rbond_handle_rkey_req(conn, m);
		break;
	case RBOND_MSG_RKEY_RSP:
		rbond_handle_rkey_rsp(conn, m);
		break;
	case RBOND_MSG_INVAL:
		rbond_handle_inval(conn, m);
		break;
	case RBOND_MSG_INVAL_ACK:
		rbond_handle_inval_ack(conn, m);
		break;
	default:
		atomic64_inc(&rbond_mstats.bad_msgs);
	}
}

void rbond_mrail_conn_up(struct rbond_conn *conn)
{
	struct rbond_mqp *mq;
	unsigned int bkt;

	mutex_lock(&rbond_mq_mutex);
	hash_for_each(rbond_mq_hash, bkt, mq, hnode)
		if (mq->conn == conn)
			rbond_mq_kick(mq, 0);
	mutex_unlock(&rbond_mq_mutex);
}

void rbond_mrail_conn_down(struct rbond_conn *conn)
{
	rbond_inval_wake();
}

void rbond_inval_wake(void)
{
	wake_up_all(&rbond_inval_wq);
}

/* --- remote keys ------------------------------------------------------------- */

/*
 * conn->lock held: may @e go?  Entries without a translation (refused, or
 * never answered) once their retries are over and RBOND_RKEY_NEG_TTL has
 * passed, or at once when the cache is 3/4 full: one user's bogus keys
 * must not keep everyone else's QPs on that connection on the home rail.
 */
static bool rbond_rkey_evictable(struct rbond_conn *conn,
				 const struct rbond_rkey *e)
{
	if (e->state != RBOND_RK_NEG && e->state != RBOND_RK_SENT)
		return false;
	if (e->state == RBOND_RK_NEG &&
	    conn->nr_rkeys >= RBOND_RKEY_MAX * 3 / 4)
		return true;
	return e->tries >= RBOND_RKEY_TRIES &&
	       time_after(jiffies, e->stamp + RBOND_RKEY_NEG_TTL);
}

void rbond_rkey_fetch_work(struct work_struct *work)
{
	struct rbond_conn *conn = container_of(work, struct rbond_conn,
					       rkey_work);
	struct {
		u32 rkey, src_qpn, dst_qpn;
		u8 echo[8];
	} todo[16];
	struct hlist_node *tmp;
	struct rbond_msg msg;
	struct rbond_rkey *e;
	unsigned long flags;
	unsigned int bkt;
	int n, i;

	do {
		n = 0;
		spin_lock_irqsave(&conn->lock, flags);
		hash_for_each_safe(conn->rkeys, bkt, tmp, e, node) {
			if (rbond_rkey_evictable(conn, e)) {
				hash_del_rcu(&e->node);
				conn->nr_rkeys--;
				kfree_rcu(e, rcu);
				continue;
			}
			if ((e->state == RBOND_RK_SENT ||
			     e->state == RBOND_RK_NEG) &&
			    time_after(jiffies, e->stamp + RBOND_RKEY_RETRY) &&
			    e->tries < RBOND_RKEY_TRIES) {
				e->tries++;
				e->state = RBOND_RK_PENDING;
			}
			if (e->state != RBOND_RK_PENDING || n == 16)
				continue;
			e->state = RBOND_RK_SENT;
			e->stamp = jiffies;
			todo[n].rkey = e->rkey;
			todo[n].src_qpn = e->src_qpn;
			todo[n].dst_qpn = e->dst_qpn;
			memcpy(todo[n].echo, e->echo, sizeof(todo[n].echo));
			n++;
		}
		spin_unlock_irqrestore(&conn->lock, flags);
		for (i = 0; i < n; i++) {
			memset(&msg, 0, sizeof(msg));
			msg.key.rkey = cpu_to_be32(todo[i].rkey);
			msg.src_qpn = cpu_to_be32(todo[i].src_qpn);
			msg.dst_qpn = cpu_to_be32(todo[i].dst_qpn);
			memcpy(msg.echo, todo[i].echo, sizeof(msg.echo));
			rbond_ctrl_send(conn, &msg, RBOND_MSG_RKEY_REQ,
					RBOND_ST_OK);
		}
	} while (n == 16);
}

void rbond_rkey_flush(struct rbond_conn *conn)
{
	struct rbond_handed *h;
	struct hlist_node *tmp;
	struct rbond_rkey *e;
	unsigned int bkt;

	hash_for_each_safe(conn->rkeys, bkt, tmp, e, node) {
		hash_del(&e->node);
		kfree(e);
	}
	hash_for_each_safe(conn->handed, bkt, tmp, h, node) {
		hash_del(&h->node);
		kfree(h);
	}
}

/* Data path (RCU, any context): translation of @rkey, or NULL (miss). */
/*
 * The translation of the peer's @rkey, or NULL; then *resolving says whether
 * a request for it is under way (the answer may still make it usable).
 */
static struct rbond_rkey *rbond_rkey_get(struct rbond_mqp *mq, u32 rkey,
					 bool *resolving)
{
	struct rbond_conn *conn = mq->conn;
	struct rbond_rkey *e;
	unsigned long flags;
	bool full;
	u8 st;

	*resolving = false;
	/*
	 * Translations live only as long as the connection they came on:
	 * once it is down, the owner can no longer revoke them (INVAL), so
	 * none is used any more.
	 */
	if (!conn || READ_ONCE(conn->state) != RBOND_CONN_UP)
		return NULL;
	e = rbond_rkey_find(conn, rkey);
	if (e && READ_ONCE(e->state) == RBOND_RK_VALID) {
		smp_rmb();	/* pairs with smp_wmb() in rkey_rsp */
		atomic64_inc(&rbond_mstats.rkey_hits);
		return e;
	}
	if (e) {
		st = READ_ONCE(e->state);
		/* Lost request or stale negative answer: ask again later. */
		if (time_after(jiffies, READ_ONCE(e->stamp) + RBOND_RKEY_RETRY) &&
		    st != RBOND_RK_PENDING)
			queue_work(rbond_wq, &conn->rkey_work);
		*resolving = st == RBOND_RK_PENDING ||
			     (st == RBOND_RK_SENT &&
			      READ_ONCE(e->tries) < RBOND_RKEY_TRIES);
		return NULL;
	}
	atomic64_inc(&rbond_mstats.rkey_misses);
	/* the owner answers only with its QP's nonce (from QP_REQ/QP_RSP) */
	if (!smp_load_acquire(&mq->have_peer_nonce))
		return NULL;
	e = kzalloc(sizeof(*e), GFP_ATOMIC);
	if (!e)
		return NULL;
	e->rkey = rkey;
	e->src_qpn = mq->qp->ibqp.qp_num;
	e->dst_qpn = mq->peer_qpn;
	memcpy(e->echo, mq->peer_nonce, sizeof(e->echo));
	e->state = RBOND_RK_PENDING;
	spin_lock_irqsave(&conn->lock, flags);
	if (conn->nr_rkeys >= RBOND_RKEY_MAX || rbond_rkey_find(conn, rkey)) {
		full = conn->nr_rkeys >= RBOND_RKEY_MAX;
		spin_unlock_irqrestore(&conn->lock, flags);
		kfree(e);
		if (full)	/* evicts refused entries */
			queue_work(rbond_wq, &conn->rkey_work);
		return NULL;
	}
	hash_add_rcu(conn->rkeys, &e->node, rkey);
	conn->nr_rkeys++;
	spin_unlock_irqrestore(&conn->lock, flags);
	queue_work(rbond_wq, &conn->rkey_work);
	*resolving = true;
	return NULL;
}

struct rbond_inval_arg {
	struct rbond_dev *bond;
	struct rbond_mr *mr;
	struct list_head waits;
};

struct rbond_invw_conn {
	struct rbond_invw w;
	struct rbond_conn *conn;
	struct list_head link;
	bool sent;
};

static void rbond_inval_one(struct rbond_conn *conn, void *arg)
{
	struct rbond_inval_arg *a = arg;
	struct rbond_invw_conn *wc;
	struct rbond_handed *h;
	struct hlist_node *tmp;
	unsigned long flags;
	bool found = false;

	wc = kzalloc(sizeof(*wc), GFP_KERNEL);
	spin_lock_irqsave(&conn->lock, flags);
	hash_for_each_possible_safe(conn->handed, h, tmp, node,
				    a->mr->ibmr.rkey) {
		if (h->mr != a->mr)
			continue;
		hash_del(&h->node);
		WRITE_ONCE(conn->nr_handed, conn->nr_handed - 1);
		kfree(h);
		found = true;
	}
	if (found && wc) {
		wc->w.rkey = a->mr->ibmr.rkey;
		list_add_tail(&wc->w.list, &conn->invals);
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!found || !wc) {
		if (found)	/* cannot wait for it: force */
			atomic64_inc(&rbond_mstats.inval_timeouts);
		kfree(wc);
		return;
	}
	rbond_conn_get(conn);
	wc->conn = conn;
	list_add_tail(&wc->link, &a->waits);
}

static bool rbond_inval_all_done(struct list_head *waits)
{
	struct rbond_invw_conn *wc;

	list_for_each_entry(wc, waits, link)
		if (!READ_ONCE(wc->w.done) &&
		    READ_ONCE(wc->conn->state) == RBOND_CONN_UP)
			return false;
	return true;
}

/* Force our extra-rail members towards @conn's peer to the error state. */
static void rbond_force_error(struct rbond_dev *bond, struct rbond_conn *conn)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	struct rbond_mqp *mq;
	unsigned int bkt, i;

	mutex_lock(&rbond_mq_mutex);
	mutex_lock(&bond->lock);
	hash_for_each(rbond_mq_hash, bkt, mq, hnode) {
		if (mq->bond != bond || mq->peer_addr != conn->raddr)
			continue;
		for (i = 0; i < RBOND_MAX_RAILS; i++) {
			struct ib_qp *mqp = mq->m[i].published ?
				mq->qp->member[i] : mq->m[i].qp;

			if (i != mq->qp->home && mqp)
				ib_modify_qp(mqp, &attr, IB_QP_STATE);
		}
	}
	mutex_unlock(&bond->lock);
	mutex_unlock(&rbond_mq_mutex);
}

/*
 * dereg_mr, before the member MRs go (the MR is off bond->mrs already, so
 * no new translation can be handed out): revoke every alias handed out.
 */
void rbond_mrail_mr_dereg(struct rbond_dev *bond, struct rbond_mr *mr)
{
	struct rbond_inval_arg a = { .bond = bond, .mr = mr };
	struct rbond_conn_iter it = { .fn = rbond_inval_one, .arg = &a };
	struct rbond_invw_conn *wc, *tmp;
	struct rbond_msg msg;
	unsigned long flags;

	if (mr->dma)
		return;
	INIT_LIST_HEAD(&a.waits);
	rbond_ctrl_walk_conns(&it);
	if (list_empty(&a.waits))
		return;
	list_for_each_entry(wc, &a.waits, link) {
		memset(&msg, 0, sizeof(msg));
		msg.key.rkey = cpu_to_be32(mr->ibmr.rkey);
		wc->sent = !rbond_ctrl_send(wc->conn, &msg, RBOND_MSG_INVAL,
					    RBOND_ST_OK);
	}
	wait_event_timeout(rbond_inval_wq, rbond_inval_all_done(&a.waits),
			   RBOND_INVAL_TIMEOUT);
	list_for_each_entry_safe(wc, tmp, &a.waits, link) {
		spin_lock_irqsave(&wc->conn->lock, flags);
		list_del(&wc->w.list);
		spin_unlock_irqrestore(&wc->conn->lock, flags);
		if (!wc->w.done) {
			atomic64_inc(&rbond_mstats.inval_timeouts);
			rbond_force_error(bond, wc->conn);
			/*
			 * A live peer that does not acknowledge is not given
			 * keys any more: with its connection dead, later
			 * deregs force at once instead of waiting 2 s each.
			 */
			if (wc->sent &&
			    READ_ONCE(wc->conn->state) == RBOND_CONN_UP)
				rbond_ctrl_conn_kill(wc->conn);
		}
		rbond_conn_put(wc->conn);
		kfree(wc);
	}
}

/* --- data path ----------------------------------------------------------------- */

/* Rails @e's translation allows for this peer (bit per local rail). */
static unsigned long rbond_rkey_rails(struct rbond_mqp *mq,
				      const struct rbond_rkey *e, u32 need)
{
	unsigned long rails = BIT(mq->qp->home);
	unsigned int i;

	if ((e->access & need) != need)
		return rails;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		int pr = mq->m[i].peer;
		unsigned int pidx;

		if (!(mq->s.rails_up & BIT(i)) || pr < 0)
			continue;
		pidx = mq->peer_rail[pr].index;
		if (pidx < RBOND_MAX_RAILS && (e->rail_valid & BIT(pidx)))
			rails |= BIT(i);
	}
	return rails;
}

/*
 * Class of a WQE and the rails it may use; *rkeys gets the per-rail rkey.
 * RCU read side (the caller holds a spinlock).
 */
static u8 rbond_classify(struct rbond_mqp *mq, const struct ib_send_wr *wr,
			 unsigned long *allowed, u32 *rkeys, bool *have_keys)
{
	struct rbond_dev *bond = mq->bond;
	enum rbond_ordering ord = READ_ONCE(bond->ordering);
	const struct rbond_rkey *e;
	bool resolving;
	unsigned int i;
	u8 cl;
	u32 need;

	*allowed = BIT(mq->qp->home);
	*have_keys = false;
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
		cl = RBOND_CL_WRITE;
		need = IB_ACCESS_REMOTE_WRITE;
		break;
	case IB_WR_RDMA_READ:
		cl = RBOND_CL_READ;
		need = IB_ACCESS_REMOTE_READ;
		break;
	default:
		/* SEND*, WRITE_WITH_IMM (receives are on home), atomics. */
		return RBOND_CL_STRICT;
	}
	if (wr->send_flags & (IB_SEND_FENCE | IB_SEND_INLINE))
		return RBOND_CL_STRICT;
	e = rbond_rkey_get(mq, rdma_wr(wr)->rkey, &resolving);
	/* home rail; its class is known once the key is */
	if (!e && resolving && ord != RBOND_ORDER_STRICT)
		return RBOND_CL_UNRESOLVED(cl);
	if (!e)			/* home rail for good */
		return ord == RBOND_ORDER_RELAXED ? cl : RBOND_CL_STRICT;
	*allowed = rbond_rkey_rails(mq, e, need);
	*have_keys = true;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		int pr = mq->m[i].peer;

		rkeys[i] = rdma_wr(wr)->rkey;
		if (i != mq->qp->home && pr >= 0 &&
		    mq->peer_rail[pr].index < RBOND_MAX_RAILS)
			rkeys[i] = e->rail_rkey[mq->peer_rail[pr].index];
	}
	if (ord == RBOND_ORDER_STRICT ||
	    (ord == RBOND_ORDER_RELAXED_MR && !e->relaxed))
		return RBOND_CL_STRICT;	/* flowlet switching only */
	return cl;
}

/* Translate the local sges of @p for @rail from byte @off, @len bytes. */
static int rbond_sub_sges(struct rbond_qp *qp, unsigned int rail,
			  const struct ib_sge *in, int num, u64 off, u64 len,
			  struct ib_sge *out, bool verbatim)
{
	int i, n = 0;

	for (i = 0; i < num && len; i++) {
		struct rbond_mr *mr;
		u64 l = in[i].length;

		if (off >= l) {
			off -= l;
			continue;
		}
		out[n] = in[i];
		out[n].addr += off;
		out[n].length = min_t(u64, l - off, len);
		len -= out[n].length;
		off = 0;
		if (!verbatim) {
			mr = rbond_mr_lookup(qp->pd, in[i].lkey);
			if (!mr || !(READ_ONCE(mr->rails) & BIT(rail)))
				return -EINVAL;
			out[n].lkey = mr->lkey[rail];
		}
		n++;
	}
	return n;
}

/* Post slot @seq (range @off/@len of @p) on @rail.  sq_lock held. */
static int rbond_post_slot(struct rbond_mqp *mq, struct rbond_pend *p,
			   u32 seq, unsigned int rail, u64 off, u64 len,
			   const u32 *rkeys, u8 cl)
{
	struct rbond_qp *qp = mq->qp;
	struct rbond_dev *bond = mq->bond;
	struct ib_sge sge[RBOND_MAX_SGE];
	const struct ib_send_wr *bad;
	struct rbond_swqe *e;
	struct ib_qp *mqp;
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
	} mwr;
	/* inline data, captured by rbond_capture_inline(): kernel address */
	bool verbatim = p->wr.send.send_flags & IB_SEND_INLINE;
	int n, ret;

	/* a rail being removed is out of rails_up before its member goes */
	if (rail >= RBOND_MAX_RAILS || !(mq->s.rails_up & BIT(rail)))
		return -EINVAL;
	mqp = qp->member[rail];
	if (!mqp)
		return -EINVAL;
	memcpy(&mwr, &p->wr, sizeof(mwr));
	rcu_read_lock();
	n = rbond_sub_sges(qp, rail, p->sge, p->num_sge, off, len, sge,
			   verbatim);
	rcu_read_unlock();
	if (n < 0)
		return n;
	mwr.send.sg_list = sge;
	mwr.send.num_sge = n;
	mwr.send.next = NULL;
	if (!verbatim)
		mwr.send.send_flags &= ~IB_SEND_INLINE;
	/* Every member WQE signaled: the shadow queue needs each completion. */
	mwr.send.send_flags |= IB_SEND_SIGNALED;
	mwr.send.wr_id = rbond_mr_wrid(qp, seq);
	if (p->wr.send.opcode == IB_WR_RDMA_WRITE ||
	    p->wr.send.opcode == IB_WR_RDMA_READ) {
		mwr.rdma.remote_addr += off;
		if (rkeys)
			mwr.rdma.rkey = rkeys[rail];
	}
	ret = ib_post_send(mqp, &mwr.send, &bad);
	if (ret)
		return ret;
	e = &qp->sq[seq & (qp->sq_size - 1)];
	e->rail = rail;
	e->byte_len = len;
	rbond_sched_posted(&mq->s, e, rail, cl,
			   rbond_wr_is_rd(p->wr.send.opcode),
			   p->wr.rdma.rkey, len);
	rbond_stat_add(bond, rail, RBOND_STAT_TX_WQES, 1);
	rbond_stat_add(bond, rail, RBOND_STAT_TX_BYTES, len);
	if (rail != qp->home)
		atomic64_inc(&rbond_mstats.striped);
	return 0;
}

static u32 rbond_alloc_slot(struct rbond_qp *qp, const struct ib_send_wr *wr,
			    u8 wc_opcode, u64 bytes, bool app_visible)
{
	u32 seq = rbond_sq_alloc(qp, wr, wc_opcode, RBOND_RAIL_PEND, bytes);

	if (!app_visible) {
		qp->sq[seq & (qp->sq_size - 1)].flags = RBOND_SWQE_CHUNK;
		qp->sq_wqes--;
	}
	return seq;
}

/*
 * Post @wr (@isge: its captured inline data, or NULL).  sq_post_lock held.
 */
int rbond_mrail_post_send(struct rbond_qp *qp, const struct ib_send_wr *wr,
			  u8 wc_opcode, const struct ib_sge *isge)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_dev *bond = mq->bond;
	enum rbond_ordering ord = READ_ONCE(bond->ordering);
	enum rbond_policy pol = READ_ONCE(bond->policy);
	u32 rd_max = READ_ONCE(mq->app.max_rd_atomic);
	u32 rkeys[RBOND_MAX_RAILS];
	unsigned long allowed, ok;
	struct rbond_pend pl, *p = &pl;
	u64 bytes = 0, thr, off, len;
	unsigned int nchunks = 1, k, rail, room;
	bool have_keys;
	u32 seq, free;
	int i, ret = 0;
	u8 cl;

	const struct ib_sge *sg = isge ?: wr->sg_list;
	int nsge = isge ? !!isge->length : wr->num_sge;

	if (!qp->member[qp->home])
		return -EINVAL;
	if (nsge < 0 || nsge > RBOND_MAX_SGE)
		return -EINVAL;
	for (i = 0; i < nsge; i++)
		bytes += sg[i].length;
	/* Validate the lkeys now: errors are synchronous as before. */
	if (!isge) {
		rcu_read_lock();
		for (i = 0; i < wr->num_sge; i++) {
			if (!rbond_mr_lookup(qp->pd, wr->sg_list[i].lkey)) {
				rcu_read_unlock();
				ibdev_dbg(&bond->ibdev, "QP 0x%x: bad lkey 0x%x\n",
					  qp->ibqp.qp_num, wr->sg_list[i].lkey);
				return -EINVAL;
			}
		}
		rcu_read_unlock();
	}

	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		pl.wr.rdma = *rdma_wr(wr);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		pl.wr.atomic = *atomic_wr(wr);
		break;
	default:
		pl.wr.send = *wr;
	}
	if (!isge)
		pl.wr.send.send_flags &= ~IB_SEND_INLINE;
	memcpy(pl.sge, sg, nsge * sizeof(*sg));
	pl.num_sge = nsge;
	pl.bytes = bytes;

	rcu_read_lock();
	cl = rbond_classify(mq, &pl.wr.send, &allowed, rkeys, &have_keys);
	rcu_read_unlock();

	spin_lock(&qp->sq_lock);
	free = qp->slot_cap - (qp->sq_head - qp->sq_tail);
	/* what the application was granted, whatever room chunks leave */
	if (!free || qp->sq_wqes >= qp->cap.max_send_wr) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	if (qp->sq_failed) {
		/*
		 * RC: the QP is in error (its first error was delivered), a
		 * new WQE completes flushed.  Never posted: a member may still
		 * be at RTS and would execute it, reported as flushed.
		 */
		seq = rbond_alloc_slot(qp, wr, wc_opcode, 0, true);
		qp->sq[seq & (qp->sq_size - 1)].status = IB_WC_WR_FLUSH_ERR;
		qp->sq[seq & (qp->sq_size - 1)].flags |= RBOND_SWQE_DONE;
		spin_unlock(&qp->sq_lock);
		rbond_qp_deliver_posted(qp);
		return 0;
	}
	ok = mq->pend_head == mq->pend_tail ?
	     rbond_sched_allowed(&mq->s, cl, &pl.wr.send, ord, rd_max,
				 allowed) : 0;
	if (!ok) {
		/* Ordering point: wait for completions on other rails. */
		u32 idx = mq->pend_head & (mq->pend_size - 1);

		if (isge && bytes) {
			/* the caller's copy is gone once we return */
			u8 *inl = mq->pend_inl ?
				  mq->pend_inl + idx * rbond_inl_stride(qp) :
				  NULL;

			if (!inl) {
				ret = -ENOMEM;
				goto out_unlock;
			}
			memcpy(inl, (void *)(uintptr_t)isge->addr, bytes);
			pl.sge[0].addr = (uintptr_t)inl;
		}
		seq = rbond_alloc_slot(qp, wr, wc_opcode, bytes, true);
		pl.seq = seq;
		mq->pend[idx] = pl;
		mq->pend_head++;
		atomic64_inc(&rbond_mstats.waits);
		goto out_unlock;
	}
	thr = READ_ONCE(bond->stripe_threshold);
	if (cl != RBOND_CL_STRICT && thr && bytes > thr &&
	    hweight_long(ok) > 1 &&
	    pol != RBOND_POLICY_ACTIVE_BACKUP && pol != RBOND_POLICY_QP_HASH) {
		nchunks = min_t(u64, DIV_ROUND_UP_ULL(bytes, thr),
				hweight_long(ok) * 2);
		/* keep room for a full queue of application WQEs */
		nchunks = free > qp->cap.max_send_wr ?
			  min(nchunks, free - qp->cap.max_send_wr) : 1;
		/* READs: no more chunks than free READ slots */
		rbond_sched_rd_free(&mq->s, ok, wr->opcode, rd_max, &room);
		nchunks = clamp(room, 1U, nchunks);
	}
	len = DIV64_U64_ROUND_UP(bytes, nchunks);
	/* as many chunks as len takes: none empty, off < bytes */
	if (len)
		nchunks = DIV64_U64_ROUND_UP(bytes, len);
	for (k = 0, off = 0; k < nchunks; k++, off += len) {
		u64 l = min(len, bytes - off);

		rail = rbond_sched_pick(&mq->s, pol,
					rbond_sched_rd_free(&mq->s, ok,
							    wr->opcode,
							    rd_max, NULL) ?: ok,
					l);
		seq = rbond_alloc_slot(qp, wr, wc_opcode, l,
				       k == nchunks - 1);
		ret = rbond_post_slot(mq, p, seq, rail, off, l,
				      have_keys ? rkeys : NULL, cl);
		if (ret) {
			rbond_sq_unalloc(qp);
			if (!k)
				goto out_unlock;
			/* Later chunk: report it as an error completion. */
			seq = rbond_alloc_slot(qp, wr, wc_opcode, 0, true);
			qp->sq[seq & (qp->sq_size - 1)].status =
				IB_WC_LOC_QP_OP_ERR;
			qp->sq[seq & (qp->sq_size - 1)].flags |=
				RBOND_SWQE_DONE | RBOND_SWQE_SIGNALED;
			ret = 0;
			break;
		}
	}
	if (nchunks > 1)
		atomic64_add(nchunks, &rbond_mstats.chunks);
out_unlock:
	spin_unlock(&qp->sq_lock);
	return ret;
}

/*
 * Old (home-only) path after publish, before the switch (sq_lock held):
 * account the slot and have its member WQE signaled.
 */
bool rbond_mrail_account_old(struct rbond_qp *qp, struct rbond_swqe *e)
{
	struct rbond_mqp *mq = qp->mrail;

	if (!mq || !mq->want_up)
		return false;
	rbond_sched_posted(&mq->s, e, e->rail, RBOND_CL_STRICT,
			   rbond_wc_is_rd(e->opcode), 0, e->byte_len);
	return true;
}

/* A slot completed (sq_lock held), before its byte_len is overwritten. */
void rbond_mrail_slot_done(struct rbond_qp *qp, struct rbond_swqe *e)
{
	if (qp->mrail)
		rbond_sched_done(&qp->mrail->s, e);
}

/*
 * Completion path (cq->lock and sq_lock held): post what may go now.  True
 * when a waiting WQE completed instead (its post failed): the caller
 * delivers again.
 */
bool rbond_mrail_drain(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	u32 rkeys[RBOND_MAX_RAILS];
	unsigned long allowed, ok;
	struct rbond_pend *p;
	struct rbond_swqe *e;
	bool have_keys, done = false;
	u8 cl;

	if (!mq)
		return false;
	if (mq->want_up && !mq->up && (s32)(qp->sq_tail - mq->up_seq) >= 0)
		rbond_mq_set_up(mq);
	while (mq->pend_tail != mq->pend_head) {
		p = &mq->pend[mq->pend_tail & (mq->pend_size - 1)];
		rcu_read_lock();
		cl = rbond_classify(mq, &p->wr.send, &allowed, rkeys,
				    &have_keys);
		rcu_read_unlock();
		ok = rbond_sched_allowed(&mq->s, cl, &p->wr.send,
					 READ_ONCE(mq->bond->ordering),
					 READ_ONCE(mq->app.max_rd_atomic),
					 allowed);
		if (!ok)
			break;
		mq->pend_tail++;
		if (rbond_post_slot(mq, p, p->seq,
				    rbond_sched_pick(&mq->s,
						     READ_ONCE(mq->bond->policy),
						     ok, p->bytes), 0,
				    p->bytes, have_keys ? rkeys : NULL, cl)) {
			e = &qp->sq[p->seq & (qp->sq_size - 1)];
			e->status = IB_WC_LOC_QP_OP_ERR;
			e->flags |= RBOND_SWQE_DONE | RBOND_SWQE_SIGNALED;
			done = true;
		}
	}
	return done;
}

int rbond_mrail_fill_res(struct sk_buff *msg, struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned long flags, rails;
	bool up;

	if (!mq)
		return 0;
	spin_lock_irqsave(&qp->sq_lock, flags);
	up = mq->up;
	rails = mq->s.rails_up;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (rdma_nl_put_driver_string(msg, "multirail",
				      up ? "up" : mq->gave_up ? "single" :
				      "negotiating") ||
	    rdma_nl_put_driver_u32_hex(msg, "rails_up", rails))
		return -EMSGSIZE;
	return 0;
}

int rbond_mrail_init(void)
{
	return 0;
}

void rbond_mrail_exit(void)
{
	rbond_ctrl_exit();
}
