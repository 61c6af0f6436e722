// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: shared receive queues.
 *
 * A bond SRQ is one member SRQ on the rail that was primary when it was
 * created.  Receives are consumed only by SENDs and WRITE_WITH_IMMs, which
 * a bond QP sends on its home rail alone (extra rails carry WRITEs and
 * READs without immediate): a QP attached to the SRQ takes the SRQ's rail
 * as its home, so every receive posted to the bond SRQ is usable by every
 * message that can consume one, and no SEND waits on an empty member SRQ
 * while the bond's has buffers.  RNR behaviour is the member's, natively.
 *
 * Each posted receive takes a slot that keeps the application's wr_id; the
 * member receive carries the SRQ id and slot (RBOND_WRID_SRQ).  Its
 * completion names the member QP that consumed it: the bond QP is found
 * among the SRQ's attached QPs by that member pointer (compared, never
 * dereferenced: a QP being destroyed is detached before its member goes).
 *
 * The limit event is the member's (both count the same receives), passed
 * to the bond SRQ's handler.  Resizing (IB_SRQ_MAX_WR) is not supported.
 */
#include "rbond.h"

/* Raise @type on the bond SRQ (its consumer's handler, if any). */
static void rbond_srq_raise(struct rbond_srq *srq, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = srq->ibsrq.device,
		.element.srq = &srq->ibsrq,
		.event = type,
	};

	if (srq->ibsrq.event_handler)
		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
}

static void rbond_srq_member_event(struct ib_event *mev, void *ctx)
{
	rbond_srq_raise(ctx, mev->event);
}

static void rbond_srq_free_slots(struct rbond_srq *srq)
{
	kvfree(srq->dma);
	kvfree(srq->wr_id);
	kvfree(srq->free);
	bitmap_free(srq->used);
}

/* The member SRQ is gone: what was mapped for its device is done. */
static void rbond_srq_unmap(struct rbond_srq *srq)
{
	unsigned long flags;

	spin_lock_irqsave(&srq->lock, flags);
	rbond_dma_unmap_dev(srq->dma, srq->max_wr, NULL);
	spin_unlock_irqrestore(&srq->lock, flags);
}

int rbond_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibsrq->device);
	struct rbond_srq *srq = to_rbond_srq(ibsrq);
	struct rbond_pd *pd = to_rbond_pd(ibsrq->pd);
	const struct ib_device_attr *a = &bond->attr;
	struct ib_srq_init_attr minit = {};
	struct ib_srq *member;
	unsigned int rail;
	u32 i;
	int ret;

	if (init->srq_type != IB_SRQT_BASIC) {
		ibdev_dbg(&bond->ibdev, "SRQ type %d not supported\n",
			  init->srq_type);
		return -EOPNOTSUPP;
	}
	if (!init->attr.max_wr || init->attr.max_wr > a->max_srq_wr ||
	    !init->attr.max_sge || init->attr.max_sge > a->max_srq_sge ||
	    init->attr.srq_limit > init->attr.max_wr) {
		ibdev_dbg(&bond->ibdev, "SRQ caps exceed device limits\n");
		return -EINVAL;
	}
	spin_lock_init(&srq->lock);
	INIT_LIST_HEAD(&srq->qps);
	srq->pd = pd;

	mutex_lock(&bond->lock);
	rail = bond->primary;
	if (!bond->num_rails || !pd->member[rail]) {
		ret = -ENODEV;
		goto err_unlock;
	}
	minit.event_handler = rbond_srq_member_event;
	minit.srq_context = srq;
	minit.srq_type = IB_SRQT_BASIC;
	minit.attr = init->attr;
	member = ib_create_srq(pd->member[rail], &minit);
	if (IS_ERR(member)) {
		ret = PTR_ERR(member);
		ibdev_dbg(&bond->ibdev, "member create_srq failed: %d\n", ret);
		goto err_unlock;
	}
	/* the member's count (it enforces it too); the SGEs as asked */
	srq->max_wr = min_t(u32, minit.attr.max_wr, a->max_srq_wr);
	srq->max_sge = init->attr.max_sge;
	srq->wr_id = kvcalloc(srq->max_wr, sizeof(*srq->wr_id),
			      GFP_KERNEL_ACCOUNT);
	srq->free = kvcalloc(srq->max_wr, sizeof(*srq->free),
			     GFP_KERNEL_ACCOUNT);
	srq->used = bitmap_zalloc(srq->max_wr, GFP_KERNEL_ACCOUNT);
	if (!udata)	/* kernel buffers: mapped for the member */
		srq->dma = rbond_dma_alloc(srq->max_wr);
	if (!srq->wr_id || !srq->free || !srq->used || (!udata && !srq->dma)) {
		ret = -ENOMEM;
		goto err_destroy_member;
	}
	for (i = 0; i < srq->max_wr; i++)
		srq->free[i] = srq->max_wr - 1 - i;
	srq->nfree = srq->max_wr;
	ret = xa_alloc_cyclic(&bond->srq_xa, &srq->id, srq,
			      XA_LIMIT(1, RBOND_QP_ID_MAX),
			      &bond->next_srq_id, GFP_KERNEL);
	if (ret < 0)
		goto err_destroy_member;
	srq->rail = rail;
	srq->member = member;
	mutex_unlock(&bond->lock);
	init->attr.max_wr = srq->max_wr;
	init->attr.max_sge = srq->max_sge;
	return 0;

