/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: multi-rail - control channel, peer negotiation, remote key
 * translation and the ordering-safe striping data path.
 * See Documentation/rdma_bond.rst, "Multi-rail".
 */
#ifndef RBOND_MRAIL_H
#define RBOND_MRAIL_H

#include "rbond.h"

struct rbond_mqp;

extern bool rbond_multirail;

int rbond_mrail_init(void);
void rbond_mrail_exit(void);

/* QP hooks (rbond_qp.c) */
void rbond_mrail_qp_create(struct rbond_qp *qp);
void rbond_mrail_qp_modified(struct rbond_qp *qp, const struct ib_qp_attr *attr,
			     int attr_mask);
void rbond_mrail_qp_destroy(struct rbond_qp *qp);
void rbond_mrail_lock(struct rbond_qp *qp);
void rbond_mrail_unlock(struct rbond_qp *qp);
void rbond_mrail_qp_reset_sq(struct rbond_qp *qp);
void rbond_mrail_qp_reset(struct rbond_qp *qp);
void rbond_mrail_qp_free(struct rbond_qp *qp);
void rbond_mrail_qp_remove_rail(struct rbond_qp *qp, unsigned int rail);
bool rbond_mrail_active(const struct rbond_qp *qp);
void rbond_mrail_wait_up(struct rbond_qp *qp);
int rbond_mrail_post_send(struct rbond_qp *qp, const struct ib_send_wr *wr,
			  u8 wc_opcode, const struct ib_sge *isge);
/* send completion of slot @e (sq_lock held): accounting, before delivery */
void rbond_mrail_slot_done(struct rbond_qp *qp, struct rbond_swqe *e);
bool rbond_mrail_account_old(struct rbond_qp *qp, struct rbond_swqe *e);
/*
 * after delivery (cq->lock and sq_lock held): post what may go now; true
 * when a WQE completed without being posted (deliver again)
 */
bool rbond_mrail_drain(struct rbond_qp *qp);
void rbond_mrail_qp_failed(struct rbond_qp *qp);
int rbond_mrail_fill_res(struct sk_buff *msg, struct rbond_qp *qp);

/* MR hook (rbond_mr.c): alias keys of @mr handed out are revoked */
void rbond_mrail_mr_dereg(struct rbond_dev *bond, struct rbond_mr *mr);

#endif /* RBOND_MRAIL_H */
