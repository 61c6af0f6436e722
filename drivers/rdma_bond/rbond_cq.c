// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: completion queues.
 *
 * A bond CQ is a software ring of struct ib_wc fed by one kernel CQ per rail.
 * The member CQs' completion handlers only schedule the bond CQ's tasklet:
 * a member may call its handler with its own CQ lock held (rxe does from
 * 6.4 on, from a workqueue), so polling or re-arming the member there would
 * deadlock.  The tasklet (softirq) polls the members, translates each
 * completion through the owning bond QP's shadow queues (application wr_id,
 * posting order, bond QP) and pushes it to the ring under cq->lock; it then
 * calls the bond CQ's comp_handler if it was armed.  poll_cq does the same
 * polling itself when the ring holds fewer completions than asked for, so a
 * busy-polling consumer does not wait for the tasklet (the notification an
 * armed consumer is owed is still the tasklet's); req_notify_cq only
 * touches the ring: nothing here sleeps.
 */
#include "rbond.h"

#define RBOND_POLL_BATCH 8
/*
 * Member completions one tasklet run processes (it runs with interrupts
 * off); with more to do it schedules itself again, other softirqs and
 * tasklets run in between.
 */
#define RBOND_POLL_BUDGET 256

static inline u32 rbond_cq_count(const struct rbond_cq *cq)
{
	return cq->head - cq->tail;
}

/**
 * rbond_cq_push() - add a completion to the bond CQ's ring
 * @cq: the bond CQ
 * @wc: the completion
 *
 * On overflow the completion is dropped and cq->overflow set.
 * Locks: cq->lock held.
 * Return: false on overflow (completion dropped), else true.
 */
bool rbond_cq_push(struct rbond_cq *cq, const struct ib_wc *wc)
{
	lockdep_assert_held(&cq->lock);
	if (rbond_cq_count(cq) >= cq->ibcq.cqe) {
		cq->overflow = true;
		return false;
	}
	cq->ring[cq->head & (cq->size - 1)] = *wc;
	cq->head++;
	return true;
}

/**
 * rbond_cq_notify() - call the bond CQ's consumer
 * @cq: the bond CQ
 * @notify: call its comp_handler, if it has one
 * @overflow: report IB_EVENT_CQ_ERR to its event_handler, if it has one
 *
 * Locks: called without cq->lock.
 */
void rbond_cq_notify(struct rbond_cq *cq, bool notify, bool overflow)
{
	if (overflow && cq->ibcq.event_handler) {
		struct ib_event ev = {
			.device = cq->ibcq.device,
			.element.cq = &cq->ibcq,
			.event = IB_EVENT_CQ_ERR,
		};

		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	}
	if (notify && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/**
 * rbond_cq_kick() - have the CQ's tasklet notify the consumer
 * @cq: the bond CQ
 *
 * Completions were added to the ring outside the tasklet, in a context that
 * must not call the consumer (post_send): the tasklet notifies it.
 * Locks: cq->lock held.
 */
void rbond_cq_kick(struct rbond_cq *cq)
{
	cq->kicked = true;
	tasklet_schedule(&cq->poll_task);
}

/**
 * rbond_cq_unlock_notify() - release the CQ's lock, then notify its consumer
 * @cq: the bond CQ; cq->lock held, taken with spin_lock_irqsave(@flags)
 * @added: completions were added to the ring: notify the consumer if it
 *	armed the CQ (which disarms it)
 * @flags: the interrupt state saved when cq->lock was taken
 *
 * Also delivers a notification poll_cq owed the consumer, and reports an
 * overflow.  The consumer is called without cq->lock.
 */
void rbond_cq_unlock_notify(struct rbond_cq *cq, bool added,
			    unsigned long flags)
{
	bool notify = added && cq->notify, overflow = cq->overflow;

	lockdep_assert_held(&cq->lock);
	if (notify)
		cq->notify = 0;
	notify |= cq->owed;
	cq->owed = false;
	cq->overflow = false;
	spin_unlock_irqrestore(&cq->lock, flags);
	rbond_cq_notify(cq, notify, overflow);
}

/*
 * Poll one member CQ empty and re-arm it, or stop (not armed) once *budget
 * completions were processed.  Caller holds cq->lock.  Returns true when
 * completions were added to the ring.
 */
static bool rbond_cq_poll_member_locked(struct rbond_cq *cq,
					unsigned int rail, int *budget)
{
	struct ib_cq *mcq = cq->member[rail];
	struct rbond_dev *bond = to_rbond_dev(cq->ibcq.device);
	struct ib_wc wc[RBOND_POLL_BATCH];
	bool added = false;
	int n, i;

	lockdep_assert_held(&cq->lock);
	do {
		while (*budget > 0 &&
		       (n = ib_poll_cq(mcq, min(*budget, RBOND_POLL_BATCH),
				       wc)) > 0) {
			*budget -= n;
			for (i = 0; i < n; i++)
				added |= rbond_qp_process_wc(bond, cq, rail,
							     &wc[i]);
		}
	} while (*budget > 0 &&
		 ib_req_notify_cq(mcq, IB_CQ_NEXT_COMP |
				  IB_CQ_REPORT_MISSED_EVENTS) > 0);
	return added;
}

/*
 * Poll the member CQs, from a rotating first one (a busy member cannot
 * starve the rest), until *budget completions were processed.  Caller holds
 * cq->lock.  Returns true when completions were added to the ring.
 */
static bool rbond_cq_poll_members_locked(struct rbond_cq *cq, int *budget)
{
	bool added = false;
	unsigned int i, k;

	lockdep_assert_held(&cq->lock);
	for (k = 0; k < RBOND_MAX_RAILS && *budget > 0; k++) {
		i = (cq->poll_first + k) % RBOND_MAX_RAILS;
		if (cq->member[i])
			added |= rbond_cq_poll_member_locked(cq, i, budget);
	}
	cq->poll_first = (cq->poll_first + 1) % RBOND_MAX_RAILS;
	return added;
}

/* Softirq: poll every member CQ (cheap when empty). */
static void rbond_cq_poll_task(struct tasklet_struct *t)
{
	struct rbond_cq *cq = from_tasklet(cq, t, poll_task);
	int budget = RBOND_POLL_BUDGET;
	unsigned long flags;
	bool added;

	spin_lock_irqsave(&cq->lock, flags);
	added = rbond_cq_poll_members_locked(cq, &budget);
	if (budget <= 0)
		tasklet_schedule(&cq->poll_task);	/* more to do */
	added |= cq->kicked && cq->head != cq->tail;
	cq->kicked = false;
	rbond_cq_unlock_notify(cq, added, flags);
}

/* Any context, possibly under the member's CQ lock: defer. */
static void rbond_cq_member_comp(struct ib_cq *mcq, void *ctx)
{
	struct rbond_cq *cq = ctx;

	tasklet_schedule(&cq->poll_task);
}

static void rbond_cq_member_event(struct ib_event *event, void *ctx)
{
	struct rbond_cq *cq = ctx;

	if (event->event == IB_EVENT_CQ_ERR)
		rbond_cq_notify(cq, false, true);
}

/**
 * rbond_cq_drain_member() - process whatever @rail's member CQ holds now
 * @cq: the bond CQ
 * @rail: the rail, whose member QP was just destroyed
 *
 * All of it, without a budget; the consumer is notified if armed.
 * Locks: cq->lock not held (taken here).
 * Context: process context.
 */
void rbond_cq_drain_member(struct rbond_cq *cq, unsigned int rail)
{
	int budget = INT_MAX;	/* all of it: the member QP is gone */
	unsigned long flags;
	bool added;

	if (!cq->member[rail])
		return;
	spin_lock_irqsave(&cq->lock, flags);
	added = rbond_cq_poll_member_locked(cq, rail, &budget);
	rbond_cq_unlock_notify(cq, added, flags);
}

/**
 * rbond_cq_fit() - size the member CQs of a CQ that multi-rail QPs use
 * @cq: the bond CQ
 *
 * Every member WQE of such a QP is signaled (the shadow queue needs each
 * completion), so a member CQ must hold the application's cqe plus every
 * WQE those QPs can have outstanding (cq->mrail_wr: their queue depths),
 * however few of them the application signals: a completion lost to a
 * member CQ overflow would stall its QP for good.  Grow them (never
 * shrink) to that, within the member device's limit.
 * Locks: bond->lock held (the other pollers but the tasklet, which is held
 * off meanwhile).
 * Return: 0, or the first error of ib_resize_cq().
 */
int rbond_cq_fit(struct rbond_cq *cq)
{
	struct rbond_dev *bond = to_rbond_dev(cq->ibcq.device);
	unsigned int i;
	int ret = 0;
	u64 want;

	lockdep_assert_held(&bond->lock);
	tasklet_disable(&cq->poll_task);
	for (i = 0; i < RBOND_MAX_RAILS && !ret; i++) {
		struct ib_cq *mcq = cq->member[i];

		if (!mcq)
			continue;
		want = min_t(u64, (u64)cq->ibcq.cqe + cq->mrail_wr,
			     bond->rails[i].ibdev->attrs.max_cqe);
		if (mcq->cqe >= want)
			continue;
		ret = ib_resize_cq(mcq, want);
		if (ret)
			ibdev_dbg(&bond->ibdev,
				  "rail %u: member CQ to %llu entries: %d\n",
				  i, want, ret);
	}
	tasklet_enable(&cq->poll_task);
	return ret;
}

/**
 * rbond_cq_clean_qp() - drop the ring entries of a QP being destroyed
 * @cq: the bond CQ
 * @qp: the QP, out of qp_xa and without members
 *
 * Its entries point at it.
 * Locks: cq->lock not held (taken here).
 */
void rbond_cq_clean_qp(struct rbond_cq *cq, struct rbond_qp *qp)
{
	unsigned long flags;
	u32 from, to;

	spin_lock_irqsave(&cq->lock, flags);
	for (from = to = cq->tail; from != cq->head; from++) {
		struct ib_wc *wc = &cq->ring[from & (cq->size - 1)];

		if (wc->qp == &qp->ibqp)
			continue;
		if (from != to)
			cq->ring[to & (cq->size - 1)] = *wc;
		to++;
	}
	cq->head = to;
	spin_unlock_irqrestore(&cq->lock, flags);
}

static void rbond_cq_free_members(struct rbond_cq *cq)
{
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_cq_remove_rail(cq, i);
}

int rbond_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    RBOND_CREATE_CQ_LAST_ARG)
{
	struct rbond_dev *bond = to_rbond_dev(ibcq->device);
	struct rbond_cq *cq = to_rbond_cq(ibcq);
	struct ib_cq_init_attr mattr = {};
	unsigned int i;
	int ret;

	/* No driver-specific udata: ignored. */
	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > bond->attr.max_cqe) {
		ibdev_dbg(ibcq->device, "bad cqe %u\n", attr->cqe);
		return -EINVAL;
	}

	spin_lock_init(&cq->lock);
	tasklet_setup(&cq->poll_task, rbond_cq_poll_task);
	cq->size = roundup_pow_of_two(attr->cqe + 1);
	cq->ring = kvcalloc(cq->size, sizeof(*cq->ring), GFP_KERNEL_ACCOUNT);
	if (!cq->ring)
		return -ENOMEM;
	ibcq->cqe = attr->cqe;

	mattr.cqe = attr->cqe;
	mutex_lock(&bond->lock);
	if (!bond->num_rails) {
		ret = -ENODEV;
		goto err_unlock;
	}
	for (i = rbond_next_rail(bond, 0); i < RBOND_MAX_RAILS;
	     i = rbond_next_rail(bond, i + 1)) {
		struct ib_cq *mcq;

		mcq = ib_create_cq(bond->rails[i].ibdev, rbond_cq_member_comp,
				   rbond_cq_member_event, cq, &mattr);
		if (IS_ERR(mcq)) {
			ret = PTR_ERR(mcq);
			goto err_free_members;
		}
		cq->member[i] = mcq;
		ib_req_notify_cq(mcq, IB_CQ_NEXT_COMP);
	}
	list_add_tail(&cq->list, &bond->cqs);
	mutex_unlock(&bond->lock);
	return 0;

err_free_members:
	rbond_cq_free_members(cq);
err_unlock:
	mutex_unlock(&bond->lock);
	tasklet_kill(&cq->poll_task);
	kvfree(cq->ring);
	return ret;
}

int rbond_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibcq->device);
	struct rbond_cq *cq = to_rbond_cq(ibcq);

	mutex_lock(&bond->lock);
	list_del(&cq->list);
	rbond_cq_free_members(cq);
	mutex_unlock(&bond->lock);
	tasklet_kill(&cq->poll_task);
	kvfree(cq->ring);
	return 0;
}

