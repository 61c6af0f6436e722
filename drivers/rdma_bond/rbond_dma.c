// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: DMA mapping for kernel consumers, per member device.
 *
 * The bond registers with no DMA device, so ib_dma_map_*() on it is
 * virtual: a kernel consumer's buffer address, as it puts it in an SGE
 * with the PD's DMA lkey, is the buffer's kernel virtual address.  rxe and
 * siw rails take that address as it is; a rail whose device does DMA
 * (every real NIC) needs it mapped for that device.  So every SGE of a
 * kernel QP or SRQ that uses a DMA MR is mapped for the member device of
 * the rail that carries it, right before the member WQE is posted
 * (ib_dma_map_single(), no sleeping), and unmapped when the bond retires
 * the WQE: its completion, a flush, a RESET, a replay on another rail, the
 * rail's removal (after its member QP is gone), the QP's destruction.  The
 * mapping of a slot is kept beside the slot (struct rbond_dmamap); user
 * QPs have none (their MRs are registered on every member: rbond_mr.c).
 *
 * rxe rails use virtual DMA, where a mapping is the address itself;
 * dma_always=1 runs this path for them as well, which is how the test bed
 * exercises the bookkeeping (dma_mapped and dma_unmapped in mrail_stats
 * must meet once the QPs are gone).
 */
#include "rbond.h"
#include "rbond_mrail.h"

static bool rbond_dma_always;
module_param_named(dma_always, rbond_dma_always, bool, 0644);
MODULE_PARM_DESC(dma_always,
		 "Map kernel consumers' DMA-lkey buffers per member also for virtual-DMA rails (rxe): a test of the per-member DMA path (default 0)");

/**
 * rbond_dma_alloc() - the mapping records of @n slots
 * @n: the number of slots
 *
 * Return: the records, or NULL.
 */
struct rbond_dmamap *rbond_dma_alloc(u32 n)
{
	return kvcalloc(n, sizeof(struct rbond_dmamap), GFP_KERNEL_ACCOUNT);
}

/**
 * rbond_dma_unmap() - undo the mapping of one slot, if any
 * @m: the slot's record (NULL: none kept)
 *
 * The member device must not touch the buffers any more (its WQE completed
 * or its QP is in error, reset or destroyed) and must still be registered.
 * Any context.
 */
void rbond_dma_unmap(struct rbond_dmamap *m)
{
	unsigned int i;

	if (!m || !m->dev)
		return;
	for (i = 0; i < m->n; i++)
		ib_dma_unmap_single(m->dev, m->addr[i], m->len[i], m->dir);
	atomic64_add(m->n, &rbond_mstats.dma_unmapped);
	m->dev = NULL;
	m->n = 0;
}

/**
 * rbond_dma_map() - map the kernel-address SGEs of a member WQE
 * @m: the slot's record (NULL: a user QP, nothing to do)
 * @dev: the member device that will carry the WQE
 * @sge: the member SGEs (addresses replaced by the mapped ones)
 * @kva: the SGEs of @sge whose address is a kernel virtual address
 * @dir: the direction of the transfer
 *
 * A mapping the slot still holds (a replay on another rail) is undone
 * first.  Data path: does not sleep.
 * Return: 0, or -ENOMEM if a mapping failed (nothing stays mapped).
 */
int rbond_dma_map(struct rbond_dmamap *m, struct ib_device *dev,
		  struct ib_sge *sge, unsigned long kva,
		  enum dma_data_direction dir)
{
	unsigned int i;
	u64 a;

	if (!m)
		return 0;
	rbond_dma_unmap(m);
	if (!kva || (!READ_ONCE(rbond_dma_always) && ib_uses_virt_dma(dev)))
		return 0;
	m->dev = dev;
	m->dir = dir;
	for_each_set_bit(i, &kva, RBOND_MAX_SGE) {
		if (!sge[i].length)
			continue;
		a = ib_dma_map_single(dev, (void *)(uintptr_t)sge[i].addr,
				      sge[i].length, dir);
		if (ib_dma_mapping_error(dev, a)) {
			rbond_dma_unmap(m);
			return -ENOMEM;
		}
		m->addr[m->n] = a;
		m->len[m->n] = sge[i].length;
		m->n++;
		atomic64_inc(&rbond_mstats.dma_mapped);
		sge[i].addr = a;
	}
	if (!m->n)
		m->dev = NULL;
	return 0;
}

/**
 * rbond_dma_unmap_dev() - undo every mapping of @n records made for @dev
 * @m: the records (NULL: none kept)
 * @n: their number
 * @dev: the member device going away, or NULL for all
 *
 * Locks: whatever serializes the records against the data path.
 */
void rbond_dma_unmap_dev(struct rbond_dmamap *m, u32 n, struct ib_device *dev)
{
	u32 i;

	if (!m)
		return;
	for (i = 0; i < n; i++)
		if (m[i].dev && (!dev || m[i].dev == dev))
			rbond_dma_unmap(&m[i]);
}

/**
 * rbond_dma_unmap_qp() - undo a kernel QP's mappings made for @dev
 * @qp: the QP (a user QP has none)
 * @dev: the member device whose QP is gone, or NULL for all
 *
 * Locks: takes sq_lock and rq_lock; neither held by the caller.
 */
void rbond_dma_unmap_qp(struct rbond_qp *qp, struct ib_device *dev)
{
	unsigned long flags;

	if (!qp->sq_dma)
		return;
	spin_lock_irqsave(&qp->sq_lock, flags);
	rbond_dma_unmap_dev(qp->sq_dma, qp->sq_size, dev);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	spin_lock_irqsave(&qp->rq_lock, flags);
	rbond_dma_unmap_dev(qp->rq_dma, qp->rq_size, dev);
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/* The direction of a send WQE's local buffers. */
enum dma_data_direction rbond_dma_send_dir(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return DMA_FROM_DEVICE;
	default:
		return DMA_TO_DEVICE;
	}
}
