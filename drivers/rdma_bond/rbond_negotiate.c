// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: multi-rail, the negotiation of extra rails.
 *
 * When a bond QP reaches RTR, its work item (rbond_wq) creates one member
 * QP per extra rail, connects the control channel from its home rail
 * address to the peer's primary address, and sends QP_REQ naming the peer
 * bond QP by (connection = primary GID, dst_qpn = the dest_qp_num the
 * application set).  The peer module answers with its own member QPNs,
 * PSNs and rail addresses once its QP is at RTR and connected back to us
 * (authentication by the connection, privileged ports and nonces).  Each
 * side pairs each local rail with the peer rail that the routing table
 * reaches through that rail's netdev and brings its member QPs to RTR/RTS
 * with the application's attributes.  A side uses its extra rails only
 * after a positive QP_RSP (the peer's members are at RTR towards ours):
 * rbond_mq_publish() adds them to the QP's rails (rails_up) at once, the
 * scheduler having accounted every WQE posted before.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sched/signal.h>
#include <net/ipv6.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/rdma_cm.h>
#include <rdma/rdma_netlink.h>

#include "rbond_mqp.h"

/* --- member QPs (work, mq->lock and bond->lock held) ------------------------ */

static int rbond_mq_create_members(struct rbond_mqp *mq)
{
	struct rbond_dev *bond = mq->bond;
	struct rbond_qp *qp = mq->qp;
	struct ib_recv_wr rwr = {};	/* no SGE: a zero-length SEND */
	struct ib_qp_attr attr = {};
	unsigned int i;
	int n = 0;

	if (qp->state == IB_QPS_ERR)
		return 0;	/* went to error before we got here */
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];
		struct ib_qp_init_attr init = {};
		struct ib_qp *member;

		if (i == qp->home || !rbond_rail_present(bond, i) ||
		    !READ_ONCE(bond->rails[i].active) ||
		    m->qp || m->state == RBOND_M_ERR)
			continue;
		if (!qp->pd->member[i] || !qp->scq->member[i] ||
		    !qp->rcq->member[i])
			continue;
		m->addr = rbond_ndev_ipv4(bond->rails[i].ndev);
		if (!m->addr)
			continue;
		init.qp_type = IB_QPT_RC;
		init.send_cq = qp->scq->member[i];
		init.recv_cq = qp->rcq->member[i];
		init.qp_context = qp;
		init.event_handler = rbond_fo_member_event;
		init.sq_sig_type = IB_SIGNAL_REQ_WR;
		init.cap.max_send_wr = qp->slot_cap;
		init.cap.max_send_sge = qp->cap.max_send_sge;
		init.cap.max_inline_data = qp->cap.max_inline_data;
		/*
		 * Room for the application's receives as well: a member
		 * becomes the home rail if the home rail fails.
		 */
		init.cap.max_recv_wr = RBOND_PROBE_RECV_WR +
				       (qp->srq ? 0 : qp->cap.max_recv_wr);
		init.cap.max_recv_sge = max(qp->cap.max_recv_sge, 1U);
		init.port_num = bond->rails[i].port;
		member = ib_create_qp(qp->pd->member[i], &init);
		if (IS_ERR(member)) {
			m->state = RBOND_M_ERR;
			continue;
		}
		attr.qp_state = IB_QPS_INIT;
		attr.pkey_index = 0;
		attr.port_num = bond->rails[i].port;
		/*
		 * Never atomics: a peer atomic on an extra rail would not be
		 * atomic with respect to those on the home rail.
		 */
		attr.qp_access_flags = ((mq->app_mask & IB_QP_ACCESS_FLAGS) ?
			mq->app.qp_access_flags :
			IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ) &
			~IB_ACCESS_REMOTE_ATOMIC;
		if (ib_modify_qp(member, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
				 IB_QP_PORT | IB_QP_ACCESS_FLAGS)) {
			ib_destroy_qp(member);
			m->state = RBOND_M_ERR;
			continue;
		}
		m->qp = member;
		m->psn = get_random_u32() & RBOND_PSN_MASK;
		m->state = RBOND_M_INIT;
		/*
		 * The one receive an extra member ever has: for the peer's
		 * probe when the rail rejoins (application SENDs stay on the
		 * home rail).  Posted before RTR, so before the peer can
		 * see this member at RTR and probe it.
		 */
		rwr.wr_id = RBOND_WRID_PROBE | rbond_wrid(qp, true, i);
		if (ib_post_recv(member, &rwr, NULL))
			ibdev_dbg(&bond->ibdev,
				  "QP 0x%x: rail %u: no probe receive\n",
				  qp->ibqp.qp_num, i);
		n++;
	}
	return n;
}

struct rbond_resolve_ctx {
	struct completion comp;
	int status;
};

static void rbond_resolve_cb(int status, struct sockaddr *src,
			     struct rdma_dev_addr *addr, void *context)
{
	struct rbond_resolve_ctx *ctx = context;

	ctx->status = status;
	complete(&ctx->comp);
}

/*
 * Neighbour resolution of a peer rail address (blocks up to 1 s, the peer
 * chooses the address): no lock held.  Out of the rail's netdev, like
 * resolution by its GID would (set_addr_netns_by_gid_rcu()).
 */
static int rbond_resolve_dmac(int ifindex, __be32 saddr, __be32 daddr,
			      u8 *dmac, int *hoplimit)
{
	struct sockaddr_in src = { .sin_family = AF_INET,
				   .sin_addr.s_addr = saddr };
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_addr.s_addr = daddr };
	struct rdma_dev_addr dev_addr = {};
	struct rbond_resolve_ctx ctx;
	int ret;

	dev_addr.net = &init_net;
	dev_addr.bound_dev_if = ifindex;
	init_completion(&ctx.comp);
	ret = rdma_resolve_ip((struct sockaddr *)&src,
			      (struct sockaddr *)&dst, &dev_addr, RBOND_RESOLVE_MS,
			      rbond_resolve_cb, false, &ctx);
	if (ret)
		return ret;
	wait_for_completion(&ctx.comp);
	if (ctx.status)
		return ctx.status;
	memcpy(dmac, dev_addr.dst_dev_addr, ETH_ALEN);
	*hoplimit = dev_addr.hoplimit;
	return 0;
}

/*
 * How to bring one member QP to RTR, worked out under bond->lock, its
 * neighbour resolved without it (rbond_mq_resolve()).
 */
struct rbond_rtr_plan {
	s8 peer;		/* index into mq->peer_rail, -1: nothing to do */
	bool resolved;
	int ifindex;
	__be32 daddr;
	int hop;
	u8 dmac[ETH_ALEN];
};

/* Pair rail @i with a peer rail reachable through its netdev. */
static int rbond_mq_pair(struct rbond_mqp *mq, unsigned int i,
			 unsigned long used)
{
	struct rbond_dev *bond = mq->bond;
	unsigned int j, k;

	for (k = 0; k < RBOND_MAX_RAILS; k++)
		if (k != i && mq->m[k].peer >= 0)
			used |= BIT(mq->m[k].peer);
	for (j = 1; j < mq->peer_nrails; j++) {
		__be32 pa = rbond_gid_ipv4(mq->peer_rail[j].gid);

		/* qpn 0: its member failed, no new one named yet */
		if (!pa || (used & BIT(j)) || !mq->peer_rail[j].qpn)
			continue;
		if (rbond_route_via(bond->rails[i].ndev, mq->m[i].addr, pa))
			return j;
	}
	return -1;
}

