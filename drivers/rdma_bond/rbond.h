/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: one virtual RoCE device over several RDMA devices ("rails").
 *
 * Locks (Documentation/rdma_bond.rst, "Locking and context rules"):
 *   rbond_mutex          global: bonds and their rails
 *   rbond_members_lock   global: candidate member devices (a leaf)
 *   rbond_mq_mutex       global: registry of multi-rail QPs (rbond_mqp.c)
 *   rbond_conn_mutex     global: control connections (rbond_ctrl.c)
 *   rbond_mqp.lock       mutex: one QP's negotiation (rbond_negotiate.c)
 *   rbond_dev.lock       mutex: rails, control path of every object of a
 *                        bond, member removal
 *   rbond_dev.state_lock spin irqsave: port state (a leaf)
 *   rbond_qp.sq_post_lock / rq_post_lock
 *                        spin irqsave: posting order, member[] on the
 *                        data path
 *   rbond_cq.lock        spin irqsave: CQ ring, arming, completion processing
 *   rbond_qp.sq_lock / rq_lock
 *                        spin: shadow queues; sq_lock also the scheduler
 *                        state (s) and the pending ring
 *   rbond_mqp.attr_lock  spin irqsave: application attributes, inbox
 *   rbond_conn.lock      spin irqsave: one control connection
 *   rbond_rail.rate_lock spin irqsave: a rail's rate (a leaf)
 * Order: rbond_mutex -> rbond_dev.lock;
 *        rbond_mqp.lock -> (rbond_conn_mutex | rbond_dev.lock);
 *        rbond_mq_mutex -> rbond_dev.lock -> rbond_mqp.attr_lock;
 *        rbond_dev.lock -> sq_post_lock -> rq_post_lock -> sq_lock;
 *        rbond_dev.lock -> rbond_cq.lock -> (sq_lock | rq_lock);
 *        sq_post_lock -> rbond_cq.lock;
 *        sq_lock -> (rbond_conn.lock | rbond_rail.rate_lock)
 */
#ifndef RBOND_H
#define RBOND_H

#include <linux/interrupt.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <linux/workqueue.h>
#include <linux/netdevice.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_bond-abi.h>

#include "rbond_compat.h"
#include "rbond_sched.h"

#define RBOND_PORT		1
#define RBOND_MAX_SGE		16
#define RBOND_PSN_MASK		0xffffff	/* 24-bit PSNs */
/*
 * Inline data per WQE: captured at post time into a buffer on the posting
 * thread's stack (rbond_post_send), so it is bounded here and never by what
 * a member would take.
 */
#define RBOND_MAX_INLINE	512
/* Bytes per WQE (the sum of its SGEs): refused beyond, at post time. */
#define RBOND_MAX_MSG_SZ	0x80000000ULL
#define RBOND_MAX_CQE		(64 * 1024 - 1)
#define RBOND_MAX_QP_WR		(16 * 1024)
/* qp_xa and srq_xa ids: 29 bits (the member wr_id carries one) */
#define RBOND_QP_ID_MAX		0x1fffffff
/*
 * A multi-rail QP's member send queues (and the shadow queue) hold this
 * many WQEs per WQE granted: room for the chunks of split WQEs.
 */
#define RBOND_CHUNK_SLOTS	4
/* The bond's GID table; member GIDs scanned for a netdev's address */
#define RBOND_GID_TBL_LEN	128
#define RBOND_GID_SCAN_MAX	64
/* node GUID: the first rail's with the locally administered bit flipped */
#define RBOND_GUID_LOCAL_BIT	0x0200000000000000ULL

/*
 * Member wr_id: SRQ flag (bit 63) | rejoin probe flag (bit 62) | qp or srq
 * id (29 bits) | recv flag (bit 32) | sequence, SRQ slot or, for a probe,
 * the rail (32 bits; bit 31 set: the READ of rbond_mrail_prime()).
 */
#define RBOND_WRID_SRQ		BIT_ULL(63)
#define RBOND_WRID_PROBE	BIT_ULL(62)
#define RBOND_WRID_RECV		BIT_ULL(32)
#define RBOND_WRID_PRIME	BIT(31)	/* with PROBE: rbond_mrail_prime() */
#define RBOND_WRID_ID_SHIFT	33
#define RBOND_WRID_ID_MASK	0x1fffffff

