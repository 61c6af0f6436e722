// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: multi-rail, the QP side.
 *
 * A QP created while multi-rail is on (module parameter multirail) on a
 * bond with two rails or more gets a struct rbond_mqp: the state of its
 * negotiation with the peer (rbond_negotiate.c), the extra-rail member QPs
 * and whether they are up.  This file holds that object, the registry that
 * finds it by QPN (control messages name QPs), the hooks the QP object
 * calls (create, modify, RESET, destroy, rail removal, error), the
 * counters, and the table of control-message handlers the control channel
 * dispatches to (rbond_ctrl.c imports nothing of multi-rail).
 */
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_cm.h>
#include <rdma/rdma_netlink.h>

#include "rbond_mqp.h"

bool rbond_multirail = true;
module_param_named(multirail, rbond_multirail, bool, 0644);
MODULE_PARM_DESC(multirail,
		 "Negotiate extra rails with bond peers for QPs created while set (default on)");

static unsigned int rbond_upgrade_wait_ms = 1000;
module_param_named(upgrade_wait_ms, rbond_upgrade_wait_ms, uint, 0644);
MODULE_PARM_DESC(upgrade_wait_ms,
		 "How long modify_qp(RTS) waits for the extra rails (ms, default 1000, 0: not at all)");

struct rbond_mstats rbond_mstats;

/* the registry: rbond_mq_hash, mq->registered */
DEFINE_MUTEX(rbond_mq_mutex);
static DEFINE_HASHTABLE(rbond_mq_hash, 8);

static int rbond_mstats_get(char *buf, const struct kernel_param *kp)
{
	struct rbond_mstats *s = &rbond_mstats;

	return sysfs_emit(buf,
			  "probes_failed %lld\nqp_up %lld\nrkey_hits %lld\nrkey_misses %lld\nrkey_invals %lld\ninval_timeouts %lld\nbad_msgs %lld\nstriped %lld\nchunks %lld\nwaits %lld\nqp_failed %lld\nfailovers %lld\nfailover_replayed %lld\nfailover_unfenced %lld\ndma_mapped %lld\ndma_unmapped %lld\nrejoin_probes %lld\nrejoin_probe_fails %lld\nprobe_recvs %lld\nprobe_recv_errors %lld\nupgrade_timeouts %lld\nhome_moves %lld\natomics_lost %lld\nhome_primes %lld\nhome_prime_fails %lld\nctrl_half_open %lld\nconn_renewed %lld\n",
			  atomic64_read(&rbond_ctrl_stats.probes_failed),
			  atomic64_read(&s->qp_up),
			  atomic64_read(&s->rkey_hits),
			  atomic64_read(&s->rkey_misses),
			  atomic64_read(&s->rkey_invals),
			  atomic64_read(&s->inval_timeouts),
			  atomic64_read(&rbond_ctrl_stats.bad_msgs),
			  atomic64_read(&s->striped),
			  atomic64_read(&s->chunks),
			  atomic64_read(&s->waits),
			  atomic64_read(&s->qp_failed),
			  atomic64_read(&s->failovers),
			  atomic64_read(&s->fo_replayed),
			  atomic64_read(&s->fo_failed),
			  atomic64_read(&s->dma_mapped),
			  atomic64_read(&s->dma_unmapped),
			  atomic64_read(&s->rejoin_probes),
			  atomic64_read(&s->rejoin_probe_fails),
			  atomic64_read(&s->probe_recvs),
			  atomic64_read(&s->probe_recv_errors),
			  atomic64_read(&s->upgrade_timeouts),
			  atomic64_read(&s->home_moves),
			  atomic64_read(&s->atomics_lost),
			  atomic64_read(&s->home_primes),
			  atomic64_read(&s->home_prime_fails),
			  atomic64_read(&rbond_ctrl_stats.half_open),
			  atomic64_read(&s->conn_renewed));
}

static const struct kernel_param_ops rbond_mstats_ops = {
	.get = rbond_mstats_get,
};

module_param_cb(mrail_stats, &rbond_mstats_ops, NULL, 0444);
MODULE_PARM_DESC(mrail_stats, "Multi-rail counters (read only)");

/**
 * rbond_gid_ipv4() - the IPv4 address of an IPv4-mapped GID
 * @gid: the GID (16 bytes)
 *
 * Any context.
 * Return: the IPv4 address, or 0 if @gid is not IPv4-mapped.
 */