/* A rail's share for the scheduler: its port's signalling rate. */
static u32 rbond_port_weight(const struct ib_port_attr *pattr)
{
	int width = ib_width_enum_to_int(pattr->active_width);

	return pattr->active_speed && width > 0 ?
	       pattr->active_speed * width : 1;
}

/* bond->lock held: which peer rail each member in INIT pairs with. */
static void rbond_mq_plan(struct rbond_mqp *mq,
			  struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	struct rbond_dev *bond = mq->bond;
	unsigned long used = 0;
	unsigned int i;
	int j;

	lockdep_assert_held(&bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		plan[i].peer = -1;
		plan[i].resolved = false;
		if (!mq->have_peer || !m->qp || m->state != RBOND_M_INIT ||
		    !bond->rails[i].ndev)
			continue;
		j = rbond_mq_pair(mq, i, used);
		if (j < 0)
			continue;
		used |= BIT(j);
		plan[i].peer = j;
		plan[i].ifindex = bond->rails[i].ndev->ifindex;
		plan[i].daddr = rbond_gid_ipv4(mq->peer_rail[j].gid);
	}
}

/* No lock held (mq->lock only): the neighbours of the planned rails. */
static void rbond_mq_resolve(struct rbond_mqp *mq,
			     struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	unsigned int i;

	lockdep_assert_held(&mq->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_rtr_plan *p = &plan[i];

		if (p->peer < 0)
			continue;
		p->hop = RBOND_RAIL_HOP_LIMIT;
		p->resolved = !rbond_resolve_dmac(p->ifindex, mq->m[i].addr,
						  p->daddr, p->dmac, &p->hop);
	}
}

static int rbond_mq_rtr(struct rbond_mqp *mq, unsigned int i,
			const struct rbond_rtr_plan *plan)
{
	struct rbond_dev *bond = mq->bond;
	struct rbond_member_qp *m = &mq->m[i];
	const struct rbond_msg_rail *pr;
	const struct ib_gid_attr *sgid;
	struct ib_qp_attr attr = {};
	struct ib_port_attr pattr;
	union ib_gid gid;
	int ret, j = plan->peer;

	/* the rail may have gone (or come) while we resolved unlocked */
	if (j < 0 || !plan->resolved || !bond->rails[i].ndev ||
	    bond->rails[i].ndev->ifindex != plan->ifindex)
		return -ENOENT;
	pr = &mq->peer_rail[j];
	ipv6_addr_set_v4mapped(m->addr, (struct in6_addr *)gid.raw);
	sgid = rdma_find_gid_by_port(bond->rails[i].ibdev, &gid,
				     IB_GID_TYPE_ROCE_UDP_ENCAP,
				     bond->rails[i].port, NULL);
	if (IS_ERR(sgid))
		return PTR_ERR(sgid);
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, bond->rails[i].port);
	attr.ah_attr.ah_flags = IB_AH_GRH;
	memcpy(attr.ah_attr.grh.dgid.raw, pr->gid, 16);
	attr.ah_attr.grh.sgid_attr = sgid;
	attr.ah_attr.grh.sgid_index = sgid->index;
	attr.ah_attr.grh.traffic_class = mq->app.ah_attr.grh.traffic_class;
	memcpy(attr.ah_attr.roce.dmac, plan->dmac, ETH_ALEN);
	attr.ah_attr.grh.hop_limit = plan->hop;
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = mq->app.path_mtu;
	if (!ib_query_port(bond->rails[i].ibdev, bond->rails[i].port,
			   &pattr) && pattr.active_mtu < attr.path_mtu)
		attr.path_mtu = pattr.active_mtu;
	attr.dest_qp_num = be32_to_cpu(pr->qpn);
	attr.rq_psn = be32_to_cpu(pr->psn);
	attr.max_dest_rd_atomic = mq->app.max_dest_rd_atomic;
	attr.min_rnr_timer = mq->app.min_rnr_timer;
	ret = ib_modify_qp(m->qp, &attr, IB_QP_STATE | IB_QP_AV |
			   IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (!ret) {
		rbond_qp_set_psn(mq->qp, i, &attr, IB_QP_PATH_MTU);
		m->state = RBOND_M_RTR;
		m->peer = j;
		mq->qp->s.weight[i] = rbond_port_weight(&pattr);
	}
	rdma_put_gid_attr(sgid);
	return ret;
}

static int rbond_mq_rts(struct rbond_mqp *mq, unsigned int i)
{
	struct rbond_member_qp *m = &mq->m[i];
	struct ib_qp_attr attr = {};
	int ret;

	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = m->psn;
	attr.timeout = mq->app.timeout;
	attr.retry_cnt = mq->app.retry_cnt;
	attr.rnr_retry = mq->app.rnr_retry;
	attr.max_rd_atomic = READ_ONCE(mq->qp->max_rd_atomic);
	ret = ib_modify_qp(m->qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN |
			   IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			   IB_QP_MAX_QP_RD_ATOMIC);
	if (!ret) {
		rbond_qp_set_psn(mq->qp, i, &attr, IB_QP_SQ_PSN);
		m->state = RBOND_M_RTS;
	}
	return ret;
}

/* Bring every member as far as the information goes (bond->lock held). */
static void rbond_mq_advance(struct rbond_mqp *mq, bool rts,
			     const struct rbond_rtr_plan plan[RBOND_MAX_RAILS])
{
	unsigned int i;

	lockdep_assert_held(&mq->lock);
	lockdep_assert_held(&mq->bond->lock);
	if (!mq->have_peer)
		return;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (!m->qp)
			continue;
		if (m->state == RBOND_M_INIT && rbond_mq_rtr(mq, i, &plan[i])) {
			ibdev_dbg(&mq->bond->ibdev,
				  "QP 0x%x: rail %u stays unused (no peer rail)\n",
				  mq->qp->ibqp.qp_num, i);
			continue;
		}
		if (rts && m->state == RBOND_M_RTR && rbond_mq_rts(mq, i))
			m->state = RBOND_M_ERR;
	}
}

static void rbond_mq_fill_rails(struct rbond_mqp *mq, struct rbond_msg *msg,
				bool rtr_only)
{
	struct rbond_dev *bond = mq->bond;
	struct net_device *home = bond->rails[mq->qp->home].ndev;
	unsigned int i, n = 1;
	struct rbond_msg_rail *r;

	lockdep_assert_held(&bond->lock);
	r = &msg->qp.rail[0];
	ipv6_addr_set_v4mapped(home ? rbond_ndev_ipv4(home) : 0,
			       (struct in6_addr *)r->gid);
	r->qpn = cpu_to_be32(mq->qp->ibqp.qp_num);
	r->index = mq->qp->home;
	r->state = RBOND_M_RTS;
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		struct rbond_member_qp *m = &mq->m[i];

		if (!m->qp || m->state == RBOND_M_ERR ||
		    (rtr_only && m->state < RBOND_M_RTR))
			continue;
		r = &msg->qp.rail[n++];
		ipv6_addr_set_v4mapped(m->addr, (struct in6_addr *)r->gid);
		r->qpn = cpu_to_be32(m->qp->qp_num);
		r->psn = cpu_to_be32(m->psn);
		r->index = i;
		r->state = m->state;
	}
	msg->qp.nrails = n;
	msg->src_qpn = cpu_to_be32(mq->qp->ibqp.qp_num);
}

