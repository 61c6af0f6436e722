// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: queue pairs (RC, and UD on the home rail), the object.
 *
 * A bond QP owns a member QP on its home rail (the primary rail when it was
 * created); its QPN is the home member's QPN, so any RC peer connects to it
 * as to a native QP.  A multi-rail QP gains member QPs on the other rails
 * (rbond_negotiate.c).  Every posted WQE gets a slot in a shadow queue
 * (send: application wr_id, opcode, rail; receive: wr_id): the post path is
 * rbond_post.c, the completion path rbond_comp.c.  Here: create, modify
 * (RESET included), query, destroy, and the loss of a rail.
 */
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>

#include "rbond.h"
#include "rbond_mrail.h"

/**
 * rbond_qp_set_psn() - a member's send PSN and path MTU, as it was given them
 * @qp: the QP
 * @rail: the member's rail
 * @attr: what the member was modified with
 * @mask: which of them
 *
 * Kept so that a home-rail failover can tell which WQEs the peer's
 * responder executed from its expected PSN (rbond_failover.c).
 * Process context.
 */
void rbond_qp_set_psn(struct rbond_qp *qp, unsigned int rail,
		      const struct ib_qp_attr *attr, int mask)
{
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	if (mask & IB_QP_SQ_PSN)
		qp->npsn[rail] = attr->sq_psn & RBOND_PSN_MASK;
	if (mask & IB_QP_PATH_MTU)
		qp->pmtu[rail] = ib_mtu_enum_to_int(attr->path_mtu);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
}

static void rbond_qp_member_event(struct ib_event *event, void *ctx)
{
	struct rbond_qp *qp = ctx;
	struct ib_event ev = *event;

	/*
	 * The home member broke: failed over if it can be (not the QP's).
	 * IB_EVENT_QP_ACCESS_ERR is a responder's access violation - the
	 * peer's request, the application's error: it goes to the consumer,
	 * and the member's flushes end the QP (rbond_fo_home_step()).
	 */
	if (event->event == IB_EVENT_QP_FATAL &&
	    rbond_fo_home_event(qp, event->element.qp))
		return;
	if (!qp->ibqp.event_handler)
		return;
	ev.device = qp->ibqp.device;
	ev.element.qp = &qp->ibqp;
	qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
}

static int rbond_qp_check_init(struct rbond_dev *bond,
			       struct ib_qp_init_attr *init)
{
	const struct ib_device_attr *a = &bond->attr;

	if (init->qp_type != IB_QPT_RC && init->qp_type != IB_QPT_UD) {
		ibdev_dbg(&bond->ibdev, "QP type %d not supported\n",
			  init->qp_type);
		return -EOPNOTSUPP;
	}
	if (init->xrcd || init->rwq_ind_tbl || init->create_flags) {
		ibdev_dbg(&bond->ibdev, "XRC/RSS/create_flags unsupported\n");
		return -EOPNOTSUPP;
	}
	if (init->srq && init->srq->device != &bond->ibdev)
		return -EINVAL;
	if (!init->send_cq || !init->recv_cq ||
	    init->send_cq->device != &bond->ibdev ||
	    init->recv_cq->device != &bond->ibdev)
		return -EINVAL;
	if (init->cap.max_send_wr > a->max_qp_wr ||
	    (!init->srq && init->cap.max_recv_wr > a->max_qp_wr) ||
	    init->cap.max_send_sge > a->max_send_sge ||
	    (!init->srq && init->cap.max_recv_sge > a->max_recv_sge) ||
	    init->cap.max_inline_data > RBOND_MAX_INLINE) {
		ibdev_dbg(&bond->ibdev, "QP caps exceed device limits\n");
		return -EINVAL;
	}
	return 0;
}

