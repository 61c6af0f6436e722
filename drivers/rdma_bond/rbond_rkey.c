// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: multi-rail, remote keys.
 *
 * An RDMA WRITE or READ on an extra rail needs the peer's rkey on that
 * rail.  A per-connection cache maps the peer's primary rkey to its
 * per-rail rkeys, access flags and relaxed-ordering flag; a miss queues an
 * RKEY_REQ while the WQE goes out on the home rail.  The owner remembers
 * which connection got which key; dereg_mr sends INVAL and waits (bounded)
 * for INVAL_ACK, which the holder sends after dropping the entry and an
 * RCU grace period (every post that could have used it finished).  On
 * timeout the owner forces its own extra-rail member QPs towards that peer
 * to the error state, so the alias keys can no longer reach memory.
 * rbond_rkey_classify() gives the post path a WQE's class and rails.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_cm.h>
#include <rdma/rdma_netlink.h>

#include "rbond_mqp.h"

static DECLARE_WAIT_QUEUE_HEAD(rbond_inval_wq);

/* conn->lock held: has @mr's key already been handed out on @conn? */
static bool rbond_handed_has(struct rbond_conn *conn, u32 rkey,
			     const struct rbond_mr *mr)
{
	struct rbond_handed *h;

	lockdep_assert_held(&conn->lock);
	hash_for_each_possible(conn->handed, h, node, rkey)
		if (h->rkey == rkey && h->mr == mr)
			return true;
	return false;
}

/**
 * rbond_handle_rkey_req() - the peer asks for the alias keys of one of ours
 * @conn: the connection it came on
 * @m: the RKEY_REQ
 *
 * The peer asks for the alias keys of one of our keys.  Answered only about
 * a QP connected to the asker (its address, its QPN, the nonce our QP gave
 * it), for a remotely accessible MR of that QP's PD, and only if we can
 * track it for dereg.  Every refusal is the same NOENT with no key material.
 * Bounded cost: one xarray lookup (bond rkey == lkey, the primary member's).
 * Locks: none held; takes rbond_mq_mutex, bond->lock and conn->lock.
 * Context: process context (the control channel's receive completion).
 */
