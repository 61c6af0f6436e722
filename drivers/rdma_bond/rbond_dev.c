// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the virtual device - ops table, device and port attributes,
 * sysfs group "bond", per-rail hardware counters, ucontext and AH.
 */
#include <linux/module.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>

#include "rbond.h"
#include "rbond_ctrl.h"
#include "rbond_mrail.h"

/* --- device attributes ---------------------------------------------------- */

/*
 * The limits every rail of @bond, and @extra if not NULL, can honour, into
 * @a; false if there is no rail.
 */
static bool rbond_dev_calc_attr(const struct rbond_dev *bond,
				const struct ib_device *extra,
				struct ib_device_attr *a)
{
	bool first = true;
	unsigned int i;

	for (i = 0; i <= RBOND_MAX_RAILS; i++) {
		const struct ib_device_attr *m;

		if (i == RBOND_MAX_RAILS && extra)
			m = &extra->attrs;
		else if (i < RBOND_MAX_RAILS && bond->rails[i].ibdev)
			m = &bond->rails[i].ibdev->attrs;
		else
			continue;

		if (first) {
			memset(a, 0, sizeof(*a));
			a->max_mr_size = m->max_mr_size;
			a->page_size_cap = m->page_size_cap;
			a->max_qp = m->max_qp;
			a->max_qp_wr = min_t(int, m->max_qp_wr, RBOND_MAX_QP_WR);
			a->max_send_sge = min_t(int, m->max_send_sge,
						RBOND_MAX_SGE);
			a->max_recv_sge = min_t(int, m->max_recv_sge,
						RBOND_MAX_SGE);
			a->max_sge_rd = min_t(int, m->max_sge_rd, RBOND_MAX_SGE);
			a->max_cq = m->max_cq;
			a->max_cqe = min_t(int, m->max_cqe, RBOND_MAX_CQE);
			a->max_mr = m->max_mr;
			a->max_pd = m->max_pd;
			a->max_qp_rd_atom = m->max_qp_rd_atom;
			a->max_qp_init_rd_atom = m->max_qp_init_rd_atom;
			a->max_res_rd_atom = m->max_res_rd_atom;
			a->atomic_cap = m->atomic_cap;
			a->max_ah = m->max_ah;
			a->max_srq = m->max_srq;
			a->max_srq_wr = min_t(int, m->max_srq_wr, RBOND_MAX_QP_WR);
			a->max_srq_sge = min_t(int, m->max_srq_sge, RBOND_MAX_SGE);
			a->local_ca_ack_delay = m->local_ca_ack_delay;
			a->device_cap_flags = m->device_cap_flags;
			first = false;
			continue;
		}
		a->page_size_cap &= m->page_size_cap;
		a->device_cap_flags &= m->device_cap_flags;
		a->max_mr_size = min(a->max_mr_size, m->max_mr_size);
		a->max_qp = min(a->max_qp, m->max_qp);
		a->max_qp_wr = min(a->max_qp_wr, m->max_qp_wr);
		a->max_send_sge = min(a->max_send_sge, m->max_send_sge);
		a->max_recv_sge = min(a->max_recv_sge, m->max_recv_sge);
		a->max_sge_rd = min(a->max_sge_rd, m->max_sge_rd);
		a->max_cq = min(a->max_cq, m->max_cq);
		a->max_cqe = min(a->max_cqe, m->max_cqe);
		a->max_mr = min(a->max_mr, m->max_mr);
		a->max_pd = min(a->max_pd, m->max_pd);
		a->max_qp_rd_atom = min(a->max_qp_rd_atom, m->max_qp_rd_atom);
		a->max_qp_init_rd_atom = min(a->max_qp_init_rd_atom, m->max_qp_init_rd_atom);
		a->max_res_rd_atom = min(a->max_res_rd_atom, m->max_res_rd_atom);
		a->max_ah = min(a->max_ah, m->max_ah);
		a->max_srq = min(a->max_srq, m->max_srq);
		a->max_srq_wr = min(a->max_srq_wr, m->max_srq_wr);
		a->max_srq_sge = min(a->max_srq_sge, m->max_srq_sge);
		if (m->atomic_cap < a->atomic_cap)
			a->atomic_cap = m->atomic_cap;
		a->local_ca_ack_delay = max(a->local_ca_ack_delay,
					    m->local_ca_ack_delay);
	}
	if (first)
		return false;

