// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the post path, one for every QP.
 *
 * post_send takes a work request through four steps:
 *
 *  1. decode (rbond_wqe_decode): opcode, SGE count and lengths against what
 *     the QP was granted, lkeys, inline data captured at post time - once,
 *     into a struct rbond_wqe;
 *  2. plan (rbond_wqe_plan): its ordering class and the rails it may use.
 *     A QP that cannot use more than one rail (multi-rail off, one rail, a
 *     plain peer, negotiation not finished) has one allowed rail, its home
 *     rail; a multi-rail QP whose extra rails are up gets the rails its
 *     remote key and the device's ordering allow (rbond_rkey_classify);
 *  3. schedule: the rails the scheduler lets it use now (rbond_sched.c:
 *     ordering points, READ slots, rail windows; none: the WQE waits in the
 *     QP's pending ring and goes out on a later completion,
 *     rbond_post_drain), split into chunks where the class allows;
 *  4. post: every chunk, and every WQE, goes to a member QP through
 *     rbond_post_chunk(), the one function that posts application work.
 *
 * Every member WQE has a shadow slot (rbond_swqe): the bond's sequence
 * number of the WQE, the rail it took and its position in that member's
 * send queue.  The completion path (rbond_comp.c) completes slots and
 * delivers WQEs in posting order.  Receives go to the home rail.
 *
 * post_send/post_recv run in any context and never sleep: the post locks
 * are irqsave spinlocks and the lkey lookup is RCU.  Locks: sq_post_lock
 * (posting order; taken per WQE) -> sq_lock (shadow queue, scheduler,
 * pending ring; also taken inside the CQ lock by the completion path).
 */
#include "rbond.h"
#include "rbond_mrail.h"

/*
 * A send WQE, decoded once; also what waits in the pending ring and, for
 * a member WQE on an extra rail, what a failover posts again (qp->log).
 */
struct rbond_wqe {
	u32 seq;			/* its slot, while it waits / logged */
	u32 len;			/* logged: the chunk's bytes */
	u64 off;			/* and its offset in the WQE */
	int num_sge;
	u64 bytes;
	u8 wc_opcode;			/* enum ib_wc_opcode */
	bool verbatim;			/* sge[0]: captured inline data */
	bool app_err;			/* rbond_lkeys_ok(): fails locally */
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
		struct ib_ud_wr ud;
	} wr;
	struct ib_sge sge[RBOND_MAX_SGE];
};

static u32 rbond_inl_stride(const struct rbond_qp *qp)
{
	return ALIGN(qp->cap.max_inline_data, 8);
}

/*
 * Translate the SGEs @in for @rail, from byte @off for @len bytes, into
 * @out; @verbatim: captured inline data, a kernel address without lkey.
 * *@kva gets the SGEs of @out whose address is a kernel virtual address
 * (a DMA MR's: rbond_dma_map()).  Number of SGEs, or -EINVAL for an lkey
 * with no member key on @rail.  RCU read side.
 */
static int rbond_sub_sges(struct rbond_qp *qp, unsigned int rail,
			  const struct ib_sge *in, int num, u64 off, u64 len,
			  struct ib_sge *out, bool verbatim,
			  unsigned long *kva)
{
	int i, n = 0, ret;

	*kva = 0;
	for (i = 0; i < num && len; i++) {
		u64 l = in[i].length;

		if (off && off >= l) {
			off -= l;
			continue;
		}
		out[n] = in[i];
		out[n].addr += off;
		out[n].length = min_t(u64, l - off, len);
		len -= out[n].length;
		off = 0;
		if (!verbatim) {
			ret = rbond_mr_rail_lkey(qp->pd, in[i].lkey, rail,
						 &out[n].lkey);
			if (ret < 0) {
				ibdev_dbg(qp->ibqp.device,
					  "QP 0x%x: bad lkey 0x%x\n",
					  qp->ibqp.qp_num, in[i].lkey);
				return -EINVAL;
			}
			if (ret)
				*kva |= BIT(n);
		}
		n++;
	}
	return n;
}

/*
 * Whether an SGE reaches outside its MR, or writes into one without local
 * write access (@access: IB_ACCESS_LOCAL_WRITE for a READ's or an atomic's
 * result, 0 for data sent).  RCU read side.
 */
static bool rbond_sge_outside(const struct rbond_mr *mr,
			      const struct ib_sge *sge, int access)
{
	u64 len = mr->ibmr.length;

	if ((mr->access & access) != access)
		return true;
	if (mr->dma || !sge->length)
		return false;
	return sge->addr < mr->ibmr.iova || sge->length > len ||
	       sge->addr - mr->ibmr.iova > len - sge->length;
}

/*
 * Whether every lkey of @sge[0..@num) names an MR of @qp's PD.  *@app_err
 * (unless NULL): one SGE lies outside its MR or lacks the @access it
 * needs - the member completes that WQE with the application's local
 * error (6.12's rxe with a flush, as if the member had failed:
 * rbond_fo_catch() must know).
 */