__be32 rbond_gid_ipv4(const u8 *gid)
{
	const struct in6_addr *a = (const struct in6_addr *)gid;

	return ipv6_addr_v4mapped(a) ? a->s6_addr32[3] : 0;
}

/* --- registry -------------------------------------------------------------- */

/**
 * rbond_mq_find() - the registered multi-rail QP of a QPN
 * @dev: the member device of the QP's home rail (the QPN's namespace)
 * @qpn: the bond QP's QPN (its home member's), as control messages name it
 *
 * Locks: rbond_mq_mutex held.
 * Return: the multi-rail QP, or NULL if none is registered.
 */
struct rbond_mqp *rbond_mq_find(struct ib_device *dev, u32 qpn)
{
	struct rbond_mqp *mq;

	lockdep_assert_held(&rbond_mq_mutex);
	hash_for_each_possible(rbond_mq_hash, mq, hnode, qpn)
		if (mq->registered && mq->home_dev == dev &&
		    mq->qp->ibqp.qp_num == qpn)
			return mq;
	return NULL;
}

/**
 * rbond_mq_peer_addr_ok() - whether @raddr is one of @mq's peer's addresses
 * @mq: the multi-rail QP
 * @raddr: a connection's peer address
 *
 * The address the application connected to, or (once the peer named its
 * rails) one of the peer's rails: after a home-rail failover the control
 * connection runs between two other rails.
 */
bool rbond_mq_peer_addr_ok(struct rbond_mqp *mq, __be32 raddr)
{
	unsigned int i;

	if (raddr && raddr == mq->peer_addr)
		return true;
	if (!raddr || !READ_ONCE(mq->have_peer))
		return false;
	for (i = 0; i < READ_ONCE(mq->peer_nrails) && i < RBOND_MAX_RAILS; i++)
		if (rbond_gid_ipv4(mq->peer_rail[i].gid) == raddr)
			return true;
	return false;
}

/**
 * rbond_mq_find_conn() - the multi-rail QP a control message names
 * @conn: the connection it came on
 * @qpn: the bond QP's QPN
 *
 * As rbond_mq_find() on the connection's device; failing that, a QP of the
 * bond that device is a rail of, whose peer has the connection's address
 * (a control connection that moved with a home-rail failover).  The
 * caller checks the message's nonce.
 * Locks: rbond_mq_mutex held.
 */
struct rbond_mqp *rbond_mq_find_conn(struct rbond_conn *conn, u32 qpn)
{
	struct rbond_mqp *mq = rbond_mq_find(conn->dmadev, qpn);
	unsigned int i;

	if (mq)
		return mq;
	hash_for_each_possible(rbond_mq_hash, mq, hnode, qpn) {
		if (!mq->registered || mq->qp->ibqp.qp_num != qpn ||
		    !rbond_mq_peer_addr_ok(mq, conn->raddr))
			continue;
		for (i = 0; i < RBOND_MAX_RAILS; i++)
			if (READ_ONCE(mq->bond->rails[i].ibdev) == conn->dmadev)
				return mq;
	}
	return NULL;
}

/**
 * rbond_mq_for_each() - call @fn for every multi-rail QP of @bond
 * @bond: the bond, or NULL for every bond
 * @fn: the function
 * @arg: its argument
 *
 * Locks: rbond_mq_mutex held.
 */
void rbond_mq_for_each(struct rbond_dev *bond,
		       void (*fn)(struct rbond_mqp *mq, void *arg), void *arg)
{
	struct rbond_mqp *mq;
	unsigned int bkt;

	lockdep_assert_held(&rbond_mq_mutex);
	hash_for_each(rbond_mq_hash, bkt, mq, hnode)
		if (!bond || mq->bond == bond)
			fn(mq, arg);
}

/**
 * rbond_mq_walk() - rbond_mq_for_each() under rbond_mq_mutex
 * @bond: the bond, or NULL for every bond
 * @fn: the function
 * @arg: its argument
 *
 * Locks: rbond_mq_mutex not held (taken here).  Process context.
 */
void rbond_mq_walk(struct rbond_dev *bond,
		   void (*fn)(struct rbond_mqp *mq, void *arg), void *arg)
{
	mutex_lock(&rbond_mq_mutex);
	rbond_mq_for_each(bond, fn, arg);
	mutex_unlock(&rbond_mq_mutex);
}

