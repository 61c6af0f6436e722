// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the device's tunables, one table for every front end.
 *
 * As drivers/net/bonding/bond_options.c: each option is described once -
 * its name, the u32 of struct rbond_dev it sets, its values (a choice of
 * names, or a number) and its default - and both front ends go through
 * the table: the module parameters (the defaults of bonds created later,
 * refused at load if invalid) and the sysfs attributes of the "bond"
 * group (one bond, at run time).
 */
#include <linux/module.h>

#include "rbond.h"

struct rbond_option {
	const char *name;
	size_t off;			/* its u32 in struct rbond_dev */
	/* the i-th name of a choice, or NULL: an unsigned number */
	const char *(*choice)(unsigned int i);
	unsigned int nr_choices;
	u32 max;			/* a number's largest (0: U32_MAX) */
	u32 def;			/* for bonds created from now on */
};

/* a time in ms: an hour at most (more would mean never; 0 says that) */
#define RBOND_OPT_MS_MAX	(3600U * MSEC_PER_SEC)

static struct rbond_option rbond_options[RBOND_NR_OPTS] = {
	[RBOND_OPT_POLICY] = {
		.name = "policy",
		.off = offsetof(struct rbond_dev, policy),
		.choice = rbond_policy_name,
		.nr_choices = RBOND_NR_POLICIES,
		.def = RBOND_POLICY_ADAPTIVE,
	},
	[RBOND_OPT_ORDERING] = {
		.name = "ordering",
		.off = offsetof(struct rbond_dev, ordering),
		.choice = rbond_ordering_name,
		.nr_choices = RBOND_NR_ORDERINGS,
		.def = RBOND_ORDER_RELAXED_MR,
	},
	[RBOND_OPT_STRIPE_THRESHOLD] = {
		.name = "stripe_threshold",
		.off = offsetof(struct rbond_dev, stripe_threshold),
		.def = 65536,
	},
	[RBOND_OPT_RAIL_WINDOW] = {
		.name = "rail_window",
		.off = offsetof(struct rbond_dev, rail_window),
		.def = 1048576,
	},
	[RBOND_OPT_STALL_MS] = {
		.name = "failover_stall_ms",
		.off = offsetof(struct rbond_dev, stall_ms),
		.max = RBOND_OPT_MS_MAX,
		.def = 300,
	},
	[RBOND_OPT_SILENT_MS] = {
		.name = "failover_silent_ms",
		.off = offsetof(struct rbond_dev, silent_ms),
		.max = RBOND_OPT_MS_MAX,
		.def = 0,	/* off until measured across the suite */
	},
};

static int rbond_opt_parse(const struct rbond_option *o, const char *buf,
			   u32 *v)
{
	unsigned int i;
	int ret;

	if (!o->choice) {
		ret = kstrtou32(buf, 0, v);
		if (!ret && o->max && *v > o->max)
			ret = -ERANGE;
		return ret;
	}
	for (i = 0; i < o->nr_choices; i++) {
		if (sysfs_streq(buf, o->choice(i))) {
			*v = i;
			return 0;
		}
	}
	return -EINVAL;
}

static int rbond_opt_show(const struct rbond_option *o, u32 v, char *buf)
{
	unsigned int i;
	int len = 0;

	if (!o->choice)
		return sysfs_emit(buf, "%u\n", v);
	/* like /sys/block/X/queue/scheduler: the current one in brackets */
	for (i = 0; i < o->nr_choices; i++)
		len += sysfs_emit_at(buf, len, i == v ? "[%s]%s" : "%s%s",
				     o->choice(i),
				     i == o->nr_choices - 1 ? "\n" : " ");
	return len;
}

static u32 *rbond_opt_field(struct rbond_dev *bond, enum rbond_opt_id id)
{
	return (u32 *)((char *)bond + rbond_options[id].off);
}

/**
 * rbond_opts_init() - a new bond's tunables: the current defaults
 * @bond: the bond, not registered yet
 */
void rbond_opts_init(struct rbond_dev *bond)
{
	unsigned int id;

	for (id = 0; id < RBOND_NR_OPTS; id++)
		*rbond_opt_field(bond, id) = READ_ONCE(rbond_options[id].def);
}

/* --- module parameters: the defaults ------------------------------------- */

static int rbond_param_set(const char *val, const struct kernel_param *kp)
{
	struct rbond_option *o = kp->arg;
	u32 v;
	int ret = rbond_opt_parse(o, val, &v);

	if (ret)
		return ret;
	WRITE_ONCE(o->def, v);
	return 0;
}

