/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: the control channel between two hosts' modules (rbond_ctrl.c):
 * connections, their limits, and the handlers it dispatches messages to
 * (registered by the multi-rail code, rbond_mqp.c).  Wire format:
 * rbond_proto.h.
 */
#ifndef RBOND_CTRL_H
#define RBOND_CTRL_H

#include <linux/hashtable.h>
#include <linux/kref.h>
#include "rbond.h"
#include "rbond_proto.h"

#define RBOND_CTRL_PORT		18515
#define RBOND_CTRL_RX		32
#define RBOND_CTRL_TX		32
#define RBOND_CTRL_NBUF		(RBOND_CTRL_RX + RBOND_CTRL_TX)
#define RBOND_CTRL_CM_TIMEOUT_MS 2000
#define RBOND_CTRL_RETRY	7	/* RC retry and RNR retry counts */
#define RBOND_CTRL_BACKLOG	8	/* rdma_listen() */
#define RBOND_CTRL_FAIL_HOLD	(60 * HZ)
/* a connection's teardown waits for its port to be up: checked this often */
#define RBOND_CTRL_DOWN_POLL_MS	250
/*
 * Heartbeats: one every heartbeat_ms (module parameter, 0: none) per
 * connection, at most RBOND_CTRL_HB_INFLIGHT not acknowledged (a rail with
 * a long queue or delay still carries one every heartbeat_ms; a dead one
 * does not take every send buffer)
 */
#define RBOND_CTRL_HB_INFLIGHT	8
#define RBOND_CTRL_HB_MAX_QUEUE_US (2 * USEC_PER_SEC)	/* a peer's claim, at most */
/*
 * A connection whose peer, a heartbeat sender, has been silent this long
 * (and at least this many of its intervals) has no peer end: it goes
 */
#define RBOND_CTRL_HB_DEAD_MS	5000U
#define RBOND_CTRL_HB_DEAD_BEATS 20U
/*
 * Only the peer's kernel module may speak on the control channel: the
 * active side binds a source port below PROT_SOCK (rdma_cm refuses those
 * without CAP_NET_BIND_SERVICE), the listener refuses any other.
 */
#define RBOND_CTRL_SPORT_MIN	512
#define RBOND_CTRL_SPORT_MAX	1023
/* Bounds on what peers and local users can make us allocate. */
#define RBOND_CTRL_MAX_PASSIVE	128	/* accepted connections, all peers */
#define RBOND_CTRL_MAX_PER_ADDR	16	/* accepted connections per peer address */
#define RBOND_CTRL_MAX_ACTIVE	128	/* our connections, incl. negative entries */

enum rbond_conn_state {
	RBOND_CONN_CONNECTING,
	RBOND_CONN_UP,
	RBOND_CONN_FAILED,	/* active probe failed: negative cache */
	RBOND_CONN_DEAD,
};

#define RBOND_RKEY_HASH_BITS	6

struct rbond_conn;

struct rbond_cbuf {
	struct ib_cqe cqe;
	struct rbond_conn *conn;
	unsigned int idx;
};

struct rbond_conn {
	struct list_head list;		/* rbond_conns, or a reap list */
	bool listed;			/* on rbond_conns: the list's ref */
	struct kref ref;
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_device *dmadev;
	u32 port;			/* of dmadev, the connection's */
	void *buf;
	u64 dma;
	struct rbond_cbuf cbufs[RBOND_CTRL_NBUF];
	bool active;
	__be32 laddr;
	__be32 raddr;
	unsigned long fail_time;

	spinlock_t lock;		/* irqsave: state, tx, tables below */
	enum rbond_conn_state state;
	unsigned long tx_busy;
	u32 seq;
	/* active side: peer primary rkey -> struct rbond_rkey (RCU) */
	DECLARE_HASHTABLE(rkeys, RBOND_RKEY_HASH_BITS);
	unsigned int nr_rkeys;
	/* passive side: our rkeys handed out on this connection */
	DECLARE_HASHTABLE(handed, RBOND_RKEY_HASH_BITS);
	unsigned int nr_handed;
	struct list_head invals;	/* struct rbond_invw awaiting ACK */
	/*
	 * Heartbeat: hb_busy our heartbeats' send buffers in flight (bits
	 * as tx_busy), hb_sent when the last went (conn->lock); hb_rx when
	 * the peer's last message came, hb_seen once a heartbeat did, and
	 * the peer's queue_us in it (the receive handler writes, READ_ONCE
	 * elsewhere)
	 */
	unsigned long hb_busy;
	unsigned long hb_sent;
	unsigned long hb_rx;
	bool hb_seen;
	u32 hb_queue_us;

	struct delayed_work down_work;	/* rbond_conn_down_work() */
	bool down_waits;		/* the work's: it waits for the port */
	struct work_struct rkey_work;
};

/**
 * struct rbond_ctrl_ops - what the control channel calls
 * @msg: handler per message type (enum rbond_msg_type), from the
 *	connection's CQ (IB_POLL_WORKQUEUE: process context); a type
 *	without one is counted bad
 * @conn_up: an active connection is established (cm handler)
 * @conn_down: a connection was torn down, or is dead and waits for its
 *	port to be torn down (process context)
 * @conn_release: its last reference goes (process context): drop the
 *	tables below
 * @rkey_work: the function of the connection's rkey_work
 */
struct rbond_ctrl_ops {
	void (*msg[RBOND_MSG_NR])(struct rbond_conn *conn,
				  const struct rbond_msg *m);
	void (*conn_up)(struct rbond_conn *conn);
	void (*conn_down)(struct rbond_conn *conn);
	void (*conn_release)(struct rbond_conn *conn);
	work_func_t rkey_work;
};

/* Control-channel counters (module parameter mrail_stats) */
struct rbond_ctrl_stats {
	atomic64_t probes_failed;
	atomic64_t bad_msgs;
	atomic64_t half_open;	/* taken down: the peer's end was gone */
};

extern struct rbond_ctrl_stats rbond_ctrl_stats;

/* rbond_ctrl.c */
void rbond_ctrl_register(const struct rbond_ctrl_ops *ops);
void rbond_conn_get(struct rbond_conn *conn);
void rbond_conn_put(struct rbond_conn *conn);
int rbond_ctrl_send(struct rbond_conn *conn, struct rbond_msg *msg, u8 type,
		    u32 status);
void rbond_ctrl_listen(__be32 addr);
struct rbond_conn *rbond_ctrl_connect(__be32 laddr, __be32 raddr);
struct rbond_conn *rbond_ctrl_connect_now(__be32 laddr, __be32 raddr);
void rbond_ctrl_forget_failed(__be32 laddr);
void rbond_ctrl_forget_addr(__be32 addr);
void rbond_ctrl_conn_kill(struct rbond_conn *conn);
void rbond_ctrl_conn_half_open(struct rbond_conn *conn);
void rbond_ctrl_remove_device(struct ib_device *dev);
struct rbond_conn_iter {
	void (*fn)(struct rbond_conn *conn, void *arg);
	void *arg;
};

void rbond_ctrl_walk_conns(const struct rbond_conn_iter *it);
bool rbond_ctrl_hb_on(void);
bool rbond_ctrl_silence(struct rbond_conn *conn, unsigned int *ms,
			u32 *queue_us);
void rbond_ctrl_heartbeat(struct rbond_conn *conn, u32 queue_us);
void rbond_ctrl_exit(void);

#endif /* RBOND_CTRL_H */