/**
 * rbond_mq_kick() - (re)schedule @mq's negotiation work on rbond_wq
 * @mq: the multi-rail QP
 * @delay: in jiffies, 0 for at once
 *
 * A pending work item is moved to the new time (mod_delayed_work()).
 * Any context.
 */
void rbond_mq_kick(struct rbond_mqp *mq, unsigned long delay)
{
	mod_delayed_work(rbond_wq, &mq->work, delay);
}

/**
 * rbond_mq_kick_later() - schedule @mq's negotiation work, never later
 *	than it is already due
 * @mq: the multi-rail QP
 * @delay: in jiffies
 *
 * For timers of its own (failback): a pending run keeps its time.
 * Any context.
 */
void rbond_mq_kick_later(struct rbond_mqp *mq, unsigned long delay)
{
	queue_delayed_work(rbond_wq, &mq->work, delay);
}

/* --- QP hooks --------------------------------------------------------------- */

static void rbond_mq_fail_work(struct work_struct *work);

/* The QP no longer counts for its CQs' member sizes.  bond->lock held. */
static void rbond_mrail_unsize(struct rbond_qp *qp, struct rbond_mqp *mq)
{
	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!mq->sized)
		return;
	qp->scq->mrail_wr -= qp->slot_cap;
	qp->rcq->mrail_wr -= qp->cap.max_recv_wr + RBOND_PROBE_RECV_WR;
	mq->sized = false;
}

/**
 * rbond_mrail_qp_create() - give a new QP its multi-rail state
 * @qp: the QP, just created on its home rail
 *
 * Only while multi-rail is on, on a bond with two rails or more whose
 * member CQs can take the QP's all-signaled member WQEs (rbond_cq_fit());
 * otherwise, or without memory, the QP stays single-rail (qp->mrail NULL).
 * Listens on every rail address first, then registers the QP by QPN.
 * Locks: none held; takes bond->lock and rbond_mq_mutex.
 * Context: process context, may sleep.
 */
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
	mutex_init(&mq->lock);
	spin_lock_init(&mq->attr_lock);
	INIT_DELAYED_WORK(&mq->work, rbond_mq_work);
	INIT_WORK(&mq->fail_work, rbond_mq_fail_work);
	rbond_fo_mq_init(mq);
	init_waitqueue_head(&mq->up_wq);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		mq->m[i].peer = -1;

	mutex_lock(&bond->lock);
	mq->home_dev = bond->rails[qp->home].ibdev;
	mq->key_home = qp->home;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!rbond_rail_present(bond, i))
			continue;
		addrs[i] = rbond_ndev_ipv4(bond->rails[i].ndev);
		n++;
	}
	if (n >= 2) {
		/* member CQs for all-signaled member WQEs (rbond_cq_fit) */
		qp->scq->mrail_wr += qp->slot_cap;
		qp->rcq->mrail_wr += qp->cap.max_recv_wr + RBOND_PROBE_RECV_WR;
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

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
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
		struct ib_qp *member = m->published ? qp->member[i] : m->qp;

		if (i == qp->home || !member || m->state == RBOND_M_ERR)
			continue;
		ret = ib_modify_qp(member, &a, mask);
		if (ret && mask == IB_QP_ACCESS_FLAGS && !revoke)
			continue;	/* keeps what it had, no more */
		if (ret && mask == IB_QP_ACCESS_FLAGS) {
			a.qp_state = IB_QPS_ERR;
			ret = ib_modify_qp(member, &a, IB_QP_STATE);
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

/**
 * rbond_mrail_qp_modified() - remember the application's attributes
 * @qp: the QP, whose home member was just modified
 * @attr: the attributes given to modify_qp
 * @mask: which of them (IB_QP_* bits)
 *
 * From modify_qp.  The extra-rail members follow an error state or new
 * access rights (rbond_mrail_mirror()); RTR and RTS kick the negotiation.
 * Locks: bond->lock held.
 */
void rbond_mrail_qp_modified(struct rbond_qp *qp, const struct ib_qp_attr *attr,
			     int mask)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned long flags;
	bool kick = false;
	int old_access;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
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

/**
 * rbond_mrail_lock() - take @qp's mq->lock, for modify_qp(RESET)
 * @qp: the QP; nothing to take if it is single-rail
 *
 * mq->lock orders before bond->lock.  Released by rbond_mrail_unlock().
 * Locks: bond->lock not held yet.
 */
void rbond_mrail_lock(struct rbond_qp *qp)
{
	if (qp->mrail)
		mutex_lock(&qp->mrail->lock);
}

/**
 * rbond_mrail_unlock() - release the mq->lock rbond_mrail_lock() took
 * @qp: the QP; nothing to release if it is single-rail
 *
 * Locks: mq->lock held, by rbond_mrail_lock().
 */
void rbond_mrail_unlock(struct rbond_qp *qp)
{
	if (qp->mrail)
		mutex_unlock(&qp->mrail->lock);
}

/**
 * rbond_mrail_qp_reset_sq() - RESET, the send queue's part
 * @qp: the QP, whose shadow send queue was just emptied
 *
 * From modify_qp(RESET): back to the home rail, nothing waiting, nothing
 * in flight.  The rest follows in rbond_mrail_qp_reset().
 * Locks: sq_post_lock and sq_lock held (and, as for all of modify_qp(RESET),
 * mq->lock and bond->lock).
 */
void rbond_mrail_qp_reset_sq(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	lockdep_assert_held(&qp->sq_lock);
	if (!mq)
		return;
	WRITE_ONCE(mq->up, false);
}

/**
 * rbond_mrail_qp_reset() - RESET, the rest
 * @qp: the QP
 *
 * From modify_qp(RESET), after rbond_mrail_qp_reset_sq(): the shadow
 * queues are empty, the published extra-rail members destroyed by
 * rbond_qp_reset().  Back to a QP that has not negotiated, so that one
 * connected again (maybe to another peer) renegotiates from scratch - new
 * members, new control connection, nothing of the old peer's.
 * Locks: mq->lock and bond->lock held, no spinlock.
 */
void rbond_mrail_qp_reset(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_conn *conn, *req_conn, *rsp_conn;
	unsigned long flags;
	unsigned int i;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!mq)
		return;

	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (m->qp && !m->published)
			rbond_member_destroy_qp(to_rbond_dev(qp->ibqp.device), i, m->qp);
		memset(m, 0, sizeof(*m));
		m->peer = -1;
	}
	rbond_mq_set_state(mq, RBOND_NEG_INIT);
	rbond_fo_mq_reset(mq);
	mq->have_peer = false;
	mq->peer_nrails = 0;
	mq->tries = 0;
	conn = mq->conn;
	mq->conn = NULL;
	mq->conn_heard = false;
	mq->dead_seen = 0;
	mq->renew_fails = 0;

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
	if (mq->have_peer_nonce) {
		memcpy(mq->old_peer_nonce, mq->peer_nonce,
		       sizeof(mq->old_peer_nonce));
		mq->have_old_peer_nonce = true;
	}
	mq->have_peer_nonce = false;
	memset(mq->peer_nonce, 0, sizeof(mq->peer_nonce));
	get_random_bytes(mq->nonce, sizeof(mq->nonce));
	spin_unlock_irqrestore(&mq->attr_lock, flags);
	rbond_conn_put(conn);
	rbond_conn_put(req_conn);
	rbond_conn_put(rsp_conn);
}

