/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR Linux-OpenIB) */
/*
 * rdma_bond: ABI shared by the kernel module and the userspace provider
 * (librbond-rdmav34.so).
 *
 * The data path of a bond device goes through the kernel (uverbs write
 * commands POST_SEND, POST_RECV, POLL_CQ, REQ_NOTIFY_CQ), so the provider
 * needs almost nothing from the module beyond the standard uverbs commands.
 * What it does need lives here, versioned by RBOND_UVERBS_ABI_VERSION
 * (ib_device_ops.uverbs_abi_ver; the provider's match_{min,max}_abi_version).
 */
#ifndef RDMA_BOND_ABI_USER_H
#define RDMA_BOND_ABI_USER_H

#include <linux/types.h>

#define RBOND_UVERBS_ABI_VERSION	1

/*
 * sysfs: every bond device has the attribute group "bond" under
 * /sys/class/infiniband/<ibdev>/bond/.  The provider binds to a device iff
 * <ibdev>/bond/abi_version exists and holds RBOND_UVERBS_ABI_VERSION, so a
 * renamed bond still binds and no other device ever does.
 */
#define RBOND_SYSFS_GROUP		"bond"
#define RBOND_SYSFS_ABI_FILE		"bond/abi_version"

/* Most rails one bond device aggregates. */
#define RBOND_MAX_RAILS			4

/* Response to ALLOC_UCONTEXT (udata outbuf); the provider may pass a
 * shorter buffer (older provider) - the module copies min(outlen, sizeof).
 */
struct rbond_alloc_ucontext_resp {
	__u32 abi_version;	/* RBOND_UVERBS_ABI_VERSION */
	__u32 num_rails;	/* rails at context creation */
	__aligned_u64 caps;	/* RBOND_CAP_* */
};

/* caps: the data path runs through the kernel (always set in ABI 1). */
#define RBOND_CAP_KERNEL_DATAPATH	(1ULL << 0)

#endif /* RDMA_BOND_ABI_USER_H */