enum rbond_rail_stat {
	RBOND_STAT_TX_WQES,
	RBOND_STAT_TX_BYTES,
	RBOND_STAT_RX_WQES,
	RBOND_STAT_RX_BYTES,
	RBOND_STAT_COMPLETIONS,
	RBOND_STAT_ERRORS,
	RBOND_STAT_FAILOVERS,		/* QPs that failed over off the rail */
	RBOND_STAT_REPLAYED_WQES,	/* member WQEs posted again elsewhere */
	RBOND_STAT_REPLAYED_BYTES,
	RBOND_STAT_FAILOVER_US,		/* last: detection to resumed traffic */
	RBOND_STAT_PARKED,		/* member objects waiting for the port, now */
	RBOND_STAT_LINK_DOWNS,		/* port error events the rail got */
	RBOND_STAT_LINK_UPS,		/* port active events the rail got */
	RBOND_NR_RAIL_STATS
};

/*
 * Why a rail failed (rbond_failover.c): the rail's own state for LINK and
 * REMOVED; per QP for the others.
 */
enum rbond_fail_reason {
	RBOND_FAIL_NONE,
	RBOND_FAIL_LINK,		/* port error event */
	RBOND_FAIL_REMOVED,		/* member device removed */
	RBOND_FAIL_RETRY,		/* member WQE: retry exceeded */
	RBOND_FAIL_STALL,		/* no progress with work outstanding */
	RBOND_FAIL_PEER,		/* the peer's module fenced it */
	RBOND_FAIL_QP_FATAL,		/* member QP async error */
	RBOND_FAIL_SILENT,		/* no heartbeat from the peer */
	RBOND_FAIL_FLUSHED,		/* home member flushed, no fault seen */
	RBOND_NR_FAIL_REASONS
};

struct rbond_dev;
struct rbond_mqp;

struct rbond_rail {
	struct rbond_dev *bond;
	struct ib_device *ibdev;	/* member device; NULL: slot empty */
	struct net_device *ndev;	/* held with dev_hold() */
	u32 port;			/* member port */
	bool active;			/* member port ACTIVE (event driven) */
	u8 down_reason;			/* enum rbond_fail_reason, if not */
	struct ib_event_handler event_handler;
	atomic64_t stats[RBOND_NR_RAIL_STATS];
	/*
	 * Rate of the rail as the bond's multi-rail QPs see it (rbond_sched.c):
	 * the delivery rate of their member WQEs on it, measured across each
	 * sampled WQE's time on the rail.  rate: bytes per 2^20 ns (~1 ms),
	 * 0 unknown.
	 */
	spinlock_t rate_lock;
	u32 busy;			/* member WQEs outstanding */
	u64 obytes;			/* and their bytes */
	u64 delivered;			/* bytes completed, ever */
	u64 delivered_t;		/* ns: the last completion, or busy start */
	u32 since_sample;		/* completions since the last sample */
	u32 rate;
	/*
	 * A peer on this rail went silent (rbond_fo_watch(), heartbeat):
	 * the peer address, 0 if none; logged once per silence.
	 */
	__be32 silent_peer;
	/*
	 * The stall watchdog's samples of the rail's netdev (bytes sent and
	 * received; rbond_fo_rail_busy()): the last sample, its time (ns),
	 * the watchdog pass it was taken in, and when (jiffies) the rail
	 * last moved bytes at half its rate or more.  The watchdog's own.
	 */
	u64 nd_bytes;
	u64 nd_t;
	u32 nd_pass;
	unsigned long busy_at;
};

/* A rail's rate (bytes per 2^20 ns) in kbit/s. */
static inline u64 rbond_rate_kbps(u32 rate)
{
	return ((u64)rate * 8000000) >> 20;
}