/* Peer rail entry @j is what a member of ours is paired with, not failed. */
static bool rbond_mq_peer_in_use(struct rbond_mqp *mq, unsigned int j)
{
	unsigned int k;

	for (k = 0; k < RBOND_MAX_RAILS; k++)
		if (mq->m[k].peer == j && mq->m[k].qp &&
		    mq->m[k].state != RBOND_M_ERR)
			return true;
	return false;
}

/*
 * The peer's rails from its QP_REQ or QP_RSP: the first time as they come;
 * later (a rail rejoins with a new member) entry by entry, matched by the
 * peer's rail index so that the positions our members' pairings point at
 * stay, and never an entry a live pairing of ours uses.
 */
static void rbond_mq_take_peer(struct rbond_mqp *mq, const struct rbond_msg *m)
{
	unsigned int n = min_t(unsigned int, m->qp.nrails, RBOND_MAX_RAILS);
	unsigned int i, j;

	if (n < 2)
		return;
	if (!mq->have_peer) {
		memcpy(mq->peer_rail, m->qp.rail, sizeof(mq->peer_rail));
		mq->peer_nrails = n;
		mq->have_peer = true;
		return;
	}
	for (i = 1; i < n; i++) {
		const struct rbond_msg_rail *r = &m->qp.rail[i];

		for (j = 1; j < mq->peer_nrails; j++)
			if (mq->peer_rail[j].index == r->index)
				break;
		if (j == mq->peer_nrails) {
			if (j >= RBOND_MAX_RAILS)
				continue;
			mq->peer_nrails++;
		} else if (rbond_mq_peer_in_use(mq, j)) {
			/* the same member further on (RTR, RTS) */
			if (mq->peer_rail[j].qpn == r->qpn)
				mq->peer_rail[j].state = r->state;
			continue;
		}
		mq->peer_rail[j] = *r;
	}
}

/*
 * Publish the members of @want at RTS (mq->lock and bond->lock held):
 * their rails join the QP's rails at once.  The rails published.
 */
static unsigned long rbond_mq_publish_rails(struct rbond_mqp *mq,
					    unsigned long want)
{
	struct rbond_qp *qp = mq->qp;
	unsigned long flags, rails = BIT(qp->home);
	unsigned int i;

	lockdep_assert_held(&mq->lock);
	lockdep_assert_held(&mq->bond->lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if ((want & BIT(i)) && mq->m[i].qp &&
		    mq->m[i].state == RBOND_M_RTS && !mq->m[i].published)
			rails |= BIT(i);
	if (rails == BIT(qp->home))
		return 0;
	if (rbond_post_alloc_pending(qp))
		return 0;
	/* the home rail on the same scale as the members (rbond_mq_rtr) */
	if (!qp->s.weight[qp->home]) {
		struct ib_port_attr pattr;
		struct rbond_rail *home = &mq->bond->rails[qp->home];

		qp->s.weight[qp->home] =
			home->ibdev && !ib_query_port(home->ibdev, home->port,
						      &pattr) ?
			rbond_port_weight(&pattr) : 1;
	}
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if (!qp->s.weight[i])
			qp->s.weight[i] = qp->s.weight[qp->home];

	spin_lock_irqsave(&qp->sq_post_lock, flags);
	spin_lock(&qp->rq_post_lock);
	for (i = 0; i < RBOND_MAX_RAILS; i++) {
		if (!(rails & BIT(i)) || i == qp->home)
			continue;
		/* the slot is free: a first home member went aside */
		WARN_ON_ONCE(qp->member[i]);
		qp->member[i] = mq->m[i].qp;
		qp->gone[i] = NULL;
		mq->m[i].published = true;
	}
	spin_unlock(&qp->rq_post_lock);
	spin_lock(&qp->sq_lock);
	/*
	 * The home joined with the QP's first rails, not with every rejoin;
	 * under sq_lock with rails_up: the heartbeat's watchdog reads both
	 * (rbond_fo_hb_one()) and must not see a rail up with the time of
	 * its previous join
	 */
	for (i = 0; i < RBOND_MAX_RAILS; i++)
		if ((rails & BIT(i)) && (i != qp->home || !mq->joined_at[i]))
			WRITE_ONCE(mq->joined_at[i], jiffies);
	/*
	 * Every WQE so far was accounted and signaled (rbond_post_chunk):
	 * the scheduler orders the next ones after them, no idle point needed.
	 */
	qp->s.rails_up |= rails;
	WRITE_ONCE(mq->up, true);
	spin_unlock(&qp->sq_lock);
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);
	return rails & ~BIT(qp->home);
}

/* Switch the data path to multi-rail (mq->lock and bond->lock held). */
static void rbond_mq_publish(struct rbond_mqp *mq)
{
	unsigned long rails = rbond_mq_publish_rails(mq, ~0UL);

	if (!rails)
		return;
	rbond_mq_set_state(mq, RBOND_NEG_UP);
	atomic64_inc(&rbond_mstats.qp_up);
	ibdev_dbg(&mq->bond->ibdev, "QP 0x%x: multi-rail up, rails 0x%lx\n",
		  mq->qp->ibqp.qp_num, rails);
}

/* --- failback: a failed rail rejoins the QP ------------------------------- */

/*
 * While a rail rejoins, QP_REQ (our members and their states) goes to the
 * peer every RBOND_MQ_RETRY_MS (5x that after RBOND_REJOIN_TRIES), not on
 * every run of the work (each answer runs it), and once more after the
 * member went into use.  mq->lock held, not bond->lock.
 */
static void rbond_mq_rejoin_ask(struct rbond_mqp *mq, struct rbond_msg *msg,
				u32 peer_qpn)
{
	unsigned long every = msecs_to_jiffies(mq->tries > RBOND_REJOIN_TRIES ?
					       5 * RBOND_MQ_RETRY_MS :
					       RBOND_MQ_RETRY_MS);

	lockdep_assert_held(&mq->lock);
	if (mq->rejoin_sent && !mq->rejoin_tell &&
	    time_before(jiffies, mq->rejoin_sent + every)) {
		rbond_mq_kick_later(mq, mq->rejoin_sent + every - jiffies);
		return;
	}
	mq->tries++;
	mq->rejoin_sent = jiffies | 1;
	mq->rejoin_tell = false;
	if (mq->conn && READ_ONCE(mq->conn->state) == RBOND_CONN_UP) {
		memset(msg, 0, sizeof(*msg));
		mutex_lock(&mq->bond->lock);
		rbond_mq_fill_rails(mq, msg, false);
		mutex_unlock(&mq->bond->lock);
		msg->dst_qpn = cpu_to_be32(peer_qpn);
		memcpy(msg->nonce, mq->nonce, sizeof(msg->nonce));
		rbond_ctrl_send(mq->conn, msg, RBOND_MSG_QP_REQ, RBOND_ST_OK);
	}
	if (mq->rejoin)
		rbond_mq_kick_later(mq, every);
}

/*
 * Start rejoining rail @i: its failed member goes (no completion of it can
 * reach a slot of the new one: destroyed and drained first), a new one
 * will be created, and the QP asks the peer again (QP_REQ) until the
 * peer's member paired with it is at RTR (its state in the peer's last
 * message): only then is it published (rbond_mq_rejoin_publish()).  Not while the rail is failing
 * over, is down, or lost its member objects (device removed: a rail added
 * again serves new objects only).  mq->lock and bond->lock held.
 */