err_destroy_member:
	ib_destroy_srq(member);
	rbond_srq_free_slots(srq);
err_unlock:
	mutex_unlock(&bond->lock);
	return ret;
}

int rbond_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibsrq->device);
	struct rbond_srq *srq = to_rbond_srq(ibsrq);

	struct ib_srq *member;
	unsigned long flags;

	mutex_lock(&bond->lock);
	xa_erase(&bond->srq_xa, srq->id);
	spin_lock_irqsave(&srq->lock, flags);
	member = srq->member;
	srq->member = NULL;
	spin_unlock_irqrestore(&srq->lock, flags);
	if (member) {
		rbond_member_destroy_srq(bond, srq->rail, member);
		rbond_srq_unmap(srq);
	}
	mutex_unlock(&bond->lock);
	WARN_ON_ONCE(!list_empty(&srq->qps));
	rbond_srq_free_slots(srq);
	return 0;
}

int rbond_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibsrq->device);
	struct rbond_srq *srq = to_rbond_srq(ibsrq);
	struct ib_srq_attr mattr = {};
	int ret;

	if (mask & ~(IB_SRQ_MAX_WR | IB_SRQ_LIMIT))
		return -EINVAL;
	if (mask & IB_SRQ_MAX_WR) {
		ibdev_dbg(&bond->ibdev, "SRQ resize not supported\n");
		return -EOPNOTSUPP;
	}
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > srq->max_wr)
		return -EINVAL;
	mattr.srq_limit = attr->srq_limit;
	mutex_lock(&bond->lock);
	ret = srq->member ? ib_modify_srq(srq->member, &mattr, IB_SRQ_LIMIT) :
			    -EIO;
	mutex_unlock(&bond->lock);
	return ret;
}

int rbond_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct rbond_dev *bond = to_rbond_dev(ibsrq->device);
	struct rbond_srq *srq = to_rbond_srq(ibsrq);
	struct ib_srq_attr mattr = {};
	int ret = 0;

	mutex_lock(&bond->lock);
	if (srq->member)
		ret = ib_query_srq(srq->member, &mattr);
	mutex_unlock(&bond->lock);
	if (ret)
		return ret;
	attr->max_wr = srq->max_wr;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = mattr.srq_limit;	/* 0 once the event fired */
	return 0;
}

/*
 * Translate @num SGEs of @pd for @rail into @out, *@kva: those with a
 * kernel virtual address (DMA MR); -EINVAL: a bad lkey.
 */
static int rbond_srq_sges(struct rbond_srq *srq, const struct ib_sge *in,
			  int num, struct ib_sge *out, unsigned long *kva)
{
	int i, ret;

	*kva = 0;
	for (i = 0; i < num; i++) {
		out[i] = in[i];
		ret = rbond_mr_rail_lkey(srq->pd, in[i].lkey, srq->rail,
					 &out[i].lkey);
		if (ret < 0)
			return -EINVAL;
		if (ret)
			*kva |= BIT(i);
	}
	return num;
}

static int rbond_post_one_srq_recv(struct rbond_srq *srq,
				   const struct ib_recv_wr *wr)
{
	struct rbond_dev *bond = to_rbond_dev(srq->ibsrq.device);
	struct ib_sge sge[RBOND_MAX_SGE];
	struct ib_recv_wr mwr = {};
	const struct ib_recv_wr *bad;
	struct rbond_dmamap *dm = NULL;
	unsigned long flags, kva;
	u32 slot;
	int n, ret;

	if (wr->num_sge < 0 || wr->num_sge > srq->max_sge) {
		ibdev_dbg(&bond->ibdev, "SRQ %u: bad num_sge %d\n", srq->id,
			  wr->num_sge);
		return -EINVAL;
	}
	rcu_read_lock();
	n = rbond_srq_sges(srq, wr->sg_list, wr->num_sge, sge, &kva);
	rcu_read_unlock();
	if (n < 0) {
		ibdev_dbg(&bond->ibdev, "SRQ %u: bad lkey\n", srq->id);
		return n;
	}

	spin_lock_irqsave(&srq->lock, flags);
	if (!srq->member) {
		ret = -EIO;
		goto out_unlock;
	}
	if (!srq->nfree) {
		ret = -ENOMEM;
		goto out_unlock;
	}
	slot = srq->free[--srq->nfree];
	srq->wr_id[slot] = wr->wr_id;
	__set_bit(slot, srq->used);
	mwr.wr_id = RBOND_WRID_SRQ | RBOND_WRID_RECV |
		    ((u64)srq->id << RBOND_WRID_ID_SHIFT) | slot;
	mwr.sg_list = sge;
	mwr.num_sge = n;
	if (srq->dma)
		dm = &srq->dma[slot];
	/* under the lock: the member is not destroyed meanwhile */
	ret = rbond_dma_map(dm, srq->member->device, sge, kva,
			    DMA_FROM_DEVICE);
	if (!ret)
		ret = ib_post_srq_recv(srq->member, &mwr, &bad);
	if (ret) {
		rbond_dma_unmap(dm);
		__clear_bit(slot, srq->used);
		srq->free[srq->nfree++] = slot;
	} else {
		rbond_stat_add(bond, srq->rail, RBOND_STAT_RX_WQES, 1);
	}
out_unlock:
	spin_unlock_irqrestore(&srq->lock, flags);
	return ret;
}