static bool rbond_lkeys_ok(struct rbond_qp *qp, const struct ib_sge *sge,
			   int num, int access, bool *app_err)
{
	const struct rbond_mr *mr;
	int i;

	if (app_err)
		*app_err = false;
	rcu_read_lock();
	for (i = 0; i < num; i++) {
		mr = rbond_mr_lookup(qp->pd, sge[i].lkey);
		if (!mr) {
			rcu_read_unlock();
			ibdev_dbg(qp->ibqp.device, "QP 0x%x: bad lkey 0x%x\n",
				  qp->ibqp.qp_num, sge[i].lkey);
			return false;
		}
		if (app_err)
			*app_err |= rbond_sge_outside(mr, &sge[i], access);
	}
	rcu_read_unlock();
	return true;
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
 * the member QP copies as kernel inline data (a waiting WQE keeps its own
 * copy in the pending ring).  A user QP's addresses are the caller's:
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

static int rbond_wqe_decode_sges(struct rbond_qp *qp,
				 const struct ib_send_wr *wr,
				 const struct ib_sge *isge, struct rbond_wqe *w);

/*
 * A UD QP's send: SEND or SEND_WITH_IMM to an AH of the QP's PD that has
 * a member on the QP's home rail.
 */
static int rbond_wqe_decode_ud(struct rbond_qp *qp,
			       const struct ib_send_wr *wr,
			       const struct ib_sge *isge, struct rbond_wqe *w)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	const struct ib_ud_wr *ud = ud_wr(wr);

	if (wr->opcode != IB_WR_SEND && wr->opcode != IB_WR_SEND_WITH_IMM) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: opcode %d not supported on UD\n",
			  qp->ibqp.qp_num, wr->opcode);
		return -EINVAL;
	}
	if (!ud->ah || ud->ah->device != &bond->ibdev ||
	    ud->ah->pd != qp->ibqp.pd) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: AH not of this QP's PD\n",
			  qp->ibqp.qp_num);
		return -EINVAL;
	}
	w->wc_opcode = IB_WC_SEND;
	w->wr.ud = *ud;
	return rbond_wqe_decode_sges(qp, wr, isge, w);
}

/*
 * Step 1: decode and check @wr into @w (@isge: its captured inline data,
 * or NULL).  Every error here is synchronous, with nothing posted.
 */
static int rbond_wqe_decode(struct rbond_qp *qp, const struct ib_send_wr *wr,
			    const struct ib_sge *isge, struct rbond_wqe *w)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);

	if (qp->ibqp.qp_type == IB_QPT_UD)
		return rbond_wqe_decode_ud(qp, wr, isge, w);
	switch (wr->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		w->wc_opcode = IB_WC_SEND;
		w->wr.send = *wr;
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		w->wc_opcode = IB_WC_RDMA_WRITE;
		w->wr.rdma = *rdma_wr(wr);
		break;
	case IB_WR_RDMA_READ:
		w->wc_opcode = IB_WC_RDMA_READ;
		w->wr.rdma = *rdma_wr(wr);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		w->wc_opcode = IB_WC_COMP_SWAP;
		w->wr.atomic = *atomic_wr(wr);
		break;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		w->wc_opcode = IB_WC_FETCH_ADD;
		w->wr.atomic = *atomic_wr(wr);
		break;
	default:
		ibdev_dbg(&bond->ibdev, "QP 0x%x: opcode %d not supported\n",
			  qp->ibqp.qp_num, wr->opcode);
		return -EINVAL;
	}
	if ((w->wc_opcode == IB_WC_RDMA_READ &&
	     wr->num_sge > bond->attr.max_sge_rd) ||
	    ((w->wc_opcode == IB_WC_COMP_SWAP ||
	      w->wc_opcode == IB_WC_FETCH_ADD) && wr->num_sge != 1)) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: bad num_sge %d\n",
			  qp->ibqp.qp_num, wr->num_sge);
		return -EINVAL;
	}
	return rbond_wqe_decode_sges(qp, wr, isge, w);
}

/* The SGEs (or captured inline data) of @wr into @w; the rest is decoded. */
static int rbond_wqe_decode_sges(struct rbond_qp *qp,
				 const struct ib_send_wr *wr,
				 const struct ib_sge *isge, struct rbond_wqe *w)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	u64 bytes = 0;
	int i;

	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_send_sge ||
	    wr->num_sge > RBOND_MAX_SGE) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: bad num_sge %d\n",
			  qp->ibqp.qp_num, wr->num_sge);
		return -EINVAL;
	}
	w->wr.send.next = NULL;
	w->app_err = false;
	if (isge) {
		/* captured inline data: a kernel address, no lkey */
		w->verbatim = true;
		w->sge[0] = *isge;
		w->num_sge = isge->length ? 1 : 0;
		w->bytes = isge->length;
		return 0;
	}
	w->verbatim = false;
	w->wr.send.send_flags &= ~IB_SEND_INLINE;
	for (i = 0; i < wr->num_sge; i++)
		bytes += wr->sg_list[i].length;
	if (bytes > RBOND_MAX_MSG_SZ) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: %llu bytes in one WQE\n",
			  qp->ibqp.qp_num, bytes);
		return -EINVAL;
	}
	/* every lkey now: the rails' keys are checked per chunk */
	if (!rbond_lkeys_ok(qp, wr->sg_list, wr->num_sge,
			    w->wc_opcode == IB_WC_RDMA_READ ||
			    w->wc_opcode == IB_WC_COMP_SWAP ||
			    w->wc_opcode == IB_WC_FETCH_ADD ?
			    IB_ACCESS_LOCAL_WRITE : 0, &w->app_err))
		return -EINVAL;
	memcpy(w->sge, wr->sg_list, wr->num_sge * sizeof(*w->sge));
	w->num_sge = wr->num_sge;
	w->bytes = bytes;
	return 0;
}

