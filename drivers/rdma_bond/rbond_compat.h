/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: the only place that knows about kernel API differences.
 * HAVE_* come from compat-probe.sh (compile probes against KDIR).
 */
#ifndef RBOND_COMPAT_H
#define RBOND_COMPAT_H

#include <net/route.h>
#include <rdma/ib_verbs.h>
#include "rbond_compat_autoconf.h"

#ifdef HAVE_CREATE_CQ_ATTR_BUNDLE
#include <rdma/uverbs_ioctl.h>
#define RBOND_CREATE_CQ_LAST_ARG struct uverbs_attr_bundle *attrs
static inline struct ib_udata *
rbond_create_cq_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

#define RBOND_CREATE_CQ_UDATA() rbond_create_cq_udata(attrs)
int rbond_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct uverbs_attr_bundle *attrs);
#else
#define RBOND_CREATE_CQ_LAST_ARG struct ib_udata *udata
#define RBOND_CREATE_CQ_UDATA() (udata)
int rbond_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct ib_udata *udata);
#endif

/*
 * Held netdev of a member port, or NULL.  Drivers that do not call
 * ib_device_set_netdev() (mlx5 before 6.12) only answer through
 * ops.get_netdev; the caller falls back to the GID table.
 */
static inline struct net_device *rbond_member_netdev(struct ib_device *dev,
						     u32 port)
{
#ifdef HAVE_IB_DEVICE_GET_NETDEV
	return ib_device_get_netdev(dev, port);
#else
	if (dev->ops.get_netdev)
		return dev->ops.get_netdev(dev, port);
	return NULL;
#endif
}

/* Output route lookup; 6.10 added a scope argument (universe before). */
static inline struct rtable *rbond_ip_route_output(struct net *net,
						   __be32 daddr, __be32 saddr,
						   u8 tos, int oif)
{
#ifdef HAVE_IP_ROUTE_OUTPUT_SCOPE
	return ip_route_output(net, daddr, saddr, tos, oif, RT_SCOPE_UNIVERSE);
#else
	return ip_route_output(net, daddr, saddr, tos, oif);
#endif
}

#endif /* RBOND_COMPAT_H */
