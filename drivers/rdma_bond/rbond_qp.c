// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: RC queue pairs and the data path.
 *
 * A bond QP owns a member QP on its home rail (the primary rail when it was
 * created); its QPN is the home member's QPN, so any RC peer connects to it
 * as to a native QP.  Every posted WQE gets a slot in a shadow queue (send:
 * application wr_id, opcode, rail; receive: wr_id) and goes to the rail the
 * scheduler picks with wr_id = (qp id, recv flag, slot sequence).  Member
 * completions complete slots; the send shadow queue is drained strictly in
 * posting order, so the application sees its completions in posting order
 * whatever rail carried each WQE.
 *
 * post_send/post_recv run in any context and never sleep: the post locks
 * are irqsave spinlocks and the lkey lookup is RCU.
 */
#include <rdma/ib_cache.h>
#include <rdma/rdma_netlink.h>
#include <rdma/restrack.h>

#include "rbond.h"
#include "rbond_mrail.h"

static void rbond_qp_member_event(struct ib_event *event, void *ctx)
{
	struct rbond_qp *qp = ctx;
	struct ib_event ev = *event;

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

	if (init->qp_type != IB_QPT_RC) {
		ibdev_dbg(&bond->ibdev, "QP type %d not supported\n",
			  init->qp_type);
		return -EOPNOTSUPP;
	}
	if (init->srq || init->xrcd || init->rwq_ind_tbl ||
	    init->create_flags) {
		ibdev_dbg(&bond->ibdev, "SRQ/XRC/RSS/create_flags unsupported\n");
		return -EOPNOTSUPP;
	}
	if (!init->send_cq || !init->recv_cq ||
	    init->send_cq->device != &bond->ibdev ||
	    init->recv_cq->device != &bond->ibdev)
		return -EINVAL;
	if (init->cap.max_send_wr > a->max_qp_wr ||
	    init->cap.max_recv_wr > a->max_qp_wr ||
	    init->cap.max_send_sge > a->max_send_sge ||
	    init->cap.max_recv_sge > a->max_recv_sge ||
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
	struct rbond_cq *scq, *rcq;
	struct ib_qp *mqp;
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

	mutex_lock(&bond->lock);
	if (!bond->num_rails) {
		ret = -ENODEV;
		goto err_unlock;
	}
	home = bond->primary;
	if (!pd->member[home] || !scq->member[home] || !rcq->member[home]) {
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
	/* The core sets up rdma_rw contexts for the bond QP, not the member. */
	mattr.cap.max_rdma_ctxs = 0;
	/* Multi-rail: room for chunks of split WQEs next to the app's. */
	mrail = READ_ONCE(rbond_multirail) && bond->num_rails > 1;
	if (mrail)
		mattr.cap.max_send_wr = min_t(u32, init->cap.max_send_wr * 4,
					      bond->attr.max_qp_wr);
	mqp = ib_create_qp(pd->member[home], &mattr);
	if (IS_ERR(mqp)) {
		ret = PTR_ERR(mqp);
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
	qp->cap.max_recv_sge = init->cap.max_recv_sge;
	qp->cap.max_inline_data = init->cap.max_inline_data;
	qp->cap.max_send_wr = mattr.cap.max_send_wr;
	qp->cap.max_recv_wr = mattr.cap.max_recv_wr;
	qp->cap.max_rdma_ctxs = init->cap.max_rdma_ctxs;
	qp->slot_cap = mattr.cap.max_send_wr;
	if (mrail)
		qp->cap.max_send_wr = max(init->cap.max_send_wr,
					  mattr.cap.max_send_wr / 4);
	qp->sq_size = roundup_pow_of_two(max(mattr.cap.max_send_wr, 1U));
	qp->rq_size = roundup_pow_of_two(max(mattr.cap.max_recv_wr, 1U));
	qp->sq = kvcalloc(qp->sq_size, sizeof(*qp->sq), GFP_KERNEL_ACCOUNT);
	qp->rq = kvcalloc(qp->rq_size, sizeof(*qp->rq), GFP_KERNEL_ACCOUNT);
	if (!qp->sq || !qp->rq) {
		ret = -ENOMEM;
		goto err_destroy_member;
	}

	ret = xa_alloc_cyclic(&bond->qp_xa, &qp->id, qp,
			      XA_LIMIT(1, RBOND_QP_ID_MAX), &bond->next_qp_id,
			      GFP_KERNEL);
	if (ret < 0)
		goto err_destroy_member;

	qp->member[home] = mqp;
	ibqp->qp_num = mqp->qp_num;
	init->cap = qp->cap;
	list_add_tail(&qp->list, &bond->qps);
	mutex_unlock(&bond->lock);
	rbond_mrail_qp_create(qp);
	return 0;

err_destroy_member:
	ib_destroy_qp(mqp);
	kvfree(qp->sq);
	kvfree(qp->rq);
err_unlock:
	mutex_unlock(&bond->lock);
	return ret;
}

/*
 * A WQE split into chunks (multi-rail) completes once, on its last chunk:
 * the earlier chunks' byte counts and first error are carried to it, so the
 * application sees the whole WQE's byte_len.  sq_lock held.
 */
static void rbond_qp_fold_chunk(struct rbond_qp *qp,
				const struct rbond_swqe *e)
{
	qp->chunk_bytes += e->byte_len;
	if (e->status != IB_WC_SUCCESS && qp->chunk_status == IB_WC_SUCCESS) {
		qp->chunk_status = e->status;
		qp->chunk_vendor_err = e->vendor_err;
	}
}

static void rbond_qp_unfold_chunks(struct rbond_qp *qp, struct rbond_swqe *e)
{
	e->byte_len += qp->chunk_bytes;
	if (qp->chunk_status != IB_WC_SUCCESS && e->status == IB_WC_SUCCESS) {
		e->status = qp->chunk_status;
		e->vendor_err = qp->chunk_vendor_err;
	}
	qp->chunk_bytes = 0;
	qp->chunk_status = IB_WC_SUCCESS;
	qp->chunk_vendor_err = 0;
}

/* Complete every outstanding WQE with IB_WC_WR_FLUSH_ERR (member gone). */
static void rbond_qp_flush(struct rbond_qp *qp)
{
	struct ib_wc wc = { .qp = &qp->ibqp, .port_num = RBOND_PORT };
	unsigned long flags;
	bool notify;

	spin_lock_irqsave(&qp->scq->lock, flags);
	spin_lock(&qp->sq_lock);
	for (; qp->sq_tail != qp->sq_head; qp->sq_tail++) {
		struct rbond_swqe *e = &qp->sq[qp->sq_tail & (qp->sq_size - 1)];

		if (!(e->flags & RBOND_SWQE_DONE))
			rbond_mrail_slot_done(qp, e);	/* rails' accounting */
		if (e->flags & RBOND_SWQE_CHUNK) {
			/* reported with its WQE's last chunk */
			rbond_qp_fold_chunk(qp, e);
			continue;
		}
		qp->sq_wqes--;
		rbond_qp_unfold_chunks(qp, e);
		if ((e->flags & RBOND_SWQE_DONE) &&
		    e->status == IB_WC_SUCCESS &&
		    !(e->flags & RBOND_SWQE_SIGNALED))
			continue;
		wc.wr_id = e->wr_id;
		wc.opcode = e->opcode;
		wc.status = (e->flags & RBOND_SWQE_DONE) ? e->status :
							     IB_WC_WR_FLUSH_ERR;
		wc.byte_len = e->byte_len;
		rbond_cq_push(qp->scq, &wc);
	}
	spin_unlock(&qp->sq_lock);
	notify = qp->scq->notify && qp->scq->head != qp->scq->tail;
	if (notify)
		qp->scq->notify = 0;
	spin_unlock_irqrestore(&qp->scq->lock, flags);
	rbond_cq_notify(qp->scq, notify, false);

	spin_lock_irqsave(&qp->rcq->lock, flags);
	spin_lock(&qp->rq_lock);
	for (; qp->rq_tail != qp->rq_head; qp->rq_tail++) {
		wc.wr_id = qp->rq[qp->rq_tail & (qp->rq_size - 1)];
		wc.opcode = IB_WC_RECV;
		wc.status = IB_WC_WR_FLUSH_ERR;
		wc.byte_len = 0;
		rbond_cq_push(qp->rcq, &wc);
	}
	spin_unlock(&qp->rq_lock);
	notify = qp->rcq->notify && qp->rcq->head != qp->rcq->tail;
	if (notify)
		qp->rcq->notify = 0;
	spin_unlock_irqrestore(&qp->rcq->lock, flags);
	rbond_cq_notify(qp->rcq, notify, false);
}

/*
 * Detach and destroy the member QP on @rail, then process what its member
 * CQs still hold.  member[] is read by the post paths (post locks) and by
 * the completion path, which posts waiting WQEs under cq->lock and sq_lock
 * (rbond_mrail_drain): cleared under all three, no one can be using the
 * member once it is destroyed.  Caller holds bond->lock.
 */
static void rbond_qp_destroy_member(struct rbond_qp *qp, unsigned int rail)
{
	struct ib_qp *mqp;
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	mqp = qp->member[rail];
	qp->member[rail] = NULL;
	spin_unlock(&qp->sq_lock);
	spin_unlock(&qp->rq_post_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
	if (!mqp)
		return;

	if (ib_destroy_qp(mqp))
		WARN_ON_ONCE(1);
	rbond_cq_drain_member(qp->scq, rail);
	if (qp->rcq != qp->scq)
		rbond_cq_drain_member(qp->rcq, rail);
}

static void rbond_qp_flush_rail(struct rbond_qp *qp, unsigned int rail);

/*
 * Caller holds bond->lock: the rail's member device is going away.  Its
 * member QP is destroyed and gives no more completions.  An extra rail's
 * WQEs still outstanding are flushed (rbond_qp_flush_rail); losing the
 * home rail puts the QP in error for good: everything flushes, the other
 * members go to error.
 */
void rbond_qp_remove_rail(struct rbond_qp *qp, unsigned int rail)
{
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };
	bool home = rail == qp->home && qp->member[rail];
	unsigned int i;

	rbond_mrail_qp_remove_rail(qp, rail);
	rbond_qp_destroy_member(qp, rail);
	if (!home) {
		rbond_qp_flush_rail(qp, rail);
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
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_qp_destroy_member(qp, i);
	list_del(&qp->list);
	mutex_unlock(&bond->lock);

	/* Entries already in the bond CQs would point at a freed QP. */
	rbond_cq_clean_qp(qp->scq, qp);
	if (qp->rcq != qp->scq)
		rbond_cq_clean_qp(qp->rcq, qp);
	rbond_mrail_qp_free(qp);
	kvfree(qp->sq);
	kvfree(qp->rq);
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

	/*
	 * Under the post locks: a post racing the RESET (another thread)
	 * must neither undo a slot dropped here nor account a WQE between
	 * the drop and the scheduler's reset.
	 */
	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->sq_lock);
	for (; qp->sq_tail != qp->sq_head; qp->sq_tail++) {
		struct rbond_swqe *e = &qp->sq[qp->sq_tail & (qp->sq_size - 1)];

		if (!(e->flags & RBOND_SWQE_DONE))
			rbond_mrail_slot_done(qp, e);	/* rails' accounting */
	}
	qp->sq_wqes = 0;
	qp->chunk_bytes = 0;
	qp->chunk_status = IB_WC_SUCCESS;
	qp->chunk_vendor_err = 0;
	qp->sq_failed = false;
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
	rbond_mrail_qp_reset(qp);
}

int rbond_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	const struct ib_gid_attr *mgid = NULL;
	struct ib_qp_attr *mattr;
	struct ib_qp *mqp;
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
	mqp = qp->member[qp->home];
	if (!mqp) {
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
	ret = ib_modify_qp(mqp, mattr, attr_mask);
	if (mgid)
		rdma_put_gid_attr(mgid);
	if (ret) {
		ibdev_dbg(&bond->ibdev, "member modify_qp failed: %d\n", ret);
		goto out_unlock;
	}
	if (attr_mask & IB_QP_STATE)
		qp->state = attr->qp_state;
	if (reset)
		rbond_qp_reset(qp);
	rbond_mrail_qp_modified(qp, attr, attr_mask);
out_unlock:
	mutex_unlock(&bond->lock);
	if (reset)
		rbond_mrail_unlock(qp);
	kfree(mattr);
	if (!ret && (attr_mask & IB_QP_STATE) && attr->qp_state == IB_QPS_RTS)
		rbond_mrail_wait_up(qp);
	return ret;
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

int rbond_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		   int attr_mask, struct ib_qp_init_attr *init_attr)
{
	struct rbond_dev *bond = to_rbond_dev(ibqp->device);
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	struct ib_qp_init_attr minit;
	struct ib_qp *mqp;
	int ret = 0;

	mutex_lock(&bond->lock);
	mqp = qp->member[qp->home];
	if (mqp) {
		ret = ib_query_qp(mqp, attr, attr_mask, &minit);
		if (!ret)
			rbond_qp_translate_back(bond, qp->home,
						&attr->ah_attr);
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
	init_attr->qp_type = IB_QPT_RC;
	init_attr->port_num = RBOND_PORT;
	return 0;
}

/* --- data path ---------------------------------------------------------- */

static inline u64 rbond_wrid(const struct rbond_qp *qp, bool recv, u32 seq)
{
	return ((u64)qp->id << RBOND_WRID_ID_SHIFT) |
	       (recv ? RBOND_WRID_RECV : 0) | seq;
}

/* Translate bond lkeys to @rail's member lkeys; total length in *bytes. */
static int rbond_translate_sges(struct rbond_qp *qp, unsigned int rail,
				const struct ib_sge *in, int num_sge,
				struct ib_sge *out, u64 *bytes)
{
	int i, ret = 0;

	*bytes = 0;
	rcu_read_lock();
	for (i = 0; i < num_sge; i++) {
		struct rbond_mr *mr = rbond_mr_lookup(qp->pd, in[i].lkey);

		if (!mr || !(READ_ONCE(mr->rails) & BIT(rail))) {
			ibdev_dbg(qp->ibqp.device, "QP 0x%x: bad lkey 0x%x\n",
				  qp->ibqp.qp_num, in[i].lkey);
			ret = -EINVAL;
			break;
		}
		out[i] = in[i];
		out[i].lkey = mr->lkey[rail];
		*bytes += in[i].length;
	}
	rcu_read_unlock();
	return ret;
}

/* A new shadow send slot for @wr (sq_lock held, room checked): its seq. */
u32 rbond_sq_alloc(struct rbond_qp *qp, const struct ib_send_wr *wr,
		   u8 wc_opcode, u8 rail, u64 bytes)
{
	u32 seq = qp->sq_head++;
	struct rbond_swqe *e = &qp->sq[seq & (qp->sq_size - 1)];

	lockdep_assert_held(&qp->sq_lock);
	qp->sq_wqes++;		/* until made a chunk (rbond_alloc_slot) */
	e->wr_id = wr->wr_id;
	e->opcode = wc_opcode;
	e->rail = rail;
	e->status = IB_WC_SUCCESS;
	e->byte_len = bytes;
	e->vendor_err = 0;
	e->flags = (qp->sig_all || (wr->send_flags & IB_SEND_SIGNALED)) ?
		   RBOND_SWQE_SIGNALED : 0;
	return seq;
}

/* Take back the slot rbond_sq_alloc() gave last (its post failed). */
void rbond_sq_unalloc(struct rbond_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	qp->sq_head--;
	if (!(qp->sq[qp->sq_head & (qp->sq_size - 1)].flags & RBOND_SWQE_CHUNK))
		qp->sq_wqes--;
}

/* IB_SEND_INLINE applies to the opcodes that carry data; others ignore it. */
static bool rbond_wr_inline(const struct ib_send_wr *wr)
{
	if (!(wr->send_flags & IB_SEND_INLINE))
		return false;
	switch (wr->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return true;
	default:
		return false;
	}
}

/*
 * Inline data belongs to the WQE from the moment it is posted: the caller
 * may reuse its buffer as soon as post_send returns.  Gather it into @buf
 * (RBOND_MAX_INLINE bytes) and describe it by @sge, a kernel address that
 * the member QP copies as kernel inline data (a pending WQE keeps its own
 * copy, rbond_mrail_post_send).  A user QP's addresses are the caller's:
 * uverbs posts from the caller's context with no lock held.
 */
static int rbond_capture_inline(struct rbond_qp *qp,
				const struct ib_send_wr *wr, u8 *buf,
				struct ib_sge *sge)
{
	u32 len = 0, l;
	int i;

	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		l = wr->sg_list[i].length;
		if (l > qp->cap.max_inline_data - len) {
			ibdev_dbg(qp->ibqp.device,
				  "QP 0x%x: inline data over %u bytes\n",
				  qp->ibqp.qp_num, qp->cap.max_inline_data);
			return -EINVAL;
		}
		if (!qp->user)
			memcpy(buf + len,
			       (void *)(uintptr_t)wr->sg_list[i].addr, l);
		else if (copy_from_user(buf + len,
					u64_to_user_ptr(wr->sg_list[i].addr),
					l))
			return -EFAULT;
		len += l;
	}
	sge->addr = (uintptr_t)buf;
	sge->length = len;
	sge->lkey = 0;
	return 0;
}

/*
 * Post one WQE; @isge, if not NULL, is its inline data captured by
 * rbond_capture_inline().  sq_post_lock held.
 */
static int rbond_post_one_send(struct rbond_qp *qp,
			       const struct ib_send_wr *wr,
			       const struct ib_sge *isge)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
	} mwr;
	struct ib_sge sge[RBOND_MAX_SGE];
	const struct ib_send_wr *bad;
	struct rbond_swqe *e;
	unsigned int rail;
	struct ib_qp *mqp;
	u8 wc_opcode;
	u64 bytes = 0;
	u32 seq;
	int i, ret;

	switch (wr->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		wc_opcode = IB_WC_SEND;
		mwr.send = *wr;
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		wc_opcode = IB_WC_RDMA_WRITE;
		mwr.rdma = *rdma_wr(wr);
		break;
	case IB_WR_RDMA_READ:
		wc_opcode = IB_WC_RDMA_READ;
		mwr.rdma = *rdma_wr(wr);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		wc_opcode = IB_WC_COMP_SWAP;
		mwr.atomic = *atomic_wr(wr);
		break;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		wc_opcode = IB_WC_FETCH_ADD;
		mwr.atomic = *atomic_wr(wr);
		break;
	default:
		ibdev_dbg(&bond->ibdev, "QP 0x%x: opcode %d not supported\n",
			  qp->ibqp.qp_num, wr->opcode);
		return -EINVAL;
	}
	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge ||
	    wr->num_sge > RBOND_MAX_SGE ||
	    (wc_opcode == IB_WC_RDMA_READ &&
	     wr->num_sge > bond->attr.max_sge_rd) ||
	    ((wc_opcode == IB_WC_COMP_SWAP || wc_opcode == IB_WC_FETCH_ADD) &&
	     wr->num_sge != 1)) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: bad num_sge %d\n",
			  qp->ibqp.qp_num, wr->num_sge);
		return -EINVAL;
	}
	if (!isge) {
		for (i = 0; i < wr->num_sge; i++)
			bytes += wr->sg_list[i].length;
		if (bytes > RBOND_MAX_MSG_SZ) {
			ibdev_dbg(&bond->ibdev, "QP 0x%x: %llu bytes in one WQE\n",
				  qp->ibqp.qp_num, bytes);
			return -EINVAL;
		}
		bytes = 0;
	}

	if (rbond_mrail_active(qp))
		return rbond_mrail_post_send(qp, wr, wc_opcode, isge);

	rail = rbond_sched_pick_rail(qp, wr);
	mqp = rail < RBOND_MAX_RAILS ? qp->member[rail] : NULL;
	if (!mqp)
		return -EINVAL;	/* home rail lost: QP in error */

	if (isge) {
		/* Captured inline data: a kernel address, no lkey. */
		sge[0] = *isge;
		bytes = isge->length;
		mwr.send.num_sge = bytes ? 1 : 0;
	} else {
		ret = rbond_translate_sges(qp, rail, wr->sg_list, wr->num_sge,
					   sge, &bytes);
		if (ret)
			return ret;
		mwr.send.send_flags &= ~IB_SEND_INLINE;
	}
	mwr.send.next = NULL;
	mwr.send.sg_list = sge;

	spin_lock(&qp->sq_lock);
	if (qp->sq_wqes >= qp->cap.max_send_wr ||
	    qp->sq_head - qp->sq_tail >= qp->slot_cap) {
		spin_unlock(&qp->sq_lock);
		return -ENOMEM;
	}
	seq = rbond_sq_alloc(qp, wr, wc_opcode, rail, bytes);
	e = &qp->sq[seq & (qp->sq_size - 1)];
	if (rbond_mrail_account_old(qp, e))
		mwr.send.send_flags |= IB_SEND_SIGNALED;
	spin_unlock(&qp->sq_lock);

	mwr.send.wr_id = rbond_wrid(qp, false, seq);
	ret = ib_post_send(mqp, &mwr.send, &bad);
	if (ret) {
		/* Nothing after us: the post lock is held (RESET takes it). */
		spin_lock(&qp->sq_lock);
		rbond_mrail_slot_done(qp, e);	/* undo account_old */
		rbond_sq_unalloc(qp);
		spin_unlock(&qp->sq_lock);
		return ret;
	}
	rbond_stat_add(bond, rail, RBOND_STAT_TX_WQES, 1);
	rbond_stat_add(bond, rail, RBOND_STAT_TX_BYTES, bytes);
	return 0;
}