struct rbond_dev {
	struct ib_device ibdev;
	struct list_head list;		/* rbond_list, under rbond_mutex */
	struct mutex lock;		/* rails, objects' control path */
	struct rbond_rail rails[RBOND_MAX_RAILS];
	unsigned int num_rails;
	unsigned int primary;		/* valid when num_rails > 0 */
	struct ib_device_attr attr;	/* min over rails, kept current */
	u32 gid_tbl_len;
	spinlock_t state_lock;		/* port_active, live */
	bool port_active;
	bool live;			/* between client add() and remove() */

	struct list_head pds;
	struct list_head mrs;
	struct list_head cqs;
	struct list_head qps;
	struct list_head ahs;		/* under ah_lock (AHs: any context) */
	spinlock_t ah_lock;
	struct xarray qp_xa;		/* qp id -> rbond_qp (RCU/cq lock) */
	u32 next_qp_id;
	struct xarray srq_xa;		/* srq id -> rbond_srq */
	u32 next_srq_id;

	/* tunables (rbond_options.c), READ_ONCE */
	u32 policy;			/* enum rbond_policy */
	u32 ordering;			/* enum rbond_ordering */
	u32 stripe_threshold;
	u32 rail_window;		/* adaptive: bytes outstanding per rail */
	u32 stall_ms;			/* failover: no progress for this long */
	u32 silent_ms;			/* failover: no heartbeat for this long */

	struct work_struct unreg_work;
	bool unreg_queued;
	/* rails whose port went down: their QPs fail over (rail_work) */
	unsigned long rails_failed;
	unsigned long rails_back;	/* port active again: failback */
	struct work_struct rail_work;

	/* member objects that wait for their port (rbond_park.c) */
	struct mutex park_lock;
	struct list_head parked[RBOND_MAX_RAILS];
	unsigned long park_off;		/* rails that keep nothing */
	struct delayed_work park_work;
};

struct rbond_ucontext {
	struct ib_ucontext ibuc;
};

struct rbond_pd {
	struct ib_pd ibpd;
	struct list_head list;		/* rbond_dev.pds */
	struct ib_pd *member[RBOND_MAX_RAILS];
	struct xarray mr_xa;		/* bond lkey -> rbond_mr */
};

struct rbond_mr {
	struct ib_mr ibmr;
	struct list_head list;		/* rbond_dev.mrs */
	struct rbond_pd *pd;
	bool dma;
	int access;			/* IB_ACCESS_* at registration */
	struct ib_mr *member[RBOND_MAX_RAILS];	/* NULL for a DMA MR */
	u32 lkey[RBOND_MAX_RAILS];
	unsigned long rails;		/* rails with a valid member key */
	struct rcu_head rcu;
};

struct rbond_cq {
	struct ib_cq ibcq;
	struct list_head list;		/* rbond_dev.cqs */
	spinlock_t lock;
	struct ib_cq *member[RBOND_MAX_RAILS];
	struct ib_wc *ring;
	u32 size;			/* ring entries, power of two > cqe */
	u32 head;			/* next to write */
	u32 tail;			/* next to poll */
	u8 notify;			/* IB_CQ_{NEXT_COMP,SOLICITED} or 0 */
	bool overflow;
	bool kicked;			/* ring grew outside the tasklet */
	bool owed;			/* poll_cq took an armed CQ's: notify */
	u8 poll_first;			/* member the tasklet polls first */
	/* WQEs multi-rail QPs may have outstanding on a rail (bond->lock) */
	u32 mrail_wr;
	struct tasklet_struct poll_task; /* polls the member CQs */
};

/* rbond_swqe.flags */
#define RBOND_SWQE_SIGNALED	BIT(0)
#define RBOND_SWQE_DONE		BIT(1)
/* a chunk of a split WQE other than the last: folded into the last */
#define RBOND_SWQE_CHUNK	BIT(2)
/* the scheduler's (rbond_sched_posted/done) */
/* on a failed rail, not completed: posted again elsewhere (failover) */
#define RBOND_SWQE_REPLAY	BIT(3)
#define RBOND_SWQE_CL_SHIFT	4
#define RBOND_SWQE_CL_MASK	(7 << RBOND_SWQE_CL_SHIFT)
#define RBOND_SWQE_MRAIL	BIT(7)	/* accounted by the scheduler */
/* its own local buffers fail it (rbond_lkeys_ok()): never a rail failure */
#define RBOND_SWQE_APP_ERR	BIT(8)

