// SPDX-License-Identifier: GPL-2.0
/*
 * Member objects that wait for their port.
 *
 * A member QP destroyed while its port is down may still be referenced by
 * the packets it sent last: rxe takes a QP reference for every skb it
 * transmits and drops it in the skb's destructor, and a netdev that was
 * brought down keeps the skbs of its transmit ring until it is brought up
 * again (virtio-net reclaims them in its open).  rxe's destroy waits
 * 200 ms for those references, WARNs, frees the QP anyway, and the skbs'
 * destructors later drop references of a freed QP ("refcount_t:
 * underflow; use-after-free" when the link comes back; measured in the
 * pair topology with the home link down for good).  Natively the same
 * happens to an rxe QP destroyed in that window; the bond has a choice
 * its consumers do not have: it keeps such a member QP, out of the bond
 * QP's sight, and destroys it once the port is
 * active again - or at once when the member device goes away or the bond
 * is deleted (nothing to wait for then).  Kept in the reset state: the
 * QP holds nothing else of its device's.  The member CQs, SRQ and PD such
 * a QP still uses wait with it, in the order they were released, so the
 * QP goes first.
 *
 * Locks: bond->park_lock (a mutex: destroying sleeps) guards the lists;
 * it may be taken under bond->lock, never the other way round.
 */
#include <rdma/ib_cache.h>

#include "rbond.h"

#define RBOND_PARK_POLL_MS	250

enum rbond_park_type {
	RBOND_PARK_QP,
	RBOND_PARK_SRQ,
	RBOND_PARK_CQ,
	RBOND_PARK_PD,
};

struct rbond_parked {
	struct list_head list;		/* bond->parked[rail] */
	enum rbond_park_type type;
	union {
		void *obj;
		struct ib_qp *qp;
		struct ib_srq *srq;
		struct ib_cq *cq;
		struct ib_pd *pd;
	};
};

/* A parked object's handlers must not reach the bond object it served. */
static void rbond_park_event(struct ib_event *event, void *ctx)
{
}

static void rbond_park_comp(struct ib_cq *cq, void *ctx)
{
}

static void rbond_park_destroy(struct rbond_parked *p)
{
	switch (p->type) {
	case RBOND_PARK_QP:
		if (ib_destroy_qp(p->qp))
			WARN_ON_ONCE(1);
		break;
	case RBOND_PARK_SRQ:
		ib_destroy_srq(p->srq);
		break;
	case RBOND_PARK_CQ:
		ib_destroy_cq(p->cq);
		break;
	case RBOND_PARK_PD:
		ib_dealloc_pd(p->pd);
		break;
	}
	kfree(p);
}

/* Destroy what waits on @rail, oldest first.  park_lock held. */
static void rbond_park_reap_locked(struct rbond_dev *bond, unsigned int rail)
{
	struct rbond_parked *p, *next;

	lockdep_assert_held(&bond->park_lock);
	list_for_each_entry_safe(p, next, &bond->parked[rail], list) {
		list_del(&p->list);
		rbond_park_destroy(p);
		atomic64_dec(&bond->rails[rail].stats[RBOND_STAT_PARKED]);
	}
}

static bool rbond_park_port_active(struct ib_device *dev, u32 port)
{
	enum ib_port_state st;

	return !ib_get_cached_port_state(dev, port, &st) &&
	       st == IB_PORT_ACTIVE;
}

static void rbond_park_work(struct work_struct *work)
{
	struct rbond_dev *bond = container_of(to_delayed_work(work),
					      struct rbond_dev, park_work);
	bool left = false;
	unsigned int i;

	mutex_lock(&bond->park_lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (list_empty(&bond->parked[i]))
			continue;
		/* listed: the rail is there (rbond_park_rail_off() first) */
		if (rbond_park_port_active(bond->rails[i].ibdev,
					   bond->rails[i].port)) {
			ibdev_dbg(&bond->ibdev,
				  "rail %u: port active, kept member objects destroyed\n",
				  i);
			rbond_park_reap_locked(bond, i);
		} else {
			left = true;
		}
	}
	if (left)
		queue_delayed_work(rbond_wq, &bond->park_work,
				   msecs_to_jiffies(RBOND_PARK_POLL_MS));
	mutex_unlock(&bond->park_lock);
}

