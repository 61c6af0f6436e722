// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the control channel between two hosts' rdma_bond modules.
 *
 * One kernel rdma_cm RC connection per (local rail address, peer address)
 * on the MEMBER devices, listening on every rail address of every bond at
 * port ctrl_port (default 18515).  Messages are small and versioned
 * (struct rbond_msg: magic, version, type, length, sequence, status); they
 * go through a fixed pool of RBOND_CTRL_TX send and RBOND_CTRL_RX receive
 * buffers per connection (bounded resources: a message that finds no free
 * send buffer is dropped and the requester's timeout retries it).
 *
 * Receive completions are handled in process context (IB_POLL_WORKQUEUE);
 * nothing here runs in a data-path context: the post path only queues
 * work (the connection's rkey_work).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <net/sock.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>

#include "rbond_ctrl.h"

static ushort ctrl_port = RBOND_CTRL_PORT;
module_param(ctrl_port, ushort, 0444);
MODULE_PARM_DESC(ctrl_port,
		 "TCP-space port of the rdma_cm control channel on every rail address (default 18515)");

/*
 * Off by default: with heartbeats on, 6.12's home moves did not complete
 * in the pair test bed (CI, twice; open, Documentation/rdma_bond.rst,
 * "Heartbeat").
 */
static unsigned int rbond_hb_ms;
module_param_named(heartbeat_ms, rbond_hb_ms, uint, 0644);
MODULE_PARM_DESC(heartbeat_ms,
		 "Send a heartbeat on every control connection this often, in ms (0: none, the default; 100 suggested); a bond's failover_silent_ms judges them");

/* Connections and listeners. */
struct rbond_ctrl_stats rbond_ctrl_stats;
/* set once at module load, before any connection exists */
static const struct rbond_ctrl_ops *rbond_ctrl_ops;

static DEFINE_MUTEX(rbond_conn_mutex);
static LIST_HEAD(rbond_conns);
static LIST_HEAD(rbond_listeners);
static bool rbond_ctrl_stopping;

struct rbond_listener {
	struct list_head list;
	struct rdma_cm_id *id;
	__be32 addr;
};

static void rbond_conn_release(struct kref *ref);
static void rbond_conn_down_work(struct work_struct *work);

/**
 * rbond_conn_get() - take a reference on a connection
 * @conn: the connection
 *
 * Any context.
 */
void rbond_conn_get(struct rbond_conn *conn)
{
	kref_get(&conn->ref);
}

/**
 * rbond_conn_put() - drop a reference on a connection
 * @conn: the connection, or NULL (nothing to do)
 *
 * The last reference frees it, after the handlers' conn_release
 * (rbond_rkey_conn_release(), which may sleep).
 * Context: process context if it may be the last reference.
 */
void rbond_conn_put(struct rbond_conn *conn)
{
	if (conn)
		kref_put(&conn->ref, rbond_conn_release);
}

static void *rbond_conn_buf(struct rbond_conn *conn, unsigned int idx)
{
	return conn->buf + (size_t)idx * RBOND_CTRL_MSG_SIZE;
}

/* --- buffers, QP ---------------------------------------------------------- */

static void rbond_ctrl_rx_done(struct ib_cq *cq, struct ib_wc *wc);
static void rbond_ctrl_tx_done(struct ib_cq *cq, struct ib_wc *wc);

static int rbond_conn_post_recv(struct rbond_conn *conn, unsigned int idx)
{
	struct rbond_cbuf *cb = &conn->cbufs[idx];
	struct ib_sge sge = {
		.addr = conn->dma + (u64)idx * RBOND_CTRL_MSG_SIZE,
		.length = RBOND_CTRL_MSG_SIZE,
		.lkey = conn->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = {
		.wr_cqe = &cb->cqe,
		.sg_list = &sge,
		.num_sge = 1,
	};

	cb->cqe.done = rbond_ctrl_rx_done;
	return ib_post_recv(conn->qp, &wr, NULL);
}

/* Resources of a connection on @id's device; posts every receive. */
static int rbond_conn_setup(struct rbond_conn *conn, struct rdma_cm_id *id)
{
	struct ib_device *dev = id->device;
	struct ib_qp_init_attr init = {};
	unsigned int i;
	int ret;

	conn->buf = kzalloc(RBOND_CTRL_NBUF * RBOND_CTRL_MSG_SIZE, GFP_KERNEL);
	if (!conn->buf)
		return -ENOMEM;
	conn->dmadev = dev;
	conn->port = id->port_num;
	conn->dma = ib_dma_map_single(dev, conn->buf,
				      RBOND_CTRL_NBUF * RBOND_CTRL_MSG_SIZE,
				      DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(dev, conn->dma)) {
		ret = -ENOMEM;
		goto err_free_buf;
	}
	conn->pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(conn->pd)) {
		ret = PTR_ERR(conn->pd);
		goto err_unmap;
	}
	/* one more of each for ib_drain_qp()'s marker WRs */
	conn->cq = ib_alloc_cq(dev, conn, RBOND_CTRL_NBUF + 2, 0,
			       IB_POLL_WORKQUEUE);
	if (IS_ERR(conn->cq)) {
		ret = PTR_ERR(conn->cq);
		goto err_dealloc_pd;
	}
	init.send_cq = conn->cq;
	init.recv_cq = conn->cq;
	init.qp_type = IB_QPT_RC;
	init.sq_sig_type = IB_SIGNAL_ALL_WR;
	init.cap.max_send_wr = RBOND_CTRL_TX + 1;
	init.cap.max_recv_wr = RBOND_CTRL_RX + 1;
	init.cap.max_send_sge = 1;
	init.cap.max_recv_sge = 1;
	ret = rdma_create_qp(id, conn->pd, &init);
	if (ret)
		goto err_free_cq;
	conn->qp = id->qp;
	for (i = 0; i < RBOND_CTRL_NBUF; i++) {
		conn->cbufs[i].conn = conn;
		conn->cbufs[i].idx = i;
	}
	for (i = 0; i < RBOND_CTRL_RX; i++) {
		ret = rbond_conn_post_recv(conn, i);
		if (ret)
			goto err_destroy_qp;
	}
	return 0;

err_destroy_qp:
	rdma_destroy_qp(id);
	conn->qp = NULL;
err_free_cq:
	ib_free_cq(conn->cq);
	conn->cq = NULL;
err_dealloc_pd:
	ib_dealloc_pd(conn->pd);
	conn->pd = NULL;
err_unmap:
	ib_dma_unmap_single(dev, conn->dma,
			    RBOND_CTRL_NBUF * RBOND_CTRL_MSG_SIZE,
			    DMA_BIDIRECTIONAL);
err_free_buf:
	kfree(conn->buf);
	conn->buf = NULL;
	return ret;
}

/* Only the id's owner (see rbond_conn_take_id()) frees. */
static void rbond_conn_free_res(struct rbond_conn *conn,
				struct rdma_cm_id *id)
{
	if (conn->qp) {
		/* No receive completion reposts on the QP after this. */
		ib_drain_qp(conn->qp);
		rdma_destroy_qp(id);
		conn->qp = NULL;
	}
	if (conn->cq) {
		ib_free_cq(conn->cq);
		conn->cq = NULL;
	}
	if (conn->pd) {
		ib_dealloc_pd(conn->pd);
		conn->pd = NULL;
	}
	if (conn->buf) {
		ib_dma_unmap_single(conn->dmadev, conn->dma,
				    RBOND_CTRL_NBUF * RBOND_CTRL_MSG_SIZE,
				    DMA_BIDIRECTIONAL);
		kfree(conn->buf);
		conn->buf = NULL;
	}
}

static struct rbond_conn *rbond_conn_alloc(bool active, __be32 laddr,
					   __be32 raddr)
{
	struct rbond_conn *conn = kzalloc(sizeof(*conn), GFP_KERNEL);

	if (!conn)
		return NULL;
	kref_init(&conn->ref);
	spin_lock_init(&conn->lock);
	conn->active = active;
	conn->laddr = laddr;
	conn->raddr = raddr;
	conn->state = RBOND_CONN_CONNECTING;
	conn->hb_rx = jiffies;
	conn->hb_sent = jiffies - HZ;
	hash_init(conn->rkeys);
	hash_init(conn->handed);
	INIT_LIST_HEAD(&conn->invals);
	INIT_DELAYED_WORK(&conn->down_work, rbond_conn_down_work);
	INIT_WORK(&conn->rkey_work, rbond_ctrl_ops->rkey_work);
	return conn;
}

static void rbond_conn_release(struct kref *ref)
{
	struct rbond_conn *conn = container_of(ref, struct rbond_conn, ref);

	rbond_ctrl_ops->conn_release(conn);
	kfree(conn);
}

/* Tear a connection down (process context, never from its cm handler). */
static void rbond_conn_teardown(struct rbond_conn *conn)
{
	struct rdma_cm_id *id;
	unsigned long flags, t0;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != RBOND_CONN_FAILED)
		conn->state = RBOND_CONN_DEAD;
	id = conn->id;
	conn->id = NULL;
	spin_unlock_irqrestore(&conn->lock, flags);
	if (!id)
		return;
	/*
	 * Its users learn it first: the disconnect and the id's destruction
	 * may wait (on the peer's answer, on rdma_cm's handler), and their
	 * replacement need not wait with them.
	 */
	t0 = jiffies;
	rbond_ctrl_ops->conn_down(conn);
	rdma_disconnect(id);
	rbond_conn_free_res(conn, id);
	rdma_destroy_id(id);
	pr_debug("control connection %pI4 -> %pI4 torn down in %u ms\n",
		 &conn->laddr, &conn->raddr, jiffies_to_msecs(jiffies - t0));
}

/* Queue the teardown; the queued work holds a reference. */
static void rbond_conn_queue_down(struct rbond_conn *conn)
{
	rbond_conn_get(conn);
	if (!queue_delayed_work(rbond_wq, &conn->down_work, 0))
		rbond_conn_put(conn);
}

/* Whether the connection gave its cm_id back (torn down). */
static bool rbond_conn_torn_down(struct rbond_conn *conn)
{
	unsigned long flags;
	bool gone;

	spin_lock_irqsave(&conn->lock, flags);
	gone = !conn->id;
	spin_unlock_irqrestore(&conn->lock, flags);
	return gone;
}

/*
 * A connection stays listed while it still has keys of ours handed out
 * (nr_handed): dereg_mr must find it, see that it cannot send INVAL and
 * force its QPs towards that peer to error (rbond_mrail_mr_dereg()); and
 * until it is torn down, which may wait for its port (rbond_conn_down_work())
 * - rbond_ctrl_exit() finds what is listed.
 */
static bool rbond_conn_reapable(struct rbond_conn *conn)
{
	return conn->state == RBOND_CONN_DEAD && !READ_ONCE(conn->nr_handed) &&
	       rbond_conn_torn_down(conn);
}

/* On rbond_conns, which holds a reference.  rbond_conn_mutex held. */
static void rbond_conn_list(struct rbond_conn *conn)
{
	lockdep_assert_held(&rbond_conn_mutex);
	list_add_tail(&conn->list, &rbond_conns);
	conn->listed = true;
}

/*
 * Off rbond_conns, onto @to (a reap list) or none: the caller puts the
 * list's reference once.  A connection on a reap list is no longer listed
 * - its list_head is not empty then, so only conn->listed tells: two
 * unlisters would put that reference twice.  rbond_conn_mutex held.
 */
static void rbond_conn_unlist(struct rbond_conn *conn, struct list_head *to)
{
	lockdep_assert_held(&rbond_conn_mutex);
	conn->listed = false;
	if (to)
		list_move_tail(&conn->list, to);
	else
		list_del_init(&conn->list);
}

/* Tear down and unlist unless still needed; the caller holds a ref. */
static void rbond_conn_down(struct rbond_conn *conn)
{
	struct rbond_conn *unlisted = NULL;

	rbond_conn_teardown(conn);
	mutex_lock(&rbond_conn_mutex);
	/* A failed active probe stays listed: negative cache. */
	if (!rbond_ctrl_stopping && rbond_conn_reapable(conn) &&
	    conn->listed) {
		rbond_conn_unlist(conn, NULL);
		unlisted = conn;
	}
	mutex_unlock(&rbond_conn_mutex);
	rbond_conn_put(unlisted);	/* the list's reference */
}

/*
 * Whether the connection's port is up.  No heartbeat goes to a port that
 * is down: it would exhaust the control QP's retries and end the
 * connection, and its teardown sends a DREQ through the port's GSI QP,
 * which rxe then moves to error for good - no rdma_cm connection over
 * that port after the link returned (seen as "unreachable (-110)").  An
 * idle connection survives an outage.  The port's state lags its netdev:
 * rxe raises the port event tens of ms after the link went (40 ms seen,
 * with a teardown in between), so the netdev the connection is bound to
 * must be running with carrier too.  conn->lock held, the device there
 * (state UP, or an id with a QP: rbond_conn_setup() ran).
 */
static bool rbond_conn_port_active(struct rbond_conn *conn)
{
	const struct rdma_dev_addr *da;
	struct net_device *ndev;
	enum ib_port_state st;
	bool up = true;

	if (ib_get_cached_port_state(conn->dmadev, conn->port, &st) ||
	    st != IB_PORT_ACTIVE)
		return false;
	if (!conn->id)
		return true;
	da = &conn->id->route.addr.dev_addr;
	rcu_read_lock();
	ndev = da->net && da->bound_dev_if ?
	       dev_get_by_index_rcu(da->net, da->bound_dev_if) : NULL;
	if (ndev)
		up = netif_running(ndev) && netif_carrier_ok(ndev);
	rcu_read_unlock();
	return up;
}

/*
 * Whether the teardown waits: the cm_id of a connection that was
 * established (or was being) sends a DREQ (or REJ) through its port's GSI
 * QP when destroyed, and with the port down rxe finds no route for it and
 * moves that QP to error for good - no rdma_cm connection over the port
 * after it came back, for any QP of ours or anyone's.  A connection whose
 * port is down is therefore kept, dead (nothing is sent on it), until the
 * port is up again; device removal and module unload do not wait.
 */
static bool rbond_conn_down_later(struct rbond_conn *conn)
{
	unsigned long flags;
	bool down;

	if (READ_ONCE(rbond_ctrl_stopping))
		return false;
	spin_lock_irqsave(&conn->lock, flags);
	down = conn->id && conn->qp && !rbond_conn_port_active(conn);
	spin_unlock_irqrestore(&conn->lock, flags);
	return down;
}

static void rbond_conn_down_work(struct work_struct *work)
{
	struct rbond_conn *conn = container_of(to_delayed_work(work),
					       struct rbond_conn, down_work);

	if (rbond_conn_down_later(conn)) {
		/* what waits on the connection learns it is down now */
		if (!conn->down_waits)
			rbond_ctrl_ops->conn_down(conn);
		conn->down_waits = true;
		/* the queued work's reference goes on with it */
		queue_delayed_work(rbond_wq, &conn->down_work,
				   msecs_to_jiffies(RBOND_CTRL_DOWN_POLL_MS));
		return;
	}
	rbond_conn_down(conn);
	rbond_conn_put(conn);		/* the queued work's */
}

/* A listed connection whose id is on @dev, with a reference; or NULL. */
static struct rbond_conn *rbond_ctrl_conn_on(struct ib_device *dev)
{
	struct rbond_conn *conn, *found = NULL;
	unsigned long flags;

	mutex_lock(&rbond_conn_mutex);
	list_for_each_entry(conn, &rbond_conns, list) {
		spin_lock_irqsave(&conn->lock, flags);
		if (conn->id && conn->id->device == dev)
			found = conn;
		spin_unlock_irqrestore(&conn->lock, flags);
		if (found) {
			rbond_conn_get(found);
			break;
		}
	}
	mutex_unlock(&rbond_conn_mutex);
	return found;
}

/**
 * rbond_ctrl_remove_device() - a member device is going away
 * @dev: the device
 *
 * Tears down every connection on @dev here, before rdma_cm's own removal
 * (ib_client removal runs newest client first) would report
 * DEVICE_REMOVAL: freeing a CQ from the cm handler means flushing its
 * poll work under rdma_cm's handler_mutex, which the CQ work of the MAD
 * layer takes the other way round (a lockdep cycle).  DEVICE_REMOVAL in
 * rbond_ctrl_cm_handler() stays for a connection accepted after this.
 * Locks: none held.
 * Context: process context (ib_client remove), sleeps.
 */
void rbond_ctrl_remove_device(struct ib_device *dev)
{
	struct rbond_conn *conn;

	while ((conn = rbond_ctrl_conn_on(dev))) {
		rbond_conn_down(conn);
		rbond_conn_put(conn);
	}
}

/*
 * rbond_conn_mutex held: unlist what has outlived its use (dead
 * connections without handed keys, negative entries past their hold
 * time) onto @gone, for rbond_conn_put() after the mutex.
 */
static void rbond_ctrl_reap(struct list_head *gone)
{
	struct rbond_conn *conn, *tmp;

	lockdep_assert_held(&rbond_conn_mutex);
	list_for_each_entry_safe(conn, tmp, &rbond_conns, list) {
		if (rbond_conn_reapable(conn) ||
		    (conn->state == RBOND_CONN_FAILED &&
		     rbond_conn_torn_down(conn) &&
		     time_after(jiffies, conn->fail_time +
					 RBOND_CTRL_FAIL_HOLD)))
			rbond_conn_unlist(conn, gone);
	}
}

static void rbond_ctrl_put_list(struct list_head *gone)
{
	struct rbond_conn *conn, *tmp;

	list_for_each_entry_safe(conn, tmp, gone, list) {
		list_del_init(&conn->list);
		rbond_conn_put(conn);
	}
}

/* Connections on the list in state CONNECTING or UP (mutex held). */
static void rbond_ctrl_count(bool active, __be32 raddr, unsigned int *all,
			     unsigned int *same)
{
	struct rbond_conn *conn;

	lockdep_assert_held(&rbond_conn_mutex);
	*all = 0;
	*same = 0;
	list_for_each_entry(conn, &rbond_conns, list) {
		if (conn->active != active)
			continue;
		if (!active && (conn->state == RBOND_CONN_DEAD ||
				conn->state == RBOND_CONN_FAILED))
			continue;
		(*all)++;
		if (conn->raddr == raddr)
			(*same)++;
	}
}

/* From a cm handler: stop the connection later. */
static void rbond_conn_fail(struct rbond_conn *conn, bool probe_failed)
{
	unsigned long flags;
	bool queue;

	spin_lock_irqsave(&conn->lock, flags);
	queue = conn->state == RBOND_CONN_CONNECTING ||
		conn->state == RBOND_CONN_UP;
	if (queue) {
		conn->state = probe_failed ? RBOND_CONN_FAILED :
					     RBOND_CONN_DEAD;
		conn->fail_time = jiffies;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (probe_failed)
		atomic64_inc(&rbond_ctrl_stats.probes_failed);
	if (queue)
		rbond_conn_queue_down(conn);
}

/**
 * rbond_ctrl_conn_kill() - take a connection down as if the peer had
 * disconnected
 * @conn: the connection
 *
 * If it was connecting or up, its teardown is queued (rbond_wq).
 * Context: any context.
 */
void rbond_ctrl_conn_kill(struct rbond_conn *conn)
{
	rbond_conn_fail(conn, false);
}

/**
 * rbond_ctrl_conn_half_open() - take down a connection whose peer end is
 * gone
 * @conn: the connection, up on our side, silent on the peer's
 *
 * As rbond_ctrl_conn_kill(), counted (mrail_stats: ctrl_half_open).
 * Context: any context.
 */
void rbond_ctrl_conn_half_open(struct rbond_conn *conn)
{
	atomic64_inc(&rbond_ctrl_stats.half_open);
	rbond_conn_fail(conn, false);
}

/* --- messages ------------------------------------------------------------- */

/**
 * rbond_ctrl_send() - send a control message
 * @conn: the connection
 * @msg: the message; its header (magic, version, type, length, sequence,
 *	status) is filled in here
 * @type: the message type (enum rbond_msg_type)
 * @status: its status (RBOND_ST_*)
 *
 * Bounded: a message that finds no free send buffer is dropped and the
 * requester's timeout retries it.
 * Locks: conn->lock not held (taken here, irqsave).
 * Return: 0 when posted, -ENOTCONN if @conn is not up, -EBUSY if no send
 * buffer is free, or the error of ib_post_send().
 */
int rbond_ctrl_send(struct rbond_conn *conn, struct rbond_msg *msg, u8 type,
		    u32 status)
{
	struct ib_send_wr wr = {};
	struct rbond_cbuf *cb;
	struct ib_sge sge;
	unsigned long flags;
	unsigned int slot;
	int ret;

	msg->magic = cpu_to_be32(RBOND_CTRL_MAGIC);
	msg->version = RBOND_CTRL_VERSION;
	msg->type = type;
	msg->len = cpu_to_be16(sizeof(*msg));
	msg->status = cpu_to_be32(status);

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state != RBOND_CONN_UP || !conn->qp) {
		ret = -ENOTCONN;
		goto out_unlock;
	}
	if (type == RBOND_MSG_HEARTBEAT && !rbond_conn_port_active(conn)) {
		ret = -ENETDOWN;
		goto out_unlock;
	}
	slot = find_first_zero_bit(&conn->tx_busy, RBOND_CTRL_TX);
	if (slot >= RBOND_CTRL_TX ||
	    (type == RBOND_MSG_HEARTBEAT &&
	     hweight_long(conn->hb_busy) >= RBOND_CTRL_HB_INFLIGHT)) {
		ret = -EBUSY;	/* bounded: the requester retries */
		goto out_unlock;
	}
	msg->seq = cpu_to_be32(++conn->seq);
	slot += RBOND_CTRL_RX;
	memcpy(rbond_conn_buf(conn, slot), msg, sizeof(*msg));
	ib_dma_sync_single_for_device(conn->dmadev,
				      conn->dma + (u64)slot * RBOND_CTRL_MSG_SIZE,
				      RBOND_CTRL_MSG_SIZE, DMA_BIDIRECTIONAL);
	cb = &conn->cbufs[slot];
	cb->cqe.done = rbond_ctrl_tx_done;
	sge.addr = conn->dma + (u64)slot * RBOND_CTRL_MSG_SIZE;
	sge.length = sizeof(*msg);
	sge.lkey = conn->pd->local_dma_lkey;
	wr.wr_cqe = &cb->cqe;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IB_WR_SEND;
	wr.send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(conn->qp, &wr, NULL);
	if (!ret) {
		__set_bit(slot - RBOND_CTRL_RX, &conn->tx_busy);
		if (type == RBOND_MSG_HEARTBEAT) {
			__set_bit(slot - RBOND_CTRL_RX, &conn->hb_busy);
			conn->hb_sent = jiffies;
		}
	}
out_unlock:
	spin_unlock_irqrestore(&conn->lock, flags);
	return ret;
}

static void rbond_ctrl_tx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rbond_cbuf *cb = container_of(wc->wr_cqe, struct rbond_cbuf,
					     cqe);
	struct rbond_conn *conn = cb->conn;
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	__clear_bit(cb->idx - RBOND_CTRL_RX, &conn->tx_busy);
	__clear_bit(cb->idx - RBOND_CTRL_RX, &conn->hb_busy);
	spin_unlock_irqrestore(&conn->lock, flags);
	if (wc->status != IB_WC_SUCCESS && wc->status != IB_WC_WR_FLUSH_ERR) {
		/*
		 * The peer is gone (retries exhausted) without a disconnect:
		 * the connection is dead, and the keys that came on it with
		 * it (M1 of the security review).
		 */
		pr_debug("control send to %pI4 failed: %d\n",
			 &conn->raddr, wc->status);
		rbond_conn_fail(conn, false);
	}
}