int rbond_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		    struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	struct rbond_pd *pd = to_rbond_pd(ibqp->pd);
	struct ib_qp_init_attr mattr;
	struct rbond_srq *srq = NULL;
	struct rbond_cq *scq, *rcq;
	struct ib_qp *member;
	unsigned int home;
	bool mrail;
	int ret;

	ret = rbond_qp_check_init(bond, init);
	if (ret)
		return ret;
	scq = to_rbond_cq(init->send_cq);
	rcq = to_rbond_cq(init->recv_cq);

	spin_lock_init(&qp->sq_post_lock);
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_post_lock);
	spin_lock_init(&qp->rq_lock);
	qp->pd = pd;
	qp->scq = scq;
	qp->rcq = rcq;
	qp->user = !!udata;
	qp->sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->state = IB_QPS_RESET;
	INIT_LIST_HEAD(&qp->srq_list);
	if (init->srq)
		srq = to_rbond_srq(init->srq);

	mutex_lock(&bond->lock);
	if (!bond->num_rails) {
		ret = -ENODEV;
		goto err_unlock;
	}
	/* a QP on an SRQ is at home where the SRQ's receives are */
	home = srq ? srq->rail : bond->primary;
	if ((srq && !srq->member) || !pd->member[home] ||
	    !scq->member[home] || !rcq->member[home]) {
		/* PD or CQ older than the current primary rail. */
		ibdev_dbg(&bond->ibdev, "PD/CQ has no member on rail %u\n",
			  home);
		ret = -ENODEV;
		goto err_unlock;
	}
	qp->home = home;

	mattr = *init;
	mattr.send_cq = scq->member[home];
	mattr.recv_cq = rcq->member[home];
	mattr.qp_context = qp;
	mattr.event_handler = rbond_qp_member_event;
	mattr.port_num = bond->rails[home].port;
	if (srq) {
		mattr.srq = srq->member;
		mattr.cap.max_recv_wr = 0;
		mattr.cap.max_recv_sge = 0;
	}
	/* The core sets up rdma_rw contexts for the bond QP, not the member. */
	mattr.cap.max_rdma_ctxs = 0;
	/* Multi-rail: room for chunks of split WQEs next to the app's. */
	mrail = READ_ONCE(rbond_multirail) && bond->num_rails > 1 &&
		init->qp_type == IB_QPT_RC;
	if (mrail)
		mattr.cap.max_send_wr = min_t(u32, init->cap.max_send_wr *
						    RBOND_CHUNK_SLOTS,
					      bond->attr.max_qp_wr);
	member = ib_create_qp(pd->member[home], &mattr);
	if (IS_ERR(member)) {
		ret = PTR_ERR(member);
		ibdev_dbg(&bond->ibdev, "member create_qp failed: %d\n", ret);
		goto err_unlock;
	}

	/*
	 * What the bond grants is what it implements and enforces: the SGE
	 * counts and inline size asked for (bounded by rbond_qp_check_init),
	 * never the member's answer (rxe rounds the send SGEs up to cover
	 * its inline size, past RBOND_MAX_SGE).  The WR counts are the
	 * member's, which the shadow queues enforce.
	 */
	qp->cap.max_send_sge = init->cap.max_send_sge;
	qp->cap.max_recv_sge = srq ? 0 : init->cap.max_recv_sge;
	qp->cap.max_inline_data = init->cap.max_inline_data;
	qp->cap.max_send_wr = mattr.cap.max_send_wr;
	qp->cap.max_recv_wr = mattr.cap.max_recv_wr;
	qp->cap.max_rdma_ctxs = init->cap.max_rdma_ctxs;
	qp->slot_cap = mattr.cap.max_send_wr;
	if (mrail)
		qp->cap.max_send_wr = max(init->cap.max_send_wr,
					  mattr.cap.max_send_wr /
					  RBOND_CHUNK_SLOTS);
	qp->sq_size = roundup_pow_of_two(max(mattr.cap.max_send_wr, 1U));
	qp->rq_size = roundup_pow_of_two(max(mattr.cap.max_recv_wr, 1U));
	qp->sq = kvcalloc(qp->sq_size, sizeof(*qp->sq), GFP_KERNEL_ACCOUNT);
	qp->rq = kvcalloc(qp->rq_size, sizeof(*qp->rq), GFP_KERNEL_ACCOUNT);
	if (!srq) {
		/* the receives' SGEs: posted again if the home rail moves */
		qp->rq_sge = kvcalloc(array_size(qp->rq_size,
						 max(qp->cap.max_recv_sge, 1U)),
				      sizeof(*qp->rq_sge), GFP_KERNEL_ACCOUNT);
		qp->rq_nsge = kvcalloc(qp->rq_size, 1, GFP_KERNEL_ACCOUNT);
		if (!qp->rq_sge || !qp->rq_nsge) {
			ret = -ENOMEM;
			goto err_destroy_member;
		}
	}
	if (!qp->sq || !qp->rq) {
		ret = -ENOMEM;
		goto err_destroy_member;
	}
	if (!qp->user) {	/* kernel buffers: mapped per member */
		qp->sq_dma = rbond_dma_alloc(qp->sq_size);
		qp->rq_dma = rbond_dma_alloc(qp->rq_size);
		if (!qp->sq_dma || !qp->rq_dma) {
			ret = -ENOMEM;
			goto err_destroy_member;
		}
	}

	ret = xa_alloc_cyclic(&bond->qp_xa, &qp->id, qp,
			      XA_LIMIT(1, RBOND_QP_ID_MAX), &bond->next_qp_id,
			      GFP_KERNEL);
	if (ret < 0)
		goto err_destroy_member;

	qp->member[home] = member;
	qp->rq_rail = home;
	ibqp->qp_num = member->qp_num;
	qp->s.bond = bond;
	qp->s.home = home;
	qp->s.qpn = member->qp_num;
	qp->s.rails_up = BIT(home);
	init->cap = qp->cap;
	list_add_tail(&qp->list, &bond->qps);
	if (srq)
		rbond_srq_attach(srq, qp);
	mutex_unlock(&bond->lock);
	if (init->qp_type == IB_QPT_RC)
		rbond_mrail_qp_create(qp);
	return 0;