/* Append @p to @rail's list; park_lock held. */
static void rbond_park_add(struct rbond_dev *bond, unsigned int rail,
			   struct rbond_parked *p)
{
	lockdep_assert_held(&bond->park_lock);
	list_add_tail(&p->list, &bond->parked[rail]);
	atomic64_inc(&bond->rails[rail].stats[RBOND_STAT_PARKED]);
	queue_delayed_work(rbond_wq, &bond->park_work,
			   msecs_to_jiffies(RBOND_PARK_POLL_MS));
}

/**
 * rbond_park_qp() - keep a detached member QP until its port is up
 * @bond: the bond
 * @rail: the member QP's rail
 * @mqp: the member QP, no longer reachable from the bond QP
 *
 * If @rail's port is down (and the rail is not being removed) @mqp's
 * event handler is cut off from the bond QP and it goes to the reset
 * state, which drops its work as destroying it would (no completion) and
 * its hold on anything but its skbs: a responder resource of an RDMA READ
 * it was serving holds a member MR the application may deregister next.
 * Completions it made before still reach the member CQs, where the bond
 * QP takes them for stale (rbond_qp.gone).
 * Locks: none that a sleeping call may not be made under.
 * Return: true if kept (the caller does not destroy it), false if the
 * caller destroys it now.
 */
bool rbond_park_qp(struct rbond_dev *bond, unsigned int rail,
		   struct ib_qp *mqp)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_RESET };
	struct rbond_parked *p;
	bool kept = false;

	mutex_lock(&bond->park_lock);
	if (test_bit(rail, &bond->park_off) ||
	    rbond_park_port_active(mqp->device, bond->rails[rail].port))
		goto out;
	p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (!p)
		goto out;
	WRITE_ONCE(mqp->event_handler, rbond_park_event);
	if (ib_modify_qp(mqp, &attr, IB_QP_STATE))
		ibdev_dbg(&bond->ibdev, "rail %u: kept QP 0x%x not reset\n",
			  rail, mqp->qp_num);
	p->type = RBOND_PARK_QP;
	p->qp = mqp;
	rbond_park_add(bond, rail, p);
	ibdev_dbg(&bond->ibdev, "rail %u: port down, member QP 0x%x kept until it is up\n",
		  rail, mqp->qp_num);
	kept = true;
out:
	mutex_unlock(&bond->park_lock);
	return kept;
}

/**
 * rbond_member_destroy_qp() - destroy a member QP the bond no longer
 * tracks (no completion of it is looked for), or keep it for its port
 * @bond: the bond
 * @rail: the rail
 * @mqp: the member QP
 */
void rbond_member_destroy_qp(struct rbond_dev *bond, unsigned int rail,
			     struct ib_qp *mqp)
{
	if (!rbond_park_qp(bond, rail, mqp) && ib_destroy_qp(mqp))
		WARN_ON_ONCE(1);
}

/*
 * A member object a kept QP may still use (usecnt: the core counts the
 * QPs on a CQ, SRQ or PD) waits behind it, its handlers cut off from the
 * bond object it served.  Return: true if kept (the caller does not
 * destroy it).
 */