/* CONNECTING -> UP (any other state stays): established. */
static void rbond_conn_set_up(struct rbond_conn *conn)
{
	unsigned long flags;

	spin_lock_irqsave(&conn->lock, flags);
	if (conn->state == RBOND_CONN_CONNECTING)
		conn->state = RBOND_CONN_UP;
	spin_unlock_irqrestore(&conn->lock, flags);
}

/*
 * A message on a connection the peer opened: it is established, whether
 * or not rdma_cm has told us yet - its ESTABLISHED event (the RTU) may be
 * handled after the first message's receive completion, and until then
 * an answer would not go out (rbond_ctrl_send(): -ENOTCONN), a NOENT to a
 * QP_REQ for one (seen in CI: the first of rbond_hostile's forged QP_REQs
 * got no answer within 3 s, the second one did).
 */
static void rbond_conn_seen_up(struct rbond_conn *conn)
{
	if (!conn->active && READ_ONCE(conn->state) != RBOND_CONN_UP)
		rbond_conn_set_up(conn);
}

static void rbond_ctrl_rx_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rbond_cbuf *cb = container_of(wc->wr_cqe, struct rbond_cbuf,
					     cqe);
	struct rbond_conn *conn = cb->conn;
	struct rbond_msg msg;

	if (wc->status != IB_WC_SUCCESS) {
		/* flushed: the connection is going down; else it is dead */
		if (wc->status != IB_WC_WR_FLUSH_ERR)
			rbond_conn_fail(conn, false);
		return;
	}
	ib_dma_sync_single_for_cpu(conn->dmadev,
				   conn->dma + (u64)cb->idx * RBOND_CTRL_MSG_SIZE,
				   RBOND_CTRL_MSG_SIZE, DMA_BIDIRECTIONAL);
	memcpy(&msg, rbond_conn_buf(conn, cb->idx), sizeof(msg));
	if (rbond_conn_post_recv(conn, cb->idx))
		pr_debug("control recv repost failed\n");

	if (wc->byte_len < sizeof(msg) ||
	    be32_to_cpu(msg.magic) != RBOND_CTRL_MAGIC ||
	    msg.version != RBOND_CTRL_VERSION ||
	    be16_to_cpu(msg.len) != sizeof(msg)) {
		atomic64_inc(&rbond_ctrl_stats.bad_msgs);
		return;
	}
	WRITE_ONCE(conn->hb_rx, jiffies);
	rbond_conn_seen_up(conn);
	if (msg.type == RBOND_MSG_HEARTBEAT) {
		WRITE_ONCE(conn->hb_queue_us,
			   min_t(u32, be32_to_cpu(msg.hb.queue_us),
				 RBOND_CTRL_HB_MAX_QUEUE_US));
		WRITE_ONCE(conn->hb_seen, true);
		return;
	}
	if (msg.type >= RBOND_MSG_NR || !rbond_ctrl_ops->msg[msg.type]) {
		atomic64_inc(&rbond_ctrl_stats.bad_msgs);
		return;
	}
	rbond_ctrl_ops->msg[msg.type](conn, &msg);
}