	/* What the bond itself implements, whatever the rails can do. */
	a->device_cap_flags &= IB_DEVICE_RC_RNR_NAK_GEN;
	a->device_cap_flags |= IB_DEVICE_PORT_ACTIVE_EVENT |
			       IB_DEVICE_SYS_IMAGE_GUID;
	a->kernel_cap_flags = IBK_ALLOW_USER_UNREG;
	a->max_pkeys = 1;
	a->sys_image_guid = bond->ibdev.node_guid;
	a->vendor_id = 0;
	a->max_mw = 0;
	a->max_fast_reg_page_list_len = 0;
	a->max_mcast_grp = 0;
	a->max_qp_init_rd_atom = min(a->max_qp_init_rd_atom,
				     a->max_qp_rd_atom);
	if (a->atomic_cap > IB_ATOMIC_HCA)
		a->atomic_cap = IB_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	return true;
}

/**
 * rbond_dev_init_attr() - set the device limits
 * @bond: the bond, not registered yet, with its rail 0
 *
 * The device limits, set once before registration from rail 0 and never
 * changed after it: applications and ULPs keep what query_device said, and
 * uverbs reads ibdev->attrs without a lock.
 */
void rbond_dev_init_attr(struct rbond_dev *bond)
{
	rbond_dev_calc_attr(bond, NULL, &bond->attr);
}

/**
 * rbond_dev_rail_fits() - may @member join @bond as a rail?
 * @bond: the bond
 * @member: the candidate rail's device
 *
 * A rail may join only if it honours every limit the bond granted (a rail
 * with lower limits would change them under live objects).
 * Locks: bond->lock held.
 * Return: true if it may join.
 */
bool rbond_dev_rail_fits(const struct rbond_dev *bond,
			 const struct ib_device *member)
{
	struct ib_device_attr a;

	if (!rbond_dev_calc_attr(bond, member, &a))
		return false;
	a.sys_image_guid = bond->attr.sys_image_guid;
	return !memcmp(&a, &bond->attr, sizeof(a));
}

static int rbond_query_device(struct ib_device *ibdev,
			      struct ib_device_attr *attr,
			      struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibdev);

	/* No driver-specific input or output: ignore udata. */
	mutex_lock(&bond->lock);
	*attr = bond->attr;
	mutex_unlock(&bond->lock);
	return 0;
}

/* Bandwidth of one lane in units of 0.25 Gb/s. */
static unsigned int rbond_speed_quarters(u16 speed)
{
	switch (speed) {
	case IB_SPEED_SDR: return 10;
	case IB_SPEED_DDR: return 20;
	case IB_SPEED_QDR: return 40;
	case IB_SPEED_FDR10: return 40;
	case IB_SPEED_FDR: return 56;
	case IB_SPEED_EDR: return 100;
	case IB_SPEED_HDR: return 200;
	case IB_SPEED_NDR: return 400;
	default: return 10;
	}
}

/* Express a total bandwidth as the (speed, width) pair closest below it. */
static void rbond_speed_width(unsigned int total, u16 *speed, u8 *width)
{
	static const u16 speeds[] = { IB_SPEED_SDR, IB_SPEED_DDR, IB_SPEED_QDR,
				      IB_SPEED_FDR, IB_SPEED_EDR, IB_SPEED_HDR,
				      IB_SPEED_NDR };
	static const u8 widths[] = { IB_WIDTH_1X, IB_WIDTH_2X, IB_WIDTH_4X,
				     IB_WIDTH_8X, IB_WIDTH_12X };
	unsigned int best = 0, s, w, bw;

	*speed = IB_SPEED_SDR;
	*width = IB_WIDTH_1X;
	/* Fewest lanes first: one 10G rail reads as 1X QDR, not 4X SDR. */
	for (w = 0; w < ARRAY_SIZE(widths); w++) {
		for (s = 0; s < ARRAY_SIZE(speeds); s++) {
			bw = rbond_speed_quarters(speeds[s]) *
			     ib_width_enum_to_int(widths[w]);
			if (bw <= total && bw > best) {
				best = bw;
				*speed = speeds[s];
				*width = widths[w];
			}
		}
	}
}

