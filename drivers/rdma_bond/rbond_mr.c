// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: protection domains and memory regions.
 *
 * A bond PD owns one kernel PD per rail.  A bond MR owns one member MR per
 * rail (user memory: ib_reg_user_mr() in the caller's process on every
 * rail; DMA MR: the member PD's local_dma_lkey).  The bond's lkey/rkey are
 * the primary rail's member keys, so a peer that is not a bond uses them
 * unchanged.  Each PD maps bond lkeys to MRs (mr_xa) for the data path,
 * which reads it under RCU; MRs are freed after a grace period.
 */
#include "rbond.h"
#include "rbond_mrail.h"

static void rbond_pd_free_members(struct rbond_pd *pd)
{
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_pd_remove_rail(pd, i);
}

int rbond_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibpd->device);
	struct rbond_pd *pd = to_rbond_pd(ibpd);
	unsigned int i;
	int ret;

	xa_init(&pd->mr_xa);
	mutex_lock(&bond->lock);
	if (!bond->num_rails) {
		ret = -ENODEV;
		goto err_unlock;
	}
	for (i = rbond_next_rail(bond, 0); i < RBOND_MAX_RAILS;
	     i = rbond_next_rail(bond, i + 1)) {
		struct ib_pd *mpd = ib_alloc_pd(bond->rails[i].ibdev, 0);

		if (IS_ERR(mpd)) {
			ret = PTR_ERR(mpd);
			goto err_free_members;
		}
		pd->member[i] = mpd;
	}
	list_add_tail(&pd->list, &bond->pds);
	mutex_unlock(&bond->lock);
	return 0;

err_free_members:
	rbond_pd_free_members(pd);
err_unlock:
	mutex_unlock(&bond->lock);
	return ret;
}

int rbond_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibpd->device);
	struct rbond_pd *pd = to_rbond_pd(ibpd);

	mutex_lock(&bond->lock);
	list_del(&pd->list);
	rbond_pd_free_members(pd);
	mutex_unlock(&bond->lock);
	WARN_ON_ONCE(!xa_empty(&pd->mr_xa));
	xa_destroy(&pd->mr_xa);
	return 0;
}

/**
 * rbond_pd_remove_rail() - free @pd's member PD on @rail
 * @pd: the bond PD
 * @rail: the rail
 *
 * Every MR and QP of @pd left @rail already.
 * Locks: bond->lock held.
 */
void rbond_pd_remove_rail(struct rbond_pd *pd, unsigned int rail)
{
	lockdep_assert_held(&to_rbond_dev(pd->ibpd.device)->lock);
	if (!pd->member[rail])
		return;
	rbond_member_dealloc_pd(to_rbond_dev(pd->ibpd.device), rail,
				pd->member[rail]);
	pd->member[rail] = NULL;
}

/* The rail whose keys become the bond's keys. */
static int rbond_key_rail(struct rbond_dev *bond, struct rbond_pd *pd)
{
	unsigned int i;

	if (bond->num_rails && pd->member[bond->primary])
		return bond->primary;
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (pd->member[i] && rbond_rail_present(bond, i))
			return i;
	return -ENODEV;
}

static int rbond_mr_publish(struct rbond_dev *bond, struct rbond_pd *pd,
			    struct rbond_mr *mr)
{
	int ret;

	ret = xa_insert(&pd->mr_xa, mr->ibmr.lkey, mr, GFP_KERNEL);
	if (ret) {
		/* Only after the primary changed: the old primary's keys. */
		ibdev_dbg(&bond->ibdev, "lkey 0x%x already in use\n",
			  mr->ibmr.lkey);
		return ret == -EBUSY ? -EAGAIN : ret;
	}
	list_add_tail(&mr->list, &bond->mrs);
	return 0;
}

static void rbond_mr_free_members(struct rbond_mr *mr)
{
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_mr_remove_rail(mr, i);
}

/*
 * A new MR of @pd, returned with bond->lock held and *key set to the rail
 * whose keys become the bond's; the caller fills its members and ends with
 * rbond_mr_finish().
 */
static struct rbond_mr *rbond_mr_start(struct rbond_dev *bond,
				       struct rbond_pd *pd, int *key)
{
	struct rbond_mr *mr = kzalloc(sizeof(*mr), GFP_KERNEL_ACCOUNT);

	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->pd = pd;
	mutex_lock(&bond->lock);
	*key = rbond_key_rail(bond, pd);
	if (*key < 0) {
		mutex_unlock(&bond->lock);
		kfree(mr);
		return ERR_PTR(*key);
	}
	return mr;
}

/* Publish @mr, or (@ret, or publishing failed) undo it; drops bond->lock. */
static struct ib_mr *rbond_mr_finish(struct rbond_dev *bond,
				     struct rbond_pd *pd, struct rbond_mr *mr,
				     int ret)
{
	if (!ret)
		ret = rbond_mr_publish(bond, pd, mr);
	if (ret)
		rbond_mr_free_members(mr);
	mutex_unlock(&bond->lock);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	return &mr->ibmr;
}