/* rbond_swqe.rail of a WQE that waits in the pending ring */
#define RBOND_RAIL_PEND		0xff

/*
 * Shadow send WQE: what the application posted, in posting order; one slot
 * per member WQE (a WQE split into chunks has one per chunk).  The slot's
 * sequence number (its index) is the bond's sequence number of the WQE;
 * rail and mseq say where it went: the member QP and that member's post
 * count at the time (its position in the member's send queue).
 */
struct rbond_swqe {
	u64 wr_id;
	u32 byte_len;
	u32 vendor_err;
	u32 mseq;
	u8 opcode;			/* enum ib_wc_opcode */
	u8 status;			/* enum ib_wc_status */
	u8 rail;
	u16 flags;
	u32 psn;			/* its member WQE's first PSN */
	/* its rail's delivered bytes and their time when it went out */
	u64 rate_del;
	u64 rate_t;
};

struct rbond_wqe;

/* A slot's buffers as mapped for its member device (rbond_dma.c). */
struct rbond_dmamap {
	struct ib_device *dev;		/* NULL: nothing mapped */
	u64 addr[RBOND_MAX_SGE];
	u32 len[RBOND_MAX_SGE];
	u8 n;
	u8 dir;				/* enum dma_data_direction */
};

/*
 * A shared receive queue: one member SRQ, on the rail that was primary at
 * creation (rail); the QPs attached to it have that rail as their home,
 * where every SEND and WRITE_WITH_IMM arrives.  Slots hold the
 * application's wr_id of each posted receive until its completion.
 */
struct rbond_srq {
	struct ib_srq ibsrq;
	struct rbond_pd *pd;
	u32 id;				/* srq_xa index */
	unsigned int rail;
	struct ib_srq *member;		/* NULL once its rail is gone */
	u32 max_wr;			/* granted (the member's) */
	u32 max_sge;			/* granted (as asked) */
	spinlock_t lock;		/* slots, qps, member */
	u64 *wr_id;			/* per slot */
	unsigned long *used;		/* slot bitmap */
	u32 *free;			/* stack of free slots */
	u32 nfree;
	struct rbond_dmamap *dma;	/* per slot; kernel SRQs only */
	struct list_head qps;		/* attached rbond_qp.srq_list */
};

struct rbond_qp {
	struct ib_qp ibqp;
	struct list_head list;		/* rbond_dev.qps */
	u32 id;				/* qp_xa index */
	struct rbond_pd *pd;
	struct rbond_cq *scq;
	struct rbond_cq *rcq;
	struct rbond_srq *srq;		/* receives from it, or NULL */
	struct list_head srq_list;	/* rbond_srq.qps (srq->lock) */
	unsigned int home;		/* home rail */
	bool user;
	bool sig_all;
	bool dead;			/* home rail lost */
	u32 max_rd_atomic;		/* the application's, READ_ONCE */
	enum ib_qp_state state;
	struct ib_qp_cap cap;
	u32 slot_cap;			/* shadow slots usable (>= cap) */
	struct ib_qp *member[RBOND_MAX_RAILS];
	/*
	 * A member kept for its port (rbond_park_qp()): its completions are
	 * stale.  Compared with ib_wc.qp, never dereferenced.
	 */
	struct ib_qp *gone[RBOND_MAX_RAILS];
	struct rbond_mqp *mrail;	/* multi-rail state, or NULL */