/*
 * Step 2: the ordering class of @w and the rails it may use (*allowed);
 * *have_keys: @rkeys holds its remote key per rail.
 */
static u8 rbond_wqe_plan(struct rbond_qp *qp, const struct rbond_wqe *w,
			 unsigned long *allowed, u32 *rkeys, bool *have_keys)
{
	u8 cl;

	*allowed = BIT(qp->home);
	*have_keys = false;
	if (!rbond_mrail_up(qp))
		return RBOND_CL_STRICT;
	rcu_read_lock();
	cl = rbond_rkey_classify(qp, &w->wr.send, allowed, rkeys, have_keys);
	rcu_read_unlock();
	return cl;
}

/*
 * A new shadow slot for @w, @bytes of it (sq_lock held, room checked): its
 * sequence number.  @last: the slot the WQE completes with (the others are
 * chunks, folded into it).
 */
static u32 rbond_sq_alloc(struct rbond_qp *qp, const struct rbond_wqe *w,
			  u64 bytes, bool last)
{
	u32 seq = qp->sq_head++;
	struct rbond_swqe *e = rbond_sq_slot(qp, seq);

	lockdep_assert_held(&qp->sq_lock);
	e->wr_id = w->wr.send.wr_id;
	e->opcode = w->wc_opcode;
	e->rail = RBOND_RAIL_PEND;
	e->status = IB_WC_SUCCESS;
	e->byte_len = bytes;
	e->vendor_err = 0;
	e->mseq = 0;
	e->flags = w->app_err ? RBOND_SWQE_APP_ERR : 0;
	if (!last) {
		e->flags |= RBOND_SWQE_CHUNK;
		return seq;
	}
	qp->sq_wqes++;
	if (qp->sig_all || (w->wr.send.send_flags & IB_SEND_SIGNALED))
		e->flags |= RBOND_SWQE_SIGNALED;
	return seq;
}

/* Take back the slot rbond_sq_alloc() gave last (its post failed). */
static void rbond_sq_unalloc(struct rbond_qp *qp)
{
	lockdep_assert_held(&qp->sq_lock);
	qp->sq_head--;
	if (!(rbond_sq_slot(qp, qp->sq_head)->flags & RBOND_SWQE_CHUNK))
		qp->sq_wqes--;
}

/* A slot completed by the post path itself with @status (sq_lock held). */
static void rbond_sq_complete(struct rbond_qp *qp, u32 seq, u8 status)
{
	struct rbond_swqe *e = rbond_sq_slot(qp, seq);

	lockdep_assert_held(&qp->sq_lock);
	e->status = status;
	e->flags |= RBOND_SWQE_DONE | RBOND_SWQE_SIGNALED;
	if (status != IB_WC_SUCCESS)
		qp->sq_erring = true;
}

/*
 * What went out on a member is kept per slot until it completes: if the
 * rail fails, it is posted again elsewhere (rbond_post_replay(), and for
 * the home rail rbond_post_home_replay()).  Only the SGEs in use are
 * copied, inline data into the slot's own buffer.  sq_lock held.
 */
static void rbond_log_store(struct rbond_qp *qp, const struct rbond_wqe *w,
			    u32 seq, u64 off, u64 len)
{
	u32 idx = seq & (qp->sq_size - 1);
	struct rbond_wqe *l = &qp->log[idx];
	u8 *inl;

	lockdep_assert_held(&qp->sq_lock);
	if (l != w)
		memcpy(l, w, offsetof(struct rbond_wqe, sge) +
		       w->num_sge * sizeof(w->sge[0]));
	l->seq = seq;
	if (w->verbatim && w->bytes) {
		inl = qp->log_inl ? qp->log_inl + idx * rbond_inl_stride(qp) :
				    NULL;
		if (inl && inl != (u8 *)(uintptr_t)w->sge[0].addr)
			memcpy(inl, (void *)(uintptr_t)w->sge[0].addr,
			       w->bytes);
		else
			l->seq = ~seq;	/* cannot be posted again */
		l->sge[0].addr = (uintptr_t)inl;
	}
	l->off = off;
	l->len = len;
}

/* The PSNs a member WQE of @len bytes takes (IBA 9.7.1; a READ: its reply). */
static u32 rbond_wqe_npsn(const struct rbond_qp *qp, unsigned int rail,
			  enum ib_wr_opcode op, u64 len)
{
	u32 mtu = qp->pmtu[rail] ?: 256;

	if (op == IB_WR_ATOMIC_CMP_AND_SWP || op == IB_WR_ATOMIC_FETCH_AND_ADD)
		return 1;
	return max_t(u64, DIV_ROUND_UP_ULL(len, mtu), 1);
}

/*
 * Step 4: post bytes [@off, @off + @len) of @w, slot @seq, on @rail - the
 * one place that posts application work to a member QP.  @rkeys: the
 * remote key per rail, or NULL for the application's.  A QP that may use
 * more than one rail (rbond_mrail_may_stripe()) has every member WQE
 * signaled (the scheduler and the ordering points need each completion)
 * and accounted.  sq_lock held.
 */