err_destroy_member:
	ib_destroy_qp(member);
	kvfree(qp->sq_dma);
	kvfree(qp->rq_dma);
	kvfree(qp->sq);
	kvfree(qp->rq);
	kvfree(qp->rq_sge);
	kvfree(qp->rq_nsge);
err_unlock:
	mutex_unlock(&bond->lock);
	return ret;
}

/*
 * Detach and destroy the member QP on @rail, then process what its member
 * CQs still hold.  member[] is read by the post paths (post locks) and by
 * the completion path, which posts waiting WQEs under cq->lock and sq_lock
 * (rbond_post_drain): cleared under all three, no one can be using the
 * member once it is destroyed.  A member whose port is down is kept
 * instead (rbond_park.c), in the error state: what its CQs hold is
 * processed as for a destroyed one, what comes after is stale (gone[]).
 * Caller holds bond->lock.
 */
void rbond_qp_destroy_member(struct rbond_qp *qp, unsigned int rail)
{
	struct ib_device *dev;
	struct ib_qp *member;
	unsigned long flags;
	bool kept;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	member = qp->member[rail];
	qp->member[rail] = NULL;
	spin_unlock(&qp->sq_lock);
	spin_unlock(&qp->rq_post_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
	if (!member)
		return;

	dev = member->device;
	kept = rbond_park_qp(to_rbond_dev(qp->ibqp.device), rail, member);
	if (!kept && ib_destroy_qp(member))
		WARN_ON_ONCE(1);
	rbond_cq_drain_member(qp->scq, rail);
	if (qp->rcq != qp->scq)
		rbond_cq_drain_member(qp->rcq, rail);
	if (kept)
		WRITE_ONCE(qp->gone[rail], member);
	/* the member is gone: what was mapped for its device is done */
	rbond_dma_unmap_qp(qp, dev);
}

/* Member GID index -> bond GID index (same GID value), or keep it. */
static void rbond_qp_translate_back(struct rbond_dev *bond, unsigned int rail,
				    struct rdma_ah_attr *ah)
{
	const struct ib_gid_attr *mgid, *bgid;

	ah->port_num = RBOND_PORT;
	ah->grh.sgid_attr = NULL;
	if (!(ah->ah_flags & IB_AH_GRH))
		return;
	mgid = rdma_get_gid_attr(bond->rails[rail].ibdev,
				 bond->rails[rail].port, ah->grh.sgid_index);
	if (IS_ERR(mgid))
		return;
	bgid = rdma_find_gid_by_port(&bond->ibdev, &mgid->gid, mgid->gid_type,
				     RBOND_PORT, NULL);
	if (!IS_ERR(bgid)) {
		ah->grh.sgid_index = bgid->index;
		rdma_put_gid_attr(bgid);
	}
	rdma_put_gid_attr(mgid);
}

/* everything rbond_qp_keep_first() keeps */
#define RBOND_QP_QUERY_ALL						\
	(IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS |		\
	 IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_AV | IB_QP_PATH_MTU |	\
	 IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |		\
	 IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC | IB_QP_MIN_RNR_TIMER |	\
	 IB_QP_SQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_DEST_QPN |	\
	 IB_QP_CAP)

/*
 * The first home member's device goes while the QP lives on (its home
 * moves or moved): what the application set of it, for query_qp.
 * bond->lock held.
 */
static void rbond_qp_keep_first(struct rbond_qp *qp, unsigned int rail)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	struct ib_qp_init_attr minit;
	struct ib_qp_attr *attr;
	struct ib_qp *first;

	if (!qp->mrail || rbond_mrail_key_rail(qp) != rail)
		return;
	first = rbond_mrail_first_member(qp);
	if (!first)
		return;
	attr = kzalloc(sizeof(*attr), GFP_KERNEL);
	if (!attr)
		return;
	if (ib_query_qp(first, attr, RBOND_QP_QUERY_ALL, &minit)) {
		kfree(attr);
		return;
	}
	rbond_qp_translate_back(bond, rail, &attr->ah_attr);
	if (!rbond_mrail_first_keep(qp, rail, attr))
		kfree(attr);
}