struct ib_mr *rbond_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct rbond_dev *bond = to_rbond_dev(ibpd->device);
	struct rbond_pd *pd = to_rbond_pd(ibpd);
	struct rbond_mr *mr;
	unsigned int i;
	int key;

	/* Kernel only; remote access to all memory is not offered. */
	if (access & ~IB_ACCESS_LOCAL_WRITE)
		return ERR_PTR(-EOPNOTSUPP);

	mr = rbond_mr_start(bond, pd, &key);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	mr->dma = true;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!pd->member[i])
			continue;
		mr->lkey[i] = pd->member[i]->local_dma_lkey;
		mr->rails |= BIT(i);
	}
	mr->ibmr.lkey = mr->lkey[key];
	mr->ibmr.rkey = 0;
	return rbond_mr_finish(bond, pd, mr, 0);
}

struct ib_mr *rbond_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt_addr, int access,
				struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibpd->device);
	struct rbond_pd *pd = to_rbond_pd(ibpd);
	struct rbond_mr *mr;
	unsigned int i;
	int key, ret;

	/* No driver-specific udata: inlen/outlen are ignored. */
	mr = rbond_mr_start(bond, pd, &key);
	if (IS_ERR(mr))
		return ERR_CAST(mr);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct ib_mr *mmr;

		if (!pd->member[i])
			continue;
		/* Pins the pages once per rail, in the caller's process. */
		mmr = ib_reg_user_mr(pd->member[i], start, length, virt_addr,
				     access);
		if (IS_ERR(mmr)) {
			ret = PTR_ERR(mmr);
			ibdev_dbg(&bond->ibdev,
				  "reg_user_mr on rail %u failed: %d\n", i, ret);
			return rbond_mr_finish(bond, pd, mr, ret);
		}
		mr->member[i] = mmr;
		mr->lkey[i] = mmr->lkey;
		mr->rails |= BIT(i);
	}
	mr->access = access;
	mr->ibmr.lkey = mr->member[key]->lkey;
	mr->ibmr.rkey = mr->member[key]->rkey;
	mr->ibmr.iova = virt_addr;
	mr->ibmr.length = length;
	return rbond_mr_finish(bond, pd, mr, 0);
}

int rbond_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibmr->device);
	struct rbond_mr *mr = to_rbond_mr(ibmr);

	mutex_lock(&bond->lock);
	xa_erase(&mr->pd->mr_xa, mr->ibmr.lkey);
	list_del(&mr->list);
	mutex_unlock(&bond->lock);
	/*
	 * Off bond->mrs: no new alias key is handed out.  Revoke those that
	 * were (bounded wait), before the member keys can be reused.
	 */
	rbond_mrail_mr_dereg(bond, mr);
	mutex_lock(&bond->lock);
	rbond_mr_free_members(mr);
	mutex_unlock(&bond->lock);
	kfree_rcu(mr, rcu);
	return 0;
}

/**
 * rbond_mr_remove_rail() - deregister @mr's member MR on @rail
 * @mr: the bond MR
 * @rail: the rail
 *
 * No QP uses @rail any more.  @rail leaves mr->rails first.
 * Locks: bond->lock held.
 */
void rbond_mr_remove_rail(struct rbond_mr *mr, unsigned int rail)
{
	/* not ibmr.device: the core sets it after reg_user_mr returns */
	lockdep_assert_held(&to_rbond_dev(mr->pd->ibpd.device)->lock);
	WRITE_ONCE(mr->rails, mr->rails & ~BIT(rail));
	if (!mr->member[rail])
		return;
	if (ib_dereg_mr(mr->member[rail]))
		WARN_ON_ONCE(1);
	mr->member[rail] = NULL;
}

/**
 * rbond_mr_lookup() - the MR of a bond lkey in @pd
 * @pd: the bond PD
 * @lkey: the bond lkey
 *
 * Data path.
 * Locks: rcu_read_lock() held (MRs are freed after a grace period).
 * Return: the MR, or NULL if @pd has none with @lkey.
 */
struct rbond_mr *rbond_mr_lookup(struct rbond_pd *pd, u32 lkey)
{
	return xa_load(&pd->mr_xa, lkey);
}

/**
 * rbond_mr_rail_lkey() - the member lkey of a bond lkey on a rail
 * @pd: the bond PD
 * @lkey: the bond lkey
 * @rail: the rail
 * @out: the member lkey
 *
 * Data path.
 * Locks: rcu_read_lock() held.
 * Return: 0 for a registered MR, 1 for a DMA MR (the SGE's address is a
 * kernel virtual address: rbond_dma.c maps it per member), or -EINVAL if
 * @pd has no MR with @lkey or it has no member key on @rail.
 */
int rbond_mr_rail_lkey(struct rbond_pd *pd, u32 lkey, unsigned int rail,
		       u32 *out)
{
	struct rbond_mr *mr = rbond_mr_lookup(pd, lkey);

	if (!mr || !(READ_ONCE(mr->rails) & BIT(rail)))
		return -EINVAL;
	*out = mr->lkey[rail];
	return mr->dma ? 1 : 0;
}
