/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: the scheduler of a multi-rail QP - which rails a send WQE may
 * use without breaking RC ordering (design 5) and which one of them the
 * device's policy picks (design 6).  Pure bookkeeping over per-rail
 * counters: every function runs under the QP's sq_lock, in any context,
 * and never sleeps.  See Documentation/rdma_bond.rst, "Ordering and
 * striping".
 */
#ifndef RBOND_SCHED_H
#define RBOND_SCHED_H

#include <linux/types.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_bond-abi.h>

struct rbond_dev;
struct rbond_swqe;

enum rbond_policy {
	RBOND_POLICY_ADAPTIVE,
	RBOND_POLICY_ROUND_ROBIN,
	RBOND_POLICY_WEIGHTED,
	RBOND_POLICY_ACTIVE_BACKUP,
	RBOND_POLICY_QP_HASH,
	RBOND_NR_POLICIES
};

enum rbond_ordering {
	RBOND_ORDER_STRICT,
	RBOND_ORDER_RELAXED_MR,
	RBOND_ORDER_RELAXED,
	RBOND_NR_ORDERINGS
};

/*
 * Ordering classes.  An RDMA WRITE (READ) whose remote key is being
 * translated goes on the home rail and is placed as strict; it is
 * "unresolved" (UWRITE/UREAD) rather than STRICT so that once the key turns
 * out to be relaxed, later WQEs to the same key may count it as one of
 * their own class and go on other rails without waiting for it.  Only one
 * unresolved WQE of a class is in flight: the next waits for its completion
 * (by then the answer is usually in), so a burst posted at once to a new
 * key is striped rather than queued on the home rail behind the first.
 */
enum rbond_class {
	RBOND_CL_STRICT,
	RBOND_CL_WRITE,		/* relaxed RDMA WRITE run */
	RBOND_CL_READ,		/* relaxed RDMA READ run */
	RBOND_CL_UWRITE,	/* RDMA WRITE, key not translated yet */
	RBOND_CL_UREAD,		/* RDMA READ, key not translated yet */
	RBOND_NR_CLASSES
};

#define RBOND_CL_UNRESOLVED(cl)	((cl) + RBOND_CL_UWRITE - RBOND_CL_WRITE)

/* A READ or atomic: takes a max_rd_atomic slot (by WR, or by WC opcode) */
static inline bool rbond_wr_is_rd(enum ib_wr_opcode op)
{
	return op == IB_WR_RDMA_READ || op == IB_WR_ATOMIC_CMP_AND_SWP ||
	       op == IB_WR_ATOMIC_FETCH_AND_ADD;
}

static inline bool rbond_wc_is_rd(enum ib_wc_opcode op)
{
	return op == IB_WC_RDMA_READ || op == IB_WC_COMP_SWAP ||
	       op == IB_WC_FETCH_ADD;
}

/*
 * Per QP (qp->sq_lock).  A QP that may use more than one rail accounts
 * every member WQE here from its first; one that may not only uses
 * rails_up (its home rail).
 */
struct rbond_sched {
	struct rbond_dev *bond;
	unsigned int home;
	u32 qpn;
	unsigned long rails_up;		/* rails with a member at RTS */
	u32 inflight[RBOND_MAX_RAILS];
	u32 inflight_cl[RBOND_MAX_RAILS][RBOND_NR_CLASSES];
	u32 rd_inflight[RBOND_MAX_RAILS];	/* READs and atomics */
	u64 obytes[RBOND_MAX_RAILS];	/* outstanding bytes */
	u64 sbytes[RBOND_MAX_RAILS];	/* bytes sent so far */
	u32 weight[RBOND_MAX_RAILS];	/* link speed x width */
	u32 unres_rkey[2];		/* key of the unresolved WQE in flight */
	u32 rr;
	/* jiffies: last completion, or start of a busy period (failover) */
	unsigned long progress[RBOND_MAX_RAILS];
	/* jiffies: last successful member completion (the peer acked) */
	unsigned long acked[RBOND_MAX_RAILS];
	/* relaxed WQEs kept to one rail by other classes: since, draining */
	unsigned long solo_since;
	bool draining;
};

/**
 * struct rbond_policy_ops - a scheduling policy
 * @name: its name (sysfs "bond/policy", module parameter policy)
 * @pick: one rail of @allowed (two or more rails, all up) for @len bytes
 * @stripes: a large relaxed WQE may be split over rails
 * @windowed: relaxed WQEs wait for room in the rails' windows
 */
struct rbond_policy_ops {
	const char *name;
	unsigned int (*pick)(struct rbond_sched *s, unsigned long allowed,
			     u64 len);
	bool stripes;
	bool windowed;
};

extern const struct rbond_policy_ops rbond_policies[RBOND_NR_POLICIES];

const char *rbond_policy_name(unsigned int i);
const char *rbond_ordering_name(unsigned int i);

static inline bool rbond_policy_stripes(enum rbond_policy pol)
{
	return pol < RBOND_NR_POLICIES && rbond_policies[pol].stripes;
}

static inline bool rbond_policy_windowed(enum rbond_policy pol)
{
	return pol < RBOND_NR_POLICIES && rbond_policies[pol].windowed;
}

unsigned long rbond_sched_allowed(struct rbond_sched *s, u8 cl,
				  const struct ib_send_wr *wr,
				  enum rbond_ordering ord, u32 rd_max,
				  unsigned long allowed);
unsigned long rbond_sched_rd_free(const struct rbond_sched *s,
				  unsigned long rails, enum ib_wr_opcode op,
				  u32 rd_max, unsigned int *room);
unsigned int rbond_sched_pick(struct rbond_sched *s, enum rbond_policy pol,
			      unsigned long allowed, u64 len);
void rbond_sched_posted(struct rbond_sched *s, struct rbond_swqe *e,
			unsigned int rail, u8 cl, bool rd, u32 rkey, u64 len);
void rbond_sched_done(struct rbond_sched *s, struct rbond_swqe *e);
void rbond_sched_drop(struct rbond_sched *s, struct rbond_swqe *e);
void rbond_sched_release(struct rbond_sched *s);

#endif /* RBOND_SCHED_H */