static int rbond_post_chunk(struct rbond_qp *qp, const struct rbond_wqe *w,
			    u32 seq, unsigned int rail, u64 off, u64 len,
			    const u32 *rkeys, u8 cl)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	struct rbond_swqe *e = rbond_sq_slot(qp, seq);
	struct ib_sge sge[RBOND_MAX_SGE];
	const struct ib_send_wr *bad;
	struct ib_qp *member;
	union {
		struct ib_send_wr send;
		struct ib_rdma_wr rdma;
		struct ib_atomic_wr atomic;
		struct ib_ud_wr ud;
	} mwr;
	unsigned long ahflags = 0;
	struct rbond_ah *ah = NULL;
	bool mrail = rbond_mrail_may_stripe(qp);
	struct rbond_dmamap *dm;
	unsigned long kva;
	int n, ret;

	lockdep_assert_held(&qp->sq_lock);
	/* a rail being removed is out of rails_up before its member goes */
	if (rail >= RBOND_MAX_RAILS || !(qp->s.rails_up & BIT(rail)))
		return -EINVAL;
	member = qp->member[rail];
	if (!member)
		return -EINVAL;
	memcpy(&mwr, &w->wr, sizeof(mwr));
	rcu_read_lock();
	n = rbond_sub_sges(qp, rail, w->sge, w->num_sge, off, len, sge,
			   w->verbatim, &kva);
	rcu_read_unlock();
	if (n < 0)
		return n;
	dm = rbond_dma_slot(qp->sq_dma, qp->sq_size, seq);
	ret = rbond_dma_map(dm, member->device, sge, kva,
			    rbond_dma_send_dir(w->wr.send.opcode));
	if (ret)
		return ret;
	mwr.send.sg_list = sge;
	mwr.send.num_sge = n;
	if (mrail || (e->flags & RBOND_SWQE_SIGNALED))
		mwr.send.send_flags |= IB_SEND_SIGNALED;
	else
		mwr.send.send_flags &= ~IB_SEND_SIGNALED;
	mwr.send.wr_id = rbond_wrid(qp, false, seq);
	switch (w->wr.send.opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_READ:
		mwr.rdma.remote_addr += off;
		fallthrough;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		if (rkeys)
			mwr.rdma.rkey = rkeys[rail];
		else if (rbond_mrail_home_moved(qp))
			return -EACCES;	/* the peer has no key for it */
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		if (rkeys)
			mwr.atomic.rkey = rkeys[rail];
		else if (rbond_mrail_home_moved(qp))
			return -EACCES;
		break;
	default:
		break;
	}
	if (qp->ibqp.qp_type == IB_QPT_UD) {
		/* held across the post: rail removal and destroy clear it */
		ah = to_rbond_ah(w->wr.ud.ah);
		spin_lock_irqsave(&ah->lock, ahflags);
		mwr.ud.ah = ah->member[rail];
	}
	if (ah && !mwr.ud.ah) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: AH has no member on rail %u\n",
			  qp->ibqp.qp_num, rail);
		ret = -EINVAL;
	} else {
		ret = ib_post_send(member, &mwr.send, &bad);
	}
	if (ah)
		spin_unlock_irqrestore(&ah->lock, ahflags);
	if (ret) {
		rbond_dma_unmap(dm);
		ibdev_dbg(&bond->ibdev, "QP 0x%x: rail %u post failed: %d\n",
			  qp->ibqp.qp_num, rail, ret);
		return ret;
	}
	e->rail = rail;
	e->byte_len = len;
	e->mseq = qp->mposted[rail]++;
	e->psn = qp->npsn[rail];
	qp->npsn[rail] = (e->psn + rbond_wqe_npsn(qp, rail, w->wr.send.opcode,
						  len)) & RBOND_PSN_MASK;
	if (mrail)
		rbond_sched_posted(&qp->s, e, rail, cl,
				   rbond_wr_is_rd(w->wr.send.opcode),
				   w->wr.rdma.rkey, len);
	if (qp->log)
		rbond_log_store(qp, w, seq, off, len);
	rbond_stat_add(bond, rail, RBOND_STAT_TX_WQES, 1);
	rbond_stat_add(bond, rail, RBOND_STAT_TX_BYTES, len);
	if (rail != qp->home)
		atomic64_inc(&rbond_mstats.striped);
	return 0;
}

/*
 * Step 3 for a WQE that may not go now: it waits in the pending ring with
 * its slot (a copy of its inline data too: the caller's is gone once
 * post_send returns).  sq_lock held.
 */
static int rbond_post_wait(struct rbond_qp *qp, struct rbond_wqe *w)
{
	u32 idx = qp->pend_head & (qp->pend_size - 1);
	u8 *inl;

	lockdep_assert_held(&qp->sq_lock);
	if (!qp->pend)
		return -EINVAL;		/* the home rail is gone */
	if (w->verbatim && w->bytes) {
		inl = qp->pend_inl ? qp->pend_inl + idx * rbond_inl_stride(qp) :
				     NULL;
		if (!inl)
			return -ENOMEM;
		memcpy(inl, (void *)(uintptr_t)w->sge[0].addr, w->bytes);
		w->sge[0].addr = (uintptr_t)inl;
	}
	w->seq = rbond_sq_alloc(qp, w, w->bytes, true);
	w->off = 0;
	w->len = w->bytes;
	qp->pend[idx] = *w;
	qp->pend_head++;
	atomic64_inc(&rbond_mstats.waits);
	return 0;
}

