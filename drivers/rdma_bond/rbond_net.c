// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: rail addressing - a rail netdev's IPv4 address and which rail
 * the routing table sends a peer address through.  Used by the control
 * channel (listen and connect addresses) and the negotiation (pairing
 * local rails with the peer's).
 */
#include <linux/inetdevice.h>
#include <net/route.h>

#include "rbond.h"

/**
 * rbond_ndev_ipv4() - IPv4 address of a rail netdev
 * @ndev: the rail's netdev
 *
 * Any context (RCU).
 * Return: its first IPv4 address, or 0.
 */
__be32 rbond_ndev_ipv4(struct net_device *ndev)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	__be32 addr = 0;

	rcu_read_lock();
	in_dev = __in_dev_get_rcu(ndev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			addr = ifa->ifa_local;
			break;
		}
	}
	rcu_read_unlock();
	return addr;
}

/**
 * rbond_route_via() - does traffic from @saddr to @daddr leave through @ndev?
 * @ndev: a rail's netdev
 * @saddr: the source address
 * @daddr: the destination address
 *
 * By the routing table, or else if @daddr is on one of @ndev's subnets.
 * Return: true if it does.
 */
bool rbond_route_via(struct net_device *ndev, __be32 saddr, __be32 daddr)
{
	const struct in_ifaddr *ifa;
	struct in_device *in_dev;
	struct rtable *rt;
	bool via = false;

	rt = rbond_ip_route_output(&init_net, daddr, saddr, 0, 0);
	if (!IS_ERR(rt)) {
		via = rt->dst.dev == ndev;
		ip_rt_put(rt);
		if (via)
			return true;
	}
	/* Fallback: the peer address is on the rail's subnet. */
	rcu_read_lock();
	in_dev = __in_dev_get_rcu(ndev);
	if (in_dev) {
		in_dev_for_each_ifa_rcu(ifa, in_dev) {
			if (inet_ifa_match(daddr, ifa)) {
				via = true;
				break;
			}
		}
	}
	rcu_read_unlock();
	return via;
}