static int rbond_query_port(struct ib_device *ibdev, u32 port,
			    struct ib_port_attr *attr)
{
	struct rbond_dev *bond = to_rbond_dev(ibdev);
	unsigned int i, total = 0, nactive = 0;
	bool first = true;

	attr->state = IB_PORT_DOWN;
	attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = IB_MTU_256;
	attr->gid_tbl_len = bond->gid_tbl_len;
	attr->pkey_tbl_len = 1;
	attr->max_msg_sz = RBOND_MAX_MSG_SZ;
	attr->port_cap_flags = 0;
	attr->max_vl_num = 1;

	mutex_lock(&bond->lock);
	for (i = rbond_next_rail(bond, 0); i < RBOND_MAX_RAILS;
	     i = rbond_next_rail(bond, i + 1)) {
		struct rbond_rail *rail = &bond->rails[i];
		struct ib_port_attr m;

		if (ib_query_port(rail->ibdev, rail->port, &m))
			continue;
		attr->max_mtu = min(attr->max_mtu, m.max_mtu);
		attr->max_msg_sz = min(attr->max_msg_sz, m.max_msg_sz);
		if (m.state != IB_PORT_ACTIVE)
			continue;
		if (first || m.active_mtu < attr->active_mtu)
			attr->active_mtu = m.active_mtu;
		first = false;
		nactive++;
		total += rbond_speed_quarters(m.active_speed) *
			 ib_width_enum_to_int(m.active_width);
	}
	mutex_unlock(&bond->lock);

	if (nactive) {
		attr->state = IB_PORT_ACTIVE;
		attr->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	}
	rbond_speed_width(total ? total : 10, &attr->active_speed,
			  &attr->active_width);
	if (attr->active_mtu > attr->max_mtu)
		attr->active_mtu = attr->max_mtu;
	return 0;
}

/**
 * rbond_is_bond() - is @ibdev one of ours?
 * @ibdev: an RDMA device
 *
 * By an op the core never rewrites: while a registration fails it swaps
 * dealloc_driver (prevent_dealloc_device), and a half-registered bond must
 * not be taken for a member (L2: the client's remove() would then take
 * rbond_mutex, held by rbond_newlink()).
 * Return: true if @ibdev is a bond device.
 */
bool rbond_is_bond(const struct ib_device *ibdev)
{
	return ibdev->ops.query_port == rbond_query_port;
}

/**
 * rbond_dev_update_port_state() - the port state follows the rails
 * @bond: the bond
 *
 * Port state follows the rails: dispatch PORT_ACTIVE/ERR on change, only
 * while the device is live (registered, not yet being unregistered), so
 * that no event work is queued after the core flushed them.
 * Locks: bond->state_lock not held (taken here, irqsave).
 */
void rbond_dev_update_port_state(struct rbond_dev *bond)
{
	struct ib_event ev = {
		.device = &bond->ibdev,
		.element.port_num = RBOND_PORT,
	};
	unsigned long flags;
	bool active = false;
	unsigned int i;

	spin_lock_irqsave(&bond->state_lock, flags);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (READ_ONCE(bond->rails[i].ibdev) &&
		    READ_ONCE(bond->rails[i].active))
			active = true;
	if (active != bond->port_active && bond->live) {
		ev.event = active ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR;
		ib_dispatch_event(&ev);
	}
	bond->port_active = active;
	spin_unlock_irqrestore(&bond->state_lock, flags);
}

/**
 * rbond_dev_set_live() - the device is live, or no longer
 * @bond: the bond
 * @live: true once registered (the ib_client's add()), false once being
 *	unregistered (its remove())
 *
 * Port events are dispatched only while the device is live
 * (rbond_dev_update_port_state()).
 * Locks: bond->state_lock not held (taken here, irqsave).
 */
void rbond_dev_set_live(struct rbond_dev *bond, bool live)
{
	unsigned long flags;

	spin_lock_irqsave(&bond->state_lock, flags);
	bond->live = live;
	spin_unlock_irqrestore(&bond->state_lock, flags);
}

static int rbond_get_port_immutable(struct ib_device *ibdev, u32 port,
				    struct ib_port_immutable *immutable)
{
	struct rbond_dev *bond = to_rbond_dev(ibdev);