/* How many chunks @w of class @cl on rails @ok is split into. */
static unsigned int rbond_post_nchunks(struct rbond_qp *qp,
				       const struct rbond_wqe *w, u8 cl,
				       unsigned long ok, u32 free, u32 rd_max)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	u64 thr = READ_ONCE(bond->stripe_threshold);
	unsigned int n, room;

	if (cl == RBOND_CL_STRICT || !thr || w->bytes <= thr ||
	    hweight_long(ok) < 2 ||
	    !rbond_policy_stripes(READ_ONCE(bond->policy)))
		return 1;
	n = min_t(u64, DIV_ROUND_UP_ULL(w->bytes, thr), hweight_long(ok) * 2);
	/* keep room for a full queue of application WQEs */
	n = free > qp->cap.max_send_wr ?
	    min(n, free - qp->cap.max_send_wr) : 1;
	/* READs: no more chunks than free READ slots */
	rbond_sched_rd_free(&qp->s, ok, w->wr.send.opcode, rd_max, &room);
	return clamp(room, 1U, n);
}

/*
 * One WQE, steps 1 to 4 (@isge: its captured inline data, or NULL).
 * sq_post_lock held.
 */
static int rbond_post_one_send(struct rbond_qp *qp,
			       const struct ib_send_wr *wr,
			       const struct ib_sge *isge)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	enum rbond_policy pol = READ_ONCE(bond->policy);
	u32 rd_max = READ_ONCE(qp->max_rd_atomic);
	u32 rkeys[RBOND_MAX_RAILS];
	unsigned long allowed, ok;
	struct rbond_wqe w;
	unsigned int nchunks, k, rail;
	u64 off, len;
	bool have_keys, deliver = false;
	u32 seq, free;
	int ret = 0;
	u8 cl;

	lockdep_assert_held(&qp->sq_post_lock);
	ret = rbond_wqe_decode(qp, wr, isge, &w);
	if (ret)
		return ret;
	/*
	 * Home rail lost: the QP is in error - unless its home moves, whose
	 * old member a device removal may take before the switch (the WQE
	 * waits for the new home below)
	 */
	if (!READ_ONCE(qp->member[qp->home]) && !rbond_fo_home_moving(qp))
		return -EINVAL;
	cl = rbond_wqe_plan(qp, &w, &allowed, rkeys, &have_keys);

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
		seq = rbond_sq_alloc(qp, &w, 0, true);
		rbond_sq_slot(qp, seq)->status = IB_WC_WR_FLUSH_ERR;
		rbond_sq_slot(qp, seq)->flags |= RBOND_SWQE_DONE;
		spin_unlock(&qp->sq_lock);
		rbond_qp_deliver_posted(qp);
		return 0;
	}
	if (!qp->pend)		/* nothing ever waits: one rail */
		ok = allowed & qp->s.rails_up;
	else if (qp->pend_head == qp->pend_tail && !qp->sq_erring &&
		 !rbond_fo_home_moving(qp))
		ok = rbond_sched_allowed(&qp->s, cl, &w.wr.send,
					 READ_ONCE(bond->ordering), rd_max,
					 allowed);
	else
		ok = 0;		/* behind a waiting WQE, or an error */
	if (!ok) {
		/* an ordering point: wait for completions on other rails */
		ret = rbond_post_wait(qp, &w);
		goto out_unlock;
	}
	nchunks = rbond_post_nchunks(qp, &w, cl, ok, free, rd_max);
	len = DIV64_U64_ROUND_UP(w.bytes, nchunks);
	/* as many chunks as len takes: none empty, off < bytes */
	if (len)
		nchunks = DIV64_U64_ROUND_UP(w.bytes, len);
	for (k = 0, off = 0; k < nchunks; k++, off += len) {
		u64 l = min(len, w.bytes - off);

		rail = rbond_sched_pick(&qp->s, pol,
					rbond_sched_rd_free(&qp->s, ok,
							    wr->opcode,
							    rd_max, NULL) ?: ok,
					l);
		seq = rbond_sq_alloc(qp, &w, l, k == nchunks - 1);
		ret = rbond_post_chunk(qp, &w, seq, rail, off, l,
				       have_keys ? rkeys : NULL, cl);
		if (!ret)
			continue;
		rbond_sq_unalloc(qp);
		if (!k && ret != -EACCES)
			goto out_unlock;
		/* a later chunk, or a key the peer refused: an error */
		seq = rbond_sq_alloc(qp, &w, 0, true);
		rbond_sq_complete(qp, seq, ret == -EACCES ?
				  IB_WC_REM_ACCESS_ERR : IB_WC_LOC_QP_OP_ERR);
		deliver = !k;	/* nothing else of it will complete */
		ret = 0;
		break;
	}
	if (nchunks > 1)
		atomic64_add(nchunks, &rbond_mstats.chunks);
out_unlock:
	spin_unlock(&qp->sq_lock);
	if (deliver)
		rbond_qp_deliver_posted(qp);
	return ret;
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

/**
 * rbond_post_drain() - post the WQEs that waited, as far as they may go now
 * @qp: the QP
 *
 * Called by the completion path after it delivered (a completion may have
 * opened an ordering point).  A waiting WQE whose post fails completes at
 * once with an error.
 *
 * Locks: the send CQ's lock and sq_lock held.
 * Return: true when a WQE completed that way (the caller delivers again).
 */
