/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond provider: the project's own declarations of the libibverbs
 * provider ABI IBVERBS_PRIVATE_34 (rdma-core v42..v46).
 *
 * Debian ships neither rdma-core's private headers (driver.h, kern-abi.h,
 * cmd_*.h) nor its source, so this header declares ONLY what the provider
 * uses, written from the documented interface of rdma-core v44.0
 * (libibverbs/driver.h, kern-abi.h) and checked against the installed
 * library at build time (Makefile target abi-check, see
 * Documentation/provider.rst) and at context creation (rbond.c,
 * rbond_check_ops_layout()).
 *
 * Layout rules: every struct below that libibverbs reads or writes must
 * have EXACTLY the layout of rdma-core's; they are pinned with
 * _Static_assert where the size follows from public headers.  Structs the
 * provider never touches are left incomplete.
 *
 * The private ABI is versioned by symbol: if rdma-core changes any of these
 * layouts it bumps IBVERBS_PRIVATE_<n> and verbs_register_driver_<n>, so
 * linking this provider against another ABI fails (undefined symbol
 * verbs_register_driver_34) instead of silently corrupting memory.
 */
#ifndef RBOND_VERBS_PRIVATE_H
#define RBOND_VERBS_PRIVATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>

#define RBOND_IBVERBS_PABI_VERSION 34

/* --- logging (exported as __verbs_log@IBVERBS_PRIVATE_34) ---------------- */
enum {
	RBOND_VERBS_LOG_NONE,
	RBOND_VERBS_LOG_ERR,
	RBOND_VERBS_LOG_WARN,
	RBOND_VERBS_LOG_INFO,
	RBOND_VERBS_LOG_DEBUG,
};

/* Prints only if the user asked for it (VERBS_LOG_LEVEL / VERBS_LOG_FILE). */
void __verbs_log(struct verbs_context *ctx, uint32_t level,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* --- objects shared with libibverbs -------------------------------------- */

/* ccan/list.h struct list_node: two pointers. */
struct rbond_list_node {
	struct rbond_list_node *next, *prev;
};

/* Device found in sysfs.  Opaque here: the provider only hands the pointer
 * back to ibv_read_ibdev_sysfs_file().
 */
struct verbs_sysfs_dev;

/* Match table entry.  The provider's table holds only the sentinel
 * (kind == 0): libibverbs walks every provider's table unconditionally for
 * devices that have a driver id (try_drivers -> match_driver_id), so the
 * table must exist, but nothing in it may match.
 */
struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;
		uint64_t driver_id;
	} u;
	uint16_t vendor;
	uint16_t device;
	uint8_t kind;	/* 0 = VERBS_MATCH_SENTINEL */
};

struct verbs_device;

/* driver.h: "Must change the PRIVATE IBVERBS_PRIVATE_ symbol if this is
 * changed".
 */
struct verbs_device_ops {
	const char *name;

	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;

	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);

	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd,
					       void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);

	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