/* --- rdma_cm ------------------------------------------------------------- */

struct rbond_cm_pdata {
	__be32 magic;
	u8 version;
	u8 rsvd[3];
};

/* Our private data and connection parameters: the same for both sides. */
static void rbond_cm_conn_param(struct rdma_conn_param *param,
				struct rbond_cm_pdata *mine)
{
	*mine = (struct rbond_cm_pdata) {
		.magic = cpu_to_be32(RBOND_CTRL_MAGIC),
		.version = RBOND_CTRL_VERSION,
	};
	*param = (struct rdma_conn_param) {
		.private_data = mine,
		.private_data_len = sizeof(*mine),
		.retry_count = RBOND_CTRL_RETRY,
		.rnr_retry_count = RBOND_CTRL_RETRY,
	};
}

/*
 * rdma_accept() failed on a connection already listed (ESTABLISHED never
 * comes).  Others may have found it meanwhile and hold references of
 * their own, or unlisted it; a device removal may even have taken its id
 * to tear it down (rbond_conn_teardown(), which then destroys the id once
 * this handler returns).  So it goes the way of any connection: off the
 * list, its resources freed by the id's owner, what waits on it told, the
 * references put - never freed here directly.  Drops the handler's
 * reference.
 * Return: for the cm handler - non-zero when the id is still ours, for
 * rdma_cm to reject and destroy; 0 when the teardown owns it.
 */