int rbond_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr)
{
	struct rbond_srq *srq = to_rbond_srq(ibsrq);
	int ret = 0;

	for (; wr; wr = wr->next) {
		ret = rbond_post_one_srq_recv(srq, wr);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	return ret;
}

/**
 * rbond_srq_attach() - a QP receives from @srq from now on
 * @srq: the SRQ
 * @qp: the QP, whose home member exists
 *
 * Locks: bond->lock held.
 */
void rbond_srq_attach(struct rbond_srq *srq, struct rbond_qp *qp)
{
	unsigned long flags;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	spin_lock_irqsave(&srq->lock, flags);
	qp->srq = srq;
	list_add_tail(&qp->srq_list, &srq->qps);
	spin_unlock_irqrestore(&srq->lock, flags);
}

/**
 * rbond_srq_detach() - before a QP's members go
 * @qp: the QP
 *
 * Completions of receives it consumed that are still in member CQs free
 * their slots but are dropped.
 * Locks: bond->lock held.
 */
void rbond_srq_detach(struct rbond_qp *qp)
{
	struct rbond_srq *srq = qp->srq;
	unsigned long flags;

	if (!srq)
		return;
	spin_lock_irqsave(&srq->lock, flags);
	list_del_init(&qp->srq_list);
	spin_unlock_irqrestore(&srq->lock, flags);
}

/**
 * rbond_srq_remove_rail() - the SRQ's member device goes away
 * @srq: the SRQ
 * @rail: the rail going
 *
 * Its QPs lost their home member already (rbond_qp_remove_rail); the
 * receives posted are gone with the member.  Posting fails with EIO from
 * now on.
 * Locks: bond->lock held.
 */
void rbond_srq_remove_rail(struct rbond_srq *srq, unsigned int rail)
{
	struct ib_srq *member;
	unsigned long flags;

	if (srq->rail != rail || !srq->member)
		return;
	spin_lock_irqsave(&srq->lock, flags);
	member = srq->member;
	srq->member = NULL;
	spin_unlock_irqrestore(&srq->lock, flags);
	rbond_member_destroy_srq(to_rbond_dev(srq->ibsrq.device), rail,
				 member);
	rbond_srq_unmap(srq);
	rbond_srq_raise(srq, IB_EVENT_SRQ_ERR);
}

/**
 * rbond_srq_recv_wc() - a member completion of a receive from an SRQ
 * @bond: the bond
 * @cq: the bond CQ it came from
 * @rail: the rail of that member CQ
 * @mwc: the member completion
 *
 * Locks: cq->lock held; the SRQ outlives every QP attached to it and their
 * member completions (destroy_qp drains them).
 * Return: true when a completion was added to @cq.
 */
bool rbond_srq_recv_wc(struct rbond_dev *bond, struct rbond_cq *cq,
		       unsigned int rail, const struct ib_wc *mwc)
{
	u32 id = (mwc->wr_id >> RBOND_WRID_ID_SHIFT) & RBOND_WRID_ID_MASK;
	u32 slot = lower_32_bits(mwc->wr_id);
	struct rbond_qp *qp, *found = NULL;
	struct rbond_srq *srq;
	struct ib_wc wc = *mwc;

	lockdep_assert_held(&cq->lock);
	srq = xa_load(&bond->srq_xa, id);
	if (!srq)
		return false;
	spin_lock(&srq->lock);
	if (slot >= srq->max_wr || !test_bit(slot, srq->used)) {
		spin_unlock(&srq->lock);
		ibdev_dbg(&bond->ibdev, "SRQ %u: stale completion\n", id);
		return false;
	}
	wc.wr_id = srq->wr_id[slot];
	if (srq->dma)
		rbond_dma_unmap(&srq->dma[slot]);
	__clear_bit(slot, srq->used);
	srq->free[srq->nfree++] = slot;
	list_for_each_entry(qp, &srq->qps, srq_list) {
		if (qp->member[rail] == mwc->qp) {
			found = qp;
			break;
		}
	}
	spin_unlock(&srq->lock);
	if (!found || WARN_ON_ONCE(found->rcq != cq))
		return false;
	return rbond_qp_recv_deliver(bond, found, rail, &wc);
}