/**
 * rbond_mrail_qp_destroy() - stop the multi-rail machinery before destroy
 * @qp: the QP being destroyed
 *
 * Before destroy: nothing of ours may touch the QP afterwards.  The QP
 * leaves the registry, its work is cancelled and its unpublished
 * extra-rail members are destroyed; rbond_mrail_qp_free() frees the rest.
 * Locks: none held; takes rbond_mq_mutex, mq->lock and bond->lock.
 * Context: process context, may sleep.
 */
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
			rbond_member_destroy_qp(bond, i, mq->m[i].qp);
		mq->m[i].qp = NULL;
	}
	if (mq->first)
		rbond_member_destroy_qp(bond, mq->key_home, mq->first);
	mq->first = NULL;
	mutex_unlock(&bond->lock);
}

/**
 * rbond_mrail_qp_free() - free @qp's multi-rail state
 * @qp: the QP, out of qp_xa, its members destroyed
 *
 * The end of destroy_qp, after rbond_mrail_qp_destroy(): the QP no longer
 * counts for its CQs' member sizes and drops its control connections.
 * Locks: none held; takes bond->lock.
 * Context: process context, may sleep.
 */
void rbond_mrail_qp_free(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	if (!mq)
		return;
	/*
	 * Only now: the QP is out of qp_xa and its CQs' locks were taken
	 * since, so no completion is being processed that could queue the
	 * work again (rbond_mrail_qp_failed(), rbond_fo_catch(), and a
	 * rejoin probe's completion: rbond_mq_probe_wc()).
	 */
	cancel_work_sync(&mq->fail_work);
	cancel_delayed_work_sync(&mq->fo_work);
	cancel_delayed_work_sync(&mq->work);
	mutex_lock(&mq->bond->lock);
	rbond_mrail_unsize(qp, mq);
	mutex_unlock(&mq->bond->lock);
	qp->mrail = NULL;
	rbond_conn_put(mq->conn);
	rbond_conn_put(mq->req_conn);
	rbond_conn_put(mq->rsp_conn);
	rbond_conn_put(mq->fence_conn);
	rbond_conn_put(mq->mv_conn);
	rbond_conn_put(mq->mv_ack_conn);
	kfree(mq->first_attr);
	kfree(mq);
}