	spinlock_t sq_post_lock;	/* posting order, member[] */
	spinlock_t sq_lock;		/* sq ring and indices, s, pend */
	struct rbond_swqe *sq;
	u32 sq_size;			/* power of two */
	u32 sq_head;
	u32 sq_tail;
	/* rails (rails_up) and, for a multi-rail QP, their accounting */
	struct rbond_sched s;
	u32 mposted[RBOND_MAX_RAILS];	/* member WQEs posted per rail */
	/*
	 * Per member: its next send PSN and path MTU in bytes (sq_lock), so
	 * that a home-rail failover knows which WQEs the peer's responder
	 * executed (rbond_failover.c, "home move").
	 */
	u32 npsn[RBOND_MAX_RAILS];
	u32 pmtu[RBOND_MAX_RAILS];
	/* WQEs that wait for completions (multi-rail; rbond_post.c) */
	struct rbond_wqe *pend;
	/* per slot, what went on an extra rail: replayed if it fails */
	struct rbond_wqe *log;
	unsigned long fo_rails;		/* rails failing over (sq_lock) */
	u8 *pend_inl;			/* their inline data, per slot */
	u8 *log_inl;			/* logged inline data, per slot */
	u32 pend_head, pend_tail, pend_size;
	/* application WQEs in [sq_tail, sq_head): at most cap.max_send_wr */
	u32 sq_wqes;
	bool sq_failed;			/* error delivered: the rest flush */
	/*
	 * A WQE completed with an error not yet delivered (the WQEs before
	 * it are still out): nothing more goes to a member, as RC executes
	 * nothing after an error; what waits is flushed with sq_failed.
	 */
	bool sq_erring;
	/*
	 * A receive completed with the application's error (sq_lock): the
	 * home member is in error, its flushes are not a rail failure.
	 */
	bool rq_failed;
	/* chunks delivered ahead of their WQE's last chunk (sq_lock) */
	u32 chunk_bytes;
	u32 chunk_vendor_err;
	u8 chunk_status;

	spinlock_t rq_post_lock;	/* posting order */
	spinlock_t rq_lock;		/* rq ring and indices */
	u64 *rq;			/* application wr_id per slot */
	/*
	 * The receives' SGEs (the application's lkeys) and counts per slot,
	 * to post them again on a new home rail.  rq_rail: the member they
	 * go to; rq_moving: being moved (posts only stored); rq_old_head:
	 * the slots posted to the old member, rq_seen: the old member's
	 * flushes seen up to (rq_lock).
	 */
	struct ib_sge *rq_sge;
	u8 *rq_nsge;
	unsigned int rq_rail;
	bool rq_moving;
	u32 rq_old_head;
	u32 rq_seen;
	/* kernel QPs: the DMA mapping per member WQE (rbond_dma.c) */
	struct rbond_dmamap *sq_dma;
	struct rbond_dmamap *rq_dma;
	u32 rq_size;
	u32 rq_head;
	u32 rq_tail;
};

/*
 * An address handle: the bond's address vector, and a member AH on every
 * rail whose member PD can reach it (the GID it names is on that rail),
 * for UD QPs homed there.  member[] under lock (posts read it, rail
 * removal and destroy clear it); list: rbond_dev.ahs under ah_lock.
 */
struct rbond_ah {
	struct ib_ah ibah;
	struct rdma_ah_attr attr;
	struct list_head list;
	spinlock_t lock;		/* member[] */
	struct ib_ah *member[RBOND_MAX_RAILS];
};

static inline struct rbond_swqe *
rbond_sq_slot(const struct rbond_qp *qp, u32 seq)
{
	return &qp->sq[seq & (qp->sq_size - 1)];
}

static inline struct rbond_dev *to_rbond_dev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct rbond_dev, ibdev);
}

static inline struct rbond_pd *to_rbond_pd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct rbond_pd, ibpd);
}

static inline struct rbond_mr *to_rbond_mr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct rbond_mr, ibmr);
}

static inline struct rbond_cq *to_rbond_cq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct rbond_cq, ibcq);
}

static inline struct rbond_qp *to_rbond_qp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct rbond_qp, ibqp);
}

/* a member wr_id of @qp (see RBOND_WRID_SRQ) */
static inline u64 rbond_wrid(const struct rbond_qp *qp, bool recv, u32 seq)
{
	return ((u64)qp->id << RBOND_WRID_ID_SHIFT) |
	       (recv ? RBOND_WRID_RECV : 0) | seq;
}

static inline struct rbond_srq *to_rbond_srq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct rbond_srq, ibsrq);
}

static inline struct rbond_ah *to_rbond_ah(struct ib_ah *ibah)
{
	return container_of(ibah, struct rbond_ah, ibah);
}

static inline bool rbond_rail_present(const struct rbond_dev *bond,
				      unsigned int i)
{
	return i < RBOND_MAX_RAILS && bond->rails[i].ibdev;
}

