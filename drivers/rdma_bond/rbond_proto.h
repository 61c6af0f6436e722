/* SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB */
/*
 * rdma_bond: the control channel's wire format (both hosts' modules).
 * Every message is one struct rbond_msg, big endian, in a buffer of
 * RBOND_CTRL_MSG_SIZE bytes; see Documentation/rdma_bond.rst, "Multi-rail".
 */
#ifndef RBOND_PROTO_H
#define RBOND_PROTO_H

#include <linux/types.h>
#include <rdma/rdma_bond-abi.h>

#define RBOND_CTRL_MAGIC	0x52424e44	/* "RBND" */
/*
 * 2: nonces; 3: FENCE, rail state.  The home-rail FENCE (RBOND_FENCE_HOME)
 * uses fields that were reserved in 3 and that a sender of 3 zeroes: a
 * peer that does not know it refuses it (no acknowledgment) and the QP
 * fails as before.
 */
#define RBOND_CTRL_VERSION	3
#define RBOND_CTRL_MSG_SIZE	256

enum rbond_msg_type {
	RBOND_MSG_QP_REQ = 1,	/* negotiate a bond QP pair */
	RBOND_MSG_QP_RSP,
	RBOND_MSG_RKEY_REQ,	/* translate a primary rkey */
	RBOND_MSG_RKEY_RSP,
	RBOND_MSG_INVAL,	/* drop a translation (owner deregisters) */
	RBOND_MSG_INVAL_ACK,
	RBOND_MSG_FENCE,	/* a rail failed: stop your member QP on it */
	RBOND_MSG_FENCE_ACK,	/* it is stopped */
	/*
	 * Every heartbeat_ms on every connection (not a version change:
	 * a peer that does not know it counts it bad and sends none, and a
	 * connection we never had one on is not watched)
	 */
	RBOND_MSG_HEARTBEAT,
	/*
	 * Your member on a rail refused a request of ours (we got a NAK:
	 * remote access, invalid request, remote operation error) and is in
	 * error, as an RC responder goes: so is your QP.  FENCE's body
	 * (rail: ours, peer_rail, peer_qpn: your member), no answer.  Not a
	 * version change: a peer that does not know it counts it bad.
	 */
	RBOND_MSG_PEER_ERR,
	RBOND_MSG_NR
};

enum rbond_msg_status {
	RBOND_ST_OK,
	RBOND_ST_NOT_READY,	/* QP not at RTR yet: retry */
	RBOND_ST_NOENT,		/* no such QP / MR */
	RBOND_ST_PERM,		/* not connected to the asker */
};

#define RBOND_FENCE_HOME	0x01	/* the QP pair's home rails failed */
#define RBOND_FENCE_EPSN	0x02	/* epsn is valid */

struct rbond_msg_rail {
	u8 gid[16];		/* rail address (IPv4-mapped) */
	__be32 qpn;		/* member QPN on that rail */
	__be32 psn;		/* its initial send PSN */
	u8 index;		/* sender's rail index */
	u8 state;		/* v3: INIT 1, RTR 2 (receives), RTS 3 */
	u8 rsvd[2];
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
	 * echo = the owner QP's nonce; FENCE: echo = the receiver QP's
	 * nonce; FENCE_ACK: echo = the FENCE's sender's.  Zero elsewhere.
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
		struct {
			u8 rail;	/* sender's rail index */
			u8 peer_rail;	/* receiver's rail index */
			u8 reason;	/* enum rbond_fail_reason */
			u8 flags;	/* RBOND_FENCE_* */
			/* the member QPs: this failure's pair, no later one */
			__be32 qpn;	/* sender's on that rail */
			__be32 peer_qpn; /* receiver's, as the sender knows it */
			/* RBOND_FENCE_HOME: the home rails move there */
			u8 new_home;	/* sender's rail index */
			u8 peer_new_home; /* receiver's rail index */
			u8 rsvd[2];
			/*
			 * RBOND_FENCE_EPSN: the PSN the sender's stopped
			 * member expected next (its responder executed
			 * everything before it)
			 */
			__be32 epsn;
		} fence;
		struct {
			/*
			 * How long the sender's queue on the rail takes to
			 * drain (its bytes outstanding at its rate), in us:
			 * what may delay the next heartbeat
			 */
			__be32 queue_us;
			u8 rsvd[4];
		} hb;
	};
};

#endif /* RBOND_PROTO_H */