/**
 * rbond_mrail_qp_remove_rail() - @rail's member device goes away
 * @qp: the QP
 * @rail: the rail
 *
 * The unpublished extra-rail member on @rail is destroyed and the rail's
 * member marked in error.
 * Locks: bond->lock held.
 */
void rbond_mrail_qp_remove_rail(struct rbond_qp *qp, unsigned int rail)
{
	struct rbond_mqp *mq = qp->mrail;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!mq)
		return;
	if (mq->m[rail].qp && !mq->m[rail].published)
		rbond_member_destroy_qp(to_rbond_dev(qp->ibqp.device), rail,
					mq->m[rail].qp);
	mq->m[rail].qp = NULL;
	mq->m[rail].state = RBOND_M_ERR;
	if (rail == mq->key_home && mq->first) {
		/* the QP cannot go back to its first home member any more */
		rbond_member_destroy_qp(to_rbond_dev(qp->ibqp.device), rail,
					mq->first);
		mq->first = NULL;
		mq->first_dirty = false;
	}
}

/*
 * RC after an error: the QP is in error and every later WQE completes with
 * a flush error.  The completion path (rbond_comp.c) flushes in posting order
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

/**
 * rbond_mrail_qp_failed() - the first error completion was just delivered
 * @qp: the QP
 *
 * A multi-rail QP's member QPs go to error from a work item
 * (rbond_mq_fail_work()); a single-rail QP's member flushes itself.
 * Locks: sq_lock held.
 */
void rbond_mrail_qp_failed(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	lockdep_assert_held(&qp->sq_lock);
	if (!mq)
		return;		/* single rail: the member QP flushes itself */
	atomic64_inc(&rbond_mstats.qp_failed);
	if (!READ_ONCE(mq->dead))	/* destroy_qp cancels it later */
		queue_work(system_unbound_wq, &mq->fail_work);
}

/**
 * rbond_mrail_wait_up() - give the negotiation a bounded chance to finish
 * @qp: the QP, just moved to RTS by the application
 *
 * Right after the application moved the QP to RTS: give the negotiation a
 * bounded chance (module parameter upgrade_wait_ms) to finish before the
 * first WQE.  Otherwise every WQE posted before it finishes runs on the
 * home rail (the upgrade ramp), which for an application that posts its
 * whole transfer at once (perftest with a deep queue) is all of it.  A peer
 * that is not a bond gives up at once (negative cache) or within the wait;
 * one whose QP is not yet at RTR (it connects after us) costs at most the
 * wait.
 * Locks: no lock held.
 * Context: process context, sleeps (killable).
 */
void rbond_mrail_wait_up(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;

	if (!mq || !READ_ONCE(rbond_upgrade_wait_ms))
		return;
	if (!wait_event_killable_timeout(mq->up_wq, READ_ONCE(mq->up) ||
					 READ_ONCE(mq->state) == RBOND_NEG_SINGLE,
					 msecs_to_jiffies(READ_ONCE(rbond_upgrade_wait_ms))))
		atomic64_inc(&rbond_mstats.upgrade_timeouts);
}

static const char * const rbond_neg_names[RBOND_NR_NEG_STATES] = {
	[RBOND_NEG_INIT] = "init",
	[RBOND_NEG_ASKING] = "asking",
	[RBOND_NEG_AGREED] = "agreed",
	[RBOND_NEG_UP] = "up",
	[RBOND_NEG_SINGLE] = "single",
};