bool rbond_post_drain(struct rbond_qp *qp)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	u32 rkeys[RBOND_MAX_RAILS];
	unsigned long allowed, ok;
	struct rbond_wqe *w;
	bool have_keys, done = false;
	int ret;
	u8 cl;

	lockdep_assert_held(&qp->sq_lock);
	while (qp->pend_tail != qp->pend_head && !qp->sq_erring &&
	       !rbond_fo_home_moving(qp)) {
		w = &qp->pend[qp->pend_tail & (qp->pend_size - 1)];
		cl = rbond_wqe_plan(qp, w, &allowed, rkeys, &have_keys);
		ok = rbond_sched_allowed(&qp->s, cl, &w->wr.send,
					 READ_ONCE(bond->ordering),
					 READ_ONCE(qp->max_rd_atomic), allowed);
		if (!ok)
			break;
		qp->pend_tail++;
		ret = rbond_post_chunk(qp, w, w->seq,
				       rbond_sched_pick(&qp->s,
							READ_ONCE(bond->policy),
							ok, w->len),
				       w->off, w->len,
				       have_keys ? rkeys : NULL, cl);
		if (ret) {
			rbond_sq_complete(qp, w->seq, ret == -EACCES ?
					  IB_WC_REM_ACCESS_ERR :
					  IB_WC_LOC_QP_OP_ERR);
			done = true;
		}
	}
	return done;
}

/**
 * rbond_post_replay() - post again what a failed rail did not complete
 * @qp: the QP
 * @rail: the failed rail, fenced on both hosts (rbond_failover.c)
 * @bytes: add the bytes posted again here
 *
 * Every slot of @rail marked RBOND_SWQE_REPLAY (its member WQE flushed
 * or lost) goes, in posting order, to a rail the policy picks among the
 * QP's rails still up, from the copy rbond_log_store() kept.  Only RDMA
 * WRITEs and READs go on extra rails: placing the same data again, or
 * reading it again, is what the application would see once.  A slot that
 * cannot go anywhere completes with IB_WC_LOC_QP_OP_ERR.
 * Locks: the send CQ's lock and sq_lock held.
 * Return: the number of member WQEs posted again.
 */
unsigned int rbond_post_replay(struct rbond_qp *qp, unsigned int rail,
			       u64 *bytes)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	u32 rkeys[RBOND_MAX_RAILS];
	unsigned long allowed;
	unsigned int n = 0, to;
	struct rbond_swqe *e;
	struct rbond_wqe *l;
	bool have_keys;
	u32 s;
	u8 cl;

	lockdep_assert_held(&qp->sq_lock);
	for (s = qp->sq_tail; s != qp->sq_head; s++) {
		e = rbond_sq_slot(qp, s);
		if (!(e->flags & RBOND_SWQE_REPLAY) || e->rail != rail)
			continue;
		e->flags &= ~RBOND_SWQE_REPLAY;
		rbond_sched_drop(&qp->s, e);
		l = qp->log ? &qp->log[s & (qp->sq_size - 1)] : NULL;
		if (!l || l->seq != s) {
			rbond_sq_complete(qp, s, IB_WC_LOC_QP_OP_ERR);
			continue;
		}
		cl = rbond_wqe_plan(qp, l, &allowed, rkeys, &have_keys);
		to = rbond_sched_pick(&qp->s, READ_ONCE(bond->policy),
				      allowed, l->len);
		if (to >= RBOND_MAX_RAILS ||
		    rbond_post_chunk(qp, l, s, to, l->off, l->len,
				     have_keys ? rkeys : NULL, cl)) {
			rbond_sq_complete(qp, s, IB_WC_LOC_QP_OP_ERR);
			continue;
		}
		n++;
		*bytes += l->len;
	}
	return n;
}

/* 24-bit PSN @a before @b */
static bool rbond_psn_before(u32 a, u32 b)
{
	return ((b - a) & RBOND_PSN_MASK) - 1 < (RBOND_PSN_MASK + 1) / 2 - 1;
}

/**
 * rbond_post_home_replay() - what the failed home rail did not finish
 * @qp: the QP, both hosts' home members stopped (rbond_failover.c)
 * @old: the failed home rail
 * @epsn: the PSN the peer's responder on it expected next (it executed
 *	everything before, in order, and nothing from it on)
 * @bytes: add the bytes to be posted again here
 * @lost: add the atomics that ran but whose reply was lost here
 * @reads: set when a READ is read again (its response may have stopped
 *	half-way: rbond_mrail_prime())
 *
 * Each slot of @old not completed, in posting order: executed by the
 * responder (its last PSN before @epsn) - a SEND, WRITE or
 * WRITE_WITH_IMM is done (its receive consumed once, on the peer), a
 * READ is read again, an atomic whose reply was lost completes with
 * IB_WC_RETRY_EXC_ERR (it ran, its result is not known: it must not run
 * twice); not executed, or only in part, it goes to the front of the
 * pending ring, ahead of what waited, from its log copy, and is posted
 * on the new home like any waiting WQE (rbond_post_drain()).
 * Locks: the send CQ's lock and sq_lock held.
 * Return: the number of WQEs to be posted again.
 */