/*
 * The post lock is taken per WQE, as rxe does, so a list of thousands does
 * not keep interrupts off for its whole length; a user QP's inline data is
 * copied from the caller before the lock (it may fault).
 */
int rbond_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr)
{
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	u8 inl[RBOND_MAX_INLINE];
	unsigned long flags;
	struct ib_sge isge;
	bool inline_wr;
	int ret = 0;

	for (; wr; wr = wr->next) {
		inline_wr = rbond_wr_inline(wr);
		if (inline_wr) {
			ret = rbond_capture_inline(qp, wr, inl, &isge);
			if (ret)
				break;
		}
		spin_lock_irqsave(&qp->sq_post_lock, flags);
		ret = rbond_post_one_send(qp, wr, inline_wr ? &isge : NULL);
		spin_unlock_irqrestore(&qp->sq_post_lock, flags);
		if (ret)
			break;
	}
	if (ret)
		*bad_wr = wr;
	return ret;
}

static int rbond_post_one_recv(struct rbond_qp *qp,
			       const struct ib_recv_wr *wr)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	struct ib_sge sge[RBOND_MAX_SGE];
	struct ib_recv_wr mwr = {};
	const struct ib_recv_wr *bad;
	unsigned int rail = qp->home;
	struct ib_qp *mqp = qp->member[rail];
	u64 bytes;
	u32 seq;
	int ret;

	if (!mqp)
		return -EINVAL;
	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_recv_sge ||
	    wr->num_sge > RBOND_MAX_SGE) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: bad recv num_sge %d\n",
			  qp->ibqp.qp_num, wr->num_sge);
		return -EINVAL;
	}
	ret = rbond_translate_sges(qp, rail, wr->sg_list, wr->num_sge, sge,
				   &bytes);
	if (ret)
		return ret;

	spin_lock(&qp->rq_lock);
	if (qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr) {
		spin_unlock(&qp->rq_lock);
		return -ENOMEM;
	}
	seq = qp->rq_head++;
	qp->rq[seq & (qp->rq_size - 1)] = wr->wr_id;
	spin_unlock(&qp->rq_lock);

	mwr.wr_id = rbond_wrid(qp, true, seq);
	mwr.sg_list = sge;
	mwr.num_sge = wr->num_sge;
	ret = ib_post_recv(mqp, &mwr, &bad);
	if (ret) {
		spin_lock(&qp->rq_lock);
		qp->rq_head--;
		spin_unlock(&qp->rq_lock);
		return ret;
	}
	rbond_stat_add(bond, rail, RBOND_STAT_RX_WQES, 1);
	return 0;
}