	/*
	 * RoCE v2 without IB_MAD/IB_CM: no GSI QP is created on the bond, and
	 * rdma_cm is not offered on it (see Documentation/rdma_bond.rst).
	 */
	immutable->core_cap_flags = RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP |
				    RDMA_CORE_CAP_ETH_AH;
	immutable->gid_tbl_len = bond->gid_tbl_len;
	immutable->pkey_tbl_len = 1;
	immutable->max_mad_size = 0;
	return 0;
}

static enum rdma_link_layer rbond_get_link_layer(struct ib_device *ibdev,
						 u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int rbond_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			    u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static void rbond_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "rdma_bond-abi%d",
		 RBOND_UVERBS_ABI_VERSION);
}

/* --- ucontext ----------------------------------------------------------- */

static int rbond_alloc_ucontext(struct ib_ucontext *ibuc,
				struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibuc->device);
	struct rbond_alloc_ucontext_resp resp = {
		.abi_version = RBOND_UVERBS_ABI_VERSION,
		.caps = RBOND_CAP_KERNEL_DATAPATH,
	};

	mutex_lock(&bond->lock);
	resp.num_rails = bond->num_rails;
	mutex_unlock(&bond->lock);

	if (udata && udata->outlen)
		return ib_copy_to_udata(udata, &resp,
					min(udata->outlen, sizeof(resp)));
	return 0;
}

static void rbond_dealloc_ucontext(struct ib_ucontext *ibuc)
{
}

/*
 * Nothing of a bond context is mapped into the process (the data path goes
 * through write commands), so there is nothing to zap: having the op lets
 * the core destroy a context's objects on unregistration instead of
 * waiting for the process to close its file.
 */
static void rbond_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

/* --- AH ----------------------------------------------------------------- */

/**
 * rbond_translate_ah_attr() - a bond address vector for a member port
 * @bond: the bond
 * @rail: the rail of the member port
 * @in: the bond's address vector
 * @out: the translated copy
 * @member_gid: the member's GID attribute, or NULL
 *
 * Translate an address vector of the bond (GID index in the bond's table)
 * to one of @rail's member port.  On success *member_gid holds a reference
 * (rdma_put_gid_attr) unless the AV has no GRH.
 * Locks: bond->lock held.
 * Return: 0, or -EINVAL (RoCE without GRH, no source GID, or the GID is not
 * on @rail).
 */
int rbond_translate_ah_attr(struct rbond_dev *bond, unsigned int rail,
			    const struct rdma_ah_attr *in,
			    struct rdma_ah_attr *out,
			    const struct ib_gid_attr **member_gid)
{
	const struct ib_gid_attr *sgid = in->grh.sgid_attr;
	const struct ib_gid_attr *mgid;
	struct rbond_rail *r = &bond->rails[rail];

	*member_gid = NULL;
	*out = *in;
	out->port_num = r->port;
	if (!(in->ah_flags & IB_AH_GRH))
		return in->type == RDMA_AH_ATTR_TYPE_ROCE ? -EINVAL : 0;
	if (!sgid)
		return -EINVAL;

	mgid = rdma_find_gid_by_port(r->ibdev, &sgid->gid, sgid->gid_type,
				     r->port, NULL);
	if (IS_ERR(mgid)) {
		ibdev_dbg(&bond->ibdev, "GID index %u not on rail %u\n",
			  in->grh.sgid_index, rail);
		return -EINVAL;
	}
	out->grh.sgid_attr = mgid;
	out->grh.sgid_index = mgid->index;
	*member_gid = mgid;
	return 0;
}

static void rbond_ah_put_members(struct ib_ah **m, u32 flags)
{
	unsigned int i;

	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (m[i])
			rdma_destroy_ah(m[i], flags);
}

/*
 * An AH serves UD QPs: a member AH on every rail the address vector's
 * source GID is on (the primary's GIDs are the bond's, so at least the
 * primary while it is the one the GID came from).  Member AHs are created
 * here, in process context: a caller that cannot sleep gets EOPNOTSUPP
 * (no kernel consumer of a RoCE bond creates AHs atomically: the bond has
 * no GSI QP).
 */