/**
 * rbond_qp_remove_rail() - the rail's member device is going away
 * @qp: the QP
 * @rail: the rail
 *
 * Its member QP is destroyed and gives no more completions.  An extra
 * rail's WQEs still outstanding are posted again on the other rails
 * (rbond_failover.c) or, if the QP cannot fail over, flushed
 * (rbond_qp_flush_rail()); so are the home rail's of a QP whose home is
 * moving off it (rbond_fo_rail_removing() started the move).  Losing the
 * home rail otherwise puts the QP in error for good: everything flushes,
 * the other members go to error and the consumer gets IB_EVENT_QP_FATAL.
 * Locks: bond->lock held.
 */
void rbond_qp_remove_rail(struct rbond_qp *qp, unsigned int rail)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	unsigned long flags;
	unsigned int i;
	bool home, fo;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	/* no WQE goes to @rail from now on (rbond_post_chunk) */
	spin_lock_irqsave(&qp->sq_lock, flags);
	home = rail == qp->home && qp->member[rail] &&
	       !rbond_fo_home_moving(qp);
	fo = !home && rbond_fo_mark(qp, rail, RBOND_FAIL_REMOVED);
	qp->s.rails_up &= ~BIT(rail);
	if (home) {
		/* the QP is lost: nothing waiting goes out (flushed below) */
		qp->s.rails_up = 0;
		qp->pend_tail = qp->pend_head;
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (!home)
		rbond_qp_keep_first(qp, rail);
	rbond_mrail_qp_remove_rail(qp, rail);
	rbond_qp_destroy_member(qp, rail);
	if (!home) {
		if (!fo)
			rbond_qp_flush_rail(qp, rail, IB_WC_WR_FLUSH_ERR);
		return;
	}

	qp->dead = true;
	qp->state = IB_QPS_ERR;
	rbond_qp_flush(qp);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (qp->member[i] && ib_modify_qp(qp->member[i], &attr,
						  IB_QP_STATE))
			ibdev_dbg(qp->ibqp.device,
				  "QP 0x%x: rail %u to error failed\n",
				  qp->ibqp.qp_num, i);
	if (qp->ibqp.event_handler) {
		struct ib_event ev = {
			.device = qp->ibqp.device,
			.element.qp = &qp->ibqp,
			.event = IB_EVENT_QP_FATAL,
		};

		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	}
}

int rbond_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	unsigned int i;

	rbond_mrail_qp_destroy(qp);
	mutex_lock(&bond->lock);
	/* From here completions still in member CQs are dropped. */
	xa_erase(&bond->qp_xa, qp->id);
	rbond_srq_detach(qp);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_qp_destroy_member(qp, i);
	list_del(&qp->list);
	mutex_unlock(&bond->lock);

	/* Entries already in the bond CQs would point at a freed QP. */
	rbond_cq_clean_qp(qp->scq, qp);
	if (qp->rcq != qp->scq)
		rbond_cq_clean_qp(qp->rcq, qp);
	rbond_mrail_qp_free(qp);
	rbond_post_free(qp);
	kvfree(qp->sq_dma);
	kvfree(qp->rq_dma);
	kvfree(qp->sq);
	kvfree(qp->rq);
	kvfree(qp->rq_sge);
	kvfree(qp->rq_nsge);
	return 0;
}