static void rbond_mq_rejoin_start(struct rbond_mqp *mq, unsigned int i)
{
	struct rbond_dev *bond = mq->bond;
	struct rbond_qp *qp = mq->qp;
	struct rbond_member_qp *m = &mq->m[i];
	unsigned int j;

	lockdep_assert_held(&mq->lock);
	lockdep_assert_held(&bond->lock);
	if (i == qp->home || (mq->rejoin & BIT(i)) || READ_ONCE(qp->sq_failed) ||
	    test_bit(i, &mq->fo_want) || m->state != RBOND_M_ERR ||
	    !rbond_rail_present(bond, i) || !READ_ONCE(bond->rails[i].active) ||
	    !qp->pd->member[i] || !qp->scq->member[i] || !qp->rcq->member[i])
		return;
	/*
	 * The peer's member it was paired with is failed too: not paired
	 * with again (qpn 0) until the peer names a new one
	 * (rbond_mq_take_peer()).
	 */
	if (m->peer >= 0) {
		mq->peer_rail[m->peer].qpn = 0;
		mq->peer_rail[m->peer].state = 0;
	}
	/*
	 * Nor a member the peer offered earlier that none of ours uses: it
	 * may be one whose rejoin the peer gave up since (nothing retracts an
	 * offer; paired with it, ours would wait at RTS for good).  One the
	 * peer still offers is back with its next QP_REQ.
	 */
	for (j = 1; j < mq->peer_nrails; j++) {
		if (rbond_mq_peer_in_use(mq, j))
			continue;
		mq->peer_rail[j].qpn = 0;
		mq->peer_rail[j].state = 0;
	}
	if (m->published)
		rbond_qp_destroy_member(qp, i);
	else if (m->qp)
		rbond_member_destroy_qp(bond, i, m->qp);
	else if (i == mq->key_home && mq->home_moved)
		rbond_mrail_first_aside(qp);
	memset(m, 0, sizeof(*m));
	m->peer = -1;
	clear_bit(i, &mq->fo_failed);
	mq->rejoin |= BIT(i);
	mq->tries = 0;
	ibdev_dbg(&bond->ibdev, "QP 0x%x: rail %u rejoins\n",
		  qp->ibqp.qp_num, i);
}

/*
 * Which failed rails start rejoining: those whose time came
 * (rejoin_want), and those the peer offers a new member for in its
 * QP_REQ or QP_RSP (@req, @rsp: or NULL); a rejoining member of ours that
 * went to the peer's old member starts again.  Then their new members.
 * mq->lock and bond->lock held; the QP is UP or AGREED.
 */
static void rbond_mq_rejoin_check(struct rbond_mqp *mq,
				  const struct rbond_msg *req,
				  const struct rbond_msg *rsp)
{
	unsigned long want = READ_ONCE(mq->rejoin_want), before = mq->rejoin;
	unsigned int i, k, n;
	bool redo = false;
	int j;

	lockdep_assert_held(&mq->lock);
	for_each_set_bit(i, &want, RBOND_MAX_RAILS) {
		if (time_before(jiffies, READ_ONCE(mq->rejoin_at[i]))) {
			rbond_mq_kick_later(mq, READ_ONCE(mq->rejoin_at[i]) -
					    jiffies);
			continue;
		}
		if (test_bit(i, &mq->fo_want)) {	/* failing over still */
			rbond_mq_kick_later(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));
			continue;
		}
		clear_bit(i, &mq->rejoin_want);
		rbond_mq_rejoin_start(mq, i);
	}
	if (!req)
		req = rsp;
	n = req ? min_t(unsigned int, req->qp.nrails, RBOND_MAX_RAILS) : 0;
	for (k = 1; k < n; k++) {
		for (i = 0; i < RBOND_MAX_RAILS; i++) {
			struct rbond_member_qp *m = &mq->m[i];

			j = m->peer;
			if (j < 0 ||
			    mq->peer_rail[j].index != req->qp.rail[k].index ||
			    mq->peer_rail[j].qpn == req->qp.rail[k].qpn)
				continue;
			/* the peer has a new member on the rail we paired */
			if (m->state == RBOND_M_ERR) {
				rbond_mq_rejoin_start(mq, i);
			} else if ((mq->rejoin & BIT(i)) && !m->published) {
				/* ours went to its old one: again */
				if (m->qp)
					rbond_member_destroy_qp(mq->bond, i,
								m->qp);
				memset(m, 0, sizeof(*m));
				m->peer = -1;
				redo = true;
			}
		}
	}
	/* a member for a rail of the peer's none of ours uses: take it */
	for (k = 1; k < n; k++) {
		for (i = 0; i < RBOND_MAX_RAILS; i++) {
			j = mq->m[i].peer;
			if (j >= 0 && mq->m[i].state != RBOND_M_ERR &&
			    mq->peer_rail[j].index == req->qp.rail[k].index)
				break;
		}
		if (i < RBOND_MAX_RAILS)
			continue;
		for (i = 0; i < RBOND_MAX_RAILS; i++)
			if (mq->m[i].state == RBOND_M_ERR &&
			    test_bit(i, &mq->fo_failed))
				rbond_mq_rejoin_start(mq, i);
	}
	if (mq->rejoin != before || redo)
		rbond_mq_create_members(mq);
}

/*
 * A QP not at RTS (AGREED) only receives over its extra rails: a rejoining
 * member at RTR is all the peer needs; the rest is the publication at RTS.
 * mq->lock held.
 */
static void rbond_mq_rejoin_rtr(struct rbond_mqp *mq)
{
	unsigned int i;

	lockdep_assert_held(&mq->lock);
	for_each_set_bit(i, &mq->rejoin, RBOND_MAX_RAILS)
		if (mq->m[i].qp && (mq->m[i].state == RBOND_M_RTR ||
				    mq->m[i].state == RBOND_M_RTS))
			mq->rejoin &= ~BIT(i);
}

/**
 * rbond_mq_probe_wc() - the completion of a rejoin probe
 * @qp: the QP
 * @mwc: the member completion (RBOND_WRID_PROBE)
 *
 * Our probe SEND done: the rail carried it to the peer and the peer's
 * acknowledgment back (success), or it did not.  The peer's probe
 * received, or our probe receive flushed: only counted.  Any other error
 * on the probe receive is a request it refused - a SEND with data, which
 * no rdma_bond peer sends: the member is in error now and the QP fails
 * over from the rail as from any broken one.
 * Locks: the member CQ's bond CQ lock held (keeps @qp alive).
 */