int rbond_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr)
{
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	unsigned long flags;
	int ret = 0;

	for (; wr; wr = wr->next) {
		spin_lock_irqsave(&qp->rq_post_lock, flags);
		ret = rbond_post_one_recv(qp, wr);
		spin_unlock_irqrestore(&qp->rq_post_lock, flags);
		if (ret) {
			*bad_wr = wr;
			break;
		}
	}
	return ret;
}

/* --- completions (member CQ handlers, cq->lock held) ------------------- */

/* Deliver the WQE at the head of the send queue, if it is done. */
static bool rbond_qp_deliver_one(struct rbond_qp *qp, bool *added)
{
	struct rbond_swqe *e = &qp->sq[qp->sq_tail & (qp->sq_size - 1)];
	struct ib_wc wc = { .qp = &qp->ibqp, .port_num = RBOND_PORT };

	if (!(e->flags & RBOND_SWQE_DONE))
		return false;
	qp->sq_tail++;
	if (e->flags & RBOND_SWQE_CHUNK) {
		rbond_qp_fold_chunk(qp, e);
		return true;
	}
	qp->sq_wqes--;
	rbond_qp_unfold_chunks(qp, e);
	/*
	 * RC: after the first error every WQE completes flushed, also those
	 * another rail had already carried.
	 */
	if (qp->sq_failed && e->status == IB_WC_SUCCESS) {
		e->status = IB_WC_WR_FLUSH_ERR;
		e->byte_len = 0;
	} else if (!qp->sq_failed && e->status != IB_WC_SUCCESS) {
		qp->sq_failed = true;
		rbond_mrail_qp_failed(qp);
	}
	if (!(e->flags & RBOND_SWQE_SIGNALED) && e->status == IB_WC_SUCCESS)
		return true;
	wc.wr_id = e->wr_id;
	wc.status = e->status;
	wc.opcode = e->opcode;
	wc.vendor_err = e->vendor_err;
	wc.byte_len = e->byte_len;
	*added |= rbond_cq_push(qp->scq, &wc);
	return true;
}