void rbond_handle_rkey_req(struct rbond_conn *conn,
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
	mq = rbond_mq_find_conn(conn, be32_to_cpu(m->dst_qpn));
	if (!mq)
		goto out_unlock;
	spin_lock_irqsave(&mq->attr_lock, flags);
	ok = mq->have_rtr && rbond_mq_peer_addr_ok(mq, conn->raddr) &&
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
		pr_debug("RKEY_REQ 0x%x for QP 0x%x from %pI4 QP 0x%x refused\n",
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

/* A QP of @arg's whose WQEs wait: the key they waited for may be known. */
static void rbond_rkey_kick_one(struct rbond_mqp *mq, void *arg)
{
	struct rbond_qp *qp = mq->qp;

	if (READ_ONCE(mq->conn) != arg || READ_ONCE(mq->dead) || !qp->pend ||
	    READ_ONCE(qp->pend_head) == READ_ONCE(qp->pend_tail))
		return;
	rbond_qp_kick(qp);
}

/**
 * rbond_handle_rkey_rsp() - the peer's answer to one of our RKEY_REQs
 * @conn: the connection it came on
 * @m: the RKEY_RSP
 *
 * The cache entry the request was sent for gets the per-rail keys and
 * access flags (and becomes valid), or becomes a negative entry on a
 * refusal.  An answer to nothing asked is ignored.
 * Locks: conn->lock not held (taken here, irqsave).
 */
void rbond_handle_rkey_rsp(struct rbond_conn *conn,
			   const struct rbond_msg *m)
{
	u32 rkey = be32_to_cpu(m->key.rkey);
	struct rbond_rkey *e;
	unsigned long flags;
	bool answered = false;
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
		answered = true;
	} else {
		pr_debug("RKEY_RSP 0x%x status %u: %s\n", rkey,
			 be32_to_cpu(m->status), e ? "not asked" : "no entry");
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!answered)
		return;
	/*
	 * The WQEs behind a QP's first one to this key wait for its
	 * completion, which on a rail shared by many QPs' first WQEs comes
	 * long after the answer (8 QPs x 1 MiB: ~1.3 s at 50 Mbit/s, the
	 * other rails idle): they may go now.
	 */
	rbond_mq_walk(NULL, rbond_rkey_kick_one, conn);
}

/**
 * rbond_handle_inval() - the peer revokes one of its keys
 * @conn: the connection it came on
 * @m: the INVAL
 *
 * The key's translation leaves @conn's cache; INVAL_ACK goes back after an
 * RCU grace period (every post that could have read the entry finished).
 * Locks: conn->lock not held (taken here, irqsave).
 * Context: process context (the control channel's receive completion),
 * sleeps (synchronize_rcu()).
 */
void rbond_handle_inval(struct rbond_conn *conn,
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

/**
 * rbond_handle_inval_ack() - the peer dropped one of our keys
 * @conn: the connection it came on
 * @m: the INVAL_ACK
 *
 * The INVALs of that key waiting on @conn are done: rbond_mrail_mr_dereg()
 * is woken.
 * Locks: conn->lock not held (taken here, irqsave).
 */
void rbond_handle_inval_ack(struct rbond_conn *conn,
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

/**
 * rbond_inval_wake() - a connection went down
 * @conn: the connection
 *
 * dereg_mr waiting for its INVAL_ACK goes on (rbond_mrail_mr_dereg()).
 * Any context.
 */
void rbond_inval_wake(struct rbond_conn *conn)
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
	lockdep_assert_held(&conn->lock);
	if (e->state != RBOND_RK_NEG && e->state != RBOND_RK_SENT)
		return false;
	if (e->state == RBOND_RK_NEG &&
	    conn->nr_rkeys >= RBOND_RKEY_MAX * 3 / 4)
		return true;
	return e->tries >= RBOND_RKEY_TRIES &&
	       time_after(jiffies, e->stamp + RBOND_RKEY_NEG_TTL);
}

/**
 * rbond_rkey_fetch_work() - send a connection's pending RKEY_REQs
 * @work: the connection's rkey_work
 *
 * Evicts the cache entries that may go (rbond_rkey_evictable()), asks
 * again for those whose request or refusal is older than RBOND_RKEY_RETRY
 * (RBOND_RKEY_TRIES times at most) and sends the requests,
 * RBOND_RKEY_BATCH per pass.
 * Locks: conn->lock not held (taken here, irqsave).
 * Context: process context (rbond_wq).
 */
void rbond_rkey_fetch_work(struct work_struct *work)
{
	struct rbond_conn *conn = container_of(work, struct rbond_conn,
					       rkey_work);
	struct {
		u32 rkey, src_qpn, dst_qpn;
		u8 echo[8];
	} todo[RBOND_RKEY_BATCH];
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
			if (e->state != RBOND_RK_PENDING || n == RBOND_RKEY_BATCH)
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
	} while (n == RBOND_RKEY_BATCH);
}

static void rbond_rkey_flush(struct rbond_conn *conn)
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

/*
 * The owner answers a key request about the QP pair that sent it only
 * (rbond_handle_rkey_req()): an entry first asked by a QP that is gone, or
 * that the key's MR is not for (another PD), would be refused again and
 * again, leaving every other QP on @mq's connection on the home rail with
 * that key until the entry is evicted.  Asked again by another QP, it is
 * asked for that QP, with tries of its own.  The entry may have left the
 * hash meanwhile (RCU keeps it): then nothing reads what changes here.
 * Context: RCU read side (the caller holds a spinlock).
 */
static void rbond_rkey_rebind(struct rbond_mqp *mq, struct rbond_rkey *e)
{
	struct rbond_conn *conn = mq->conn;
	unsigned long flags;

	/* the peer's QPN and nonce are set before the flag */
	if (!smp_load_acquire(&mq->have_peer_nonce))
		return;
	spin_lock_irqsave(&conn->lock, flags);
	if ((e->state == RBOND_RK_NEG || e->state == RBOND_RK_SENT) &&
	    e->src_qpn != mq->qp->ibqp.qp_num) {
		e->src_qpn = mq->qp->ibqp.qp_num;
		e->dst_qpn = mq->peer_qpn;
		memcpy(e->echo, mq->peer_nonce, sizeof(e->echo));
		e->tries = 0;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
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
	if (!conn || READ_ONCE(conn->state) != RBOND_CONN_UP) {
		/* a home rail that moved waits for its new connection */
		*resolving = conn && READ_ONCE(mq->home_moved) &&
			     READ_ONCE(conn->state) == RBOND_CONN_CONNECTING;
		return NULL;
	}
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
		    st != RBOND_RK_PENDING) {
			rbond_rkey_rebind(mq, e);
			queue_work(rbond_wq, &conn->rkey_work);
		}
		*resolving = st == RBOND_RK_PENDING ||
			     (st == RBOND_RK_SENT &&
			      READ_ONCE(e->tries) < RBOND_RKEY_TRIES);
		pr_debug_ratelimited("QP 0x%x: rkey 0x%x untranslated: state %u tries %u (asked by QP 0x%x)\n",
				     mq->qp->ibqp.qp_num, rkey, st,
				     READ_ONCE(e->tries), e->src_qpn);
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
	bool force_all;		/* a key that cannot be waited for */
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
		if (found) {	/* cannot wait for it: force (after the walk) */
			atomic64_inc(&rbond_mstats.inval_timeouts);
			a->force_all = true;
		}
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

struct rbond_force_arg {
	const struct rbond_conn *conn;	/* its peer's QPs; NULL: every peer */
	const struct ib_pd *pd;		/* the revoked MR's */
};

/*
 * rbond_mq_mutex and bond->lock held: @mq's extra-rail members to error -
 * those of the revoked MR's PD only: a key of it works through no member
 * QP of another PD (the member PDs are per bond PD), so another program's
 * QPs towards the same peer keep their rails.
 */
static void rbond_force_error_one(struct rbond_mqp *mq, void *arg)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	const struct rbond_force_arg *a = arg;
	unsigned int i;

	lockdep_assert_held(&rbond_mq_mutex);
	lockdep_assert_held(&mq->bond->lock);
	if (a->conn && !rbond_mq_peer_addr_ok(mq, a->conn->raddr))
		return;
	if (mq->qp->ibqp.pd != a->pd) {
		ibdev_dbg(&mq->bond->ibdev,
			  "QP 0x%x: keeps its rails: the revoked key is of another PD\n",
			  mq->qp->ibqp.qp_num);
		return;
	}
	ibdev_dbg(&mq->bond->ibdev,
		  "QP 0x%x: extra-rail members to error: a key of its PD was not revoked at the peer\n",
		  mq->qp->ibqp.qp_num);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct ib_qp *member = mq->m[i].published ?
			mq->qp->member[i] : mq->m[i].qp;

		if (i != mq->qp->home && member)
			ib_modify_qp(member, &attr, IB_QP_STATE);
	}
}

