// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the completion path, one for every QP.
 *
 * A member completion names its slot by wr_id (qp id, recv flag, slot
 * sequence: rbond_post.c).  rbond_qp_process_wc() completes the slot (and,
 * RC, the unsignaled slots before it on the same rail), tells the
 * scheduler, and delivers: the send shadow queue is drained strictly in
 * posting order, so the application sees its completions in posting order
 * whatever rail carried each WQE; a WQE split into chunks completes once,
 * with its whole byte count.  Then the WQEs that waited for completions
 * go out (rbond_post_drain).  Receives complete in order on the home rail.
 *
 * Runs from the bond CQ's tasklet (rbond_cq.c) with the CQ's lock held,
 * and from rail removal.
 */
#include "rbond.h"
#include "rbond_mrail.h"

/*
 * A WQE split into chunks (multi-rail) completes once, on its last chunk:
 * the earlier chunks' byte counts and first error are carried to it, so the
 * application sees the whole WQE's byte_len.  sq_lock held.
 */
static void rbond_qp_fold_chunk(struct rbond_qp *qp,
				const struct rbond_swqe *e)
{
	lockdep_assert_held(&qp->sq_lock);
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

/*
 * RC: after the first error every WQE completes flushed, also those another
 * rail had already carried.  Applies that to @e's status as it is
 * delivered; true for the QP's first error.  qp->sq_lock held.
 */
static bool rbond_qp_sq_status(struct rbond_qp *qp, struct rbond_swqe *e)
{
	if (e->status == IB_WC_SUCCESS) {
		if (qp->sq_failed) {
			e->status = IB_WC_WR_FLUSH_ERR;
			e->byte_len = 0;
		}
		return false;
	}
	if (qp->sq_failed)
		return false;
	qp->sq_failed = true;
	return true;
}

/**
 * rbond_qp_flush() - complete every outstanding WQE with IB_WC_WR_FLUSH_ERR
 * @qp: the QP, whose home member is gone
 *
 * Send and receive queues both, in posting order; a send WQE that had
 * completed keeps its status unless an error comes before it (RC: after
 * the first error everything flushes, also a WQE another rail had
 * already carried).  The CQs' consumers are notified if armed.
 * Locks: bond->lock held (rail removal); the CQs' and queues' locks not
 * held (taken here).
 */
void rbond_qp_flush(struct rbond_qp *qp)
{
	struct ib_wc wc = { .qp = &qp->ibqp, .port_num = RBOND_PORT };
	unsigned long flags;
	bool notify;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	spin_lock_irqsave(&qp->scq->lock, flags);
	spin_lock(&qp->sq_lock);
	qp->sq_erring = true;
	for (; qp->sq_tail != qp->sq_head; qp->sq_tail++) {
		struct rbond_swqe *e = rbond_sq_slot(qp, qp->sq_tail);

		if (!(e->flags & RBOND_SWQE_DONE))
			rbond_sched_done(&qp->s, e);	/* rails' accounting */
		if (e->flags & RBOND_SWQE_CHUNK) {
			/* reported with its WQE's last chunk */
			rbond_qp_fold_chunk(qp, e);
			continue;
		}
		qp->sq_wqes--;
		rbond_qp_unfold_chunks(qp, e);
		if (!(e->flags & RBOND_SWQE_DONE)) {
			e->status = IB_WC_WR_FLUSH_ERR;
			e->byte_len = 0;
		}
		rbond_qp_sq_status(qp, e);
		if (e->status == IB_WC_SUCCESS &&
		    !(e->flags & RBOND_SWQE_SIGNALED))
			continue;
		wc.status = e->status;
		wc.byte_len = e->byte_len;
		wc.wr_id = e->wr_id;
		wc.opcode = e->opcode;
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

/* --- completions (member CQ handlers, cq->lock held) ------------------- */

/* Deliver the WQE at the head of the send queue, if it is done. */
static bool rbond_qp_deliver_one(struct rbond_qp *qp, bool *added)
{
	struct rbond_swqe *e = rbond_sq_slot(qp, qp->sq_tail);
	struct ib_wc wc = { .qp = &qp->ibqp, .port_num = RBOND_PORT };

	if (!(e->flags & RBOND_SWQE_DONE))
		return false;
	/* its member is done with its buffers */
	rbond_dma_unmap(rbond_dma_slot(qp->sq_dma, qp->sq_size, qp->sq_tail));
	qp->sq_tail++;
	if (e->flags & RBOND_SWQE_CHUNK) {
		rbond_qp_fold_chunk(qp, e);
		return true;
	}
	qp->sq_wqes--;
	rbond_qp_unfold_chunks(qp, e);
	if (rbond_qp_sq_status(qp, e)) {
		rbond_fo_peer_err_release(qp);
		rbond_post_flush_pending(qp);
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

/**
 * rbond_qp_deliver() - deliver what is done, post what may go now
 * @qp: the QP
 *
 * Deliver the completed WQEs at the head of the send queue, in posting
 * order, then post the WQEs that waited for them (multi-rail); again until
 * neither makes progress: a waiting WQE whose post fails completes at once
 * and must be delivered too.
 * Locks: scq->lock and sq_lock held.
 * Return: true when a completion was added to the bond CQ.
 */
bool rbond_qp_deliver(struct rbond_qp *qp)
{
	bool added = false;

	lockdep_assert_held(&qp->scq->lock);
	lockdep_assert_held(&qp->sq_lock);
	do {
		while (qp->sq_tail != qp->sq_head &&
		       rbond_qp_deliver_one(qp, &added))
			;
	} while (qp->pend && rbond_post_drain(qp));
	return added;
}

/**
 * rbond_qp_flush_rail() - fail the WQEs of a rail that is gone
 * @qp: the QP
 * @rail: the rail, whose member QP is gone (rail removal) or which failed
 *	and cannot be failed over (rbond_failover.c)
 * @status: what they complete with (the first of them; the rest flush)
 *
 * Its WQEs that had not completed (their completions, if any, were
 * processed when the member was destroyed) never will.  As RC does on a
 * broken connection, they complete with an error in posting order:
 * the first of them is the QP's first error, everything after it flushes
 * (rbond_qp_deliver()) and the QP goes to error (rbond_mrail_qp_failed()).
 * Locks: bond->lock held; the send CQ's lock and sq_lock not held (taken
 * here).
 */
void rbond_qp_flush_rail(struct rbond_qp *qp, unsigned int rail,
			 enum ib_wc_status status)
{
	struct rbond_cq *cq = qp->scq;
	bool added = false, found = false;
	unsigned long flags;
	u32 s;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	spin_lock_irqsave(&cq->lock, flags);
	spin_lock(&qp->sq_lock);
	for (s = qp->sq_tail; s != qp->sq_head; s++) {
		struct rbond_swqe *e = rbond_sq_slot(qp, s);

		if (e->rail != rail || (e->flags & RBOND_SWQE_DONE))
			continue;
		rbond_sched_done(&qp->s, e);
		e->status = found ? IB_WC_WR_FLUSH_ERR : status;
		e->vendor_err = 0;
		e->flags &= ~RBOND_SWQE_REPLAY;
		e->flags |= RBOND_SWQE_DONE;
		found = true;
	}
	qp->fo_rails &= ~BIT(rail);
	if (found) {
		qp->sq_erring = true;
		ibdev_dbg(qp->ibqp.device,
			  "QP 0x%x: WQEs on lost rail %u failed\n",
			  qp->ibqp.qp_num, rail);
		added = rbond_qp_deliver(qp);
	}
	spin_unlock(&qp->sq_lock);
	rbond_cq_unlock_notify(cq, added, flags);
}

/**
 * rbond_qp_replay_rail() - post again what a failed rail did not complete
 * @qp: the QP
 * @rail: the failed rail, fenced on both hosts
 * @force: its member gives no more completions (gone, or given time):
 *	every slot of it not completed is replayed
 * @bytes: add the bytes posted again here
 *
 * Unless @force, only once every member WQE of @rail has completed or
 * been caught for replay (rbond_fo_catch()), so that nothing is posted
 * twice.  Then rbond_post_replay(), and delivery goes on (the replayed
 * WQEs held it up; so did the ordering points behind them).
 * Locks: bond->lock held; the send CQ's lock and sq_lock not held.
 * Return: the number of member WQEs posted again, or -EAGAIN when @rail
 * still has member WQEs outstanding.
 */
int rbond_qp_replay_rail(struct rbond_qp *qp, unsigned int rail, bool force,
			 u64 *bytes)
{
	struct rbond_cq *cq = qp->scq;
	unsigned long flags;
	bool added;
	int n = 0;
	u32 s;

	lockdep_assert_held(&to_rbond_dev(qp->ibqp.device)->lock);
	spin_lock_irqsave(&cq->lock, flags);
	spin_lock(&qp->sq_lock);
	for (s = qp->sq_tail; s != qp->sq_head; s++) {
		struct rbond_swqe *e = rbond_sq_slot(qp, s);

		if (e->rail != rail ||
		    (e->flags & (RBOND_SWQE_DONE | RBOND_SWQE_REPLAY)))
			continue;
		if (!force) {
			n = -EAGAIN;
			break;
		}
		e->flags |= RBOND_SWQE_REPLAY;
	}
	if (n) {
		spin_unlock(&qp->sq_lock);
		spin_unlock_irqrestore(&cq->lock, flags);
		return n;
	}
	n = rbond_post_replay(qp, rail, bytes);
	qp->fo_rails &= ~BIT(rail);
	added = rbond_qp_deliver(qp);
	spin_unlock(&qp->sq_lock);
	rbond_cq_unlock_notify(cq, added, flags);
	return n;
}

/**
 * rbond_qp_kick() - post the WQEs that waited, outside a completion
 * @qp: the QP
 *
 * What made them wait may have changed without a completion of @qp (the
 * remote key the first of them waited for was translated): post what may
 * go now, as the completion path would, and deliver.
 * Locks: the send CQ's lock and sq_lock not held.  Process context.
 */
void rbond_qp_kick(struct rbond_qp *qp)
{
	struct rbond_cq *cq = qp->scq;
	unsigned long flags;
	bool added;

	spin_lock_irqsave(&cq->lock, flags);
	spin_lock(&qp->sq_lock);
	added = rbond_qp_deliver(qp);
	spin_unlock(&qp->sq_lock);
	rbond_cq_unlock_notify(cq, added, flags);
}

/**
 * rbond_qp_deliver_posted() - deliver a WQE the post path completed itself
 * @qp: the QP
 *
 * The post path completed a WQE itself, without posting it (the QP is in
 * error: rbond_mrail_post_send): deliver it now, nothing else would.  The
 * consumer is notified from the CQ's tasklet, never from inside post_send.
 * Locks: sq_post_lock held (interrupts off), sq_lock not.
 */
void rbond_qp_deliver_posted(struct rbond_qp *qp)
{
	struct rbond_cq *cq = qp->scq;

	lockdep_assert_held(&qp->sq_post_lock);
	spin_lock(&cq->lock);
	spin_lock(&qp->sq_lock);
	if (rbond_qp_deliver(qp) || cq->overflow)
		rbond_cq_kick(cq);
	spin_unlock(&qp->sq_lock);
	spin_unlock(&cq->lock);
}

static bool rbond_qp_send_wc(struct rbond_dev *bond, struct rbond_qp *qp,
			     unsigned int rail, const struct ib_wc *mwc,
			     u32 seq)
{
	struct rbond_swqe *e;
	bool added = false;
	u32 s;

	spin_lock(&qp->sq_lock);
	if (seq - qp->sq_tail >= qp->sq_head - qp->sq_tail) {
		spin_unlock(&qp->sq_lock);
		ibdev_dbg(&bond->ibdev, "QP 0x%x: stale send completion\n",
			  qp->ibqp.qp_num);
		return false;
	}
	e = rbond_sq_slot(qp, seq);
	/*
	 * From the rail the slot went to last: a WQE posted again after its
	 * rail failed may still see the old member's flush.
	 */
	if (rail != e->rail || (e->flags & RBOND_SWQE_DONE)) {
		spin_unlock(&qp->sq_lock);
		ibdev_dbg(&bond->ibdev, "QP 0x%x: stale send completion\n",
			  qp->ibqp.qp_num);
		return false;
	}
	rbond_stat_add(bond, rail, RBOND_STAT_COMPLETIONS, 1);
	if (mwc->status != IB_WC_SUCCESS)
		rbond_stat_add(bond, rail, RBOND_STAT_ERRORS, 1);
	if (mwc->status != IB_WC_SUCCESS && rbond_fo_catch(qp, e, mwc)) {
		/* failover: posted again once the rail is fenced */
		spin_unlock(&qp->sq_lock);
		return false;
	}
	/*
	 * The application's error: nothing behind it may reach the peer
	 * (an ordering point the error releases would, with the WQE
	 * before it failed: a SEND announcing data its WRITE never put).
	 */
	if (mwc->status != IB_WC_SUCCESS) {
		qp->sq_erring = true;
		rbond_fo_peer_err(qp, rail, mwc->status);
	}
	rbond_sched_done(&qp->s, e);
	e->status = mwc->status;
	e->vendor_err = mwc->vendor_err;
	if (mwc->status == IB_WC_SUCCESS) {
		e->byte_len = mwc->byte_len;
		qp->s.acked[rail] = jiffies;	/* the heartbeat's too */
	}
	e->flags |= RBOND_SWQE_DONE;

	/*
	 * RC: earlier (unsignaled) WQEs on the same member are complete too:
	 * those posted to it before this one.
	 */
	for (s = qp->sq_tail; s != seq; s++) {
		struct rbond_swqe *p = rbond_sq_slot(qp, s);

		if (p->rail == rail && (s32)(e->mseq - p->mseq) > 0 &&
		    !(p->flags & (RBOND_SWQE_DONE | RBOND_SWQE_REPLAY))) {
			ibdev_dbg(&bond->ibdev,
				  "QP 0x%x: slot %u (opcode %u, mseq %u) done by slot %u's completion (rail %u mseq %u)\n",
				  qp->ibqp.qp_num, s, p->opcode, p->mseq, seq,
				  rail, e->mseq);
			rbond_sched_done(&qp->s, p);
			p->flags |= RBOND_SWQE_DONE;
			p->status = IB_WC_SUCCESS;
		}
	}

	added = rbond_qp_deliver(qp);
	spin_unlock(&qp->sq_lock);
	return added;
}

/**
 * rbond_qp_recv_deliver() - a receive completion of @qp into its recv CQ
 * @bond: the bond
 * @qp: the QP
 * @rail: the rail it came on (counters)
 * @wc: the member's completion, with the application's wr_id already
 *
 * Locks: the recv CQ's lock held.
 * Return: true when it was added (false: the CQ overflowed).
 */
bool rbond_qp_recv_deliver(struct rbond_dev *bond, struct rbond_qp *qp,
			   unsigned int rail, struct ib_wc *wc)
{
	wc->qp = &qp->ibqp;
	wc->port_num = RBOND_PORT;
	if (wc->status != IB_WC_SUCCESS)
		wc->opcode = IB_WC_RECV;

	rbond_stat_add(bond, rail, RBOND_STAT_COMPLETIONS, 1);
	if (wc->status == IB_WC_SUCCESS)
		rbond_stat_add(bond, rail, RBOND_STAT_RX_BYTES, wc->byte_len);
	else
		rbond_stat_add(bond, rail, RBOND_STAT_ERRORS, 1);
	return rbond_cq_push(qp->rcq, wc);
}

static bool rbond_qp_recv_wc(struct rbond_dev *bond, struct rbond_qp *qp,
			     unsigned int rail, const struct ib_wc *mwc,
			     u32 seq)
{
	struct ib_wc wc = *mwc;

	/* the home rail moving: its flushes are posted again, not seen */
	if (rbond_fo_recv_wc(qp, rail, mwc, seq))
		return false;
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
	for (; qp->rq_dma && qp->rq_tail != seq + 1; qp->rq_tail++)
		rbond_dma_unmap(rbond_dma_slot(qp->rq_dma, qp->rq_size,
					       qp->rq_tail));
	qp->rq_tail = seq + 1;
	spin_unlock(&qp->rq_lock);

	return rbond_qp_recv_deliver(bond, qp, rail, &wc);
}

/**
 * rbond_qp_process_wc() - one member completion
 * @bond: the bond
 * @cq: the bond CQ whose member CQ it came from
 * @rail: the rail of that member CQ
 * @mwc: the member completion
 *
 * Completes its slot (and, on the send side, the unsignaled slots before
 * it on the same rail), tells the scheduler and delivers in posting order.
 * A completion of a QP being destroyed, or a stale one, is dropped.
 * Locks: cq->lock held (the CQ it came from), which keeps the QP found in
 * qp_xa alive: destroy_qp erases it first, then takes every CQ lock of the
 * QP before returning.
 * Return: true when a completion was added to a bond CQ.
 */
bool rbond_qp_process_wc(struct rbond_dev *bond, struct rbond_cq *cq,
			 unsigned int rail, const struct ib_wc *mwc)
{
	u32 id = (mwc->wr_id >> RBOND_WRID_ID_SHIFT) & RBOND_WRID_ID_MASK;
	u32 seq = lower_32_bits(mwc->wr_id);
	struct rbond_qp *qp;

	lockdep_assert_held(&cq->lock);
	if (mwc->wr_id & RBOND_WRID_SRQ)
		return rbond_srq_recv_wc(bond, cq, rail, mwc);
	qp = xa_load(&bond->qp_xa, id);
	if (!qp)
		return false;	/* QP being destroyed */
	if (mwc->qp == READ_ONCE(qp->gone[rail]))
		return false;	/* kept for its port, flushed since */
	if (mwc->wr_id & RBOND_WRID_PROBE) {
		rbond_mq_probe_wc(qp, mwc);
		return false;	/* the bond's own: never the application's */
	}
	if (mwc->wr_id & RBOND_WRID_RECV) {
		if (WARN_ON_ONCE(qp->rcq != cq))
			return false;
		return rbond_qp_recv_wc(bond, qp, rail, mwc, seq);
	}
	if (WARN_ON_ONCE(qp->scq != cq))
		return false;
	return rbond_qp_send_wc(bond, qp, rail, mwc, seq);
}