/*
 * Deliver the completed WQEs at the head of the send queue, in posting
 * order, then post the WQEs that waited for them (multi-rail); again until
 * neither makes progress: a waiting WQE whose post fails completes at once
 * and must be delivered too.  scq->lock and sq_lock held.  True when a
 * completion was added to the bond CQ.
 */
static bool rbond_qp_deliver(struct rbond_qp *qp)
{
	bool added = false;

	do {
		while (qp->sq_tail != qp->sq_head &&
		       rbond_qp_deliver_one(qp, &added))
			;
	} while (rbond_mrail_drain(qp));
	return added;
}

/*
 * @rail's member QP is gone (rail removal, bond->lock held): its WQEs that
 * had not completed (their completions, if any, were processed when the
 * member was destroyed) never will.  As RC does on a broken connection,
 * they complete with a flush error in posting order: the first of them is
 * the QP's first error, everything after it flushes (rbond_qp_deliver) and
 * the QP goes to error (rbond_mrail_qp_failed).
 */
static void rbond_qp_flush_rail(struct rbond_qp *qp, unsigned int rail)
{
	struct rbond_cq *cq = qp->scq;
	bool added = false, found = false, notify, overflow;
	unsigned long flags;
	u32 s;

	spin_lock_irqsave(&cq->lock, flags);
	spin_lock(&qp->sq_lock);
	for (s = qp->sq_tail; s != qp->sq_head; s++) {
		struct rbond_swqe *e = &qp->sq[s & (qp->sq_size - 1)];

		if (e->rail != rail || (e->flags & RBOND_SWQE_DONE))
			continue;
		rbond_mrail_slot_done(qp, e);
		e->status = IB_WC_WR_FLUSH_ERR;
		e->vendor_err = 0;
		e->flags |= RBOND_SWQE_DONE;
		found = true;
	}
	if (found) {
		ibdev_dbg(qp->ibqp.device,
			  "QP 0x%x: WQEs on removed rail %u flushed\n",
			  qp->ibqp.qp_num, rail);
		added = rbond_qp_deliver(qp);
	}
	spin_unlock(&qp->sq_lock);
	notify = added && cq->notify;
	if (notify)
		cq->notify = 0;
	overflow = cq->overflow;
	cq->overflow = false;
	spin_unlock_irqrestore(&cq->lock, flags);
	rbond_cq_notify(cq, notify, overflow);
}