static int rbond_param_get(char *buf, const struct kernel_param *kp)
{
	const struct rbond_option *o = kp->arg;
	u32 v = READ_ONCE(o->def);

	if (o->choice)
		return sysfs_emit(buf, "%s\n", o->choice(v));
	return sysfs_emit(buf, "%u\n", v);
}

static const struct kernel_param_ops rbond_param_ops = {
	.set = rbond_param_set,
	.get = rbond_param_get,
};

module_param_cb(policy, &rbond_param_ops,
		&rbond_options[RBOND_OPT_POLICY], 0444);
MODULE_PARM_DESC(policy,
		 "Default scheduling policy: adaptive, round-robin, weighted, active-backup, qp-hash");
module_param_cb(ordering, &rbond_param_ops,
		&rbond_options[RBOND_OPT_ORDERING], 0444);
MODULE_PARM_DESC(ordering,
		 "Default ordering mode: strict, relaxed-mr (stripe only to IB_ACCESS_RELAXED_ORDERING MRs), relaxed");
module_param_cb(stripe_threshold, &rbond_param_ops,
		&rbond_options[RBOND_OPT_STRIPE_THRESHOLD], 0444);
MODULE_PARM_DESC(stripe_threshold,
		 "Default size in bytes above which one WQE may be split across rails");
module_param_cb(rail_window, &rbond_param_ops,
		&rbond_options[RBOND_OPT_RAIL_WINDOW], 0444);
MODULE_PARM_DESC(rail_window,
		 "Default bytes the adaptive policy keeps outstanding per rail, all multi-rail QPs together (0: no limit)");
module_param_cb(failover_stall_ms, &rbond_param_ops,
		&rbond_options[RBOND_OPT_STALL_MS], 0444);
MODULE_PARM_DESC(failover_stall_ms,
		 "Default time in ms an extra rail may make no progress with work outstanding before its QPs fail over (plus its queue's drain time; 0: never)");
module_param_cb(failover_silent_ms, &rbond_param_ops,
		&rbond_options[RBOND_OPT_SILENT_MS], 0444);
MODULE_PARM_DESC(failover_silent_ms,
		 "Default time in ms a rail may go without a heartbeat from a peer's module (sent every 100 ms) before its QPs with that peer fail over, the home rail's too (plus both ends' queue drain time, 1 s at most; 0: never, the default; 500 suggested)");

/* --- sysfs: one bond's tunables (group "bond") --------------------------- */

/* rbond_opt_attrs[] follows rbond_options[] */
static const struct rbond_option *rbond_opt_of(struct device_attribute *attr)
{
	return &rbond_options[attr - rbond_opt_attrs];
}

static ssize_t rbond_opt_attr_show(struct device *device,
				   struct device_attribute *attr, char *buf)
{
	const struct rbond_option *o = rbond_opt_of(attr);
	struct rbond_dev *bond = to_rbond_dev(rdma_device_to_ibdev(device));

	return rbond_opt_show(o, READ_ONCE(*rbond_opt_field(bond, o -
							   rbond_options)),
			      buf);
}

static ssize_t rbond_opt_attr_store(struct device *device,
				    struct device_attribute *attr,
				    const char *buf, size_t count)
{
	const struct rbond_option *o = rbond_opt_of(attr);
	struct rbond_dev *bond = to_rbond_dev(rdma_device_to_ibdev(device));
	u32 v;
	int ret = rbond_opt_parse(o, buf, &v);

	if (ret)
		return ret;
	WRITE_ONCE(*rbond_opt_field(bond, o - rbond_options), v);
	return count;
}

#define RBOND_OPT_ATTR(_id, _name)					\
	[_id] = __ATTR(_name, 0644, rbond_opt_attr_show, rbond_opt_attr_store)

struct device_attribute rbond_opt_attrs[RBOND_NR_OPTS] = {
	RBOND_OPT_ATTR(RBOND_OPT_POLICY, policy),
	RBOND_OPT_ATTR(RBOND_OPT_ORDERING, ordering),
	RBOND_OPT_ATTR(RBOND_OPT_STRIPE_THRESHOLD, stripe_threshold),
	RBOND_OPT_ATTR(RBOND_OPT_RAIL_WINDOW, rail_window),
	RBOND_OPT_ATTR(RBOND_OPT_STALL_MS, failover_stall_ms),
	RBOND_OPT_ATTR(RBOND_OPT_SILENT_MS, failover_silent_ms),
};
