/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond userspace provider: private types.
 */
#ifndef RBOND_PROVIDER_H
#define RBOND_PROVIDER_H

#include <stdint.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_bond-abi.h>

#include "verbs_private.h"

/* The kernel device registers with driver_id RDMA_DRIVER_UNKNOWN; the ioctl
 * path checks that the provider's context uses the same id.
 */
#define RBOND_DRIVER_ID 0 /* RDMA_DRIVER_UNKNOWN */

struct rbond_device {
	struct verbs_device vdev;
};

struct rbond_context {
	struct verbs_context vctx;
	uint32_t kernel_abi;	/* from ALLOC_UCONTEXT response */
	uint32_t num_rails;
	uint64_t caps;
};

/* ALLOC_UCONTEXT response as the kernel writes it: core part, then ours. */
struct rbond_get_context_resp {
	struct ib_uverbs_get_context_resp ibv_resp;
	struct rbond_alloc_ucontext_resp drv;
};
_Static_assert(sizeof(struct rbond_get_context_resp) ==
	       sizeof(struct ib_uverbs_get_context_resp) +
	       sizeof(struct rbond_alloc_ucontext_resp),
	       "padding between core and driver part of the ucontext resp");

struct rbond_mr {
	struct verbs_mr vmr;
};

struct rbond_cq {
	struct ibv_cq cq;
};

struct rbond_qp {
	struct verbs_qp vqp;
};

struct rbond_ah {
	struct ibv_ah ah;
};

static inline struct rbond_context *to_rctx(struct ibv_context *ctx)
{
	return (struct rbond_context *)((char *)ctx -
		offsetof(struct rbond_context, vctx.context));
}

#endif /* RBOND_PROVIDER_H */