static int rbond_create_ah(struct ib_ah *ibah,
			   struct rdma_ah_init_attr *init_attr,
			   struct ib_udata *udata)
{
	struct rbond_dev *bond = to_rbond_dev(ibah->device);
	struct rdma_ah_attr *attr = init_attr->ah_attr;
	struct rbond_pd *pd = to_rbond_pd(ibah->pd);
	struct ib_ah *m[RBOND_MAX_RAILS] = {};
	struct rbond_ah *ah = to_rbond_ah(ibah);
	const struct ib_gid_attr *mgid;
	struct rdma_ah_attr mattr;
	unsigned int i, n = 0;
	int ret = -EINVAL;

	if (attr->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(attr->ah_flags & IB_AH_GRH) || !attr->grh.sgid_attr)
		return -EINVAL;
	if (!(init_attr->flags & RDMA_CREATE_AH_SLEEPABLE))
		return -EOPNOTSUPP;
	ah->attr = *attr;
	ah->attr.grh.sgid_attr = NULL;	/* the core holds the reference */
	spin_lock_init(&ah->lock);

	mutex_lock(&bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct ib_ah *mah;

		if (!rbond_rail_present(bond, i) || !pd->member[i])
			continue;
		if (rbond_translate_ah_attr(bond, i, attr, &mattr, &mgid))
			continue;	/* the GID is not on this rail */
		mah = rdma_create_ah(pd->member[i], &mattr,
				     RDMA_CREATE_AH_SLEEPABLE);
		if (mgid)
			rdma_put_gid_attr(mgid);
		if (IS_ERR(mah)) {
			ret = PTR_ERR(mah);
			ibdev_dbg(&bond->ibdev, "rail %u: member AH: %d\n", i,
				  ret);
			continue;
		}
		m[i] = mah;
		n++;
	}
	if (!n) {
		mutex_unlock(&bond->lock);
		return ret;
	}
	memcpy(ah->member, m, sizeof(m));
	spin_lock_irq(&bond->ah_lock);
	list_add_tail(&ah->list, &bond->ahs);
	spin_unlock_irq(&bond->ah_lock);
	mutex_unlock(&bond->lock);
	return 0;
}

static int rbond_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	*attr = to_rbond_ah(ibah)->attr;
	return 0;
}

static int rbond_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct rbond_dev *bond = to_rbond_dev(ibah->device);
	struct rbond_ah *ah = to_rbond_ah(ibah);
	struct ib_ah *m[RBOND_MAX_RAILS];
	unsigned long irqflags;

	spin_lock_irqsave(&bond->ah_lock, irqflags);
	list_del(&ah->list);
	spin_lock(&ah->lock);
	memcpy(m, ah->member, sizeof(m));
	memset(ah->member, 0, sizeof(ah->member));
	spin_unlock(&ah->lock);
	spin_unlock_irqrestore(&bond->ah_lock, irqflags);
	rbond_ah_put_members(m, flags);
	return 0;
}

/**
 * rbond_ah_remove_rail() - destroy every AH's member AH on @rail
 * @bond: the bond
 * @rail: the rail going away
 *
 * Locks: bond->lock held (before the member PDs go).
 */
void rbond_ah_remove_rail(struct rbond_dev *bond, unsigned int rail)
{
	struct rbond_ah *ah;
	struct ib_ah *m;

	lockdep_assert_held(&bond->lock);
	do {
		m = NULL;
		spin_lock_irq(&bond->ah_lock);
		list_for_each_entry(ah, &bond->ahs, list) {
			spin_lock(&ah->lock);
			m = ah->member[rail];
			ah->member[rail] = NULL;
			spin_unlock(&ah->lock);
			if (m)
				break;
		}
		spin_unlock_irq(&bond->ah_lock);
		if (m)
			rdma_destroy_ah(m, RDMA_DESTROY_AH_SLEEPABLE);
	} while (m);
}

/* --- sysfs group "bond" ------------------------------------------------- */

static struct rbond_dev *rbond_from_kdev(struct device *device)
{
	return to_rbond_dev(rdma_device_to_ibdev(device));
}

static ssize_t abi_version_show(struct device *device,
				struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n", RBOND_UVERBS_ABI_VERSION);
}
static DEVICE_ATTR_RO(abi_version);

static ssize_t num_rails_show(struct device *device,
			      struct device_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(rbond_from_kdev(device)->num_rails));
}
static DEVICE_ATTR_RO(num_rails);