void rbond_mq_probe_wc(struct rbond_qp *qp, const struct ib_wc *mwc)
{
	struct rbond_mqp *mq = qp->mrail;
	unsigned int r = lower_32_bits(mwc->wr_id);
	u32 res = mwc->status == IB_WC_SUCCESS ? RBOND_PROBE_OK :
						 RBOND_PROBE_FAILED;
	struct rbond_member_qp *m;

	if (mwc->wr_id & RBOND_WRID_RECV) {
		if (mwc->status == IB_WC_SUCCESS) {
			atomic64_inc(&rbond_mstats.probe_recvs);
		} else if (mwc->status != IB_WC_WR_FLUSH_ERR) {
			atomic64_inc(&rbond_mstats.probe_recv_errors);
			ibdev_dbg(qp->ibqp.device,
				  "QP 0x%x: rail %u: probe receive refused a request (%s)\n",
				  qp->ibqp.qp_num, r, ib_wc_status_msg(mwc->status));
		}
		return;
	}
	if (r & RBOND_WRID_PRIME) {
		if (mwc->status == IB_WC_SUCCESS) {
			atomic64_inc(&rbond_mstats.home_primes);
		} else {
			/* the member is in error: the QP fails over or fails */
			atomic64_inc(&rbond_mstats.home_prime_fails);
			ibdev_dbg(qp->ibqp.device,
				  "QP 0x%x: primer READ on rail %u: %s\n",
				  qp->ibqp.qp_num, (u32)(r & ~RBOND_WRID_PRIME),
				  ib_wc_status_msg(mwc->status));
		}
		return;
	}
	if (!mq || r >= RBOND_MAX_RAILS)
		return;
	m = &mq->m[r];
	/* a member that rejoined since is another QP */
	if (!mwc->qp || READ_ONCE(m->probe_qp) != mwc->qp)
		return;
	if (cmpxchg(&m->probe, RBOND_PROBE_SENT, res) == RBOND_PROBE_SENT &&
	    !READ_ONCE(mq->dead))
		rbond_mq_kick(mq, 0);
}

/* A WQE of the bond's own on @member; its PSN counted. */
static int rbond_mq_post_own(struct rbond_mqp *mq, unsigned int i,
			     struct ib_qp *member, const struct ib_send_wr *wr)
{
	struct rbond_qp *qp = mq->qp;
	unsigned long flags;
	int ret;

	ret = ib_post_send(member, wr, NULL);
	if (!ret) {
		spin_lock_irqsave(&qp->sq_lock, flags);
		qp->npsn[i] = (qp->npsn[i] + 1) & RBOND_PSN_MASK;
		spin_unlock_irqrestore(&qp->sq_lock, flags);
	}
	return ret;
}

/**
 * rbond_mq_post_probe() - one zero-length SEND of the bond's own on a member
 * @mq: the multi-rail QP
 * @i: the member's rail
 * @member: the member QP
 *
 * Into the one receive the peer's member on that rail has beside the
 * application's (rbond_mq_create_members()): a rejoin's health probe, or
 * the first SEND on a member that becomes the home rail, so that the
 * application's SENDs find the application's receives.  Its PSN counted.
 * Return: what ib_post_send() returned.
 */
int rbond_mq_post_probe(struct rbond_mqp *mq, unsigned int i,
			struct ib_qp *member)
{
	struct ib_send_wr wr = {
		.wr_id = RBOND_WRID_PROBE | rbond_wrid(mq->qp, false, i),
		.opcode = IB_WR_SEND,
		.send_flags = IB_SEND_SIGNALED,
	};

	return rbond_mq_post_own(mq, i, member, &wr);
}

/**
 * rbond_mq_post_prime() - one zero-length READ of the bond's own on a member
 * @mq: the multi-rail QP
 * @i: the member's rail
 * @member: the member QP, at RTS, nothing posted on it yet
 *
 * See rbond_mrail_prime().  One PSN, like any one-packet READ; its
 * completion is the bond's (rbond_mq_probe_wc()).
 * Return: what ib_post_send() returned.
 */
int rbond_mq_post_prime(struct rbond_mqp *mq, unsigned int i,
			struct ib_qp *member)
{
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = RBOND_WRID_PROBE | RBOND_WRID_PRIME |
				 rbond_wrid(mq->qp, false, i),
			.opcode = IB_WR_RDMA_READ,
			.send_flags = IB_SEND_SIGNALED,
		},
	};

	return rbond_mq_post_own(mq, i, member, &wr.wr);
}

/*
 * The health check of a rejoining rail before it carries data: one
 * zero-length SEND on our new member, into the receive the peer posted on
 * its own (rbond_mq_create_members).  Its success proves the rail works
 * in both directions (the SEND one way, the peer's acknowledgment the
 * other), which neither a port event nor a backoff timer does: a rail
 * that lost one direction only would be taken back, fail again, and
 * every such failover costs a fence and a replay.  No access right is
 * needed (a WRITE would need the application's REMOTE_WRITE).  Unanswered
 * within RBOND_REJOIN_PROBE_MS, or failed (retry exceeded): the rejoin
 * gives up and the rail is tried again after its backoff.
 * mq->lock and bond->lock held.  Returns enum rbond_probe_state.
 */
static u32 rbond_mq_rejoin_probe(struct rbond_mqp *mq, unsigned int i)
{
	struct rbond_member_qp *m = &mq->m[i];
	unsigned long limit = msecs_to_jiffies(RBOND_REJOIN_PROBE_MS);

	lockdep_assert_held(&mq->lock);
	if (READ_ONCE(m->probe) == RBOND_PROBE_NONE) {
		m->probe_qp = m->qp;
		m->probe_sent = jiffies;
		WRITE_ONCE(m->probe, RBOND_PROBE_SENT);
		atomic64_inc(&rbond_mstats.rejoin_probes);
		if (rbond_mq_post_probe(mq, i, m->qp))
			WRITE_ONCE(m->probe, RBOND_PROBE_FAILED);
		else
			rbond_mq_kick_later(mq, limit);
	} else if (READ_ONCE(m->probe) == RBOND_PROBE_SENT &&
		   time_after(jiffies, m->probe_sent + limit)) {
		cmpxchg(&m->probe, RBOND_PROBE_SENT, RBOND_PROBE_FAILED);
	}
	return READ_ONCE(m->probe);
}

/*
 * The rejoining members at RTS whose peer member is at RTR go into use
 * once their probe came back (rbond_mq_rejoin_probe()); a failed probe
 * gives the rejoin up.  A rejoin whose member is not even at RTR (no new
 * peer member named) within RBOND_REJOIN_TRIES QP_REQs gives up too: the
 * new member goes, and the rail is tried again later.  One at RTR stays
 * (the peer may have paired with it, and published it: only a fence may
 * take it away) and the QP keeps asking, more slowly.  A member whose
 * probe failed goes although the peer may have published its own (its
 * probe got through just before the rail broke): the peer's WQEs on it
 * then fail over as from any dead rail, fenced (a member that is gone is
 * stopped) and replayed.  mq->lock and bond->lock held.
 */