static int rbond_ctrl_accept_failed(struct rbond_conn *conn,
				    struct rdma_cm_id *id)
{
	unsigned long flags;
	bool listed, mine;

	mutex_lock(&rbond_conn_mutex);
	listed = conn->listed;
	if (listed)
		rbond_conn_unlist(conn, NULL);
	mutex_unlock(&rbond_conn_mutex);
	spin_lock_irqsave(&conn->lock, flags);
	mine = conn->id == id;
	if (mine) {
		conn->id = NULL;
		conn->state = RBOND_CONN_DEAD;
	}
	spin_unlock_irqrestore(&conn->lock, flags);
	if (mine) {
		rbond_conn_free_res(conn, id);
		id->context = NULL;
		rbond_ctrl_ops->conn_down(conn);
	}
	if (listed)
		rbond_conn_put(conn);	/* the list's */
	rbond_conn_put(conn);		/* the handler's */
	return mine ? -ECONNREFUSED : 0;
}

/*
 * A connection request, on the new id (@id->context is still the
 * listener's).  Every refusal returns non-zero: rdma_cm then rejects and
 * destroys the id, so a refused request leaves nothing behind.
 */
static int rbond_ctrl_accept(struct rdma_cm_id *id,
			     struct rdma_cm_event *ev)
{
	const struct rbond_cm_pdata *pd = ev->param.conn.private_data;
	struct rbond_cm_pdata mine;
	struct rdma_conn_param param;
	/* on a passive id, src_addr is ours and dst_addr the asker's */
	struct sockaddr_in *src = (struct sockaddr_in *)&id->route.addr.src_addr;
	struct sockaddr_in *dst = (struct sockaddr_in *)&id->route.addr.dst_addr;
	struct rbond_conn *conn;
	unsigned int all, same;
	bool full;
	LIST_HEAD(gone);
	int ret;