/*
 * The post path completed a WQE itself, without posting it (the QP is in
 * error: rbond_mrail_post_send): deliver it now, nothing else would.
 * sq_post_lock held (interrupts off), sq_lock not.  The consumer is
 * notified from the CQ's tasklet, never from inside post_send.
 */
void rbond_qp_deliver_posted(struct rbond_qp *qp)
{
	struct rbond_cq *cq = qp->scq;

	spin_lock(&cq->lock);
	spin_lock(&qp->sq_lock);
	if (rbond_qp_deliver(qp) || cq->overflow)
		rbond_cq_kick(cq);
	spin_unlock(&qp->sq_lock);
	spin_unlock(&cq->lock);
}

static bool rbond_qp_send_wc(struct rbond_dev *bond, struct rbond_qp *qp,
			     const struct ib_wc *mwc, u32 seq)
{
	struct rbond_swqe *e;
	bool added = false;
	unsigned int rail;
	u32 s;

	spin_lock(&qp->sq_lock);
	if (seq - qp->sq_tail >= qp->sq_head - qp->sq_tail) {
		spin_unlock(&qp->sq_lock);
		ibdev_dbg(&bond->ibdev, "QP 0x%x: stale send completion\n",
			  qp->ibqp.qp_num);
		return false;
	}
	e = &qp->sq[seq & (qp->sq_size - 1)];
	rail = e->rail;
	if (!(e->flags & RBOND_SWQE_DONE))
		rbond_mrail_slot_done(qp, e);
	e->status = mwc->status;
	e->vendor_err = mwc->vendor_err;
	if (mwc->status == IB_WC_SUCCESS)
		e->byte_len = mwc->byte_len;
	e->flags |= RBOND_SWQE_DONE;

	/* RC: earlier (unsignaled) WQEs on the same rail are complete too. */
	for (s = qp->sq_tail; s != seq; s++) {
		struct rbond_swqe *p = &qp->sq[s & (qp->sq_size - 1)];

		if (p->rail == rail && !(p->flags & RBOND_SWQE_DONE)) {
			rbond_mrail_slot_done(qp, p);
			p->flags |= RBOND_SWQE_DONE;
			p->status = IB_WC_SUCCESS;
		}
	}

	added = rbond_qp_deliver(qp);
	spin_unlock(&qp->sq_lock);

	rbond_stat_add(bond, rail, RBOND_STAT_COMPLETIONS, 1);
	if (mwc->status != IB_WC_SUCCESS)
		rbond_stat_add(bond, rail, RBOND_STAT_ERRORS, 1);
	return added;
}

