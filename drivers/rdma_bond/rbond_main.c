// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: module init/exit, "rdma link add NAME type bond netdev DEV",
 * the list of bonds and the ib_client that tells us about member devices.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <rdma/rdma_netlink.h>
#include <rdma/ib_cache.h>

#include "rbond.h"
#include "rbond_mrail.h"
#include "rbond_ctrl.h"

MODULE_AUTHOR("rdma_bond developers");
MODULE_DESCRIPTION("RDMA bond: one virtual RoCE device over several rails");
MODULE_LICENSE("Dual BSD/GPL");
MODULE_ALIAS_RDMA_LINK("bond");

struct workqueue_struct *rbond_wq;

/* Protects rbond_list and every bond's rails. */
static DEFINE_MUTEX(rbond_mutex);
/*
 * Protects rbond_members.  A leaf lock of its own: the ib_client add()
 * callback runs under the core's devices_rwsem and client_data_rwsem, while
 * rbond_newlink() holds rbond_mutex across ib_device_get_by_name() and
 * ib_register_device(), which take devices_rwsem; taking rbond_mutex in
 * add() would close that circle (lockdep found it in the debug lane).
 */
static DEFINE_MUTEX(rbond_members_lock);
static LIST_HEAD(rbond_list);

/* A non-bond RDMA device the client has seen (candidate rail). */
struct rbond_member {
	struct list_head list;
	struct ib_device *ibdev;
};

static LIST_HEAD(rbond_members);

/* --- finding the RDMA device of a netdev ------------------------------ */

static bool rbond_port_has_ndev(struct ib_device *dev, u32 port,
				struct net_device *ndev)
{
	struct net_device *pndev;
	struct ib_port_attr pattr;
	bool found = false;
	unsigned int idx;

	pndev = rbond_member_netdev(dev, port);
	if (pndev) {
		found = pndev == ndev;
		dev_put(pndev);
		return found;
	}

	/* Legacy drivers without a port netdev: look at the GID table. */
	if (ib_query_port(dev, port, &pattr))
		return false;
	for (idx = 0; idx < pattr.gid_tbl_len && idx < RBOND_GID_SCAN_MAX && !found; idx++) {
		const struct ib_gid_attr *gattr;

		gattr = rdma_get_gid_attr(dev, port, idx);
		if (IS_ERR(gattr))
			continue;
		rcu_read_lock();
		found = rdma_read_gid_attr_ndev_rcu(gattr) == ndev;
		rcu_read_unlock();
		rdma_put_gid_attr(gattr);
	}
	return found;
}

static u32 rbond_dev_port_of(struct ib_device *dev, struct net_device *ndev)
{
	u32 port;

	rdma_for_each_port(dev, port)
		if (rdma_protocol_roce(dev, port) || rdma_protocol_iwarp(dev, port) ||
		    rdma_protocol_ib(dev, port))
			if (rbond_port_has_ndev(dev, port, ndev))
				return port;
	return 0;
}

/* Caller holds rbond_mutex; the returned device stays valid under it. */
static struct ib_device *rbond_find_member(struct net_device *ndev, u32 *port)
{
	struct ib_device *found = NULL;
	struct rbond_member *m;

	lockdep_assert_held(&rbond_mutex);
	mutex_lock(&rbond_members_lock);
#ifdef HAVE_IB_DEVICE_GET_BY_NETDEV
	{
		struct ib_device *dev;

		dev = ib_device_get_by_netdev(ndev, RDMA_DRIVER_UNKNOWN);
		if (dev) {
			bool bond = rbond_is_bond(dev);

			*port = bond ? 0 : rbond_dev_port_of(dev, ndev);
			ib_device_put(dev);
			list_for_each_entry(m, &rbond_members, list)
				if (m->ibdev == dev && *port) {
					found = dev;
					goto out;
				}
		}
	}
#endif
	list_for_each_entry(m, &rbond_members, list) {
		*port = rbond_dev_port_of(m->ibdev, ndev);
		if (*port) {
			found = m->ibdev;
			break;
		}
	}
#ifdef HAVE_IB_DEVICE_GET_BY_NETDEV
out:
#endif
	mutex_unlock(&rbond_members_lock);
	return found;
}