/**
 * rbond_cq_remove_rail() - destroy @cq's member CQ on @rail
 * @cq: the bond CQ
 * @rail: the rail
 *
 * No QP uses @rail's member CQ any more.  It leaves the poll task's sight
 * (under cq->lock) before it is destroyed.
 * Locks: bond->lock held.
 */
void rbond_cq_remove_rail(struct rbond_cq *cq, unsigned int rail)
{
	struct ib_cq *mcq = cq->member[rail];
	unsigned long flags;

	lockdep_assert_held(&to_rbond_dev(cq->ibcq.device)->lock);
	if (!mcq)
		return;
	/* Out of the poll task's sight (it polls under cq->lock) first. */
	spin_lock_irqsave(&cq->lock, flags);
	cq->member[rail] = NULL;
	spin_unlock_irqrestore(&cq->lock, flags);
	rbond_member_destroy_cq(to_rbond_dev(cq->ibcq.device), rail, mcq);
}

/*
 * With fewer completions in the ring than asked for, poll_cq takes what the
 * members hold now itself (a busy-polling consumer does not wait for the
 * tasklet); the notification that owes an armed consumer is left to the
 * tasklet, never made from inside poll_cq.
 */
int rbond_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct rbond_cq *cq = to_rbond_cq(ibcq);
	int budget = RBOND_POLL_BUDGET;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	if (rbond_cq_count(cq) < num_entries &&
	    rbond_cq_poll_members_locked(cq, &budget) && cq->notify) {
		cq->notify = 0;
		cq->owed = true;
	}
	if (cq->owed || cq->overflow)
		tasklet_schedule(&cq->poll_task);	/* reports them */
	while (n < num_entries && cq->tail != cq->head) {
		wc[n++] = cq->ring[cq->tail & (cq->size - 1)];
		cq->tail++;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

int rbond_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct rbond_cq *cq = to_rbond_cq(ibcq);
	unsigned long irqflags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	/* Solicited-only arming is treated as "next completion". */
	cq->notify = flags & IB_CQ_SOLICITED_MASK;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->tail != cq->head)
		ret = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}