	id->context = NULL;
	if (!pd || ev->param.conn.private_data_len < sizeof(*pd) ||
	    be32_to_cpu(pd->magic) != RBOND_CTRL_MAGIC ||
	    pd->version != RBOND_CTRL_VERSION ||
	    src->sin_family != AF_INET || dst->sin_family != AF_INET)
		goto refuse;
	/* Only a kernel peer can bind a privileged source port. */
	if (!dst->sin_port || ntohs(dst->sin_port) >= PROT_SOCK) {
		pr_debug("control connection from %pI4:%u refused: unprivileged port\n",
			 &dst->sin_addr.s_addr, ntohs(dst->sin_port));
		goto refuse;
	}
	mutex_lock(&rbond_conn_mutex);
	rbond_ctrl_count(false, dst->sin_addr.s_addr, &all, &same);
	full = all >= RBOND_CTRL_MAX_PASSIVE ||
	       same >= RBOND_CTRL_MAX_PER_ADDR;
	mutex_unlock(&rbond_conn_mutex);
	if (full)
		goto refuse_full;
	conn = rbond_conn_alloc(false, src->sin_addr.s_addr,
				dst->sin_addr.s_addr);
	if (!conn)
		goto refuse;
	conn->id = id;
	id->context = conn;
	ret = rbond_conn_setup(conn, id);
	if (ret)
		goto err_free;
	mutex_lock(&rbond_conn_mutex);
	rbond_ctrl_reap(&gone);
	/* again, under the mutex: requests are handled concurrently */
	rbond_ctrl_count(false, dst->sin_addr.s_addr, &all, &same);
	if (rbond_ctrl_stopping || all >= RBOND_CTRL_MAX_PASSIVE ||
	    same >= RBOND_CTRL_MAX_PER_ADDR) {
		mutex_unlock(&rbond_conn_mutex);
		rbond_ctrl_put_list(&gone);
		goto err_free_res;
	}
	rbond_conn_list(conn);
	rbond_conn_get(conn);		/* the handler's, to its end */
	mutex_unlock(&rbond_conn_mutex);
	rbond_ctrl_put_list(&gone);
	rbond_cm_conn_param(&param, &mine);
	ret = rdma_accept(id, &param);
	if (ret)
		return rbond_ctrl_accept_failed(conn, id);
	rbond_conn_put(conn);
	return 0;

err_free_res:
	rbond_conn_free_res(conn, id);
err_free:
	id->context = NULL;
	kfree(conn);
	return -ECONNREFUSED;	/* rdma_cm rejects and destroys the id */
refuse_full:
	pr_debug("control connection from %pI4 refused: %u connections (%u from it)\n",
		 &dst->sin_addr.s_addr, all, same);
refuse:
	return -ECONNREFUSED;
}