/* The transitions rbond_mq_set_state() takes (INIT: RESET, from any). */
static const u8 rbond_neg_next[RBOND_NR_NEG_STATES] = {
	[RBOND_NEG_INIT] = BIT(RBOND_NEG_ASKING) | BIT(RBOND_NEG_SINGLE),
	[RBOND_NEG_ASKING] = BIT(RBOND_NEG_AGREED) | BIT(RBOND_NEG_SINGLE),
	[RBOND_NEG_AGREED] = BIT(RBOND_NEG_UP) | BIT(RBOND_NEG_SINGLE),
	[RBOND_NEG_UP] = BIT(RBOND_NEG_SINGLE),
	[RBOND_NEG_SINGLE] = 0,
};

const char *rbond_mq_state_name(enum rbond_neg_state st)
{
	return st < RBOND_NR_NEG_STATES ? rbond_neg_names[st] : "?";
}

/**
 * rbond_mq_set_state() - the one place the negotiation changes state
 * @mq: the multi-rail QP
 * @st: the new state
 *
 * A transition the diagram in rbond_mqp.h does not have is ignored (a
 * QP_RSP that comes after the QP went single stays without effect).
 * Waiters of rbond_mrail_wait_up() wake on UP and SINGLE.
 * Locks: mq->lock held.
 */
void rbond_mq_set_state(struct rbond_mqp *mq, enum rbond_neg_state st)
{
	enum rbond_neg_state old = mq->state;

	lockdep_assert_held(&mq->lock);
	if (old == st || (st != RBOND_NEG_INIT &&
			  !(rbond_neg_next[old] & BIT(st))))
		return;
	ibdev_dbg(&mq->bond->ibdev, "QP 0x%x: negotiation %s -> %s\n",
		  mq->qp->ibqp.qp_num, rbond_neg_names[old],
		  rbond_neg_names[st]);
	WRITE_ONCE(mq->state, st);
	if (st == RBOND_NEG_UP || st == RBOND_NEG_SINGLE)
		wake_up_all(&mq->up_wq);
}

/**
 * rbond_mrail_may_stripe() - whether @qp may use more than its home rail
 * @qp: the QP
 *
 * A multi-rail QP that did not (yet) go single: its member WQEs are all
 * signaled and accounted by the scheduler, so that extra rails can join
 * at any time.  One that went single (a plain peer) posts as a native QP
 * would.  Any context.
 */
bool rbond_mrail_may_stripe(const struct rbond_qp *qp)
{
	return qp->mrail && READ_ONCE(qp->mrail->state) != RBOND_NEG_SINGLE;
}

/**
 * rbond_mrail_up() - whether @qp's extra rails are published
 * @qp: the QP
 *
 * Until then (and for good on a single-rail QP) a WQE may use the home
 * rail only.  Any context.
 */
bool rbond_mrail_up(const struct rbond_qp *qp)
{
	return qp->mrail && READ_ONCE(qp->mrail->up);
}

/**
 * rbond_mrail_home_moved() - whether @qp's home rail moved (failover)
 * @qp: the QP
 *
 * Its remote keys are then translated for every rail, the home rail's
 * too: the application's are valid on the peer's first home member only.
 * Any context.
 */
bool rbond_mrail_home_moved(const struct rbond_qp *qp)
{
	return qp->mrail && READ_ONCE(qp->mrail->home_moved);
}

/**
 * rbond_mrail_key_rail() - the rail of @qp's first home member
 * @qp: the QP
 *
 * The member the application connected (its path, its peer's QPN): the
 * home member, unless the home moved - then it stays in error on its rail
 * until a reset takes the QP back to it (rbond_mrail_home_restore()).
 * Locks: bond->lock held.
 * Return: the rail.
 */
unsigned int rbond_mrail_key_rail(const struct rbond_qp *qp)
{
	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	return rbond_mrail_home_moved(qp) ? qp->mrail->key_home : qp->home;
}

/**
 * rbond_mrail_first_aside() - the first home member leaves its slot
 * @qp: the QP, whose home moved
 *
 * Its rail rejoins the QP as an extra rail, with a new member in
 * qp->member[]; the first home member (in error, drained since the move
 * ended) is kept in mq->first.  Nothing if it is not in its slot (its
 * device went, or it went aside before).
 * Locks: mq->lock and bond->lock held.
 */
