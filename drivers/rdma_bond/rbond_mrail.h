/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: multi-rail, as the rest of the module sees it: the hooks the
 * QP object calls (rbond_mqp.c), the post path's view of remote keys
 * (rbond_rkey.c) and the counters.  Internals: rbond_mqp.h.
 * See Documentation/rdma_bond.rst, "Multi-rail".
 */
#ifndef RBOND_MRAIL_H
#define RBOND_MRAIL_H

#include "rbond.h"

struct rbond_mqp;

extern bool rbond_multirail;

int rbond_mrail_init(void);
void rbond_mrail_exit(void);

/* QP hooks (rbond_qp.c, rbond_comp.c) */
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
bool rbond_mrail_up(const struct rbond_qp *qp);
bool rbond_mrail_home_moved(const struct rbond_qp *qp);
void rbond_mrail_first_aside(struct rbond_qp *qp);
struct ib_qp *rbond_mrail_first_member(const struct rbond_qp *qp);
unsigned int rbond_mrail_key_rail(const struct rbond_qp *qp);
int rbond_mrail_home_restore(struct rbond_qp *qp);
bool rbond_mrail_first_keep(struct rbond_qp *qp, unsigned int rail,
			    struct ib_qp_attr *attr);
bool rbond_mrail_first_kept(const struct rbond_qp *qp,
			    struct ib_qp_attr *attr);
void rbond_mrail_prime(struct rbond_qp *qp);
bool rbond_mrail_may_stripe(const struct rbond_qp *qp);
void rbond_mrail_wait_up(struct rbond_qp *qp);
void rbond_mrail_qp_failed(struct rbond_qp *qp);
int rbond_mrail_fill_res(struct sk_buff *msg, struct rbond_qp *qp);

/* failover (rbond_failover.c): the completion path, rails, counters */
bool rbond_fo_mark(struct rbond_qp *qp, unsigned int rail, u8 reason);
bool rbond_fo_catch(struct rbond_qp *qp, struct rbond_swqe *e,
		    const struct ib_wc *wc);
void rbond_fo_peer_err(struct rbond_qp *qp, unsigned int rail,
		       enum ib_wc_status status);
void rbond_fo_peer_err_release(struct rbond_qp *qp);
void rbond_fo_rail_down(struct rbond_dev *bond, unsigned int rail,
			u8 reason);
void rbond_fo_rail_up(struct rbond_dev *bond, unsigned int rail);
void rbond_fo_rail_removing(struct rbond_dev *bond, unsigned int rail);
void rbond_fo_rail_work(struct work_struct *work);
bool rbond_fo_home_event(struct rbond_qp *qp, struct ib_qp *member);
bool rbond_fo_home_moving(const struct rbond_qp *qp);
bool rbond_fo_recv_wc(struct rbond_qp *qp, unsigned int rail,
		      const struct ib_wc *wc, u32 seq);
/* failback (rbond_negotiate.c): a rejoin probe's completion */
void rbond_mq_probe_wc(struct rbond_qp *qp, const struct ib_wc *mwc);
const char *rbond_fail_reason_name(unsigned int reason);
void rbond_fo_init(void);
void rbond_fo_exit(void);

/* post path (rbond_post.c) */
u8 rbond_rkey_classify(struct rbond_qp *qp, const struct ib_send_wr *wr,
		       unsigned long *allowed, u32 *rkeys, bool *have_keys);

/* Multi-rail counters (module parameter mrail_stats) */
struct rbond_mstats {
	atomic64_t qp_up;
	atomic64_t rkey_hits;
	atomic64_t rkey_misses;
	atomic64_t rkey_invals;
	atomic64_t inval_timeouts;
	atomic64_t striped;
	atomic64_t chunks;
	atomic64_t waits;
	atomic64_t qp_failed;
	atomic64_t failovers;		/* QP x rail failed over */
	atomic64_t fo_replayed;		/* member WQEs posted again */
	atomic64_t fo_failed;		/* failovers that could not fence */
	atomic64_t dma_mapped;		/* kernel SGEs mapped per member */
	atomic64_t dma_unmapped;
	atomic64_t rejoin_probes;	/* health probes of rejoining rails */
	atomic64_t rejoin_probe_fails;	/* ... that found the rail broken */
	atomic64_t probe_recvs;		/* the peer's probes received */
	/* requests the probe receive refused (a SEND with data: hostile) */
	atomic64_t probe_recv_errors;
	/* modify_qp(RTS) waits that ended before the extra rails were up */
	atomic64_t upgrade_timeouts;
	atomic64_t home_moves;		/* QPs whose home rail moved */
	atomic64_t atomics_lost;	/* ran on a failed home, reply lost */
	atomic64_t home_primes;		/* rbond_mrail_prime() READs done */
	atomic64_t home_prime_fails;	/* ... that failed */
	atomic64_t conn_renewed;	/* QPs given a new control connection */
};

extern struct rbond_mstats rbond_mstats;

/* MR hook (rbond_mr.c): alias keys of @mr handed out are revoked */
void rbond_mrail_mr_dereg(struct rbond_dev *bond, struct rbond_mr *mr);

#endif /* RBOND_MRAIL_H */