static int rbond_ctrl_cm_handler(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	struct rbond_conn *conn = id->context;
	struct rbond_cm_pdata pdata;
	struct rdma_conn_param param;
	unsigned long flags;
	bool mine;
	int ret;

	switch (ev->event) {
	case RDMA_CM_EVENT_CONNECT_REQUEST:
		return rbond_ctrl_accept(id, ev);
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		ret = rdma_resolve_route(id, RBOND_CTRL_CM_TIMEOUT_MS);
		if (ret)
			rbond_conn_fail(conn, true);
		return 0;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		ret = rbond_conn_setup(conn, id);
		if (!ret) {
			rbond_cm_conn_param(&param, &pdata);
			ret = rdma_connect_locked(id, &param);
		}
		if (ret)
			rbond_conn_fail(conn, true);
		return 0;
	case RDMA_CM_EVENT_ESTABLISHED:
		rbond_conn_set_up(conn);
		if (conn->active)
			rbond_ctrl_ops->conn_up(conn);
		return 0;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		/* Not a bond (no listener) or not reachable: single-rail. */
		pr_debug("control connection %pI4 -> %pI4: %s (%d)\n",
			 &conn->laddr, &conn->raddr, rdma_event_msg(ev->event),
			 ev->status);
		rbond_conn_fail(conn, conn->active);
		return 0;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		/*
		 * One owner for the id: if rbond_conn_teardown() took it, it
		 * frees and destroys (rdma_cm waits for that); else we free
		 * everything on the device now and rdma_cm destroys the id.
		 */
		spin_lock_irqsave(&conn->lock, flags);
		mine = conn->id == id;
		if (mine) {
			if (conn->state != RBOND_CONN_FAILED)
				conn->state = RBOND_CONN_DEAD;
			conn->id = NULL;
		}
		spin_unlock_irqrestore(&conn->lock, flags);
		if (!mine)
			return 0;
		rbond_conn_free_res(conn, id);
		rbond_conn_queue_down(conn);
		return 1;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_ADDR_CHANGE:
		rbond_conn_fail(conn, false);
		return 0;
	default:
		return 0;
	}
}

static int rbond_ctrl_listen_handler(struct rdma_cm_id *id,
				     struct rdma_cm_event *ev)
{
	struct rbond_listener *l = id->context;
	bool mine = false;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		id->event_handler = rbond_ctrl_cm_handler;
		return rbond_ctrl_accept(id, ev);
	}
	if (ev->event != RDMA_CM_EVENT_DEVICE_REMOVAL)
		return 0;
	/* The listener's device goes away: rdma_cm destroys it on return. */
	mutex_lock(&rbond_conn_mutex);
	if (!list_empty(&l->list)) {
		list_del_init(&l->list);
		mine = true;
	}
	mutex_unlock(&rbond_conn_mutex);
	if (mine)
		kfree(l);
	return mine ? 1 : 0;
}

/**
 * rbond_ctrl_listen() - listen on @addr unless already listening
 * @addr: a rail's IPv4 address; 0: nothing to do
 *
 * Not once rbond_ctrl_exit() has begun.  A failure is only logged (debug).
 * Locks: rbond_conn_mutex not held (taken here).
 * Context: process context, may sleep.
 */
void rbond_ctrl_listen(__be32 addr)
{
	struct sockaddr_in sin = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = addr,
		.sin_port = htons(ctrl_port),
	};
	struct rbond_listener *l;
	struct rdma_cm_id *id;
	int ret;

	if (!addr)
		return;
	mutex_lock(&rbond_conn_mutex);
	if (rbond_ctrl_stopping)
		goto out_unlock;
	list_for_each_entry(l, &rbond_listeners, list)
		if (l->addr == addr)
			goto out_unlock;
	l = kzalloc(sizeof(*l), GFP_KERNEL);
	if (!l)
		goto out_unlock;
	INIT_LIST_HEAD(&l->list);
	l->addr = addr;
	id = rdma_create_id(&init_net, rbond_ctrl_listen_handler, l,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		goto err_free;
	ret = rdma_bind_addr(id, (struct sockaddr *)&sin);
	if (!ret)
		ret = rdma_listen(id, RBOND_CTRL_BACKLOG);
	if (ret) {
		pr_debug("listen on %pI4:%u failed: %d\n", &addr,
			 ctrl_port, ret);
		rdma_destroy_id(id);
		goto err_free;
	}
	l->id = id;
	list_add_tail(&l->list, &rbond_listeners);
	pr_debug("control channel listens on %pI4:%u\n", &addr,
		 ctrl_port);
	goto out_unlock;

err_free:
	kfree(l);
out_unlock:
	mutex_unlock(&rbond_conn_mutex);
}