/* Allocated by the provider (alloc_device), filled in by libibverbs. */
struct verbs_device {
	struct ibv_device device; /* must be first */
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct rbond_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

/* Allocated by the provider (reg_mr), read by libibverbs. */
enum rbond_ibv_mr_type {
	RBOND_IBV_MR_TYPE_MR,
	RBOND_IBV_MR_TYPE_NULL_MR,
	RBOND_IBV_MR_TYPE_IMPORTED_MR,
	RBOND_IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum rbond_ibv_mr_type mr_type;
	int access;
};

/* Allocated by the provider (create_qp); libibverbs' ibv_qp_to_qp_ex()
 * reads comp_mask of EVERY qp, so every qp must be a zeroed verbs_qp.
 */
struct verbs_xrcd;
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

/*
 * The union of every op a provider can supply, in rdma-core's (sorted)
 * order.  verbs_set_ops() copies each non-NULL member by NAME, so the order
 * and count must match exactly (76 members in v42..v46).  Members this
 * provider does not implement are declared with a generic pointer type:
 * they stay NULL and libibverbs keeps its EOPNOTSUPP dummies for them.
 */
typedef void (*rbond_unused_op)(void);

struct verbs_context_ops {
	rbond_unused_op advise_mr;
	rbond_unused_op alloc_dm;
	rbond_unused_op alloc_mw;
	rbond_unused_op alloc_null_mr;
	rbond_unused_op alloc_parent_domain;
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	rbond_unused_op alloc_td;
	void (*async_event)(struct ibv_context *context,
			    struct ibv_async_event *event);
	rbond_unused_op attach_counters_point_flow;
	rbond_unused_op attach_mcast;
	rbond_unused_op bind_mw;
	rbond_unused_op close_xrcd;
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	rbond_unused_op create_counters;
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	rbond_unused_op create_cq_ex;
	rbond_unused_op create_flow;
	rbond_unused_op create_flow_action_esp;
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	rbond_unused_op create_rwq_ind_table;
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	rbond_unused_op create_srq_ex;
	rbond_unused_op create_wq;
	rbond_unused_op dealloc_mw;
	int (*dealloc_pd)(struct ibv_pd *pd);
	rbond_unused_op dealloc_td;
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	rbond_unused_op destroy_counters;
	int (*destroy_cq)(struct ibv_cq *cq);
	rbond_unused_op destroy_flow;
	rbond_unused_op destroy_flow_action;
	int (*destroy_qp)(struct ibv_qp *qp);
	rbond_unused_op destroy_rwq_ind_table;
	int (*destroy_srq)(struct ibv_srq *srq);
	rbond_unused_op destroy_wq;
	rbond_unused_op detach_mcast;
	void (*free_context)(struct ibv_context *context);
	rbond_unused_op free_dm;
	rbond_unused_op get_srq_num;
	rbond_unused_op import_dm;
	rbond_unused_op import_mr;
	rbond_unused_op import_pd;
	rbond_unused_op modify_cq;
	rbond_unused_op modify_flow_action_esp;
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	rbond_unused_op modify_qp_rate_limit;
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			  int attr_mask);
	rbond_unused_op modify_wq;
	rbond_unused_op open_qp;
	rbond_unused_op open_xrcd;
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	rbond_unused_op post_srq_ops;
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	rbond_unused_op query_ece;
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	rbond_unused_op query_qp_data_in_order;
	rbond_unused_op query_rt_values;
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	rbond_unused_op read_counters;
	rbond_unused_op reg_dm_mr;
	rbond_unused_op reg_dmabuf_mr;
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	rbond_unused_op rereg_mr;
	rbond_unused_op resize_cq;
	rbond_unused_op set_ece;
	rbond_unused_op unimport_dm;
	rbond_unused_op unimport_mr;
	rbond_unused_op unimport_pd;
};

/* --- uverbs write-command buffers (kern-abi.h DECLARE_CMD layout) ---------
 * struct ibv_<cmd> = { struct ib_uverbs_cmd_hdr hdr; struct ib_uverbs_<cmd>
 * core_payload; } followed by driver data (none for rdma_bond).  The
 * libibverbs helpers fill core_payload themselves; the provider only
 * supplies zeroed storage of the right size.
 */
#define RBOND_DECLARE_CMD(name, kabi)                                        \
	struct rbond_cmd_##name {                                            \
		struct ib_uverbs_cmd_hdr hdr;                                \
		struct kabi core_payload;                                    \
	};                                                                   \
	_Static_assert(sizeof(struct rbond_cmd_##name) ==                    \
		       sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct kabi),\
		       "implicit padding in command " #name)

RBOND_DECLARE_CMD(get_context, ib_uverbs_get_context);
RBOND_DECLARE_CMD(query_port, ib_uverbs_query_port);
RBOND_DECLARE_CMD(alloc_pd, ib_uverbs_alloc_pd);
RBOND_DECLARE_CMD(reg_mr, ib_uverbs_reg_mr);
RBOND_DECLARE_CMD(create_cq, ib_uverbs_create_cq);
RBOND_DECLARE_CMD(create_qp, ib_uverbs_create_qp);
RBOND_DECLARE_CMD(modify_qp, ib_uverbs_modify_qp);
RBOND_DECLARE_CMD(query_qp, ib_uverbs_query_qp);
RBOND_DECLARE_CMD(create_srq, ib_uverbs_create_srq);
RBOND_DECLARE_CMD(modify_srq, ib_uverbs_modify_srq);
RBOND_DECLARE_CMD(query_srq, ib_uverbs_query_srq);

/* --- functions exported by libibverbs.so.1 under IBVERBS_PRIVATE_34 -------
 * The Makefile's abi-check verifies that every one of these resolves to
 * a symbol of version IBVERBS_PRIVATE_34 in the installed library.
 */
void verbs_register_driver_34(const struct verbs_device_ops *ops);

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);
void verbs_uninit_context(struct verbs_context *context);
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);