static struct rbond_dev *rbond_rail_owner(struct ib_device *member,
					  unsigned int *rail)
{
	struct rbond_dev *bond;
	unsigned int i;

	list_for_each_entry(bond, &rbond_list, list)
		for (i = 0; i < RBOND_MAX_RAILS; i++)
			if (bond->rails[i].ibdev == member) {
				if (rail)
					*rail = i;
				return bond;
			}
	return NULL;
}

/* --- rails -------------------------------------------------------------- */

static void rbond_rail_event(struct ib_event_handler *handler,
			     struct ib_event *event)
{
	struct rbond_rail *rail = container_of(handler, struct rbond_rail,
					       event_handler);

	if (event->element.port_num != rail->port)
		return;
	ibdev_dbg(&rail->bond->ibdev, "rail %td: %s\n",
		  rail - rail->bond->rails, ib_event_msg(event->event));
	switch (event->event) {
	case IB_EVENT_PORT_ACTIVE:
		atomic64_inc(&rail->stats[RBOND_STAT_LINK_UPS]);
		WRITE_ONCE(rail->active, true);
		/* the QPs that failed over from it take it back */
		rbond_fo_rail_up(rail->bond, rail - rail->bond->rails);
		break;
	case IB_EVENT_PORT_ERR:
	case IB_EVENT_DEVICE_FATAL:
		atomic64_inc(&rail->stats[RBOND_STAT_LINK_DOWNS]);
		WRITE_ONCE(rail->active, false);
		/* its QPs go on over the other rails */
		rbond_fo_rail_down(rail->bond, rail - rail->bond->rails,
				   RBOND_FAIL_LINK);
		break;
	default:
		return;
	}
	rbond_dev_update_port_state(rail->bond);
}

/* Check a candidate rail against the bond; no state is changed. */
static int rbond_rail_check(struct rbond_dev *bond, struct ib_device *member,
			    u32 port)
{
	if (rdma_port_get_link_layer(member, port) != IB_LINK_LAYER_ETHERNET ||
	    !rdma_protocol_roce_udp_encap(member, port)) {
		/* First rail: we only do RoCE v2.  Later: mixed rails. */
		return bond && bond->num_rails ? -EINVAL : -EOPNOTSUPP;
	}
	if (bond && bond->num_rails >= RBOND_MAX_RAILS)
		return -ENOSPC;
	if (bond && bond->num_rails && !rbond_dev_rail_fits(bond, member)) {
		ibdev_dbg(&bond->ibdev, "%s has lower limits than the bond\n",
			  dev_name(&member->dev));
		return -EINVAL;
	}
	return 0;
}

/* Caller holds rbond_mutex and, for a registered bond, bond->lock. */
static void rbond_rail_init(struct rbond_dev *bond, unsigned int i,
			    struct ib_device *member, u32 port,
			    struct net_device *ndev)
{
	struct rbond_rail *rail = &bond->rails[i];
	struct ib_port_attr pattr;
	int s;

	rail->bond = bond;
	rail->port = port;
	rail->ndev = ndev;
	dev_hold(ndev);
	for (s = 0; s < RBOND_NR_RAIL_STATS; s++)
		atomic64_set(&rail->stats[s], 0);
	rail->active = !ib_query_port(member, port, &pattr) &&
		       pattr.state == IB_PORT_ACTIVE;
	INIT_IB_EVENT_HANDLER(&rail->event_handler, member, rbond_rail_event);
	ib_register_event_handler(&rail->event_handler);
	/* Publish last: rbond_rail_present() tests ibdev. */
	WRITE_ONCE(rail->ibdev, member);
	rbond_park_rail_on(bond, i);
	bond->num_rails++;
}

/* Drop a rail whose member objects are already gone. */
static void rbond_rail_release(struct rbond_dev *bond, unsigned int i)
{
	struct rbond_rail *rail = &bond->rails[i];

	rbond_park_rail_off(bond, i);
	ib_unregister_event_handler(&rail->event_handler);
	WRITE_ONCE(rail->ibdev, NULL);
	rail->active = false;
	dev_put(rail->ndev);
	rail->ndev = NULL;
	bond->num_rails--;
}

