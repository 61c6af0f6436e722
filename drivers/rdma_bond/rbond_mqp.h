/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: multi-rail internals, shared by rbond_mqp.c (the multi-rail
 * state of a QP, its registry and the hooks the QP calls),
 * rbond_negotiate.c (the negotiation of extra rails with the peer) and
 * rbond_rkey.c (remote-key translation and revocation).
 *
 * Locks: mq->lock (mutex, the negotiation's state) -> bond->lock -> ...;
 * rbond_mq_mutex (registry) -> bond->lock; the QP's data-path state under
 * qp->sq_lock; mq->attr_lock (irqsave) for the application's attributes
 * and the inbox from the control channel.
 */
#ifndef RBOND_MQP_H
#define RBOND_MQP_H

#include "rbond.h"
#include "rbond_ctrl.h"
#include "rbond_mrail.h"

#define RBOND_MQ_RETRY_MS	200
#define RBOND_RESOLVE_MS	1000	/* neighbour resolution, per rail */
#define RBOND_RAIL_HOP_LIMIT	64
#define RBOND_RKEY_BATCH	16	/* RKEY_REQs per pass of the key work */
#define RBOND_MQ_MAX_TRIES	50
/*
 * Tries without any QP_RSP on a connection that is up: its peer end is
 * gone (half-open); it goes, the next try connects anew
 */
#define RBOND_MQ_DEAF_TRIES	25
#define RBOND_RKEY_MAX		1024
#define RBOND_RKEY_RETRY	(HZ / 2)
#define RBOND_RKEY_TRIES	8
#define RBOND_RKEY_NEG_TTL	(10 * HZ)	/* a refused key is asked again */
#define RBOND_INVAL_TIMEOUT	(2 * HZ)
#define RBOND_FO_FENCE_RETRY_MS	100	/* FENCE sent again */
#define RBOND_FO_FENCE_MS	3000	/* no FENCE_ACK: the WQEs fail */
#define RBOND_FO_FLUSH_MS	1000	/* member flushes awaited at most */
/* a home member that only flushed: how long a rail fault may still show */
#define RBOND_FO_VERDICT_MS	50
/* a home rail's move not agreed with the peer by then: the QP fails */
#define RBOND_FO_HOME_MS	10000
#define RBOND_FO_WATCH_MS	50	/* stall watchdog period */
#define RBOND_REJOIN_HOLD_MS	1000	/* port up this long before rejoin */
#define RBOND_REJOIN_MIN_MS	2000	/* failed without a port event: retry */
#define RBOND_REJOIN_MAX_MS	60000	/* backoff limit */
#define RBOND_REJOIN_TRIES	25	/* QP_REQs per rejoin */
/* a rejoin probe not answered in this long failed (rbond_mq_rejoin_probe) */
#define RBOND_REJOIN_PROBE_MS	15000
/* an extra member's receive queue: the peer's probe only */
#define RBOND_PROBE_RECV_WR	1

enum rbond_mstate {
	RBOND_M_NONE,
	RBOND_M_INIT,
	RBOND_M_RTR,
	RBOND_M_RTS,
	RBOND_M_ERR,
};

/* the health probe of a rejoining member (rbond_negotiate.c) */
enum rbond_probe_state {
	RBOND_PROBE_NONE,
	RBOND_PROBE_SENT,
	RBOND_PROBE_OK,
	RBOND_PROBE_FAILED,
};

struct rbond_member_qp {
	struct ib_qp *qp;
	u32 psn;
	u8 state;		/* enum rbond_mstate */
	s8 peer;		/* index into peer rails, -1 unpaired */
	bool published;		/* owned by qp->member[] */
	__be32 addr;
	/* enum rbond_probe_state: cmpxchg from SENT by the completion */
	u32 probe;
	/*
	 * The member the probe went to: compared with a completion's QP,
	 * never dereferenced (a completion may outlive its member QP)
	 */
	struct ib_qp *probe_qp;
	unsigned long probe_sent;	/* jiffies */
};

/*
 * The negotiation of one QP's extra rails (mq->state, changed only by
 * rbond_mq_set_state() under mq->lock):
 *
 *   INIT --(RTR: members created)--> ASKING --(QP_RSP OK)--> AGREED
 *   AGREED --(RTS, members at RTS: rbond_mq_publish)--> UP
 *   any --(plain peer, refusal, no members, home rail lost)--> SINGLE
 *   any --(modify_qp RESET)--> INIT
 *
 * A QP_REQ from the peer is answered in every state from RTR on (SINGLE:
 * the refusal that is also the answer for no such QP).
 */
enum rbond_neg_state {
	RBOND_NEG_INIT,
	RBOND_NEG_ASKING,
	RBOND_NEG_AGREED,
	RBOND_NEG_UP,
	RBOND_NEG_SINGLE,
	RBOND_NR_NEG_STATES
};

struct rbond_mqp {
	struct rbond_qp *qp;
	struct rbond_dev *bond;
	struct hlist_node hnode;	/* rbond_mq_hash, rbond_mq_mutex */
	bool registered;
	struct ib_device *home_dev;
	struct mutex lock;		/* the work's state */
	struct delayed_work work;
	struct work_struct fail_work;	/* members to error, see qp_failed */
	bool dead;
	bool sized;			/* counted in its CQs' mrail_wr */

	spinlock_t attr_lock;		/* app attrs, inbox */
	struct ib_qp_attr app;
	int app_mask;
	bool have_rtr, have_rts;
	__be32 peer_addr;
	u32 peer_qpn;
	u8 nonce[8];			/* ours, random, constant */
	/* inbox from the control channel */
	bool req_pending;
	struct rbond_conn *req_conn;
	struct rbond_msg req;
	bool rsp_pending;
	struct rbond_conn *rsp_conn;
	struct rbond_msg rsp;
	/* the peer QP's nonce (attr_lock to write; set once) */
	bool have_peer_nonce;
	u8 peer_nonce[8];
	/*
	 * (attr_lock) The peer's nonce before our last RESET: QP_REQs that
	 * carry it are from the peer's previous connection (rbond_mq_req_stale())
	 */
	bool have_old_peer_nonce;
	u8 old_peer_nonce[8];

	/* work state (mq->lock) */
	enum rbond_neg_state state;	/* READ_ONCE outside mq->lock */
	struct rbond_conn *conn;	/* our active connection */
	unsigned int tries;
	bool conn_heard;		/* a QP_RSP came on conn */
	unsigned long dead_seen;	/* conn seen dead (jiffies), or 0 */
	unsigned int renew_fails;	/* new connections that failed since */
	wait_queue_head_t up_wq;	/* UP or SINGLE: rbond_mrail_wait_up() */
	bool have_peer;
	u8 peer_nrails;
	struct rbond_msg_rail peer_rail[RBOND_MAX_RAILS];
	struct rbond_member_qp m[RBOND_MAX_RAILS];

	/* extra rails published (qp->sq_lock to write) */
	bool up;

	/*
	 * Failover of extra rails (rbond_failover.c), bit per local rail.
	 * fo_want: failing over (set under qp->sq_lock by rbond_fo_mark(),
	 * cleared by the work); fo_local: our member stopped; fo_peer: the
	 * peer's member stopped (its FENCE or FENCE_ACK); fo_failed: rails
	 * this QP lost.  Atomic bit operations; the rest under mq->lock.
	 */
	struct delayed_work fo_work;
	unsigned long fo_want, fo_local, fo_peer, fo_failed;
	u8 fo_reason[RBOND_MAX_RAILS];	/* enum rbond_fail_reason */
	u64 fo_t0[RBOND_MAX_RAILS];	/* ktime of detection */
	u64 fo_since[RBOND_MAX_RAILS];	/* of the failure, as known */
	unsigned long fo_sent[RBOND_MAX_RAILS];	/* jiffies, last FENCE */
	/* inbox (attr_lock): FENCE / FENCE_ACK for our rail, from peer rail */
	unsigned long fence_in, ack_in;
	u8 fence_from[RBOND_MAX_RAILS], ack_from[RBOND_MAX_RAILS];
	u32 fence_qpn[RBOND_MAX_RAILS], ack_qpn[RBOND_MAX_RAILS]; /* ours */
	u32 fence_src[RBOND_MAX_RAILS];	/* the FENCE's sender's member */
	u8 fence_flags[RBOND_MAX_RAILS], ack_flags[RBOND_MAX_RAILS];
	u8 fence_nh[RBOND_MAX_RAILS];	/* RBOND_FENCE_HOME: our new home */
	u32 fence_epsn[RBOND_MAX_RAILS], ack_epsn[RBOND_MAX_RAILS];
	u32 fo_qpn[RBOND_MAX_RAILS];	/* our member that failed */
	struct rbond_conn *fence_conn;	/* where to acknowledge */
	/*
	 * The peer's bad request (rbond_fo_peer_err()): perr_held, rails
	 * whose peer member refused ours, before that error is delivered;
	 * perr_want, once it is (atomic bits both: tell the peer);
	 * perr_in (attr_lock), rails of ours whose member, perr_qpn[], the
	 * peer says refused its request.
	 */
	unsigned long perr_held, perr_want, perr_in;
	u32 perr_qpn[RBOND_MAX_RAILS];

	/*
	 * Failover of the home rail, "home move" (rbond_failover.c; mq->lock
	 * unless said): mv_old the failed home rail, mv_new the new one (-1
	 * while not chosen); mv_fenced: our old home member stopped, its
	 * receives held; mv_ready: the receives moved and mv_epsn (what our
	 * old member's responder expected next) known; from the peer
	 * (attr_lock): mv_peer_epsn once mv_have_peer, mv_peer_nh (our rail
	 * it named the new home, -1) and a FENCE to acknowledge on
	 * mv_ack_conn; mv_conn: our control connection between the new home
	 * rails; home_moved: the home rail moved (the QP's first home member
	 * is no longer its home).  mv_active is read locklessly by the post path.
	 */
	bool mv_active, mv_fenced, mv_ready, home_moved;
	u8 mv_old;
	s8 mv_new;
	u32 mv_epsn, mv_qpn;
	unsigned long mv_sent;
	struct rbond_conn *mv_conn;
	bool mv_have_peer;
	s8 mv_peer_nh;
	u32 mv_peer_epsn;
	struct rbond_conn *mv_ack_conn;
	u8 mv_ack_from;			/* the FENCE's sender's rail */
	u32 mv_ack_src;			/* and member */
	u8 peer_home;			/* index into peer_rail[] */
	__be32 home_laddr;		/* our first home rail's address */
	u8 key_home;			/* the first home rail */
	/*
	 * The first home member once its rail rejoined the QP as an extra
	 * rail and a new member took its slot in qp->member[] (bond->lock):
	 * in error, kept for a reset to return to, for query_qp and for
	 * destruction.  NULL while it is still in that slot.
	 */
	struct ib_qp *first;
	/*
	 * (bond->lock) The first home member stopped with a READ of ours
	 * unfinished on it, maybe in the middle of its response: once a
	 * reset took the QP back to it and it is at RTS again, it gets a
	 * zero-length READ before anything else (rbond_mrail_prime()).
	 */
	bool first_dirty;
	/*
	 * (bond->lock) What the application set, read from the first home
	 * member just before its device went (rbond_qp_remove_rail()):
	 * query_qp's answer once no member has it.  NULL until then.
	 */
	struct ib_qp_attr *first_attr;

	/*
	 * Failback (rbond_negotiate.c, mq->lock): rails whose new member is
	 * being negotiated (rejoin) and rails to start that for, not before
	 * rejoin_at (rejoin_want: atomic bit operations); when the last
	 * QP_REQ of a rejoin went (jiffies).
	 */
	unsigned long rejoin, rejoin_want, rejoin_sent;
	bool rejoin_tell;		/* one more QP_REQ: ours is in use */
	unsigned long rejoin_at[RBOND_MAX_RAILS];
	unsigned int rejoin_backoff[RBOND_MAX_RAILS];	/* ms */
	unsigned long joined_at[RBOND_MAX_RAILS];	/* jiffies */
	/*
	 * Why the home could not move, as last logged (rails_up and
	 * fo_rails, rbond_fo_mark_home(), sq_lock): said once, not at
	 * every watchdog pass of a silence
	 */
	u32 home_stuck;
};

struct rbond_rkey {
	struct hlist_node node;
	struct rcu_head rcu;
	u32 rkey;
	/* the QP pair asking (the last one, rbond_rkey_rebind()), conn->lock */
	u32 src_qpn, dst_qpn;
	u8 echo[8];		/* the owner QP's nonce, for RKEY_REQ */
	u8 state;
	u8 tries;
	bool relaxed;
	u8 rail_valid;
	u32 access;
	unsigned long stamp;
	u32 rail_rkey[RBOND_MAX_RAILS];
};

enum { RBOND_RK_PENDING, RBOND_RK_SENT, RBOND_RK_VALID, RBOND_RK_NEG };

struct rbond_handed {
	struct hlist_node node;
	u32 rkey;
	struct rbond_mr *mr;
};

struct rbond_invw {
	struct list_head list;
	u32 rkey;
	bool done;
};

/* rbond_mqp.c */
extern struct mutex rbond_mq_mutex;
struct rbond_mqp *rbond_mq_find(struct ib_device *dev, u32 qpn);
struct rbond_mqp *rbond_mq_find_conn(struct rbond_conn *conn, u32 qpn);
bool rbond_mq_peer_addr_ok(struct rbond_mqp *mq, __be32 raddr);
void rbond_mq_for_each(struct rbond_dev *bond,
		       void (*fn)(struct rbond_mqp *mq, void *arg), void *arg);
void rbond_mq_walk(struct rbond_dev *bond,
		   void (*fn)(struct rbond_mqp *mq, void *arg), void *arg);
void rbond_mq_kick(struct rbond_mqp *mq, unsigned long delay);
void rbond_mq_kick_later(struct rbond_mqp *mq, unsigned long delay);
void rbond_mq_set_state(struct rbond_mqp *mq, enum rbond_neg_state st);
const char *rbond_mq_state_name(enum rbond_neg_state st);
__be32 rbond_gid_ipv4(const u8 *gid);

/* rbond_negotiate.c */
void rbond_mq_work(struct work_struct *work);
void rbond_handle_qp_msg(struct rbond_conn *conn, const struct rbond_msg *m);
int rbond_mq_post_probe(struct rbond_mqp *mq, unsigned int i,
			struct ib_qp *member);
int rbond_mq_post_prime(struct rbond_mqp *mq, unsigned int i,
			struct ib_qp *member);

/* rbond_failover.c */
void rbond_fo_mq_init(struct rbond_mqp *mq);
void rbond_fo_mq_reset(struct rbond_mqp *mq);
void rbond_fo_home_prepare(struct rbond_mqp *mq);
void rbond_fo_conn_renew(struct rbond_mqp *mq);
void rbond_fo_want_rejoin(struct rbond_mqp *mq, unsigned int r,
			  unsigned int delay_ms);
void rbond_fo_member_event(struct ib_event *ev, void *ctx);
void rbond_handle_fence(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_handle_peer_err(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_handle_fence_ack(struct rbond_conn *conn,
			    const struct rbond_msg *m);

/* rbond_rkey.c */
void rbond_handle_rkey_req(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_handle_rkey_rsp(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_handle_inval(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_handle_inval_ack(struct rbond_conn *conn,
			    const struct rbond_msg *m);
void rbond_rkey_fetch_work(struct work_struct *work);
void rbond_rkey_conn_release(struct rbond_conn *conn);
void rbond_inval_wake(struct rbond_conn *conn);

#endif /* RBOND_MQP_H */