static inline void rbond_stat_add(struct rbond_dev *bond, unsigned int rail,
				  enum rbond_rail_stat stat, u64 val)
{
	if (rail < RBOND_MAX_RAILS)
		atomic64_add(val, &bond->rails[rail].stats[stat]);
}

/* Next present rail at or after @i, or RBOND_MAX_RAILS. */
static inline unsigned int rbond_next_rail(const struct rbond_dev *bond,
					   unsigned int i)
{
	while (i < RBOND_MAX_RAILS && !bond->rails[i].ibdev)
		i++;
	return i;
}

/* rbond_main.c */
extern struct workqueue_struct *rbond_wq;
bool rbond_is_bond(const struct ib_device *ibdev);
void rbond_dealloc_driver(struct ib_device *ibdev);

/* rbond_dev.c */
struct rbond_dev *rbond_dev_alloc(void);
int rbond_dev_register(struct rbond_dev *bond, const char *name);
void rbond_dev_init_attr(struct rbond_dev *bond);
bool rbond_dev_rail_fits(const struct rbond_dev *bond,
			 const struct ib_device *member);
void rbond_dev_update_port_state(struct rbond_dev *bond);
void rbond_dev_set_live(struct rbond_dev *bond, bool live);
void rbond_ah_remove_rail(struct rbond_dev *bond, unsigned int rail);
int rbond_translate_ah_attr(struct rbond_dev *bond, unsigned int rail,
			    const struct rdma_ah_attr *in,
			    struct rdma_ah_attr *out,
			    const struct ib_gid_attr **member_gid);

/* rbond_net.c */
__be32 rbond_ndev_ipv4(struct net_device *ndev);
bool rbond_route_via(struct net_device *ndev, __be32 saddr, __be32 daddr);

/* rbond_options.c */
enum rbond_opt_id {
	RBOND_OPT_POLICY,
	RBOND_OPT_ORDERING,
	RBOND_OPT_STRIPE_THRESHOLD,
	RBOND_OPT_RAIL_WINDOW,
	RBOND_OPT_STALL_MS,
	RBOND_OPT_SILENT_MS,
	RBOND_NR_OPTS
};

extern struct device_attribute rbond_opt_attrs[RBOND_NR_OPTS];
void rbond_opts_init(struct rbond_dev *bond);

/* rbond_mr.c */
int rbond_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
int rbond_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata);
struct ib_mr *rbond_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *rbond_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt_addr, int access,
				struct ib_udata *udata);
int rbond_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
void rbond_pd_remove_rail(struct rbond_pd *pd, unsigned int rail);
void rbond_mr_remove_rail(struct rbond_mr *mr, unsigned int rail);
struct rbond_mr *rbond_mr_lookup(struct rbond_pd *pd, u32 lkey);
/* rbond_dma.c */
struct rbond_dmamap *rbond_dma_alloc(u32 n);
void rbond_dma_unmap(struct rbond_dmamap *m);
int rbond_dma_map(struct rbond_dmamap *m, struct ib_device *dev,
		  struct ib_sge *sge, unsigned long kva,
		  enum dma_data_direction dir);
void rbond_dma_unmap_dev(struct rbond_dmamap *m, u32 n, struct ib_device *dev);
void rbond_dma_unmap_qp(struct rbond_qp *qp, struct ib_device *dev);
enum dma_data_direction rbond_dma_send_dir(enum ib_wr_opcode op);

static inline struct rbond_dmamap *
rbond_dma_slot(struct rbond_dmamap *m, u32 size, u32 seq)
{
	return m ? &m[seq & (size - 1)] : NULL;
}

int rbond_mr_rail_lkey(struct rbond_pd *pd, u32 lkey, unsigned int rail,
		       u32 *out);

/* rbond_cq.c */
int rbond_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int rbond_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int rbond_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void rbond_cq_drain_member(struct rbond_cq *cq, unsigned int rail);
bool rbond_cq_push(struct rbond_cq *cq, const struct ib_wc *wc);
void rbond_cq_clean_qp(struct rbond_cq *cq, struct rbond_qp *qp);
void rbond_cq_remove_rail(struct rbond_cq *cq, unsigned int rail);
void rbond_cq_notify(struct rbond_cq *cq, bool notify, bool overflow);
void rbond_cq_unlock_notify(struct rbond_cq *cq, bool added,
			    unsigned long flags);