unsigned int rbond_post_home_replay(struct rbond_qp *qp, unsigned int old,
				    u32 epsn, u64 *bytes, unsigned int *lost,
				    bool *reads)
{
	struct rbond_swqe *e;
	struct rbond_wqe *l;
	enum ib_wr_opcode op;
	unsigned int n = 0;
	bool ran;
	u32 s;

	lockdep_assert_held(&qp->sq_lock);
	for (s = qp->sq_tail; s != qp->sq_head; s++) {
		e = rbond_sq_slot(qp, s);
		if (e->rail != old || (e->flags & RBOND_SWQE_DONE))
			continue;
		e->flags &= ~RBOND_SWQE_REPLAY;
		rbond_sched_drop(&qp->s, e);
		l = qp->log ? &qp->log[s & (qp->sq_size - 1)] : NULL;
		if (!l || l->seq != s || !qp->pend) {
			rbond_sq_complete(qp, s, IB_WC_LOC_QP_OP_ERR);
			continue;
		}
		op = l->wr.send.opcode;
		ran = !rbond_psn_before(epsn, (e->psn +
				rbond_wqe_npsn(qp, old, op, l->len)) &
				RBOND_PSN_MASK);
		if (ran && (op == IB_WR_ATOMIC_CMP_AND_SWP ||
			    op == IB_WR_ATOMIC_FETCH_AND_ADD)) {
			rbond_sq_complete(qp, s, IB_WC_RETRY_EXC_ERR);
			(*lost)++;
			continue;
		}
		if (ran && op != IB_WR_RDMA_READ) {
			/* the peer has it: completes as it would have */
			e->status = IB_WC_SUCCESS;
			e->flags |= RBOND_SWQE_DONE;
			continue;
		}
		/* marked for the ring's front (below) */
		if (op == IB_WR_RDMA_READ)
			*reads = true;
		e->rail = RBOND_RAIL_PEND;
		e->flags |= RBOND_SWQE_REPLAY;
		*bytes += l->len;
		n++;
	}
	/* to the front of the pending ring, in posting order: backwards */
	for (s = qp->sq_head; n && s != qp->sq_tail; ) {
		e = rbond_sq_slot(qp, --s);
		if (e->rail != RBOND_RAIL_PEND ||
		    !(e->flags & RBOND_SWQE_REPLAY))
			continue;
		e->flags &= ~RBOND_SWQE_REPLAY;
		qp->pend_tail--;
		qp->pend[qp->pend_tail & (qp->pend_size - 1)] =
			qp->log[s & (qp->sq_size - 1)];
	}
	return n;
}

/**
 * rbond_post_flush_pending() - the waiting WQEs complete flushed
 * @qp: the QP, whose first error was just delivered
 *
 * They were posted after the failed WQE: RC flushes them, never posted.
 * Locks: sq_lock held.
 */
void rbond_post_flush_pending(struct rbond_qp *qp)
{
	struct rbond_swqe *e;

	lockdep_assert_held(&qp->sq_lock);
	while (qp->pend_tail != qp->pend_head) {
		e = rbond_sq_slot(qp,
				  qp->pend[qp->pend_tail++ &
					   (qp->pend_size - 1)].seq);
		e->status = IB_WC_WR_FLUSH_ERR;
		e->flags |= RBOND_SWQE_DONE;
	}
}

/**
 * rbond_post_alloc_pending() - give a QP that may use more rails its
 * pending ring
 * @qp: the QP
 *
 * Process context, before its extra rails are published.
 * Return: 0 or -ENOMEM.
 */
int rbond_post_alloc_pending(struct rbond_qp *qp)
{
	struct rbond_wqe *pend, *log;
	u8 *inl = NULL, *linl = NULL;
	unsigned long flags;

	if (qp->pend)
		return 0;
	if (qp->cap.max_inline_data) {
		inl = kvcalloc(qp->sq_size, rbond_inl_stride(qp),
			       GFP_KERNEL_ACCOUNT);
		linl = kvcalloc(qp->sq_size, rbond_inl_stride(qp),
				GFP_KERNEL_ACCOUNT);
		if (!inl || !linl) {
			kvfree(inl);
			kvfree(linl);
			return -ENOMEM;
		}
	}
	pend = kvcalloc(qp->sq_size, sizeof(*pend), GFP_KERNEL_ACCOUNT);
	log = kvcalloc(qp->sq_size, sizeof(*log), GFP_KERNEL_ACCOUNT);
	if (!pend || !log) {
		kvfree(log);
		kvfree(pend);
		kvfree(inl);
		kvfree(linl);
		return -ENOMEM;
	}
	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->pend_inl = inl;
	qp->log_inl = linl;
	qp->pend_size = qp->sq_size;
	qp->pend_head = 0;
	qp->pend_tail = 0;
	qp->pend = pend;
	qp->log = log;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	return 0;
}

/* The QP is freed: what it had outstanding, and its pending ring, go. */
void rbond_post_free(struct rbond_qp *qp)
{
	rbond_sched_release(&qp->s);
	kvfree(qp->pend);
	kvfree(qp->pend_inl);
	kvfree(qp->log_inl);
	kvfree(qp->log);
	qp->log_inl = NULL;
	qp->log = NULL;
	qp->pend = NULL;
	qp->pend_inl = NULL;
}

/**
 * rbond_post_reset_sq() - the send side back to its home rail
 * @qp: the QP; RESET, or its home rail is gone (@home_ok false)
 * @home_ok: the home member QP is still there
 *
 * Nothing waiting, nothing in flight, no extra rail.
 * Locks: sq_lock held.
 */
void rbond_post_reset_sq(struct rbond_qp *qp, bool home_ok)
{
	lockdep_assert_held(&qp->sq_lock);
	qp->pend_tail = qp->pend_head;
	qp->fo_rails = 0;
	rbond_sched_release(&qp->s);
	qp->s.rails_up = home_ok ? BIT(qp->home) : 0;
	memset(qp->s.inflight_cl, 0, sizeof(qp->s.inflight_cl));
	memset(qp->s.rd_inflight, 0, sizeof(qp->s.rd_inflight));
	qp->s.solo_since = 0;
	qp->s.draining = false;
}

/*
 * Post receive slot @seq (its stored SGEs) on the member of @rail.
 * rq_post_lock held, rq_lock not.
 */