static void rbond_mq_rejoin_publish(struct rbond_mqp *mq, bool rts)
{
	unsigned long ready = 0, done, give_up = 0;
	unsigned int i;
	int j;

	lockdep_assert_held(&mq->lock);
	for_each_set_bit(i, &mq->rejoin, RBOND_MAX_RAILS) {
		j = mq->m[i].peer;
		if (rts && j >= 0 && mq->m[i].state == RBOND_M_RTS &&
		    (mq->peer_rail[j].state == RBOND_M_RTR ||
		     mq->peer_rail[j].state == RBOND_M_RTS)) {
			switch (rbond_mq_rejoin_probe(mq, i)) {
			case RBOND_PROBE_OK:
				ready |= BIT(i);
				break;
			case RBOND_PROBE_FAILED:
				atomic64_inc(&rbond_mstats.rejoin_probe_fails);
				ibdev_dbg(&mq->bond->ibdev,
					  "QP 0x%x: rail %u failed its rejoin probe\n",
					  mq->qp->ibqp.qp_num, i);
				give_up |= BIT(i);
				break;
			default:	/* its completion runs the work */
				break;
			}
		} else if (mq->tries > RBOND_REJOIN_TRIES &&
			   mq->m[i].state < RBOND_M_RTR) {
			give_up |= BIT(i);
		}
	}
	done = ready ? rbond_mq_publish_rails(mq, ready) : 0;
	mq->rejoin &= ~done;
	if (done)	/* the peer may wait to see ours at RTS */
		mq->rejoin_tell = true;
	for_each_set_bit(i, &done, RBOND_MAX_RAILS)
		ibdev_info_ratelimited(&mq->bond->ibdev,
				       "QP 0x%x: rail %u back in use\n",
				       mq->qp->ibqp.qp_num, i);
	for_each_set_bit(i, &give_up, RBOND_MAX_RAILS) {
		struct rbond_member_qp *m = &mq->m[i];

		if (m->qp && !m->published)
			rbond_member_destroy_qp(mq->bond, i, m->qp);
		m->qp = NULL;
		m->state = RBOND_M_ERR;
		mq->rejoin &= ~BIT(i);
		set_bit(i, &mq->fo_failed);
		rbond_fo_want_rejoin(mq, i, 0);
		ibdev_dbg(&mq->bond->ibdev, "QP 0x%x: rail %u rejoin gave up\n",
			  mq->qp->ibqp.qp_num, i);
	}
}

/*
 * Our QP_REQs went unanswered on a connection that is up for
 * RBOND_MQ_DEAF_TRIES tries: any peer module answers every QP_REQ (NOENT
 * for a QP it does not know), so the peer's end of it is gone - torn down
 * while its port was down, ours idle since (test_pair_failover.sh case 7:
 * "asking -> single" after 10 s while the peer's own QP_REQ, over a new
 * connection of its, was answered at once).  The connection goes (for
 * every QP on it: it carries nothing) and the next try connects anew.
 * mq->lock held.  Return: true if it went.
 */
static bool rbond_mq_deaf(struct rbond_mqp *mq)
{
	if (mq->conn_heard || mq->tries != RBOND_MQ_DEAF_TRIES)
		return false;
	ibdev_dbg(&mq->bond->ibdev,
		  "QP 0x%x: no QP_RSP on the control connection to %pI4 in %u tries: connecting anew\n",
		  mq->qp->ibqp.qp_num, &mq->conn->raddr, mq->tries);
	rbond_ctrl_conn_half_open(mq->conn);
	rbond_conn_put(mq->conn);
	mq->conn = NULL;
	return true;
}

/* The peer QP's nonce, from the first message that carries it (set once). */
static void rbond_mq_learn_nonce(struct rbond_mqp *mq, const u8 *nonce)
{
	static const u8 zero[sizeof(mq->peer_nonce)];
	unsigned long flags;

	if (!memcmp(nonce, zero, sizeof(zero)))
		return;
	spin_lock_irqsave(&mq->attr_lock, flags);
	if (!mq->have_peer_nonce) {
		memcpy(mq->peer_nonce, nonce, sizeof(mq->peer_nonce));
		/* nonce before flag: rbond_rkey_get() reads without the lock */
		smp_store_release(&mq->have_peer_nonce, true);
	}
	spin_unlock_irqrestore(&mq->attr_lock, flags);
}

/*
 * @raddr is our peer QP's: the address the application connected to, or,
 * once the home moved (the control connection runs between two other
 * rails), one of the peer's rails.
 */
static bool rbond_mq_addr_ours(struct rbond_mqp *mq, __be32 raddr,
			       __be32 peer_addr)
{
	return raddr == peer_addr ||
	       (READ_ONCE(mq->home_moved) && rbond_mq_peer_addr_ok(mq, raddr));
}

/*
 * A QP_RSP is about our QP only if it answers our own QP_REQ: it came on
 * the connection we asked on (to the peer the application connected to),
 * from the peer QP the application named, echoing our nonce.
 */
static bool rbond_mq_rsp_ours(struct rbond_mqp *mq, struct rbond_conn *conn,
			      const struct rbond_msg *rsp, __be32 peer_addr,
			      u32 peer_qpn)
{
	return conn && conn == mq->conn &&
	       rbond_mq_addr_ours(mq, conn->raddr, peer_addr) &&
	       be32_to_cpu(rsp->src_qpn) == peer_qpn &&
	       !memcmp(rsp->echo, mq->nonce, sizeof(mq->nonce));
}

/*
 * A QP_REQ that is not from the peer QP's current connection: with a nonce
 * other than the one it gave (its QP was reset since), or, before it gave
 * one, with the one it gave before our QP was reset - the peer's previous
 * connection, whose rejoin QP_REQs may reach us after our RESET (held
 * until our RTR) while the peer's application has not reset its QP yet.
 * Taken, it named members the peer then destroyed and set the peer's nonce
 * to the old one for good (test_teardown_load e, once in CI: the new
 * connection's rail-1 WRITEs got no ACK, the peer's FENCE_ACK echoed the
 * old nonce and was dropped, the first WQE flushed).  Not answered either:
 * the current connection asks again.  attr_lock or mq->lock held.
 */
static bool rbond_mq_req_prev(struct rbond_mqp *mq,
			      const struct rbond_msg *req)
{
	return mq->have_old_peer_nonce &&
	       !memcmp(req->nonce, mq->old_peer_nonce,
		       sizeof(mq->old_peer_nonce));
}

static bool rbond_mq_req_stale(struct rbond_mqp *mq,
			       const struct rbond_msg *req)
{
	/* pairs with smp_store_release() in rbond_mq_learn_nonce() */
	if (smp_load_acquire(&mq->have_peer_nonce))
		return memcmp(req->nonce, mq->peer_nonce,
			      sizeof(mq->peer_nonce));
	return rbond_mq_req_prev(mq, req);
}

/*
 * A QP_REQ is from our peer QP: on a connection it opened from its address
 * - after a home move from its new home's, with the nonce it gave before.
 */
static bool rbond_mq_req_ours(struct rbond_mqp *mq, struct rbond_conn *conn,
			      const struct rbond_msg *req, __be32 peer_addr,
			      u32 peer_qpn)
{
	if (!conn || conn->active || be32_to_cpu(req->src_qpn) != peer_qpn ||
	    rbond_mq_req_stale(mq, req))
		return false;
	if (conn->raddr == peer_addr)
		return true;
	if (!rbond_mq_addr_ours(mq, conn->raddr, peer_addr))
		return false;
	return smp_load_acquire(&mq->have_peer_nonce);	/* and it matched */
}

/**
 * rbond_mq_work() - the negotiation of one QP's extra rails, one step
 * @work: the QP's mq->work
 *
 * Takes the inbox (a QP_REQ and a QP_RSP from the control channel) and,
 * once the QP is at RTR, moves the negotiation on (see the state diagram
 * in rbond_mqp.h): creates the extra-rail members, pairs them with the
 * peer's rails, brings them to RTR/RTS and publishes them once the peer
 * agreed and the QP is at RTS; sends our QP_REQ until the peer answers
 * and answers the peer's.  Requeues itself while waiting.
 * Locks: none held; takes mq->lock, then bond->lock.
 * Context: process context (rbond_wq), sleeps.
 */