static ssize_t primary_show(struct device *device,
			    struct device_attribute *attr, char *buf)
{
	struct rbond_dev *bond = rbond_from_kdev(device);
	ssize_t len;

	mutex_lock(&bond->lock);
	if (bond->num_rails)
		len = sysfs_emit(buf, "%u\n", bond->primary);
	else
		len = sysfs_emit(buf, "none\n");
	mutex_unlock(&bond->lock);
	return len;
}
static DEVICE_ATTR_RO(primary);

/* The bond's rails in index order, one line each from @emit. */
static ssize_t rbond_rails_show(struct device *device, char *buf,
				ssize_t (*emit)(struct rbond_rail *rail,
						unsigned int i, char *buf,
						ssize_t len))
{
	struct rbond_dev *bond = rbond_from_kdev(device);
	ssize_t len = 0;
	unsigned int i;

	mutex_lock(&bond->lock);
	for (i = rbond_next_rail(bond, 0); i < RBOND_MAX_RAILS;
	     i = rbond_next_rail(bond, i + 1))
		len = emit(&bond->rails[i], i, buf, len);
	mutex_unlock(&bond->lock);
	return len;
}

/*
 * "index ibdev netdev state", and why it is down - or, up, which peer
 * sends no heartbeat on it.
 */
static ssize_t rbond_rail_line(struct rbond_rail *rail, unsigned int i,
			       char *buf, ssize_t len)
{
	u8 why = READ_ONCE(rail->down_reason);
	/* a silence noted before heartbeats were turned off stands no more */
	__be32 silent = rbond_ctrl_hb_on() ? READ_ONCE(rail->silent_peer) : 0;

	len += sysfs_emit_at(buf, len, "%u %s %s %s", i,
			     dev_name(&rail->ibdev->dev),
			     netdev_name(rail->ndev),
			     READ_ONCE(rail->active) ? "active" : "down");
	if (!READ_ONCE(rail->active) && why != RBOND_FAIL_NONE)
		len += sysfs_emit_at(buf, len, " (%s)",
				     rbond_fail_reason_name(why));
	else if (READ_ONCE(rail->active) && silent)
		len += sysfs_emit_at(buf, len, " (%s from %pI4)",
				     rbond_fail_reason_name(RBOND_FAIL_SILENT),
				     &silent);
	return len + sysfs_emit_at(buf, len, "\n");
}

static ssize_t rails_show(struct device *device,
			  struct device_attribute *attr, char *buf)
{
	return rbond_rails_show(device, buf, rbond_rail_line);
}
static DEVICE_ATTR_RO(rails);

/*
 * "index kbit/s", the rate the adaptive policy has measured for the rail
 * (rbond_sched.c; 0: not measured yet).
 */
static ssize_t rbond_rail_rate_line(struct rbond_rail *rail, unsigned int i,
				    char *buf, ssize_t len)
{
	return len + sysfs_emit_at(buf, len, "%u %llu\n", i,
				   rbond_rate_kbps(READ_ONCE(rail->rate)));
}

static ssize_t rail_rates_show(struct device *device,
			       struct device_attribute *attr, char *buf)
{
	return rbond_rails_show(device, buf, rbond_rail_rate_line);
}
static DEVICE_ATTR_RO(rail_rates);

static struct attribute *rbond_attrs[] = {
	&dev_attr_abi_version.attr,
	&dev_attr_num_rails.attr,
	&dev_attr_primary.attr,
	&dev_attr_rails.attr,
	&dev_attr_rail_rates.attr,
	&rbond_opt_attrs[RBOND_OPT_POLICY].attr,
	&rbond_opt_attrs[RBOND_OPT_ORDERING].attr,
	&rbond_opt_attrs[RBOND_OPT_STRIPE_THRESHOLD].attr,
	&rbond_opt_attrs[RBOND_OPT_RAIL_WINDOW].attr,
	&rbond_opt_attrs[RBOND_OPT_STALL_MS].attr,
	&rbond_opt_attrs[RBOND_OPT_SILENT_MS].attr,
	NULL
};

static const struct attribute_group rbond_attr_group = {
	.name = RBOND_SYSFS_GROUP,
	.attrs = rbond_attrs,
};

/* --- hardware counters: RBOND_NR_RAIL_STATS per rail slot ----------------- */