/*
 * Force our extra-rail members of @mr's PD towards @conn's peer (NULL:
 * every peer) to the error state.
 */
static void rbond_force_error(struct rbond_dev *bond, struct rbond_conn *conn,
			      struct rbond_mr *mr)
{
	struct rbond_force_arg a = { .conn = conn, .pd = mr->ibmr.pd };

	mutex_lock(&rbond_mq_mutex);
	mutex_lock(&bond->lock);
	rbond_mq_for_each(bond, rbond_force_error_one, &a);
	mutex_unlock(&bond->lock);
	mutex_unlock(&rbond_mq_mutex);
}

/**
 * rbond_mrail_mr_dereg() - revoke every alias key of @mr handed out
 * @bond: the bond
 * @mr: the MR
 *
 * From dereg_mr, before the member MRs go (the MR is off bond->mrs already,
 * so no new translation can be handed out): revoke every alias handed out.
 * INVAL goes on every connection that got the key (nothing for a DMA MR);
 * one whose INVAL_ACK does not come (within RBOND_INVAL_TIMEOUT, or before
 * it goes down) has our extra-rail members of the MR's PD towards its peer
 * forced to the error state, and is taken down if still up.
 * Locks: none held (dereg_mr dropped bond->lock); takes rbond_conn_mutex,
 * rbond_mq_mutex and bond->lock.
 * Context: process context, sleeps.
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
	if (a.force_all)	/* out of memory for a wait: every peer */
		rbond_force_error(bond, NULL, mr);
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
			rbond_force_error(bond, wc->conn, mr);
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

/* --- the post path's view -------------------------------------------------- */

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

		if (!(mq->qp->s.rails_up & BIT(i)) || pr < 0)
			continue;
		pidx = mq->peer_rail[pr].index;
		if (pidx < RBOND_MAX_RAILS && (e->rail_valid & BIT(pidx)))
			rails |= BIT(i);
	}
	return rails;
}

/**
 * rbond_rkey_classify() - ordering class of a send WQE and its rails
 * @qp: a QP whose extra rails are up (rbond_mrail_up())
 * @wr: the WQE
 * @allowed: the rails it may use (the home rail always)
 * @rkeys: its remote key per rail, when *@have_keys
 * @have_keys: the remote key is translated
 *
 * Relaxed classes are for RDMA WRITE and READ to memory whose key the peer
 * translated (and, by the device's ordering, marked relaxed); a key being
 * translated gives the unresolved class on the home rail.
 * Context: RCU read side (the caller holds a spinlock).
 * Return: enum rbond_class.
 */