/**
 * rbond_ctrl_forget_failed() - a local rail address is usable again
 * @laddr: its address
 *
 * The negative cache of connections from @laddr (a failed probe keeps a
 * peer single-rail for RBOND_CTRL_FAIL_HOLD) is from a time the rail was
 * down: the next connection from it probes again.
 * Locks: rbond_conn_mutex not held (taken here).  Process context.
 */
void rbond_ctrl_forget_failed(__be32 laddr)
{
	struct rbond_conn *conn;

	mutex_lock(&rbond_conn_mutex);
	list_for_each_entry(conn, &rbond_conns, list)
		if (conn->active && conn->laddr == laddr &&
		    conn->state == RBOND_CONN_FAILED)
			conn->fail_time = jiffies - RBOND_CTRL_FAIL_HOLD - 1;
	mutex_unlock(&rbond_conn_mutex);
}

/**
 * rbond_ctrl_forget_addr() - no bond has local address @addr any more
 * @addr: a rail's IPv4 address; 0: nothing to do
 *
 * Its listener goes, and every connection from it that nothing uses (no
 * QP's reference, no keys handed out) ends as if the peer had
 * disconnected - its teardown waits for a port that is down, as any
 * (rbond_conn_down_later()) - so that a deleted bond leaves none of the
 * control channel's cm_ids, QPs, CQs or PDs on its member devices.  A
 * later bond on the address listens again with its first multi-rail QP.
 * Locks: rbond_conn_mutex not held (taken here).
 * Context: process context, sleeps (rdma_destroy_id()).
 */
void rbond_ctrl_forget_addr(__be32 addr)
{
	struct rbond_listener *l, *found = NULL;
	struct rbond_conn *conn;

	if (!addr)
		return;
	mutex_lock(&rbond_conn_mutex);
	list_for_each_entry(l, &rbond_listeners, list) {
		if (l->addr == addr) {
			list_del_init(&l->list);
			found = l;
			break;
		}
	}
	list_for_each_entry(conn, &rbond_conns, list)
		if (conn->laddr == addr && kref_read(&conn->ref) == 1 &&
		    !READ_ONCE(conn->nr_handed))
			rbond_conn_fail(conn, false);
	mutex_unlock(&rbond_conn_mutex);
	/* unlisted: a DEVICE_REMOVAL of its own leaves it to us */
	if (found) {
		rdma_destroy_id(found->id);
		kfree(found);
	}
}

static struct rbond_conn *__rbond_ctrl_connect(__be32 laddr, __be32 raddr,
					       bool force);

/**
 * rbond_ctrl_connect() - the active connection from @laddr to @raddr
 * @laddr: our address, a rail's
 * @raddr: the peer's address
 *
 * Starts connecting if needed: check conn->state.
 * Locks: rbond_conn_mutex not held (taken here).
 * Context: process context, may sleep.
 * Return: the connection, referenced, or NULL when the peer is known not to
 * answer (failed probe within RBOND_CTRL_FAIL_HOLD); NULL too while
 * stopping, without memory or at RBOND_CTRL_MAX_ACTIVE connections.
 */
struct rbond_conn *rbond_ctrl_connect(__be32 laddr, __be32 raddr)
{
	return __rbond_ctrl_connect(laddr, raddr, false);
}

/**
 * rbond_ctrl_connect_now() - rbond_ctrl_connect(), past the negative cache
 * @laddr: our address
 * @raddr: the peer's
 *
 * For a peer known to be a bond (a QP pair's failover needs it): a failed
 * probe is tried again at once - it may date from a moment the rail was
 * down or its neighbour not yet resolved.
 * Context: process context, may sleep.
 * Return: as rbond_ctrl_connect().
 */
struct rbond_conn *rbond_ctrl_connect_now(__be32 laddr, __be32 raddr)
{
	return __rbond_ctrl_connect(laddr, raddr, true);
}

static struct rbond_conn *__rbond_ctrl_connect(__be32 laddr, __be32 raddr,
					       bool force)
{
	struct sockaddr_in src = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = laddr,
	};
	struct sockaddr_in dst = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = raddr,
		.sin_port = htons(ctrl_port),
	};
	struct rbond_conn *conn, *old = NULL;
	unsigned int all, same, port;
	struct rdma_cm_id *id;
	LIST_HEAD(gone);
	int ret;

	mutex_lock(&rbond_conn_mutex);
	if (rbond_ctrl_stopping) {
		conn = NULL;
		goto out_unlock;
	}
	rbond_ctrl_reap(&gone);
	list_for_each_entry(conn, &rbond_conns, list) {
		if (!conn->active || conn->laddr != laddr ||
		    conn->raddr != raddr)
			continue;
		if (conn->state == RBOND_CONN_FAILED) {
			if (!force && time_before(jiffies, conn->fail_time +
						  RBOND_CTRL_FAIL_HOLD)) {
				conn = NULL;
				goto out_unlock;
			}
			/* hold time over: probe again; unlisted once torn down */
			if (!rbond_conn_torn_down(conn))
				continue;
			old = conn;
			break;
		}
		if (conn->state == RBOND_CONN_DEAD)
			continue;
		rbond_conn_get(conn);
		goto out_unlock;
	}
	if (old)
		rbond_conn_unlist(old, NULL);
	/* Every destination a local user names costs one: bounded. */
	rbond_ctrl_count(true, raddr, &all, &same);
	if (all >= RBOND_CTRL_MAX_ACTIVE) {
		pr_debug("no control connection to %pI4: %u connections\n",
			 &raddr, all);
		conn = NULL;
		goto out_unlock;
	}

	conn = rbond_conn_alloc(true, laddr, raddr);
	if (!conn)
		goto out_unlock;
	id = rdma_create_id(&init_net, rbond_ctrl_cm_handler, conn,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id)) {
		kfree(conn);
		conn = NULL;
		goto out_unlock;
	}
	/*
	 * A privileged source port (we run in a kworker, which has
	 * CAP_NET_BIND_SERVICE): the peer's listener takes only those.
	 */
	ret = -EADDRINUSE;
	for (port = RBOND_CTRL_SPORT_MAX;
	     port >= RBOND_CTRL_SPORT_MIN && ret == -EADDRINUSE; port--) {
		src.sin_port = htons(port);
		ret = rdma_bind_addr(id, (struct sockaddr *)&src);
	}
	conn->id = id;
	rbond_conn_list(conn);
	rbond_conn_get(conn);		/* the caller's */
	if (!ret)
		ret = rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst,
					RBOND_CTRL_CM_TIMEOUT_MS);
	if (ret) {
		pr_debug("control connection %pI4 -> %pI4: %d\n",
			 &laddr, &raddr, ret);
		rbond_conn_fail(conn, true);
	}