void rbond_cq_kick(struct rbond_cq *cq);
int rbond_cq_fit(struct rbond_cq *cq);

/* rbond_qp.c */
int rbond_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init_attr,
		    struct ib_udata *udata);
int rbond_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		    int attr_mask, struct ib_udata *udata);
int rbond_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
		   int attr_mask, struct ib_qp_init_attr *init_attr);
int rbond_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
void rbond_qp_set_psn(struct rbond_qp *qp, unsigned int rail,
		      const struct ib_qp_attr *attr, int mask);

/* rbond_srq.c */
int rbond_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int rbond_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int rbond_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int rbond_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int rbond_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr);
void rbond_srq_attach(struct rbond_srq *srq, struct rbond_qp *qp);
void rbond_srq_detach(struct rbond_qp *qp);
void rbond_srq_remove_rail(struct rbond_srq *srq, unsigned int rail);
bool rbond_srq_recv_wc(struct rbond_dev *bond, struct rbond_cq *cq,
		       unsigned int rail, const struct ib_wc *mwc);
int rbond_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp);
void rbond_qp_remove_rail(struct rbond_qp *qp, unsigned int rail);
void rbond_qp_destroy_member(struct rbond_qp *qp, unsigned int rail);

/* rbond_park.c */
void rbond_park_init(struct rbond_dev *bond);
void rbond_park_stop(struct rbond_dev *bond);
void rbond_park_rail_on(struct rbond_dev *bond, unsigned int rail);
void rbond_park_rail_off(struct rbond_dev *bond, unsigned int rail);
bool rbond_park_qp(struct rbond_dev *bond, unsigned int rail,
		   struct ib_qp *mqp);
void rbond_member_destroy_qp(struct rbond_dev *bond, unsigned int rail,
			     struct ib_qp *mqp);
void rbond_member_destroy_cq(struct rbond_dev *bond, unsigned int rail,
			     struct ib_cq *mcq);
void rbond_member_destroy_srq(struct rbond_dev *bond, unsigned int rail,
			      struct ib_srq *msrq);
void rbond_member_dealloc_pd(struct rbond_dev *bond, unsigned int rail,
			     struct ib_pd *mpd);

/* rbond_post.c */
int rbond_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr);
int rbond_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr);
bool rbond_post_drain(struct rbond_qp *qp);
void rbond_post_flush_pending(struct rbond_qp *qp);
unsigned int rbond_post_replay(struct rbond_qp *qp, unsigned int rail,
			       u64 *bytes);
int rbond_post_alloc_pending(struct rbond_qp *qp);
void rbond_post_free(struct rbond_qp *qp);
void rbond_post_reset_sq(struct rbond_qp *qp, bool home_ok);
unsigned int rbond_post_recv_move(struct rbond_qp *qp, unsigned int rail);
unsigned int rbond_post_home_replay(struct rbond_qp *qp, unsigned int old,
				    u32 epsn, u64 *bytes, unsigned int *lost,
				    bool *reads);

/* rbond_comp.c */
bool rbond_qp_recv_deliver(struct rbond_dev *bond, struct rbond_qp *qp,
			   unsigned int rail, struct ib_wc *wc);
bool rbond_qp_process_wc(struct rbond_dev *bond, struct rbond_cq *cq,
			 unsigned int rail, const struct ib_wc *mwc);
bool rbond_qp_deliver(struct rbond_qp *qp);
void rbond_qp_deliver_posted(struct rbond_qp *qp);
void rbond_qp_kick(struct rbond_qp *qp);
void rbond_qp_flush(struct rbond_qp *qp);
void rbond_qp_flush_rail(struct rbond_qp *qp, unsigned int rail,
			 enum ib_wc_status status);
int rbond_qp_replay_rail(struct rbond_qp *qp, unsigned int rail, bool force,
			 u64 *bytes);

#endif /* RBOND_H */