int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));

int ibv_cmd_get_context(struct verbs_context *context,
			struct rbond_cmd_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct rbond_cmd_query_port *cmd, size_t cmd_size);
int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct rbond_cmd_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct rbond_cmd_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct rbond_cmd_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr,
		      struct rbond_cmd_create_qp *cmd, size_t cmd_size,
		      struct ib_uverbs_create_qp_resp *resp, size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct rbond_cmd_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct rbond_cmd_modify_qp *cmd,
		      size_t cmd_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct rbond_cmd_query_qp *cmd, size_t cmd_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct rbond_cmd_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct rbond_cmd_modify_srq *cmd,
		       size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct rbond_cmd_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);

/* --- layout pins ----------------------------------------------------------
 * Sizes derivable from the public headers plus rdma-core v44's definitions
 * (x86_64 LP64).  A change in the installed public headers that moves these
 * breaks the build here instead of at run time.
 */
#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(void *) == 8, "LP64 expected");
_Static_assert(sizeof(struct verbs_context_ops) == 76 * sizeof(void *),
	       "verbs_context_ops must have the 76 members of rdma-core 42..46");
_Static_assert(offsetof(struct verbs_match_ent, kind) == 20 &&
	       sizeof(struct verbs_match_ent) == 24, "verbs_match_ent layout");
_Static_assert(sizeof(struct verbs_device_ops) == 72,
	       "verbs_device_ops layout");
_Static_assert(offsetof(struct verbs_device, device) == 0,
	       "verbs_device.device must be first");
_Static_assert(sizeof(struct ibv_device) == 664, "ibv_device (public)");
_Static_assert(offsetof(struct verbs_device, ops) == 664,
	       "verbs_device.ops follows ibv_device");
_Static_assert(offsetof(struct verbs_device, entry) == 680,
	       "verbs_device.entry");
_Static_assert(sizeof(struct verbs_device) == 712, "verbs_device size");
_Static_assert(offsetof(struct verbs_mr, ibv_mr) == 0, "verbs_mr.ibv_mr");
_Static_assert(sizeof(struct ibv_mr) == 48, "ibv_mr (public)");
_Static_assert(sizeof(struct verbs_mr) == 56, "verbs_mr size");
_Static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0,
	       "ibv_qp_ex.qp_base must be first");
_Static_assert(offsetof(struct verbs_qp, comp_mask) ==
	       sizeof(struct ibv_qp_ex), "verbs_qp.comp_mask");
_Static_assert(sizeof(struct ib_uverbs_get_context_resp) == 8,
	       "ib_uverbs_get_context_resp (uapi)");
_Static_assert(sizeof(struct ib_uverbs_ex_query_device_resp) >= 304,
	       "ib_uverbs_ex_query_device_resp (uapi)");
_Static_assert(sizeof(struct ib_uverbs_modify_qp) == 112,
	       "ib_uverbs_modify_qp (uapi)");
_Static_assert(sizeof(struct ib_uverbs_create_qp) == 56,
	       "ib_uverbs_create_qp (uapi)");
_Static_assert(sizeof(struct ib_uverbs_reg_mr) == 40,
	       "ib_uverbs_reg_mr (uapi)");
#else
#error "rdma_bond provider: layouts are only pinned for LP64 (x86_64, aarch64)"
#endif

#endif /* RBOND_VERBS_PRIVATE_H */