/*
 * A member device goes away: destroy every member object on that rail, then
 * the rail.  QPs homed on it move to the error state (flush completions and
 * IB_EVENT_QP_FATAL).  Losing the primary makes the lowest remaining rail
 * primary (GIDs follow its netdev); losing the last rail unregisters the
 * bond.  Caller holds rbond_mutex.
 */
static void rbond_remove_rail(struct rbond_dev *bond, unsigned int i)
{
	struct rbond_srq *srq;
	unsigned long idx;
	struct rbond_qp *qp;
	struct rbond_mr *mr;
	struct rbond_cq *cq;
	struct rbond_pd *pd;
	unsigned int j;

	lockdep_assert_held(&rbond_mutex);
	mutex_lock(&bond->lock);
	dev_info(&bond->ibdev.dev, "removing rail %u (%s)\n", i,
		 dev_name(&bond->rails[i].ibdev->dev));
	/* the device goes: what waits for its port is destroyed now */
	rbond_park_rail_off(bond, i);
	list_for_each_entry(qp, &bond->qps, list)
		rbond_qp_remove_rail(qp, i);
	xa_for_each(&bond->srq_xa, idx, srq)
		rbond_srq_remove_rail(srq, i);
	list_for_each_entry(mr, &bond->mrs, list)
		rbond_mr_remove_rail(mr, i);
	list_for_each_entry(cq, &bond->cqs, list)
		rbond_cq_remove_rail(cq, i);
	rbond_ah_remove_rail(bond, i);
	list_for_each_entry(pd, &bond->pds, list)
		rbond_pd_remove_rail(pd, i);
	rbond_rail_release(bond, i);

	if (bond->num_rails && bond->primary == i) {
		for (j = 0; j < RBOND_MAX_RAILS; j++)
			if (rbond_rail_present(bond, j))
				break;
		bond->primary = j;
		ib_device_set_netdev(&bond->ibdev, bond->rails[j].ndev,
				     RBOND_PORT);
		rdma_roce_rescan_device(&bond->ibdev);
		dev_info(&bond->ibdev.dev, "rail %u is now primary\n", j);
	}
	if (!bond->num_rails) {
		ib_device_set_netdev(&bond->ibdev, NULL, RBOND_PORT);
		if (!bond->unreg_queued) {
			bond->unreg_queued = true;
			dev_info(&bond->ibdev.dev,
				 "last rail gone, unregistering\n");
			get_device(&bond->ibdev.dev);
			queue_work(rbond_wq, &bond->unreg_work);
		}
	}
	mutex_unlock(&bond->lock);
	rbond_dev_update_port_state(bond);
}

static void rbond_unreg_work(struct work_struct *work)
{
	struct rbond_dev *bond = container_of(work, struct rbond_dev,
					      unreg_work);
	struct ib_device *ibdev = &bond->ibdev;

	ib_unregister_device(ibdev);
	put_device(&ibdev->dev);
}

/* ops.dealloc_driver: every object is gone; give the rails back. */
void rbond_dealloc_driver(struct ib_device *ibdev)
{
	struct rbond_dev *bond = to_rbond_dev(ibdev);
	__be32 addrs[RBOND_MAX_RAILS] = {};
	unsigned int i;

	mutex_lock(&rbond_mutex);
	list_del_init(&bond->list);
	mutex_lock(&bond->lock);
	for (i = rbond_next_rail(bond, 0); i < RBOND_MAX_RAILS;
	     i = rbond_next_rail(bond, i + 1)) {
		if (bond->rails[i].ndev)
			addrs[i] = rbond_ndev_ipv4(bond->rails[i].ndev);
		rbond_rail_release(bond, i);
	}
	mutex_unlock(&bond->lock);
	mutex_unlock(&rbond_mutex);
	/* the control channel on its rails' addresses: no bond's now */
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		rbond_ctrl_forget_addr(addrs[i]);
	/* no event handler left to queue it */
	cancel_work_sync(&bond->rail_work);
	rbond_park_stop(bond);

	WARN_ON_ONCE(!list_empty(&bond->qps) || !list_empty(&bond->cqs) ||
		     !list_empty(&bond->mrs) || !list_empty(&bond->pds));
	xa_destroy(&bond->qp_xa);
	xa_destroy(&bond->srq_xa);
	mutex_destroy(&bond->lock);
}