/*
 * The QP went to RESET (modify_qp; mq->lock and bond->lock held, the home
 * member is reset).  The members dropped their WQEs without completions:
 * so do the shadow queues (completions of them still in member CQs are
 * stale from now on), and the extra-rail members go - the QP is
 * renegotiated when it is connected again (rbond_mrail_qp_reset).
 */
static void rbond_qp_reset(struct rbond_qp *qp)
{
	unsigned long flags;
	unsigned int i;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	/*
	 * Under the post locks: a post racing the RESET (another thread)
	 * must neither undo a slot dropped here nor account a WQE between
	 * the drop and the scheduler's reset.
	 */
	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->sq_lock);
	for (; qp->sq_tail != qp->sq_head; qp->sq_tail++) {
		struct rbond_swqe *e = rbond_sq_slot(qp, qp->sq_tail);

		if (!(e->flags & RBOND_SWQE_DONE))
			rbond_sched_done(&qp->s, e);	/* rails' accounting */
	}
	qp->sq_wqes = 0;
	qp->chunk_bytes = 0;
	qp->chunk_status = IB_WC_SUCCESS;
	qp->chunk_vendor_err = 0;
	qp->sq_failed = false;
	qp->sq_erring = false;
	qp->rq_failed = false;
	rbond_post_reset_sq(qp, true);
	rbond_mrail_qp_reset_sq(qp);
	spin_unlock(&qp->sq_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);

	spin_lock_irqsave(&qp->rq_post_lock, flags);
	spin_lock(&qp->rq_lock);
	qp->rq_tail = qp->rq_head;
	spin_unlock(&qp->rq_lock);
	spin_unlock_irqrestore(&qp->rq_post_lock, flags);

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (i != qp->home)
			rbond_qp_destroy_member(qp, i);
	/* the home member is in RESET: nothing of the dropped WQEs runs */
	rbond_dma_unmap_qp(qp, NULL);
	rbond_mrail_qp_reset(qp);
}