static bool rbond_park_behind(struct rbond_dev *bond, unsigned int rail,
			      enum rbond_park_type type, void *obj,
			      atomic_t *usecnt)
{
	struct rbond_parked *p = NULL;

	mutex_lock(&bond->park_lock);
	if (!list_empty(&bond->parked[rail]) && atomic_read(usecnt))
		p = kzalloc(sizeof(*p), GFP_KERNEL);
	if (p) {
		p->type = type;
		p->obj = obj;
		if (type == RBOND_PARK_CQ) {
			WRITE_ONCE(p->cq->comp_handler, rbond_park_comp);
			WRITE_ONCE(p->cq->event_handler, rbond_park_event);
		} else if (type == RBOND_PARK_SRQ) {
			WRITE_ONCE(p->srq->event_handler, rbond_park_event);
		}
		rbond_park_add(bond, rail, p);
	}
	mutex_unlock(&bond->park_lock);
	return p;
}

/**
 * rbond_member_destroy_cq() - destroy a member CQ, or keep it behind the
 * QPs that wait for @rail's port and still use it
 * @bond: the bond
 * @rail: the rail
 * @mcq: the member CQ, out of the bond CQ's sight
 */
void rbond_member_destroy_cq(struct rbond_dev *bond, unsigned int rail,
			     struct ib_cq *mcq)
{
	if (!rbond_park_behind(bond, rail, RBOND_PARK_CQ, mcq, &mcq->usecnt))
		ib_destroy_cq(mcq);
}

/**
 * rbond_member_destroy_srq() - rbond_member_destroy_cq() for a member SRQ
 * @bond: the bond
 * @rail: the rail
 * @msrq: the member SRQ, out of the bond SRQ's sight
 */
void rbond_member_destroy_srq(struct rbond_dev *bond, unsigned int rail,
			      struct ib_srq *msrq)
{
	if (!rbond_park_behind(bond, rail, RBOND_PARK_SRQ, msrq,
			       &msrq->usecnt))
		ib_destroy_srq(msrq);
}

/**
 * rbond_member_dealloc_pd() - rbond_member_destroy_cq() for a member PD
 * @bond: the bond
 * @rail: the rail
 * @mpd: the member PD
 */
void rbond_member_dealloc_pd(struct rbond_dev *bond, unsigned int rail,
			     struct ib_pd *mpd)
{
	if (!rbond_park_behind(bond, rail, RBOND_PARK_PD, mpd, &mpd->usecnt))
		ib_dealloc_pd(mpd);
}

/**
 * rbond_park_rail_off() - @rail's member device goes away: nothing waits
 * @bond: the bond
 * @rail: the rail
 *
 * What waits on @rail is destroyed now, and nothing is kept on it until
 * rbond_park_rail_on().
 */
void rbond_park_rail_off(struct rbond_dev *bond, unsigned int rail)
{
	mutex_lock(&bond->park_lock);
	set_bit(rail, &bond->park_off);
	rbond_park_reap_locked(bond, rail);
	mutex_unlock(&bond->park_lock);
}

/**
 * rbond_park_rail_on() - a new member device on @rail: its objects may wait
 * @bond: the bond
 * @rail: the rail
 */
void rbond_park_rail_on(struct rbond_dev *bond, unsigned int rail)
{
	mutex_lock(&bond->park_lock);
	clear_bit(rail, &bond->park_off);
	mutex_unlock(&bond->park_lock);
}

/**
 * rbond_park_init() - no member object waits yet
 * @bond: the bond
 */
void rbond_park_init(struct rbond_dev *bond)
{
	unsigned int i;

	mutex_init(&bond->park_lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		INIT_LIST_HEAD(&bond->parked[i]);
	bond->park_off = ~0UL;
	INIT_DELAYED_WORK(&bond->park_work, rbond_park_work);
}

/**
 * rbond_park_stop() - the bond goes away: destroy whatever still waits
 * @bond: the bond, none of its objects left
 */
void rbond_park_stop(struct rbond_dev *bond)
{
	unsigned int i;

	cancel_delayed_work_sync(&bond->park_work);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_park_rail_off(bond, i);
	/* rbond_park_rail_off() does not queue the work: it stays idle */
	mutex_destroy(&bond->park_lock);
}