/* --- rdma link add ------------------------------------------------------- */

/*
 * On failure *failed is the half-built bond: the caller must drop
 * rbond_mutex and ib_dealloc_device() it (dealloc_driver takes the mutex).
 */
static int rbond_create(const char *name, struct ib_device *member, u32 port,
			struct net_device *ndev, struct rbond_dev **failed)
{
	struct rbond_dev *bond;
	int ret;

	bond = rbond_dev_alloc();
	if (!bond)
		return -ENOMEM;
	rbond_opts_init(bond);
	INIT_WORK(&bond->unreg_work, rbond_unreg_work);
	INIT_WORK(&bond->rail_work, rbond_fo_rail_work);
	rbond_park_init(bond);

	rbond_rail_init(bond, 0, member, port, ndev);
	bond->primary = 0;
	bond->ibdev.node_guid = member->node_guid ^ cpu_to_be64(RBOND_GUID_LOCAL_BIT);
	rbond_dev_init_attr(bond);

	ret = ib_device_set_netdev(&bond->ibdev, ndev, RBOND_PORT);
	if (ret)
		goto err_dealloc;

	/* Visible to the client's remove() before registration finishes. */
	list_add_tail(&bond->list, &rbond_list);
	ret = rbond_dev_register(bond, name);
	if (ret)
		goto err_unlist;

	dev_info(&bond->ibdev.dev, "created with rail 0 %s (%s)\n",
		 dev_name(&member->dev), netdev_name(ndev));
	return 0;

err_unlist:
	list_del_init(&bond->list);
err_dealloc:
	*failed = bond;
	return ret;
}

static int rbond_add_rail(struct rbond_dev *bond, struct ib_device *member,
			  u32 port, struct net_device *ndev)
{
	unsigned int i;
	int ret;

	mutex_lock(&bond->lock);
	ret = rbond_rail_check(bond, member, port);
	if (ret)
		goto out_unlock;
	if (!bond->num_rails || bond->unreg_queued) {
		ret = -ENODEV;
		goto out_unlock;
	}
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (!bond->rails[i].ibdev)
			break;
	if (WARN_ON_ONCE(i == RBOND_MAX_RAILS)) {
		ret = -ENOSPC;
		goto out_unlock;
	}
	rbond_rail_init(bond, i, member, port, ndev);
	dev_info(&bond->ibdev.dev, "added rail %u %s (%s)\n", i,
		 dev_name(&member->dev), netdev_name(ndev));
out_unlock:
	mutex_unlock(&bond->lock);
	if (!ret)
		rbond_dev_update_port_state(bond);
	return ret;
}

static int rbond_newlink(const char *ibdev_name, struct net_device *ndev)
{
	struct rbond_dev *bond = NULL, *failed = NULL;
	struct ib_device *member, *named;
	u32 port = 0;
	int ret;

	mutex_lock(&rbond_mutex);

	named = ib_device_get_by_name(ibdev_name, RDMA_DRIVER_UNKNOWN);
	if (named) {
		if (rbond_is_bond(named))
			bond = to_rbond_dev(named);
		ib_device_put(named);
		if (!bond) {
			pr_debug("%s is not a bond device\n",
				 ibdev_name);
			ret = -EEXIST;
			goto out_unlock;
		}
	}

	member = rbond_find_member(ndev, &port);
	if (!member) {
		pr_debug("no RDMA device on %s\n",
			 netdev_name(ndev));
		ret = -ENODEV;
		goto out_unlock;
	}
	if (rbond_rail_owner(member, NULL)) {
		pr_debug("%s is already a rail\n",
			 dev_name(&member->dev));
		ret = -EBUSY;
		goto out_unlock;
	}

	if (bond) {
		ret = rbond_add_rail(bond, member, port, ndev);
	} else {
		ret = rbond_rail_check(NULL, member, port);
		if (!ret)
			ret = rbond_create(ibdev_name, member, port, ndev,
					   &failed);
	}
out_unlock:
	mutex_unlock(&rbond_mutex);
	if (failed)
		ib_dealloc_device(&failed->ibdev);
	return ret;
}