int rbond_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	const struct ib_gid_attr *mgid = NULL;
	struct ib_qp_attr *mattr;
	struct ib_qp *member;
	bool reset;
	int ret;

	if (attr_mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;
	if (attr_mask & (IB_QP_ALT_PATH | IB_QP_PATH_MIG_STATE))
		return -EOPNOTSUPP;
	if ((attr_mask & IB_QP_PORT) && attr->port_num != RBOND_PORT)
		return -EINVAL;
	/* the READ/atomic depths the bond granted, not what a member takes */
	if (((attr_mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	     attr->max_rd_atomic > bond->attr.max_qp_init_rd_atom) ||
	    ((attr_mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	     attr->max_dest_rd_atomic > bond->attr.max_qp_rd_atom)) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: rd_atomic over the device's\n",
			  ibqp->qp_num);
		return -EINVAL;
	}

	mattr = kmalloc(sizeof(*mattr), GFP_KERNEL);
	if (!mattr)
		return -ENOMEM;
	*mattr = *attr;

	/* RESET also resets the multi-rail state: its lock comes first */
	reset = (attr_mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RESET;
	if (reset)
		rbond_mrail_lock(qp);
	mutex_lock(&bond->lock);
	if (reset) {
		ret = rbond_mrail_home_restore(qp);
		if (ret) {
			ibdev_dbg(&bond->ibdev,
				  "QP 0x%x: RESET refused: its first home member's device was removed\n",
				  ibqp->qp_num);
			goto out_unlock;
		}
	}
	member = qp->member[qp->home];
	if (!member) {
		ret = -EIO;	/* home rail lost: the QP is in error */
		goto out_unlock;
	}
	if (attr_mask & IB_QP_PORT)
		mattr->port_num = bond->rails[qp->home].port;
	if (attr_mask & IB_QP_AV) {
		ret = rbond_translate_ah_attr(bond, qp->home, &attr->ah_attr,
					      &mattr->ah_attr, &mgid);
		if (ret)
			goto out_unlock;
	}
	ret = ib_modify_qp(member, mattr, attr_mask);
	if (mgid)
		rdma_put_gid_attr(mgid);
	if (ret) {
		ibdev_dbg(&bond->ibdev, "member modify_qp failed: %d\n", ret);
		goto out_unlock;
	}
	if (attr_mask & IB_QP_STATE)
		qp->state = attr->qp_state;
	if (attr_mask & IB_QP_MAX_QP_RD_ATOMIC)
		WRITE_ONCE(qp->max_rd_atomic, attr->max_rd_atomic);
	if (attr_mask & (IB_QP_SQ_PSN | IB_QP_PATH_MTU))
		rbond_qp_set_psn(qp, qp->home, attr, attr_mask);
	if (reset)
		rbond_qp_reset(qp);
	rbond_mrail_qp_modified(qp, attr, attr_mask);
	rbond_mrail_prime(qp);
out_unlock:
	mutex_unlock(&bond->lock);
	if (reset)
		rbond_mrail_unlock(qp);
	kfree(mattr);
	if (!ret && (attr_mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTS)
		rbond_mrail_wait_up(qp);
	return ret;
}

int rbond_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		   int attr_mask, struct ib_qp_init_attr *init_attr)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	struct ib_qp_init_attr minit;
	struct ib_qp_attr st = {};
	struct ib_qp *member, *first;
	unsigned int key;
	int ret = 0;

	mutex_lock(&bond->lock);
	member = qp->member[qp->home];
	key = rbond_mrail_key_rail(qp);
	first = rbond_mrail_first_member(qp);
	if (member) {
		/*
		 * What the application set - its path, its peer's QPN - is
		 * its first home member's, also after the home moved (that
		 * member is in error since), or what it had when its device
		 * went; the state is the home's.
		 */
		if (!first && !rbond_mrail_first_kept(qp, attr)) {
			key = qp->home;
			first = member;
		}
		if (first) {
			ret = ib_query_qp(first, attr, attr_mask, &minit);
			if (!ret)
				rbond_qp_translate_back(bond, key,
							&attr->ah_attr);
		}
		if (!ret && first != member) {
			ret = ib_query_qp(member, &st, IB_QP_STATE |
					  IB_QP_CUR_STATE, &minit);
			attr->qp_state = st.qp_state;
			attr->cur_qp_state = st.cur_qp_state;
			attr->sq_draining = st.sq_draining;
		}
	} else {
		memset(attr, 0, sizeof(*attr));
		attr->qp_state = IB_QPS_ERR;
		attr->cur_qp_state = IB_QPS_ERR;
	}
	mutex_unlock(&bond->lock);
	if (ret)
		return ret;

	attr->port_num = RBOND_PORT;
	attr->cap = qp->cap;
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->event_handler = ibqp->event_handler;
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->cap = qp->cap;
	init_attr->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR :
					       IB_SIGNAL_REQ_WR;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->port_num = RBOND_PORT;
	return 0;
}

/* --- rdma res show qp -dd ------------------------------------------------ */

int rbond_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	u32 qpn[RBOND_MAX_RAILS] = {};
	struct nlattr *table;
	unsigned long flags;
	unsigned int i, mask = 0;
	char name[16];

	spin_lock_irqsave(&qp->sq_post_lock, flags);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!qp->member[i])
			continue;
		mask |= BIT(i);
		qpn[i] = qp->member[i]->qp_num;
	}
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);

	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_u32(msg, "home_rail", qp->home) ||
	    rdma_nl_put_driver_u32_hex(msg, "rails", mask))
		goto err_cancel;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!(mask & BIT(i)))
			continue;
		snprintf(name, sizeof(name), "rail%u_qpn", i);
		if (rdma_nl_put_driver_u32(msg, name, qpn[i]))
			goto err_cancel;
	}
	if (rbond_mrail_fill_res(msg, qp))
		goto err_cancel;
	nla_nest_end(msg, table);
	return 0;

err_cancel:
	nla_nest_cancel(msg, table);
	return -EMSGSIZE;
}