out_unlock:
	mutex_unlock(&rbond_conn_mutex);
	rbond_conn_put(old);
	rbond_ctrl_put_list(&gone);
	return conn;
}

/**
 * rbond_ctrl_walk_conns() - call a function for every live connection
 * @it: the function (@it->fn) and its argument (@it->arg)
 *
 * @it->fn is called under the connection list mutex.
 * Locks: rbond_conn_mutex not held (taken here).
 */
void rbond_ctrl_walk_conns(const struct rbond_conn_iter *it)
{
	struct rbond_conn *conn;

	mutex_lock(&rbond_conn_mutex);
	list_for_each_entry(conn, &rbond_conns, list)
		it->fn(conn, it->arg);
	mutex_unlock(&rbond_conn_mutex);
}

/**
 * rbond_ctrl_hb_on() - whether heartbeats are sent (heartbeat_ms not 0)
 *
 * Off, no connection is judged either: a peer is found silent only
 * while both ends send them.
 * Context: any.
 */
bool rbond_ctrl_hb_on(void)
{
	return READ_ONCE(rbond_hb_ms);
}

/**
 * rbond_ctrl_silence() - how long a connection's peer has been silent
 * @conn: the connection
 * @ms: set to the time since the peer's last message, in ms
 * @queue_us: set to the queue drain time its last heartbeat gave
 *
 * Only for a connection that is up and on which the peer sends
 * heartbeats (a peer module without them is never found silent).
 * Context: any.
 * Return: true if @ms and @queue_us are set.
 */
bool rbond_ctrl_silence(struct rbond_conn *conn, unsigned int *ms,
			u32 *queue_us)
{
	if (READ_ONCE(conn->state) != RBOND_CONN_UP ||
	    !READ_ONCE(conn->hb_seen))
		return false;
	*ms = jiffies_to_msecs(jiffies - READ_ONCE(conn->hb_rx));
	*queue_us = READ_ONCE(conn->hb_queue_us);
	return true;
}

/**
 * rbond_ctrl_heartbeat() - send a heartbeat if one is due
 * @conn: the connection
 * @queue_us: our queue's drain time on its rail, in us (struct rbond_msg)
 *
 * Due heartbeat_ms after the last one (none if 0), while fewer than
 * RBOND_CTRL_HB_INFLIGHT are not acknowledged.  A connection whose peer
 * sent heartbeats and then none for RBOND_CTRL_HB_DEAD_MS is half-open:
 * it is taken down instead.
 * Context: any (takes conn->lock, irqsave).
 */
void rbond_ctrl_heartbeat(struct rbond_conn *conn, u32 queue_us)
{
	unsigned int ms = READ_ONCE(rbond_hb_ms);
	struct rbond_msg msg = {};
	unsigned int silent;
	u32 q;

	if (!ms || READ_ONCE(conn->state) != RBOND_CONN_UP)
		return;
	/*
	 * A peer that sends heartbeats sends one every @ms on every
	 * connection whose end it still has: silent this long, its end is
	 * gone (torn down while its port or ours was down) and ours is
	 * half-open - it would take our requests into the void and its
	 * silence would judge the rail whenever it is used again.  It goes
	 * as if the peer had disconnected (its teardown waits for our port);
	 * the next user connects anew.  Well after any silence verdict
	 * (failover_silent_ms plus the queues, rbond_fo_hb_one()).
	 */
	if (rbond_ctrl_silence(conn, &silent, &q) &&
	    silent > max(RBOND_CTRL_HB_DEAD_MS, RBOND_CTRL_HB_DEAD_BEATS * ms)) {
		pr_debug("control connection %pI4 -> %pI4: no heartbeat for %u ms: its peer end is gone\n",
			 &conn->laddr, &conn->raddr, silent);
		rbond_ctrl_conn_half_open(conn);
		return;
	}
	if (time_before(jiffies, READ_ONCE(conn->hb_sent) +
				 msecs_to_jiffies(ms)))
		return;
	msg.hb.queue_us = cpu_to_be32(queue_us);
	rbond_ctrl_send(conn, &msg, RBOND_MSG_HEARTBEAT, RBOND_ST_OK);
}

/**
 * rbond_ctrl_register() - set the handlers the control channel calls
 * @ops: the handlers (rbond_mqp.c)
 *
 * At module load, before any connection exists.
 */
void rbond_ctrl_register(const struct rbond_ctrl_ops *ops)
{
	rbond_ctrl_ops = ops;
}

/**
 * rbond_ctrl_exit() - stop the control channel
 *
 * At module unload: no listener or connection is created from now on,
 * every listener is destroyed, every connection torn down and released,
 * and rbond_wq flushed.
 * Locks: rbond_conn_mutex not held (taken here).
 * Context: process context, sleeps.
 */
void rbond_ctrl_exit(void)
{
	struct rbond_conn *conn, *tmp;
	struct rbond_listener *l;
	LIST_HEAD(conns);

	mutex_lock(&rbond_conn_mutex);
	rbond_ctrl_stopping = true;
	list_splice_init(&rbond_conns, &conns);
	mutex_unlock(&rbond_conn_mutex);

	/*
	 * One listener at a time, unlinked under the mutex: a concurrent
	 * DEVICE_REMOVAL (rbond_ctrl_listen_handler()) either took it first
	 * (and frees it) or finds it unlinked and leaves it to us.
	 */
	for (;;) {
		mutex_lock(&rbond_conn_mutex);
		l = list_first_entry_or_null(&rbond_listeners,
					     struct rbond_listener, list);
		if (l)
			list_del_init(&l->list);
		mutex_unlock(&rbond_conn_mutex);
		if (!l)
			break;
		rdma_destroy_id(l->id);
		kfree(l);
	}
	list_for_each_entry_safe(conn, tmp, &conns, list) {
		list_del_init(&conn->list);
		if (cancel_delayed_work_sync(&conn->down_work))
			rbond_conn_put(conn);	/* the queued work's */
		rbond_conn_teardown(conn);
		rbond_conn_put(conn);
	}
	flush_workqueue(rbond_wq);
}