static struct rdma_link_ops rbond_link_ops = {
	.type = "bond",
	.newlink = rbond_newlink,
};

/* --- ib_client: learn about member devices -------------------------------- */

static int rbond_client_add(struct ib_device *ibdev)
{
	struct rbond_member *m;

	/* Our own devices: registered under rbond_mutex, never rails. */
	if (rbond_is_bond(ibdev)) {
		rbond_dev_set_live(to_rbond_dev(ibdev), true);
		return 0;
	}

	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return -ENOMEM;
	m->ibdev = ibdev;
	mutex_lock(&rbond_members_lock);
	list_add_tail(&m->list, &rbond_members);
	mutex_unlock(&rbond_members_lock);
	return 0;
}

static void rbond_client_remove(struct ib_device *ibdev, void *client_data)
{
	struct rbond_member *m, *tmp;
	struct rbond_dev *bond;
	unsigned int rail;

	if (rbond_is_bond(ibdev)) {
		rbond_dev_set_live(to_rbond_dev(ibdev), false);
		return;
	}

	rbond_ctrl_remove_device(ibdev);
	mutex_lock(&rbond_mutex);
	mutex_lock(&rbond_members_lock);
	list_for_each_entry_safe(m, tmp, &rbond_members, list) {
		if (m->ibdev == ibdev) {
			list_del(&m->list);
			kfree(m);
		}
	}
	mutex_unlock(&rbond_members_lock);
	/* A device is a rail of at most one bond. */
	bond = rbond_rail_owner(ibdev, &rail);
	if (bond) {
		/* the QPs homed on it move while the member is still there */
		rbond_fo_rail_removing(bond, rail);
		rbond_remove_rail(bond, rail);
	}
	mutex_unlock(&rbond_mutex);
}

static struct ib_client rbond_client = {
	.name = "rdma_bond",
	.add = rbond_client_add,
	.remove = rbond_client_remove,
	.no_kverbs_req = true,
};

/* Unregister every bond; dealloc_driver takes it off rbond_list. */
static void rbond_unregister_all(void)
{
	struct rbond_dev *bond;

	for (;;) {
		mutex_lock(&rbond_mutex);
		bond = list_first_entry_or_null(&rbond_list, struct rbond_dev,
						list);
		if (bond)
			get_device(&bond->ibdev.dev);
		mutex_unlock(&rbond_mutex);
		if (!bond)
			break;
		ib_unregister_device(&bond->ibdev);
		put_device(&bond->ibdev.dev);
	}
}

static int __init rbond_init(void)
{
	int ret;

	rbond_wq = alloc_workqueue("rdma_bond", WQ_UNBOUND, 0);
	if (!rbond_wq)
		return -ENOMEM;
	rbond_mrail_init();

	ret = ib_register_client(&rbond_client);
	if (ret)
		goto err_destroy_wq;

	rdma_link_register(&rbond_link_ops);
	rbond_fo_init();
	pr_info("loaded (ABI %d)\n", RBOND_UVERBS_ABI_VERSION);
	return 0;

err_destroy_wq:
	destroy_workqueue(rbond_wq);
	return ret;
}

static void __exit rbond_exit(void)
{
	struct rbond_member *m, *tmp;

	rbond_fo_exit();
	rdma_link_unregister(&rbond_link_ops);
	rbond_unregister_all();
	/* Queued unregistrations (last rail gone) are no-ops by now. */
	drain_workqueue(rbond_wq);
	rbond_unregister_all();
	rbond_mrail_exit();
	ib_unregister_client(&rbond_client);
	destroy_workqueue(rbond_wq);

	list_for_each_entry_safe(m, tmp, &rbond_members, list) {
		list_del(&m->list);
		kfree(m);
	}
	pr_info("unloaded\n");
}

module_init(rbond_init);
module_exit(rbond_exit);