void rbond_mq_work(struct work_struct *work)
{
	struct rbond_mqp *mq = container_of(to_delayed_work(work),
					    struct rbond_mqp, work);
	struct rbond_dev *bond = mq->bond;
	struct rbond_rtr_plan plan[RBOND_MAX_RAILS];
	struct rbond_conn *req_conn = NULL, *rsp_conn = NULL;
	struct rbond_msg *msg, req, rsp;
	bool req_pending, rsp_pending, have_rtr, have_rts, ok;
	unsigned long flags;
	__be32 peer_addr, home_addr = 0;
	u32 peer_qpn, status;

	msg = kzalloc(sizeof(*msg), GFP_KERNEL);
	if (!msg) {
		rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));
		return;
	}
	mutex_lock(&mq->lock);
	if (mq->dead)
		goto out_unlock;

	spin_lock_irqsave(&mq->attr_lock, flags);
	have_rtr = mq->have_rtr;
	have_rts = mq->have_rts;
	peer_addr = mq->peer_addr;
	peer_qpn = mq->peer_qpn;
	req_pending = mq->req_pending;
	mq->req_pending = false;
	if (req_pending) {
		req = mq->req;
		req_conn = mq->req_conn;
		mq->req_conn = NULL;
	}
	rsp_pending = mq->rsp_pending;
	mq->rsp_pending = false;
	if (rsp_pending) {
		rsp = mq->rsp;
		rsp_conn = mq->rsp_conn;
		mq->rsp_conn = NULL;
	}
	spin_unlock_irqrestore(&mq->attr_lock, flags);

	if (!have_rtr) {
		/* Answer later: keep the request until we reach RTR. */
		if (req_pending) {
			spin_lock_irqsave(&mq->attr_lock, flags);
			if (!mq->req_pending) {
				mq->req_pending = true;
				mq->req = req;
				mq->req_conn = req_conn;
				req_conn = NULL;
			}
			spin_unlock_irqrestore(&mq->attr_lock, flags);
		}
		goto out_unlock;
	}
	if (mq->state == RBOND_NEG_SINGLE || !peer_addr)
		goto answer;

	mutex_lock(&bond->lock);
	if (!rbond_rail_present(bond, mq->qp->home)) {
		/* The QP is dead with its home rail: nothing to negotiate. */
		rbond_mq_set_state(mq, RBOND_NEG_SINGLE);
		mutex_unlock(&bond->lock);
		goto answer;
	}
	home_addr = rbond_ndev_ipv4(bond->rails[mq->qp->home].ndev);
	if (!mq->home_moved)
		WRITE_ONCE(mq->home_laddr, home_addr);
	if (mq->state == RBOND_NEG_INIT)
		rbond_mq_set_state(mq, rbond_mq_create_members(mq) ?
				   RBOND_NEG_ASKING : RBOND_NEG_SINGLE);
	/* AGREED: a QP the application never moved to RTS (it only answers) */
	if (mq->state == RBOND_NEG_UP || mq->state == RBOND_NEG_AGREED)
		rbond_mq_rejoin_check(mq, req_pending &&
				      rbond_mq_req_ours(mq, req_conn, &req,
							peer_addr, peer_qpn) ?
				      &req : NULL,
				      rsp_pending &&
				      be32_to_cpu(rsp.status) == RBOND_ST_OK &&
				      rbond_mq_rsp_ours(mq, rsp_conn, &rsp,
							peer_addr, peer_qpn) ?
				      &rsp : NULL);
	if (rsp_pending)
		ibdev_dbg(&bond->ibdev, "QP 0x%x: QP_RSP from 0x%x: status %u%s\n",
			  mq->qp->ibqp.qp_num, be32_to_cpu(rsp.src_qpn),
			  be32_to_cpu(rsp.status),
			  rsp_conn == mq->conn ? "" : ", not our connection");
	if (rsp_pending &&
	    rbond_mq_rsp_ours(mq, rsp_conn, &rsp, peer_addr, peer_qpn)) {
		mq->conn_heard = true;
		switch (be32_to_cpu(rsp.status)) {
		case RBOND_ST_OK:
			rbond_mq_learn_nonce(mq, rsp.nonce);
			rbond_mq_take_peer(mq, &rsp);
			rbond_mq_set_state(mq, RBOND_NEG_AGREED);
			break;
		case RBOND_ST_NOT_READY:
			rbond_mq_learn_nonce(mq, rsp.nonce);
			if (mq->have_peer)	/* states of members named before */
				rbond_mq_take_peer(mq, &rsp);
			break;
		default:
			rbond_mq_set_state(mq, RBOND_NEG_SINGLE);
		}
	}
	if (req_pending && rbond_mq_req_ours(mq, req_conn, &req, peer_addr,
					     peer_qpn)) {
		rbond_mq_learn_nonce(mq, req.nonce);
		rbond_mq_take_peer(mq, &req);
	}
	/* Not under bond->lock: a neighbour the peer names may not answer. */
	rbond_mq_plan(mq, plan);
	mutex_unlock(&bond->lock);
	rbond_mq_resolve(mq, plan);
	mutex_lock(&bond->lock);
	if (!rbond_rail_present(bond, mq->qp->home)) {
		rbond_mq_set_state(mq, RBOND_NEG_SINGLE);
		mutex_unlock(&bond->lock);
		goto answer;
	}
	rbond_mq_advance(mq, have_rts, plan);
	if (mq->state == RBOND_NEG_AGREED && have_rts)
		rbond_mq_publish(mq);
	if (mq->state == RBOND_NEG_UP && mq->rejoin)
		rbond_mq_rejoin_publish(mq, have_rts);
	if (mq->state == RBOND_NEG_AGREED && mq->rejoin)
		rbond_mq_rejoin_rtr(mq);
	mutex_unlock(&bond->lock);
	if (mq->state == RBOND_NEG_UP) {
		rbond_fo_conn_renew(mq);
		rbond_fo_home_prepare(mq);
	}

	/* Our own request, until the peer said yes (or we give up). */
	if (mq->state == RBOND_NEG_UP && (mq->rejoin || mq->rejoin_tell))
		rbond_mq_rejoin_ask(mq, msg, peer_qpn);
	if (mq->state == RBOND_NEG_ASKING) {
		if (!mq->conn) {
			mq->conn = rbond_ctrl_connect(home_addr, peer_addr);
			mq->conn_heard = false;
			if (!mq->conn)	/* not a bond peer */
				rbond_mq_set_state(mq, RBOND_NEG_SINGLE);
		}
		if (mq->conn) {
			enum rbond_conn_state st = READ_ONCE(mq->conn->state);

			if (st == RBOND_CONN_FAILED ||
			    ++mq->tries > RBOND_MQ_MAX_TRIES) {
				rbond_mq_set_state(mq, RBOND_NEG_SINGLE);
			} else if (st == RBOND_CONN_DEAD) {
				/*
				 * it died under our QP_REQs (its peer end had
				 * gone, our retries ran out): connect anew -
				 * a dead rail's probe fails, and we give up
				 */
				ibdev_dbg(&bond->ibdev,
					  "QP 0x%x: control connection to %pI4 died while asking: connecting anew\n",
					  mq->qp->ibqp.qp_num, &peer_addr);
				rbond_conn_put(mq->conn);
				mq->conn = NULL;
			} else if (st == RBOND_CONN_UP && rbond_mq_deaf(mq)) {
				/* the next pass connects anew */
			} else if (st == RBOND_CONN_UP) {
				memset(msg, 0, sizeof(*msg));
				mutex_lock(&bond->lock);
				rbond_mq_fill_rails(mq, msg, false);
				mutex_unlock(&bond->lock);
				msg->dst_qpn = cpu_to_be32(peer_qpn);
				memcpy(msg->nonce, mq->nonce, sizeof(msg->nonce));
				rbond_ctrl_send(mq->conn, msg,
						RBOND_MSG_QP_REQ,
						RBOND_ST_OK);
			}
			if (mq->state != RBOND_NEG_SINGLE)
				rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));
		}
		if (mq->state == RBOND_NEG_SINGLE)
			ibdev_dbg(&bond->ibdev, "QP 0x%x stays single-rail\n",
				  mq->qp->ibqp.qp_num);
	}
	if (mq->state == RBOND_NEG_AGREED && !have_rts)
		rbond_mq_kick(mq, msecs_to_jiffies(RBOND_MQ_RETRY_MS));

