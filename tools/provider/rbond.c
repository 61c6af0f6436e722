// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond userspace provider (librbond-rdmav34.so).
 *
 * The bond device's data path runs in the kernel, so every verb here is the
 * plain uverbs command: POST_SEND, POST_RECV, POLL_CQ and REQ_NOTIFY_CQ go
 * through the write() interface (ibv_cmd_post_send & co.), the way
 * ipathverbs/hfi1verbs do.  No driver-specific data is exchanged except the
 * ALLOC_UCONTEXT response (include/uapi/rdma/rdma_bond-abi.h).
 *
 * Verbs not set in rbond_ctx_ops stay on libibverbs' dummies, which fail
 * with EOPNOTSUPP.  The library prints nothing itself: errors go through
 * libibverbs' logging (__verbs_log, VERBS_LOG_LEVEL).
 *
 * See Documentation/provider.rst.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbond.h"

#define rbond_log(vctx, level, fmt, ...)                                     \
	do {                                                                 \
		int __saved = errno;                                         \
		__verbs_log(vctx, level, "rbond: %s: %s: " fmt "\n",         \
			    (vctx)->context.device->name, __func__,          \
			    ##__VA_ARGS__);                                  \
		errno = __saved;                                             \
	} while (0)

#define rbond_err(vctx, fmt, ...) \
	rbond_log(vctx, RBOND_VERBS_LOG_ERR, fmt, ##__VA_ARGS__)
#define rbond_dbg(vctx, fmt, ...) \
	rbond_log(vctx, RBOND_VERBS_LOG_DEBUG, fmt, ##__VA_ARGS__)

static const struct verbs_context_ops rbond_ctx_ops;

/* ------------------------------------------------------------------------
 * Device
 */

static int rbond_read_sysfs_abi(struct verbs_sysfs_dev *sysfs_dev,
				unsigned int *abi)
{
	char buf[24];
	unsigned long v;
	char *end;
	int len;

	len = ibv_read_ibdev_sysfs_file(buf, sizeof(buf), sysfs_dev, "%s",
					RBOND_SYSFS_ABI_FILE);
	if (len <= 0)
		return -1;
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v > UINT32_MAX)
		return -1;
	*abi = v;
	return 0;
}

/*
 * Called by libibverbs for every RDMA device not yet bound to a provider
 * (the table holds only its sentinel, so it never matches by itself).  A device is a bond
 * iff <ibdev>/bond/abi_version exists; this holds whatever the device is
 * called (rdma dev set NAME name X) and never for rxe, siw or hardware.
 * A bond of another ABI generation is not ours: leave it unbound.
 */
static bool rbond_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	unsigned int abi;

	if (rbond_read_sysfs_abi(sysfs_dev, &abi))
		return false;
	return abi == RBOND_UVERBS_ABI_VERSION;
}

static struct verbs_device *rbond_alloc_device(struct verbs_sysfs_dev *sdev)
{
	struct rbond_device *dev;

	(void)sdev;	/* matched by rbond_match_device() already */
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void rbond_uninit_device(struct verbs_device *vdev)
{
	free((struct rbond_device *)vdev);
}

/* ------------------------------------------------------------------------
 * Context
 */

/*
 * verbs_set_ops() copies our ops into the library's own structures by
 * member name.  If this provider's idea of struct verbs_context_ops ever
 * disagreed with the installed library's, pointers would land in the wrong
 * slots: check the ones the public struct ibv_context_ops / verbs_context
 * expose and refuse the context on any mismatch.
 */
static bool rbond_check_ops_layout(struct verbs_context *vctx)
{
	const struct ibv_context_ops *o = &vctx->context.ops;
	const struct verbs_context_ops *r = &rbond_ctx_ops;

#define SAME(a, b) ((void *)(uintptr_t)(a) == (void *)(uintptr_t)(b))
	return SAME(o->poll_cq, r->poll_cq) &&
	       SAME(o->req_notify_cq, r->req_notify_cq) &&
	       SAME(o->post_send, r->post_send) &&
	       SAME(o->post_recv, r->post_recv) &&
	       SAME(o->post_srq_recv, r->post_srq_recv) &&
	       SAME(o->_compat_alloc_pd, r->alloc_pd) &&
	       SAME(o->_compat_dealloc_pd, r->dealloc_pd) &&
	       SAME(o->_compat_reg_mr, r->reg_mr) &&
	       SAME(o->_compat_dereg_mr, r->dereg_mr) &&
	       SAME(o->_compat_create_cq, r->create_cq) &&
	       SAME(o->_compat_destroy_cq, r->destroy_cq) &&
	       SAME(o->_compat_create_qp, r->create_qp) &&
	       SAME(o->_compat_query_qp, r->query_qp) &&
	       SAME(o->_compat_modify_qp, r->modify_qp) &&
	       SAME(o->_compat_destroy_qp, r->destroy_qp) &&
	       SAME(o->_compat_create_ah, r->create_ah) &&
	       SAME(o->_compat_destroy_ah, r->destroy_ah) &&
	       SAME(vctx->query_device_ex, r->query_device_ex) &&
	       SAME(vctx->create_qp_ex, r->create_qp_ex) &&
	       /* never set by us: must still be libibverbs' dummy */
	       !SAME(o->alloc_mw, NULL);
#undef SAME
}

static struct verbs_context *rbond_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd,
						 void *private_data)
{
	struct rbond_get_context_resp resp;
	struct rbond_cmd_get_context cmd;
	struct rbond_context *ctx;
	int ret;

	(void)private_data;

	ctx = _verbs_init_and_alloc_context(
		ibdev, cmd_fd, sizeof(*ctx),
		(struct verbs_context *)(uintptr_t)offsetof(struct rbond_context,
							    vctx),
		RBOND_DRIVER_ID);
	if (!ctx)
		return NULL;

	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (ret) {
		rbond_err(&ctx->vctx, "ALLOC_UCONTEXT failed: %s",
			  strerror(ret));
		errno = ret;
		goto err;
	}

	if (resp.drv.abi_version != RBOND_UVERBS_ABI_VERSION ||
	    !(resp.drv.caps & RBOND_CAP_KERNEL_DATAPATH)) {
		rbond_err(&ctx->vctx,
			  "kernel module speaks rdma_bond ABI %u caps 0x%llx, provider needs ABI %u with kernel data path",
			  resp.drv.abi_version,
			  (unsigned long long)resp.drv.caps,
			  RBOND_UVERBS_ABI_VERSION);
		errno = EPROTO;
		goto err;
	}
	ctx->kernel_abi = resp.drv.abi_version;
	ctx->num_rails = resp.drv.num_rails;
	ctx->caps = resp.drv.caps;

	verbs_set_ops(&ctx->vctx, &rbond_ctx_ops);
	if (!rbond_check_ops_layout(&ctx->vctx)) {
		rbond_err(&ctx->vctx,
			  "struct verbs_context_ops of the installed libibverbs differs from the one this provider was built for (IBVERBS_PRIVATE_34, rdma-core 42..46)");
		errno = EPROTO;
		goto err;
	}
	rbond_dbg(&ctx->vctx, "context: ABI %u, %u rails, caps 0x%llx",
		  ctx->kernel_abi, ctx->num_rails,
		  (unsigned long long)ctx->caps);
	return &ctx->vctx;

err:
	ret = errno;
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	errno = ret;
	return NULL;
}

static void rbond_free_context(struct ibv_context *ibctx)
{
	struct rbond_context *ctx = to_rctx(ibctx);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

/* ------------------------------------------------------------------------
 * Device and port queries
 */

static int rbond_query_device_ex(struct ibv_context *context,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr,
				 size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int rbond_query_port(struct ibv_context *context, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct rbond_cmd_query_port cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_query_port(context, port, attr, &cmd, sizeof(cmd));
}

/* ------------------------------------------------------------------------
 * PD, MR
 */

static struct ibv_pd *rbond_alloc_pd(struct ibv_context *context)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct rbond_cmd_alloc_pd cmd;
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	ret = ibv_cmd_alloc_pd(context, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

static int rbond_dealloc_pd(struct ibv_pd *pd)
{
	int ret = ibv_cmd_dealloc_pd(pd);

	if (!ret)
		free(pd);
	return ret;
}

/*
 * access is passed to the kernel unchanged, IBV_ACCESS_RELAXED_ORDERING
 * included (libibverbs keeps the optional-access bits when the kernel
 * reports IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS): the module uses it to
 * decide whether WRITEs/READs targeting this MR may be striped.
 */
static struct ibv_mr *rbond_reg_mr(struct ibv_pd *pd, void *addr,
				   size_t length, uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct rbond_cmd_reg_mr cmd;
	struct rbond_mr *mr;
	int ret;

	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, &mr->vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	return &mr->vmr.ibv_mr;
}

static int rbond_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (!ret)
		free((struct rbond_mr *)vmr);
	return ret;
}

/* ------------------------------------------------------------------------
 * CQ: a software queue in the kernel; poll and arm are write commands.
 */

static struct ibv_cq *rbond_create_cq(struct ibv_context *context, int cqe,
				      struct ibv_comp_channel *channel,
				      int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp;
	struct rbond_cmd_create_cq cmd;
	struct rbond_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector, &cq->cq,
				&cmd, sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	return &cq->cq;
}

static int rbond_destroy_cq(struct ibv_cq *ibcq)
{
	int ret = ibv_cmd_destroy_cq(ibcq);

	if (!ret)
		free((struct rbond_cq *)ibcq);
	return ret;
}

static int rbond_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc)
{
	if (ne < 0) {
		errno = EINVAL;
		return -1;
	}
	if (ne == 0)
		return 0;
	return ibv_cmd_poll_cq(cq, ne, wc);
}

static int rbond_req_notify_cq(struct ibv_cq *cq, int solicited_only)
{
	return ibv_cmd_req_notify_cq(cq, solicited_only);
}

/* ------------------------------------------------------------------------
 * QP: RC and UD.  Other types fail with EOPNOTSUPP before reaching the kernel.
 */

static bool rbond_qp_type_supported(enum ibv_qp_type t)
{
	return t == IBV_QPT_RC || t == IBV_QPT_UD;
}

static struct ibv_qp *rbond_create_qp(struct ibv_pd *pd,
				      struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct rbond_cmd_create_qp cmd;
	struct rbond_qp *qp;
	int ret;

	if (!rbond_qp_type_supported(attr->qp_type)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd),
				&resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

/*
 * ibv_create_qp_ex() only comes here when comp_mask asks for more than a
 * PD.  Everything beyond the PD (new post-send API, create flags, XRC, RSS,
 * TSO) is a feature of a user-mapped send queue that this device does not
 * have.
 */
static struct ibv_qp *rbond_create_qp_ex(struct ibv_context *context,
					 struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct rbond_cmd_create_qp cmd;
	struct rbond_qp *qp;
	int ret;

	if (attr->comp_mask != IBV_QP_INIT_ATTR_PD ||
	    !rbond_qp_type_supported(attr->qp_type)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	ret = ibv_cmd_create_qp_ex(context, &qp->vqp, attr, &cmd, sizeof(cmd),
				   &resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

static int rbond_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			   int attr_mask)
{
	struct rbond_cmd_modify_qp cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int rbond_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			  int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct rbond_cmd_query_qp cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

static int rbond_destroy_qp(struct ibv_qp *qp)
{
	int ret = ibv_cmd_destroy_qp(qp);

	if (!ret)
		free((struct rbond_qp *)qp);
	return ret;
}

static int rbond_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			   struct ibv_send_wr **bad_wr)
{
	return ibv_cmd_post_send(qp, wr, bad_wr);
}

static int rbond_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	return ibv_cmd_post_recv(qp, wr, bad_wr);
}

/* ------------------------------------------------------------------------
 * SRQ (the kernel keeps it: one member SRQ on the bond's home rail)
 */

static struct ibv_srq *rbond_create_srq(struct ibv_pd *pd,
					struct ibv_srq_init_attr *attr)
{
	struct ib_uverbs_create_srq_resp resp;
	struct rbond_cmd_create_srq cmd;
	struct ibv_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	memset(&cmd, 0, sizeof(cmd));
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_srq(pd, srq, attr, &cmd, sizeof(cmd), &resp,
				 sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return srq;
}

static int rbond_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			    int attr_mask)
{
	struct rbond_cmd_modify_srq cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int rbond_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct rbond_cmd_query_srq cmd;

	memset(&cmd, 0, sizeof(cmd));
	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int rbond_destroy_srq(struct ibv_srq *srq)
{
	int ret = ibv_cmd_destroy_srq(srq);

	if (!ret)
		free(srq);
	return ret;
}

static int rbond_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			       struct ibv_recv_wr **bad_wr)
{
	return ibv_cmd_post_srq_recv(srq, wr, bad_wr);
}

/* ------------------------------------------------------------------------
 * AH (the kernel resolves the RoCE destination MAC in create_user_ah)
 */

static struct ibv_ah *rbond_create_ah(struct ibv_pd *pd,
				      struct ibv_ah_attr *attr)
{
	struct ib_uverbs_create_ah_resp resp;
	struct rbond_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	memset(&resp, 0, sizeof(resp));
	ret = ibv_cmd_create_ah(pd, &ah->ah, attr, &resp, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	return &ah->ah;
}

static int rbond_destroy_ah(struct ibv_ah *ah)
{
	int ret = ibv_cmd_destroy_ah(ah);

	if (!ret)
		free((struct rbond_ah *)ah);
	return ret;
}

/* ------------------------------------------------------------------------
 * Registration
 */

static const struct verbs_context_ops rbond_ctx_ops = {
	.free_context = rbond_free_context,
	.query_device_ex = rbond_query_device_ex,
	.query_port = rbond_query_port,

	.alloc_pd = rbond_alloc_pd,
	.dealloc_pd = rbond_dealloc_pd,
	.reg_mr = rbond_reg_mr,
	.dereg_mr = rbond_dereg_mr,

	.create_cq = rbond_create_cq,
	.destroy_cq = rbond_destroy_cq,
	.poll_cq = rbond_poll_cq,
	.req_notify_cq = rbond_req_notify_cq,

	.create_qp = rbond_create_qp,
	.create_qp_ex = rbond_create_qp_ex,
	.modify_qp = rbond_modify_qp,
	.query_qp = rbond_query_qp,
	.destroy_qp = rbond_destroy_qp,
	.post_send = rbond_post_send,
	.post_recv = rbond_post_recv,

	.create_srq = rbond_create_srq,
	.modify_srq = rbond_modify_srq,
	.query_srq = rbond_query_srq,
	.destroy_srq = rbond_destroy_srq,
	.post_srq_recv = rbond_post_srq_recv,

	.create_ah = rbond_create_ah,
	.destroy_ah = rbond_destroy_ah,
};

/*
 * Nothing in the table: no driver id (the kernel device has
 * RDMA_DRIVER_UNKNOWN), no name (a bond may be called anything), no modalias
 * (a virtual device has none).  libibverbs then calls rbond_match_device().
 */
static const struct verbs_match_ent rbond_match_table[] = {
	{ .kind = 0 },	/* sentinel */
};

static const struct verbs_device_ops rbond_dev_ops = {
	.name = "rbond",
	.match_min_abi_version = RBOND_UVERBS_ABI_VERSION,
	.match_max_abi_version = RBOND_UVERBS_ABI_VERSION,
	.match_table = rbond_match_table,	/* sentinel only */
	.match_device = rbond_match_device,
	.alloc_device = rbond_alloc_device,
	.uninit_device = rbond_uninit_device,
	.alloc_context = rbond_alloc_context,
};

static __attribute__((constructor)) void rbond_register_driver(void)
{
	verbs_register_driver_34(&rbond_dev_ops);
}