u8 rbond_rkey_classify(struct rbond_qp *qp, const struct ib_send_wr *wr,
		       unsigned long *allowed, u32 *rkeys, bool *have_keys)
{
	struct rbond_mqp *mq = qp->mrail;
	struct rbond_dev *bond = mq->bond;
	enum rbond_ordering ord = READ_ONCE(bond->ordering);
	bool moved = READ_ONCE(mq->home_moved);
	const struct rbond_rkey *e;
	bool resolving, strict = false;
	unsigned int i;
	u32 need, rkey;
	u8 cl;

	*allowed = BIT(mq->qp->home);
	*have_keys = false;
	rkey = rdma_wr(wr)->rkey;
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
		cl = RBOND_CL_WRITE;
		need = IB_ACCESS_REMOTE_WRITE;
		break;
	case IB_WR_RDMA_READ:
		cl = RBOND_CL_READ;
		need = IB_ACCESS_REMOTE_READ;
		break;
	/*
	 * Strict, on the home rail; with the key as the application gave
	 * it, valid on the peer's first home member only: once the home
	 * rail moved, translated like the others.
	 */
	case IB_WR_RDMA_WRITE_WITH_IMM:
		cl = RBOND_CL_STRICT;
		need = IB_ACCESS_REMOTE_WRITE;
		strict = true;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		cl = RBOND_CL_STRICT;
		need = IB_ACCESS_REMOTE_ATOMIC;
		rkey = atomic_wr(wr)->rkey;
		strict = true;
		break;
	default:
		/* SEND*: receives are on the home rail */
		return RBOND_CL_STRICT;
	}
	if (strict && !moved)
		return RBOND_CL_STRICT;
	if (wr->send_flags & (IB_SEND_FENCE | IB_SEND_INLINE)) {
		if (!moved)
			return RBOND_CL_STRICT;
		strict = true;
	}
	e = rbond_rkey_get(mq, rkey, &resolving);
	if (!e && moved) {
		/* no key for the new home yet: wait (or fail: refused) */
		if (resolving)
			*allowed = 0;
		return RBOND_CL_STRICT;
	}
	/* home rail; its class is known once the key is */
	if (!e && resolving && ord != RBOND_ORDER_STRICT)
		return RBOND_CL_UNRESOLVED(cl);
	if (!e)			/* home rail for good */
		return ord == RBOND_ORDER_RELAXED ? cl : RBOND_CL_STRICT;
	if (moved) {
		int pr = mq->m[mq->qp->home].peer;

		if (pr < 0 || mq->peer_rail[pr].index >= RBOND_MAX_RAILS ||
		    !(e->rail_valid & BIT(mq->peer_rail[pr].index)) ||
		    (e->access & need) != need)
			return RBOND_CL_STRICT;	/* refused: see post_chunk */
	}
	*have_keys = true;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		int pr = mq->m[i].peer;

		rkeys[i] = rkey;
		if ((i != mq->qp->home || moved) && pr >= 0 &&
		    mq->peer_rail[pr].index < RBOND_MAX_RAILS)
			rkeys[i] = e->rail_rkey[mq->peer_rail[pr].index];
	}
	if (strict)
		return RBOND_CL_STRICT;
	*allowed = rbond_rkey_rails(mq, e, need);
	if (*allowed == BIT(mq->qp->home))
		pr_debug_ratelimited("QP 0x%x: rkey 0x%x on the home rail only: access 0x%x rail_valid 0x%x rails_up 0x%lx\n",
				     qp->ibqp.qp_num, e->rkey, e->access,
				     e->rail_valid, qp->s.rails_up);
	if (ord == RBOND_ORDER_STRICT ||
	    (ord == RBOND_ORDER_RELAXED_MR && !e->relaxed))
		return RBOND_CL_STRICT;	/* flowlet switching only */
	return cl;
}

/**
 * rbond_rkey_conn_release() - a connection's last reference goes
 * @conn: the connection
 *
 * Its key cache and key work go, and so does its table of our keys handed
 * out (the control channel's conn_release).
 * Context: process context, sleeps (cancel_work_sync()).
 */
void rbond_rkey_conn_release(struct rbond_conn *conn)
{
	cancel_work_sync(&conn->rkey_work);
	rbond_rkey_flush(conn);
}