void rbond_mrail_first_aside(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned int key = mq->key_home;
	unsigned long flags;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (mq->first || !qp->member[key])
		return;
	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	mq->first = qp->member[key];
	qp->member[key] = NULL;
	spin_unlock(&qp->sq_lock);
	spin_unlock(&qp->rq_post_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
}

/**
 * rbond_mrail_first_member() - @qp's first home member
 * @qp: the QP
 *
 * The member the application connected: what query_qp reports of its
 * path and peer.  NULL if its device went.
 * Locks: bond->lock held.
 * Return: the member QP, or NULL.
 */
struct ib_qp *rbond_mrail_first_member(const struct rbond_qp *qp)
{
	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (qp->mrail && qp->mrail->first)
		return qp->mrail->first;
	return qp->member[rbond_mrail_key_rail(qp)];
}

/**
 * rbond_mrail_first_keep() - keep what query_qp reports of the first home
 *	member, whose device is going
 * @qp: the QP
 * @rail: the rail going
 * @attr: the member's attributes, translated to the bond's (taken)
 *
 * Return: true when @attr was taken (and is freed with the QP).
 * Locks: bond->lock held.
 */
bool rbond_mrail_first_keep(struct rbond_qp *qp, unsigned int rail,
			    struct ib_qp_attr *attr)
{
	struct rbond_mqp *mq = qp->mrail;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!mq || rail != mq->key_home || mq->first_attr)
		return false;
	mq->first_attr = attr;
	return true;
}

/**
 * rbond_mrail_first_kept() - what the first home member had, if its device
 *	went
 * @qp: the QP
 * @attr: filled from rbond_mrail_first_keep()'s copy
 *
 * Return: true when @attr was filled.
 * Locks: bond->lock held.
 */
bool rbond_mrail_first_kept(const struct rbond_qp *qp,
			    struct ib_qp_attr *attr)
{
	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!qp->mrail || !qp->mrail->first_attr)
		return false;
	*attr = *qp->mrail->first_attr;
	return true;
}

/**
 * rbond_mrail_home_restore() - RESET of a QP whose home rail moved
 * @qp: the QP
 *
 * The QP is known to the peer by its first home member's QPN, which a
 * new connection names: the home goes back to that member (in error since
 * the failover, reset now by modify_qp) and the member that served as
 * home since becomes an extra one again, dropped with the others by the
 * reset.  If the first home member's device was removed, its QPN - the
 * QP's - went with it: no new connection can reach the QP, the RESET is
 * refused and the QP goes on as it was.
 * Locks: mq->lock and bond->lock held.
 * Return: 0, or -EIO (nothing changed).
 */
int rbond_mrail_home_restore(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned int old;
	unsigned long flags;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	if (!mq || !mq->home_moved)
		return 0;
	old = mq->key_home;
	if (!mq->first && !qp->member[old])
		return -EIO;
	if (mq->first) {
		/* its rail rejoined: that member goes, the first comes back */
		rbond_qp_destroy_member(qp, old);
		mq->m[old].qp = NULL;
		mq->m[old].published = false;
	}
	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	spin_lock(&qp->rq_lock);
	if (mq->first) {
		qp->member[old] = mq->first;
		mq->first = NULL;
	}
	qp->home = old;
	qp->s.home = old;
	qp->rq_rail = old;
	qp->rq_moving = false;
	spin_unlock(&qp->rq_lock);
	spin_unlock(&qp->sq_lock);
	spin_unlock(&qp->rq_post_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
	WRITE_ONCE(mq->home_moved, false);
	return 0;
}

/**
 * rbond_mrail_prime() - the first READ on a first home member brought back
 * @qp: the QP, just modified to RTS
 *
 * rxe's completer (6.1; 6.12 not checked) keeps the READ-response opcode it
 * was in the middle of across a reset: a member that stopped there (its
 * rail failed under a READ: mq->first_dirty) and is connected again takes
 * the first acknowledgment of the new connection for a broken response
 * sequence, WARNs (rxe_comp.c "COMPST_ERROR") and fails the WQE and the
 * QP.  A one-packet READ response is the one packet such a completer
 * takes, and it starts it afresh: so the bond's own zero-length READ goes
 * first (no memory touched, no key checked; an RC READ any peer that took
 * our READs answers), before anything of the application's.  Only with
 * READs allowed (max_rd_atomic), which the READ cut short had.
 * Locks: bond->lock held.
 */
void rbond_mrail_prime(struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	struct ib_qp *member = qp->member[qp->home];
	int ret;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	/* back on the first home member: after a reset (home_restore) */
	if (!mq || !mq->first_dirty || READ_ONCE(mq->home_moved) ||
	    qp->state != IB_QPS_RTS)
		return;
	mq->first_dirty = false;
	if (!member || !READ_ONCE(qp->max_rd_atomic))
		return;
	ret = rbond_mq_post_prime(mq, qp->home, member);
	if (ret)
		ibdev_dbg(qp->ibqp.device, "QP 0x%x: primer READ not posted: %d\n",
			  qp->ibqp.qp_num, ret);
}

/**
 * rbond_mrail_fill_res() - the multi-rail part of "rdma res show qp -dd"
 * @msg: the netlink message, inside the QP's driver table
 * @qp: the QP
 *
 * Adds "multirail" (up, single or negotiating), "negotiation" (the state)
 * and "rails_up"; nothing for a single-rail QP.
 * Locks: sq_lock not held (taken here).
 * Return: 0, or -EMSGSIZE when @msg is full.
 */
int rbond_mrail_fill_res(struct sk_buff *msg, struct rbond_qp *qp)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned long flags, rails;
	enum rbond_neg_state st;
	bool up;

	if (!mq)
		return 0;
	spin_lock_irqsave(&qp->sq_lock, flags);
	up = mq->up;
	rails = qp->s.rails_up;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	st = READ_ONCE(mq->state);
	if (rdma_nl_put_driver_string(msg, "multirail",
				      up ? "up" : st == RBOND_NEG_SINGLE ?
				      "single" : "negotiating") ||
	    rdma_nl_put_driver_string(msg, "negotiation",
				      rbond_mq_state_name(st)) ||
	    rdma_nl_put_driver_u32_hex(msg, "rails_up", rails) ||
	    rdma_nl_put_driver_u32_hex(msg, "rails_failed",
				       READ_ONCE(mq->fo_failed)))
		return -EMSGSIZE;
	return 0;
}

