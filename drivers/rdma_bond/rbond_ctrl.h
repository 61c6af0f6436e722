/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: control channel between two hosts' modules (rbond_ctrl.c) and
 * its protocol (rbond_mrail.c).  Wire format: Documentation/rdma_bond.rst,
 * "Multi-rail".
 */
#ifndef RBOND_CTRL_H
#define RBOND_CTRL_H

#include <linux/hashtable.h>
#include <linux/kref.h>
#include "rbond_mrail.h"

#define RBOND_CTRL_PORT		18515
#define RBOND_CTRL_MAGIC	0x52424e44	/* "RBND" */
#define RBOND_CTRL_VERSION	2	/* 2: nonces (rbond_msg.nonce/echo) */
#define RBOND_CTRL_MSG_SIZE	256
#define RBOND_CTRL_RX		32
#define RBOND_CTRL_TX		32
#define RBOND_CTRL_NBUF		(RBOND_CTRL_RX + RBOND_CTRL_TX)
#define RBOND_CTRL_CM_TIMEOUT_MS 2000
#define RBOND_CTRL_FAIL_HOLD	(60 * HZ)
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

enum rbond_msg_type {
	RBOND_MSG_QP_REQ = 1,	/* negotiate a bond QP pair */
	RBOND_MSG_QP_RSP,
	RBOND_MSG_RKEY_REQ,	/* translate a primary rkey */
	RBOND_MSG_RKEY_RSP,
	RBOND_MSG_INVAL,	/* drop a translation (owner deregisters) */
	RBOND_MSG_INVAL_ACK,
};

enum rbond_msg_status {
	RBOND_ST_OK,
	RBOND_ST_NOT_READY,	/* QP not at RTR yet: retry */
	RBOND_ST_NOENT,		/* no such QP / MR */
	RBOND_ST_PERM,		/* not connected to the asker */
};

struct rbond_msg_rail {
	u8 gid[16];		/* rail address (IPv4-mapped) */
	__be32 qpn;		/* member QPN on that rail */
	__be32 psn;		/* its initial send PSN */
	u8 index;		/* sender's rail index */
	u8 rsvd[3];
};

struct rbond_msg {
	__be32 magic;
	u8 version;
	u8 type;
	__be16 len;
	__be32 seq;
	__be32 status;
	__be32 src_qpn;		/* sender's bond QP (home QPN) */
	__be32 dst_qpn;		/* receiver's bond QP */
	/*
	 * Binding to one negotiation of one QP pair (random per bond QP):
	 * QP_REQ: nonce = the asker's; QP_RSP: echo = the QP_REQ's nonce,
	 * nonce = the answering QP's (only on OK / NOT_READY); RKEY_REQ:
	 * echo = the owner QP's nonce.  Zero elsewhere.
	 */
	u8 nonce[8];
	u8 echo[8];
	union {
		struct {
			u8 nrails;	/* rail[0] is the home rail */
			u8 rsvd[3];
			struct rbond_msg_rail rail[RBOND_MAX_RAILS];
		} qp;
		struct {
			__be32 rkey;	/* primary (bond) rkey */
			__be32 access;	/* IB_ACCESS_* of the MR */
			__be32 rail_rkey[RBOND_MAX_RAILS]; /* by rail index */
			u8 rail_valid;	/* bit per rail index */
			u8 rsvd[3];
		} key;
	};
};

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
	struct list_head list;		/* rbond_conns */
	struct kref ref;
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_device *dmadev;
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

	struct work_struct down_work;
	struct work_struct rkey_work;
};

struct rbond_mstats {
	atomic64_t probes_failed;
	atomic64_t qp_up;
	atomic64_t rkey_hits;
	atomic64_t rkey_misses;
	atomic64_t rkey_invals;
	atomic64_t inval_timeouts;
	atomic64_t bad_msgs;
	atomic64_t striped;
	atomic64_t chunks;
	atomic64_t waits;
	atomic64_t qp_failed;
};

extern struct rbond_mstats rbond_mstats;

/* rbond_ctrl.c */
void rbond_conn_get(struct rbond_conn *conn);
void rbond_conn_put(struct rbond_conn *conn);
int rbond_ctrl_send(struct rbond_conn *conn, struct rbond_msg *msg, u8 type,
		    u32 status);
void rbond_ctrl_listen(__be32 addr);
struct rbond_conn *rbond_ctrl_connect(__be32 laddr, __be32 raddr);
void rbond_ctrl_conn_kill(struct rbond_conn *conn);
struct rbond_conn_iter {
	void (*fn)(struct rbond_conn *conn, void *arg);
	void *arg;
};

void rbond_ctrl_walk_conns(const struct rbond_conn_iter *it);
__be32 rbond_ndev_ipv4(struct net_device *ndev);
bool rbond_route_via(struct net_device *ndev, __be32 saddr, __be32 daddr);
void rbond_ctrl_exit(void);

/* rbond_mrail.c */
void rbond_mrail_handle_msg(struct rbond_conn *conn, const struct rbond_msg *m);
void rbond_mrail_conn_up(struct rbond_conn *conn);
void rbond_mrail_conn_down(struct rbond_conn *conn);
void rbond_rkey_fetch_work(struct work_struct *work);
void rbond_rkey_flush(struct rbond_conn *conn);
void rbond_inval_wake(void);

#endif /* RBOND_CTRL_H */