/* Index: rail * RBOND_NR_RAIL_STATS + enum rbond_rail_stat. */
static const struct rdma_stat_desc rbond_stat_descs[] = {
	{ .name = "rail0_tx_wqes" },
	{ .name = "rail0_tx_bytes" },
	{ .name = "rail0_rx_wqes" },
	{ .name = "rail0_rx_bytes" },
	{ .name = "rail0_completions" },
	{ .name = "rail0_errors" },
	{ .name = "rail0_failovers" },
	{ .name = "rail0_replayed_wqes" },
	{ .name = "rail0_replayed_bytes" },
	{ .name = "rail0_failover_us" },
	{ .name = "rail0_parked" },
	{ .name = "rail0_link_downs" },
	{ .name = "rail0_link_ups" },
	{ .name = "rail1_tx_wqes" },
	{ .name = "rail1_tx_bytes" },
	{ .name = "rail1_rx_wqes" },
	{ .name = "rail1_rx_bytes" },
	{ .name = "rail1_completions" },
	{ .name = "rail1_errors" },
	{ .name = "rail1_failovers" },
	{ .name = "rail1_replayed_wqes" },
	{ .name = "rail1_replayed_bytes" },
	{ .name = "rail1_failover_us" },
	{ .name = "rail1_parked" },
	{ .name = "rail1_link_downs" },
	{ .name = "rail1_link_ups" },
	{ .name = "rail2_tx_wqes" },
	{ .name = "rail2_tx_bytes" },
	{ .name = "rail2_rx_wqes" },
	{ .name = "rail2_rx_bytes" },
	{ .name = "rail2_completions" },
	{ .name = "rail2_errors" },
	{ .name = "rail2_failovers" },
	{ .name = "rail2_replayed_wqes" },
	{ .name = "rail2_replayed_bytes" },
	{ .name = "rail2_failover_us" },
	{ .name = "rail2_parked" },
	{ .name = "rail2_link_downs" },
	{ .name = "rail2_link_ups" },
	{ .name = "rail3_tx_wqes" },
	{ .name = "rail3_tx_bytes" },
	{ .name = "rail3_rx_wqes" },
	{ .name = "rail3_rx_bytes" },
	{ .name = "rail3_completions" },
	{ .name = "rail3_errors" },
	{ .name = "rail3_failovers" },
	{ .name = "rail3_replayed_wqes" },
	{ .name = "rail3_replayed_bytes" },
	{ .name = "rail3_failover_us" },
	{ .name = "rail3_parked" },
	{ .name = "rail3_link_downs" },
	{ .name = "rail3_link_ups" },
};

static_assert(ARRAY_SIZE(rbond_stat_descs) ==
	      RBOND_MAX_RAILS * RBOND_NR_RAIL_STATS);