/*
 * The QPs whose control connection @conn is go on: it is up (they waited
 * for it), or down (rbond_fo_conn_renew() gives them a new one).
 */
static void rbond_mrail_conn_kick(struct rbond_conn *conn, bool up)
{
	struct rbond_mqp *mq;
	unsigned int bkt;

	mutex_lock(&rbond_mq_mutex);
	hash_for_each(rbond_mq_hash, bkt, mq, hnode)
		if (mq->conn == conn) {
			rbond_mq_kick(mq, 0);
			/* WQEs that wait for keys on the moved connection */
			if (up && READ_ONCE(mq->home_moved))
				rbond_qp_kick(mq->qp);
		}
	mutex_unlock(&rbond_mq_mutex);
}

static void rbond_mrail_conn_up(struct rbond_conn *conn)
{
	rbond_mrail_conn_kick(conn, true);
}

/* --- the control channel's handlers ------------------------------------------ */

static void rbond_mrail_conn_down(struct rbond_conn *conn)
{
	rbond_inval_wake(conn);
	rbond_mrail_conn_kick(conn, false);
}

static const struct rbond_ctrl_ops rbond_mrail_ctrl_ops = {
	.msg = {
		[RBOND_MSG_QP_REQ] = rbond_handle_qp_msg,
		[RBOND_MSG_QP_RSP] = rbond_handle_qp_msg,
		[RBOND_MSG_RKEY_REQ] = rbond_handle_rkey_req,
		[RBOND_MSG_RKEY_RSP] = rbond_handle_rkey_rsp,
		[RBOND_MSG_INVAL] = rbond_handle_inval,
		[RBOND_MSG_INVAL_ACK] = rbond_handle_inval_ack,
		[RBOND_MSG_FENCE] = rbond_handle_fence,
		[RBOND_MSG_FENCE_ACK] = rbond_handle_fence_ack,
		[RBOND_MSG_PEER_ERR] = rbond_handle_peer_err,
	},
	.conn_up = rbond_mrail_conn_up,
	.conn_down = rbond_mrail_conn_down,
	.conn_release = rbond_rkey_conn_release,
	.rkey_work = rbond_rkey_fetch_work,
};

/**
 * rbond_mrail_init() - register the control channel's handlers
 *
 * At module load, before any bond exists.
 * Return: 0.
 */
int rbond_mrail_init(void)
{
	rbond_ctrl_register(&rbond_mrail_ctrl_ops);
	return 0;
}

/**
 * rbond_mrail_exit() - stop the control channel (rbond_ctrl_exit())
 *
 * At module unload, after every bond is gone.
 * Context: process context, sleeps.
 */
void rbond_mrail_exit(void)
{
	rbond_ctrl_exit();
}