answer:
	if (req_pending && req_conn && rbond_mq_req_stale(mq, &req)) {
		ibdev_dbg(&bond->ibdev,
			  "QP 0x%x: QP_REQ of the peer's previous connection not answered\n",
			  mq->qp->ibqp.qp_num);
		req_pending = false;
	}
	if (req_pending && req_conn) {
		ok = mq->state != RBOND_NEG_SINGLE &&
		     rbond_mq_req_ours(mq, req_conn, &req, peer_addr,
				       peer_qpn);
		memset(msg, 0, sizeof(*msg));
		status = RBOND_ST_NOENT;
		if (ok) {
			mutex_lock(&bond->lock);
			ok = rbond_rail_present(bond, mq->qp->home);
			if (ok)
				rbond_mq_fill_rails(mq, msg, true);
			mutex_unlock(&bond->lock);
		}
		if (ok) {
			memcpy(msg->nonce, mq->nonce, sizeof(msg->nonce));
			status = msg->qp.nrails > 1 ? RBOND_ST_OK :
						      RBOND_ST_NOT_READY;
		} else {
			/* the same answer as for no such QP */
			memset(msg, 0, sizeof(*msg));
			msg->src_qpn = req.dst_qpn;
		}
		msg->dst_qpn = req.src_qpn;
		memcpy(msg->echo, req.nonce, sizeof(msg->echo));
		rbond_ctrl_send(req_conn, msg, RBOND_MSG_QP_RSP, status);
	}
out_unlock:
	mutex_unlock(&mq->lock);
	rbond_conn_put(req_conn);
	rbond_conn_put(rsp_conn);
	kfree(msg);
}

/* --- QP_REQ / QP_RSP ---------------------------------------------------------- */

/**
 * rbond_handle_qp_msg() - a QP_REQ or QP_RSP from the control channel
 * @conn: the connection it came on
 * @m: the message
 *
 * QP_REQ arrives on connections the peer opened (passive), QP_RSP on ours
 * (active).  Whatever cannot be about the named QP is dropped here, before
 * it can take the one-slot inbox; a QP_REQ gets the same NOENT answer
 * whether the QP does not exist or is not connected to the asker.  What is
 * taken is left to the QP's work (rbond_mq_work()).
 * Locks: none held; takes rbond_mq_mutex.
 * Context: process context (the control channel's receive completion).
 */
void rbond_handle_qp_msg(struct rbond_conn *conn,
			 const struct rbond_msg *m)
{
	bool is_req = m->type == RBOND_MSG_QP_REQ;
	struct rbond_conn *old = NULL;
	struct rbond_msg rsp = {};
	struct rbond_mqp *mq;
	unsigned long flags;
	bool take = false;

	if (conn->active == is_req) {
		atomic64_inc(&rbond_ctrl_stats.bad_msgs);
		return;
	}
	mutex_lock(&rbond_mq_mutex);
	/* after a home move: on a rail of the bond other than the first home */
	mq = rbond_mq_find_conn(conn, be32_to_cpu(m->dst_qpn));
	if (mq) {
		spin_lock_irqsave(&mq->attr_lock, flags);
		if (is_req && (rbond_mq_req_prev(mq, m) ||
			       (mq->have_rtr && conn->raddr == mq->peer_addr &&
				be32_to_cpu(m->src_qpn) == mq->peer_qpn &&
				rbond_mq_req_stale(mq, m)))) {
			/*
			 * The peer's previous connection, or its next one
			 * while ours is still the old (our application resets
			 * next; it asks again): no answer at all - a NOENT
			 * would leave its next connection single-rail
			 */
			spin_unlock_irqrestore(&mq->attr_lock, flags);
			mutex_unlock(&rbond_mq_mutex);
			pr_debug("QP_REQ for QP 0x%x from %pI4 QP 0x%x: not of its current connection, dropped\n",
				 be32_to_cpu(m->dst_qpn), &conn->raddr,
				 be32_to_cpu(m->src_qpn));
			return;
		}
		if (is_req) {
			/*
			 * before RTR the peer is not known yet: check later;
			 * the newest request wins the slot (one of the peer's
			 * previous connection may hold it: rbond_mq_req_stale)
			 */
			take = !rbond_mq_req_stale(mq, m) &&
			       (!mq->have_rtr ||
				rbond_mq_req_ours(mq, conn, m, mq->peer_addr,
						  mq->peer_qpn));
			if (take) {
				mq->req_pending = true;
				mq->req = *m;
				old = mq->req_conn;
				rbond_conn_get(conn);
				mq->req_conn = conn;
			}
		} else {
			take = rbond_mq_addr_ours(mq, conn->raddr,
						  mq->peer_addr) &&
			       be32_to_cpu(m->src_qpn) == mq->peer_qpn &&
			       !memcmp(m->echo, mq->nonce, sizeof(mq->nonce));
			if (take && !mq->rsp_pending) {
				mq->rsp_pending = true;
				mq->rsp = *m;
				old = mq->rsp_conn;
				rbond_conn_get(conn);
				mq->rsp_conn = conn;
			}
		}
		spin_unlock_irqrestore(&mq->attr_lock, flags);
		if (take)
			rbond_mq_kick(mq, 0);
	}
	mutex_unlock(&rbond_mq_mutex);
	rbond_conn_put(old);
	if (take)
		return;
	if (is_req) {
		pr_debug("QP_REQ for QP 0x%x from %pI4 QP 0x%x: no such QP (%s)\n",
			 be32_to_cpu(m->dst_qpn), &conn->raddr,
			 be32_to_cpu(m->src_qpn), mq ? "not its peer" : "none");
		rsp.dst_qpn = m->src_qpn;
		rsp.src_qpn = m->dst_qpn;
		memcpy(rsp.echo, m->nonce, sizeof(rsp.echo));
		rbond_ctrl_send(conn, &rsp, RBOND_MSG_QP_RSP, RBOND_ST_NOENT);
	} else {
		atomic64_inc(&rbond_ctrl_stats.bad_msgs);
		pr_debug("QP_RSP for QP 0x%x from %pI4 QP 0x%x dropped\n",
			 be32_to_cpu(m->dst_qpn), &conn->raddr,
			 be32_to_cpu(m->src_qpn));
	}
}