static struct rdma_hw_stats *rbond_alloc_hw_port_stats(struct ib_device *ibdev,
						       u32 port)
{
	return rdma_alloc_hw_stats_struct(rbond_stat_descs,
					  ARRAY_SIZE(rbond_stat_descs),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int rbond_get_hw_stats(struct ib_device *ibdev,
			      struct rdma_hw_stats *stats, u32 port, int index)
{
	struct rbond_dev *bond = to_rbond_dev(ibdev);
	unsigned int r, s;

	if (!port || stats->num_counters != ARRAY_SIZE(rbond_stat_descs))
		return -EINVAL;
	for (r = 0; r < RBOND_MAX_RAILS; r++)
		for (s = 0; s < RBOND_NR_RAIL_STATS; s++)
			stats->value[r * RBOND_NR_RAIL_STATS + s] =
				atomic64_read(&bond->rails[r].stats[s]);
	return stats->num_counters;
}

/* --- ops and registration ----------------------------------------------- */

static const struct ib_device_ops rbond_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = RBOND_UVERBS_ABI_VERSION,

	.alloc_hw_port_stats = rbond_alloc_hw_port_stats,
	.alloc_pd = rbond_alloc_pd,
	.alloc_ucontext = rbond_alloc_ucontext,
	.create_ah = rbond_create_ah,
	.create_cq = rbond_create_cq,
	.create_qp = rbond_create_qp,
	.create_srq = rbond_create_srq,
	.create_user_ah = rbond_create_ah,
	.dealloc_driver = rbond_dealloc_driver,
	.dealloc_pd = rbond_dealloc_pd,
	.dealloc_ucontext = rbond_dealloc_ucontext,
	.dereg_mr = rbond_dereg_mr,
	.device_group = &rbond_attr_group,
	.destroy_ah = rbond_destroy_ah,
	.destroy_cq = rbond_destroy_cq,
	.destroy_qp = rbond_destroy_qp,
	.destroy_srq = rbond_destroy_srq,
	.disassociate_ucontext = rbond_disassociate_ucontext,
	.fill_res_qp_entry = rbond_fill_res_qp_entry,
	.get_dev_fw_str = rbond_get_dev_fw_str,
	.get_dma_mr = rbond_get_dma_mr,
	.get_hw_stats = rbond_get_hw_stats,
	.get_link_layer = rbond_get_link_layer,
	.get_port_immutable = rbond_get_port_immutable,
	.modify_qp = rbond_modify_qp,
	.modify_srq = rbond_modify_srq,
	.poll_cq = rbond_poll_cq,
	.post_recv = rbond_post_recv,
	.post_send = rbond_post_send,
	.post_srq_recv = rbond_post_srq_recv,
	.query_ah = rbond_query_ah,
	.query_device = rbond_query_device,
	.query_pkey = rbond_query_pkey,
	.query_port = rbond_query_port,
	.query_qp = rbond_query_qp,
	.query_srq = rbond_query_srq,
	.reg_user_mr = rbond_reg_user_mr,
	.req_notify_cq = rbond_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, rbond_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, rbond_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, rbond_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, rbond_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, rbond_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, rbond_ucontext, ibuc),
};

/**
 * rbond_dev_alloc() - a new bond device, not registered
 *
 * Its lists, locks and device ops are set up; it has no rail yet.
 * Context: process context, may sleep.
 * Return: the bond, or NULL without memory.
 */
struct rbond_dev *rbond_dev_alloc(void)
{
	struct rbond_dev *bond;
	unsigned int i;

	bond = ib_alloc_device(rbond_dev, ibdev);
	if (!bond)
		return NULL;
	INIT_LIST_HEAD(&bond->list);
	mutex_init(&bond->lock);
	spin_lock_init(&bond->state_lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		spin_lock_init(&bond->rails[i].rate_lock);
	INIT_LIST_HEAD(&bond->pds);
	INIT_LIST_HEAD(&bond->mrs);
	INIT_LIST_HEAD(&bond->cqs);
	INIT_LIST_HEAD(&bond->qps);
	INIT_LIST_HEAD(&bond->ahs);
	spin_lock_init(&bond->ah_lock);
	xa_init_flags(&bond->qp_xa, XA_FLAGS_ALLOC1);
	xa_init_flags(&bond->srq_xa, XA_FLAGS_ALLOC1);
	bond->gid_tbl_len = RBOND_GID_TBL_LEN;

	bond->ibdev.node_type = RDMA_NODE_IB_CA;
	bond->ibdev.phys_port_cnt = 1;
	bond->ibdev.num_comp_vectors = 1;
	bond->ibdev.local_dma_lkey = 0;
	strscpy(bond->ibdev.node_desc, "rdma_bond",
		sizeof(bond->ibdev.node_desc));
	bond->ibdev.uverbs_cmd_mask |=
		BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
		BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
		BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
		BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |
		BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	ib_set_device_ops(&bond->ibdev, &rbond_dev_ops);
	return bond;
}

/**
 * rbond_dev_register() - register the bond with the RDMA core
 * @bond: the bond, with its primary rail and its limits set
 * @name: the device name
 *
 * The GID table is sized and the port state taken from the primary rail.
 * Locks: rbond_mutex held (bonds are registered under it).
 * Context: process context, sleeps.
 * Return: 0, or the error of ib_register_device().
 */
int rbond_dev_register(struct rbond_dev *bond, const char *name)
{
	struct ib_port_attr pattr;
	struct rbond_rail *rail = &bond->rails[bond->primary];

	if (!ib_query_port(rail->ibdev, rail->port, &pattr) &&
	    pattr.gid_tbl_len)
		bond->gid_tbl_len = pattr.gid_tbl_len;
	bond->port_active = rail->active;
	return ib_register_device(&bond->ibdev, name, NULL);
}