static bool rbond_qp_recv_wc(struct rbond_dev *bond, struct rbond_qp *qp,
			     const struct ib_wc *mwc, u32 seq)
{
	struct ib_wc wc = *mwc;

	spin_lock(&qp->rq_lock);
	if (seq - qp->rq_tail >= qp->rq_head - qp->rq_tail) {
		spin_unlock(&qp->rq_lock);
		ibdev_dbg(&bond->ibdev, "QP 0x%x: stale recv completion\n",
			  qp->ibqp.qp_num);
		return false;
	}
	/*
	 * One receive queue on the home rail: completes in order (RESET
	 * drops what was outstanding: rbond_qp_reset).
	 */
	if (seq != qp->rq_tail)
		ibdev_dbg(&bond->ibdev, "QP 0x%x: receive %u completed, %u expected\n",
			  qp->ibqp.qp_num, seq, qp->rq_tail);
	wc.wr_id = qp->rq[seq & (qp->rq_size - 1)];
	qp->rq_tail = seq + 1;
	spin_unlock(&qp->rq_lock);

	wc.qp = &qp->ibqp;
	wc.port_num = RBOND_PORT;
	if (wc.status != IB_WC_SUCCESS)
		wc.opcode = IB_WC_RECV;

	rbond_stat_add(bond, qp->home, RBOND_STAT_COMPLETIONS, 1);
	if (wc.status == IB_WC_SUCCESS)
		rbond_stat_add(bond, qp->home, RBOND_STAT_RX_BYTES,
			       wc.byte_len);
	else
		rbond_stat_add(bond, qp->home, RBOND_STAT_ERRORS, 1);
	return rbond_cq_push(qp->rcq, &wc);
}

/*
 * One member completion.  Caller holds cq->lock (the CQ it came from), which
 * keeps the QP found in qp_xa alive: destroy_qp erases it first, then takes
 * every CQ lock of the QP before returning.
 */
bool rbond_qp_process_wc(struct rbond_dev *bond, struct rbond_cq *cq,
			 const struct ib_wc *mwc)
{
	u32 id = mwc->wr_id >> RBOND_WRID_ID_SHIFT;
	u32 seq = lower_32_bits(mwc->wr_id);
	struct rbond_qp *qp;

	qp = xa_load(&bond->qp_xa, id);
	if (!qp)
		return false;	/* QP being destroyed */
	if (mwc->wr_id & RBOND_WRID_RECV) {
		if (WARN_ON_ONCE(qp->rcq != cq))
			return false;
		return rbond_qp_recv_wc(bond, qp, mwc, seq);
	}
	if (WARN_ON_ONCE(qp->scq != cq))
		return false;
	return rbond_qp_send_wc(bond, qp, mwc, seq);
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