static int rbond_post_recv_slot(struct rbond_qp *qp, unsigned int rail,
				u32 seq)
{
	u32 idx = seq & (qp->rq_size - 1), nsge = qp->rq_nsge[idx];
	struct ib_qp *member = qp->member[rail];
	struct ib_sge sge[RBOND_MAX_SGE];
	struct ib_recv_wr mwr = {};
	struct rbond_dmamap *dm;
	unsigned long kva;
	int n, ret;

	if (!member)
		return -EINVAL;
	rcu_read_lock();
	n = rbond_sub_sges(qp, rail,
			   &qp->rq_sge[idx * max(qp->cap.max_recv_sge, 1U)],
			   nsge, 0, U64_MAX, sge, false, &kva);
	rcu_read_unlock();
	if (n < 0)
		return n;
	dm = rbond_dma_slot(qp->rq_dma, qp->rq_size, seq);
	spin_lock(&qp->rq_lock);
	rbond_dma_unmap(dm);
	ret = rbond_dma_map(dm, member->device, sge, kva, DMA_FROM_DEVICE);
	spin_unlock(&qp->rq_lock);
	if (ret)
		return ret;
	mwr.wr_id = rbond_wrid(qp, true, seq);
	mwr.sg_list = sge;
	mwr.num_sge = n;
	ret = ib_post_recv(member, &mwr, NULL);
	if (ret) {
		spin_lock(&qp->rq_lock);
		rbond_dma_unmap(dm);
		spin_unlock(&qp->rq_lock);
	}
	return ret;
}

/*
 * Receives: one queue, on the home rail (qp->rq_rail).  Each is kept
 * (wr_id, SGEs) until it completes: a home-rail failover posts the ones
 * still outstanding again on the new home (rbond_post_recv_move()); while
 * that is under way a new receive is only stored.
 */
static int rbond_post_one_recv(struct rbond_qp *qp,
			       const struct ib_recv_wr *wr)
{
	struct rbond_dev *bond = to_rbond_dev(qp->ibqp.device);
	unsigned int rail = qp->rq_rail;
	u32 seq, idx, stride = max(qp->cap.max_recv_sge, 1U);
	bool moving;
	int ret;

	if (!qp->member[rail] || !qp->rq_nsge)
		return -EINVAL;
	if (wr->num_sge < 0 || wr->num_sge > qp->cap.max_recv_sge ||
	    wr->num_sge > RBOND_MAX_SGE) {
		ibdev_dbg(&bond->ibdev, "QP 0x%x: bad recv num_sge %d\n",
			  qp->ibqp.qp_num, wr->num_sge);
		return -EINVAL;
	}
	/* every lkey now, as the post would (a bad buffer: the member's) */
	if (!rbond_lkeys_ok(qp, wr->sg_list, wr->num_sge, 0, NULL))
		return -EINVAL;

	spin_lock(&qp->rq_lock);
	if (qp->rq_head - qp->rq_tail >= qp->cap.max_recv_wr) {
		spin_unlock(&qp->rq_lock);
		return -ENOMEM;
	}
	seq = qp->rq_head++;
	idx = seq & (qp->rq_size - 1);
	qp->rq[idx] = wr->wr_id;
	qp->rq_nsge[idx] = wr->num_sge;
	if (wr->num_sge)
		memcpy(&qp->rq_sge[idx * stride], wr->sg_list,
		       wr->num_sge * sizeof(*wr->sg_list));
	moving = qp->rq_moving;
	spin_unlock(&qp->rq_lock);
	if (moving)
		return 0;	/* posted with the others on the new home */

	ret = rbond_post_recv_slot(qp, rail, seq);
	if (ret) {
		spin_lock(&qp->rq_lock);
		qp->rq_head--;
		spin_unlock(&qp->rq_lock);
		return ret;
	}
	rbond_stat_add(bond, rail, RBOND_STAT_RX_WQES, 1);
	return 0;
}

/**
 * rbond_post_recv_move() - the receives go to a new home rail
 * @qp: the QP, whose old home member flushed its receives (or was given
 *	time to: rbond_failover.c)
 * @rail: the new home rail
 *
 * Every receive not completed is posted again, in order, on @rail's
 * member; from now on receives go there.  One that cannot be posted
 * (the member refused it) and those behind it stay outstanding on no
 * member: they complete flushed when the QP goes to error.
 * Locks: rq_post_lock not held (taken here).  Any context.
 * Return: the number of receives posted again.
 */
unsigned int rbond_post_recv_move(struct rbond_qp *qp, unsigned int rail)
{
	unsigned long flags;
	unsigned int n = 0;
	u32 seq, head;

	spin_lock_irqsave(&qp->rq_post_lock, flags);
	spin_lock(&qp->rq_lock);
	seq = qp->rq_tail;
	head = qp->rq_head;
	qp->rq_rail = rail;
	qp->rq_moving = false;
	spin_unlock(&qp->rq_lock);
	for (; seq != head; seq++, n++)
		if (rbond_post_recv_slot(qp, rail, seq))
			break;
	spin_unlock_irqrestore(&qp->rq_post_lock, flags);
	return n;
}

int rbond_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr)
{
	struct rbond_qp *qp = to_rbond_qp(ibqp);
	unsigned long flags;
	int ret = 0;

	if (qp->srq) {	/* its receives come from the SRQ */
		*bad_wr = wr;
		return -EINVAL;
	}
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
