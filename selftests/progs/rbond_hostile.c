// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_hostile - a hostile peer of the rdma_bond control channel (rdma_cm,
 * port 18515 on every rail address), and the bond QP pair it attacks.
 *
 *   rbond_hostile probe  -a ADDR [-l LOCAL] [-P SPORT] [-V VER]
 *       one connection request with valid private data; exit 0 if it was
 *       accepted, 2 if it was refused, 1 on any other outcome.
 *   rbond_hostile flood  -a ADDR [-l LOCAL] -n N
 *       N requests with bad private data; exit 0 if every one was refused.
 *   rbond_hostile cap    -a ADDR [-l LOCAL] -P SPORT -n N
 *       N connections held at once from ports SPORT..SPORT+N-1 (root);
 *       prints how many were accepted and refused.
 *   rbond_hostile forge  -a ADDR -l LOCAL -P SPORT [-V VER] -F DIR
 *       connects from a privileged port (root), waits for DIR/qpns (written
 *       by the victim server on this host), then sprays forged QP_RSPs at
 *       the victim QP while it negotiates and sends malformed, truncated,
 *       replayed and forged messages (also FENCEs that would fail the
 *       victim's rail 1 over); TAP output, exit 0 if every one was refused
 *       without key material.
 *   rbond_hostile qpreq  -a ADDR -l LOCAL -P SPORT -q QPN -s PEER_QPN
 *       from a privileged port (root), a QP_REQ for the QP pair QPN (at
 *       ADDR) / PEER_QPN with a guessed nonce, then with none; TAP output,
 *       exit 0 if both were refused (NOENT) without key material.
 *   rbond_hostile victim -d DEV -p TCP_PORT -F DIR [-n COUNT] [SERVER]
 *       the victim pair: a relaxed-ordered bond RC QP pair; the client
 *       writes COUNT x 1 MiB to the server and a SEND; the server checks
 *       every byte.  The server delays its RTR until DIR/go exists.
 *   rbond_hostile inject -d DEV -a ADDR -q QPN -s PSN [-o send|write] [-L LEN]
 *       one RC request (a SEND, or a WRITE with rkey 0, of LEN (64) bytes)
 *       from a plain QP on DEV straight into the QP QPN, expected PSN PSN,
 *       at the RoCE address ADDR (a member QP of a bond); exit 0 if it
 *       completed with an error, 3 if it succeeded, 2 if it never did.
 *
 * VER is the control protocol version (3; 2 has the same layout, 1 speaks
 * the old format).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "common.h"

/* --- the wire format (drivers/rdma_bond/rbond_ctrl.h) ------------------- */

#define CTRL_PORT	18515
#define CTRL_MAGIC	0x52424e44
#define NRAILS		4
enum { QP_REQ = 1, QP_RSP, RKEY_REQ, RKEY_RSP, INVAL, INVAL_ACK, FENCE,
       FENCE_ACK, HEARTBEAT, PEER_ERR };
enum { ST_OK, ST_NOT_READY, ST_NOENT, ST_PERM };

struct hrail {
	uint8_t gid[16];
	uint32_t qpn, psn;
	uint8_t index, rsvd[3];
};

struct hhdr {
	uint32_t magic;
	uint8_t version, type;
	uint16_t len;
	uint32_t seq, status, src_qpn, dst_qpn;
};

union hbody {
	struct {
		uint8_t nrails, rsvd[3];
		struct hrail rail[NRAILS];
	} qp;
	struct {
		uint32_t rkey, access, rail_rkey[NRAILS];
		uint8_t rail_valid, rsvd[3];
	} key;
	struct {
		uint8_t rail, peer_rail, reason, rsvd;
		uint32_t qpn, peer_qpn;
	} fence;
	struct {
		uint32_t queue_us;
		uint8_t rsvd[4];
	} hb;
};

/* versions 2 and 3 (3: a rail entry's first reserved byte is the member
 * state); version 1 is the same without nonce and echo */
struct hmsg {
	struct hhdr h;
	uint8_t nonce[8], echo[8];
	union hbody b;
};

static int ver = 3;

static size_t msg_size(void)
{
	return ver == 1 ? sizeof(struct hhdr) + sizeof(union hbody) :
			  sizeof(struct hmsg);
}

/* host-order fields of @m to wire bytes in @out */
static size_t msg_pack(const struct hmsg *m, uint8_t *out)
{
	struct hmsg w = *m;
	size_t off = sizeof(w.h);
	int i;

	w.h.magic = htonl(m->h.magic);
	w.h.len = htons(m->h.len);
	w.h.seq = htonl(m->h.seq);
	w.h.status = htonl(m->h.status);
	w.h.src_qpn = htonl(m->h.src_qpn);
	w.h.dst_qpn = htonl(m->h.dst_qpn);
	if (m->h.type == QP_REQ || m->h.type == QP_RSP) {
		for (i = 0; i < NRAILS; i++) {
			w.b.qp.rail[i].qpn = htonl(m->b.qp.rail[i].qpn);
			w.b.qp.rail[i].psn = htonl(m->b.qp.rail[i].psn);
		}
	} else if (m->h.type == FENCE || m->h.type == FENCE_ACK ||
		   m->h.type == PEER_ERR) {
		w.b.fence.qpn = htonl(m->b.fence.qpn);
		w.b.fence.peer_qpn = htonl(m->b.fence.peer_qpn);
	} else if (m->h.type == HEARTBEAT) {
		w.b.hb.queue_us = htonl(m->b.hb.queue_us);
	} else {
		w.b.key.rkey = htonl(m->b.key.rkey);
		w.b.key.access = htonl(m->b.key.access);
		for (i = 0; i < NRAILS; i++)
			w.b.key.rail_rkey[i] = htonl(m->b.key.rail_rkey[i]);
	}
	memcpy(out, &w.h, sizeof(w.h));
	if (ver != 1) {
		memcpy(out + off, w.nonce, 16);
		off += 16;
	}
	memcpy(out + off, &w.b, sizeof(w.b));
	return off + sizeof(w.b);
}

static void msg_unpack(const uint8_t *in, struct hmsg *m)
{
	size_t off = sizeof(m->h);
	int i;

	memset(m, 0, sizeof(*m));
	memcpy(&m->h, in, sizeof(m->h));
	if (ver != 1) {
		memcpy(m->nonce, in + off, 16);
		off += 16;
	}
	memcpy(&m->b, in + off, sizeof(m->b));
	m->h.magic = ntohl(m->h.magic);
	m->h.len = ntohs(m->h.len);
	m->h.seq = ntohl(m->h.seq);
	m->h.status = ntohl(m->h.status);
	m->h.src_qpn = ntohl(m->h.src_qpn);
	m->h.dst_qpn = ntohl(m->h.dst_qpn);
	if (m->h.type == QP_REQ || m->h.type == QP_RSP) {
		for (i = 0; i < NRAILS; i++) {
			m->b.qp.rail[i].qpn = ntohl(m->b.qp.rail[i].qpn);
			m->b.qp.rail[i].psn = ntohl(m->b.qp.rail[i].psn);
		}
	} else if (m->h.type == FENCE || m->h.type == FENCE_ACK ||
		   m->h.type == PEER_ERR) {
		m->b.fence.qpn = ntohl(m->b.fence.qpn);
		m->b.fence.peer_qpn = ntohl(m->b.fence.peer_qpn);
	} else {
		m->b.key.rkey = ntohl(m->b.key.rkey);
		m->b.key.access = ntohl(m->b.key.access);
		for (i = 0; i < NRAILS; i++)
			m->b.key.rail_rkey[i] = ntohl(m->b.key.rail_rkey[i]);
	}
}

static void msg_init(struct hmsg *m, uint8_t type, uint32_t src, uint32_t dst)
{
	memset(m, 0, sizeof(*m));
	m->h.magic = CTRL_MAGIC;
	m->h.version = ver;
	m->h.type = type;
	m->h.len = msg_size();
	m->h.src_qpn = src;
	m->h.dst_qpn = dst;
}

static bool all_zero(const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n--)
		if (*b++)
			return false;
	return true;
}

/* --- an rdma_cm connection to a control port --------------------------- */

#define SLOT	256
#define NRX	32
#define NTX	32

struct cconn {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	unsigned int tx_next;
	/* received messages not yet taken */
	uint8_t rx[NRX][SLOT];
	uint32_t rx_len[NRX];
	unsigned int rx_head, rx_tail;
};

static struct {
	const char *addr, *local, *dev, *dir, *server, *op;
	int sport, n, port, count;
	unsigned long qpn, psn;
	long len;
} opt = { .n = 200, .port = 18660, .count = 24, .op = "send", .len = -1 };

static int cm_wait(struct cconn *c, enum rdma_cm_event_type want,
		   int timeout_ms, enum rdma_cm_event_type *got)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int r;

	r = poll(&pfd, 1, timeout_ms);
	if (r <= 0)
		return -ETIMEDOUT;
	if (rdma_get_cm_event(c->ch, &ev))
		return -errno;
	*got = ev->event;
	rdma_ack_cm_event(ev);
	return *got == want ? 0 : -EPROTO;
}

static int post_rx(struct cconn *c, unsigned int i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->buf + i * SLOT),
		.length = SLOT, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad);
}

static void cc_close(struct cconn *c)
{
	if (c->id && c->id->qp) {
		rdma_disconnect(c->id);
		rdma_destroy_qp(c->id);
	}
	if (c->mr)
		ibv_dereg_mr(c->mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	if (c->ch)
		rdma_destroy_event_channel(c->ch);
	free(c->buf);
	memset(c, 0, sizeof(*c));
}

/*
 * Connect to ADDR:18515 from LOCAL:SPORT (0: any) with private data
 * {magic, version} (good) or garbage.  0 established, 2 rejected, 1 error;
 * *why says what happened.
 */
static int cc_connect(struct cconn *c, bool good_pdata, const char **why)
{
	struct sockaddr_in dst = { .sin_family = AF_INET,
				   .sin_port = htons(CTRL_PORT) };
	struct sockaddr_in src = { .sin_family = AF_INET,
				   .sin_port = htons(opt.sport) };
	struct ibv_qp_init_attr qa = {};
	struct rdma_conn_param cp = {};
	enum rdma_cm_event_type ev;
	uint8_t pdata[8] = {};
	unsigned int i;
	int r;

	memset(c, 0, sizeof(*c));
	*why = "";
	inet_pton(AF_INET, opt.addr, &dst.sin_addr);
	if (opt.local)
		inet_pton(AF_INET, opt.local, &src.sin_addr);
	c->ch = rdma_create_event_channel();
	if (!c->ch || rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP)) {
		*why = "rdma_create_id failed";
		return 1;
	}
	if ((opt.local || opt.sport) &&
	    rdma_bind_addr(c->id, (struct sockaddr *)&src)) {
		*why = errno == EACCES ? "bind: EACCES (privileged port)" :
					 "bind failed";
		return 1;
	}
	if (rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 2000) ||
	    cm_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED, 5000, &ev) ||
	    rdma_resolve_route(c->id, 2000) ||
	    cm_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000, &ev)) {
		*why = "address/route resolution failed";
		return 1;
	}
	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, NRX + NTX + 4, NULL,
				      NULL, 0) : NULL;
	c->buf = calloc(NRX + NTX, SLOT);
	if (!c->cq || !c->buf) {
		*why = "PD/CQ/buffer";
		return 1;
	}
	c->mr = ibv_reg_mr(c->pd, c->buf, (NRX + NTX) * SLOT,
			   IBV_ACCESS_LOCAL_WRITE);
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = NTX;
	qa.cap.max_recv_wr = NRX;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (!c->mr || rdma_create_qp(c->id, c->pd, &qa)) {
		*why = "MR/QP";
		return 1;
	}
	for (i = 0; i < NRX; i++)
		post_rx(c, i);
	if (good_pdata) {
		uint32_t magic = htonl(CTRL_MAGIC);

		memcpy(pdata, &magic, 4);
		pdata[4] = ver;
	} else {
		memcpy(pdata, "hostile!", 8);
	}
	cp.private_data = pdata;
	cp.private_data_len = sizeof(pdata);
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (rdma_connect(c->id, &cp)) {
		*why = "rdma_connect failed";
		return 1;
	}
	r = cm_wait(c, RDMA_CM_EVENT_ESTABLISHED, 10000, &ev);
	if (!r) {
		*why = "established";
		return 0;
	}
	if (r == -EPROTO && ev == RDMA_CM_EVENT_REJECTED) {
		*why = "rejected";
		return 2;
	}
	*why = r == -ETIMEDOUT ? "no answer" : rdma_event_str(ev);
	return 1;
}

/* Poll the CQ: stash received messages, count send completions. */
static int cc_poll(struct cconn *c, int timeout_ms, bool want_tx)
{
	uint64_t end = now_ms() + timeout_ms;
	struct ibv_wc wc;
	int r;

	for (;;) {
		r = ibv_poll_cq(c->cq, 1, &wc);
		if (r < 0)
			return -1;
		if (r == 0) {
			if (now_ms() > end)
				return 0;
			usleep(200);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS) {
			diag("control connection: completion status %s",
			     wc_status_name(wc.status));
			return -1;
		}
		if (wc.opcode & IBV_WC_RECV) {
			unsigned int slot = c->rx_head++ % NRX;

			memcpy(c->rx[slot], c->buf + wc.wr_id * SLOT, SLOT);
			c->rx_len[slot] = wc.byte_len;
			post_rx(c, wc.wr_id);
			if (!want_tx)
				return 1;
		} else if (want_tx) {
			return 1;
		}
	}
}

/* Send raw bytes; waits for the send completion. */
static int cc_send_raw(struct cconn *c, const void *p, size_t len)
{
	unsigned int slot = NRX + c->tx_next++ % NTX;
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->buf + slot * SLOT),
		.length = len, .lkey = c->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = slot, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	memcpy(c->buf + slot * SLOT, p, len);
	if (ibv_post_send(c->id->qp, &wr, &bad))
		return -1;
	return cc_poll(c, 5000, true) == 1 ? 0 : -1;
}

static int cc_send(struct cconn *c, const struct hmsg *m)
{
	uint8_t raw[SLOT];

	return cc_send_raw(c, raw, msg_pack(m, raw));
}

/*
 * The next received message within @timeout_ms: 1, or 0 if none.  The
 * module's heartbeats (one every 100 ms) are not answers: skipped.
 */
static int cc_recv(struct cconn *c, struct hmsg *m, int timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	unsigned int slot;
	int64_t left;

	for (;;) {
		left = (int64_t)(end - now_ms());
		if (c->rx_tail == c->rx_head &&
		    cc_poll(c, left > 0 ? (int)left : 0, false) != 1)
			return 0;
		slot = c->rx_tail++ % NRX;
		msg_unpack(c->rx[slot], m);
		if (m->h.type != HEARTBEAT)
			return 1;
	}
}

static void cc_drain(struct cconn *c)
{
	struct hmsg m;

	while (cc_recv(c, &m, 50))
		;
}

/* --- probe, flood -------------------------------------------------------- */

static int do_probe(void)
{
	struct cconn c;
	const char *why;
	int r;

	r = cc_connect(&c, true, &why);
	printf("probe %s:%d from port %d: %s\n", opt.addr, CTRL_PORT,
	       opt.sport, why);
	cc_close(&c);
	return r;
}

static int do_flood(void)
{
	int i, refused = 0, other = 0;
	struct cconn c;
	const char *why;

	for (i = 0; i < opt.n; i++) {
		int r = cc_connect(&c, false, &why);

		cc_close(&c);
		if (r == 2) {
			refused++;
		} else {
			if (!other++)
				diag("request %d: %s", i, why);
		}
	}
	printf("flood %s: %d requests with bad private data, %d refused, %d otherwise\n",
	       opt.addr, opt.n, refused, other);
	return refused == opt.n ? 0 : 1;
}

/* N connections at once from ports SPORT.. (root): how many are accepted? */
static int do_cap(void)
{
	int i, acc = 0, ref = 0, other = 0, base = opt.sport;
	struct cconn *c = calloc(opt.n, sizeof(*c));
	const char *why;

	if (!c)
		return 1;
	for (i = 0; i < opt.n; i++) {
		int r;

		opt.sport = base + i;
		r = cc_connect(&c[i], true, &why);
		if (r == 0)
			acc++;
		else if (r == 2)
			ref++;
		else if (!other++)
			diag("connection %d: %s", i, why);
	}
	printf("cap %s: %d connections at once from ports %d..%d: %d accepted, %d refused, %d otherwise\n",
	       opt.addr, opt.n, base, base + opt.n - 1, acc, ref, other);
	for (i = 0; i < opt.n; i++)
		cc_close(&c[i]);
	free(c);
	return 0;
}

/* --- forge ----------------------------------------------------------------- */

static bool file_exists(const char *dir, const char *name)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return !stat(p, &st);
}

static void file_put(const char *dir, const char *name, const char *text)
{
	char p[512], t[520];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	snprintf(t, sizeof(t), "%s.tmp", p);
	f = fopen(t, "w");
	if (!f)
		return;
	fputs(text, f);
	fclose(f);
	rename(t, p);
}

static bool file_wait(const char *dir, const char *name, int timeout_s)
{
	uint64_t end = now_ms() + timeout_s * 1000ull;

	while (!file_exists(dir, name)) {
		if (now_ms() > end)
			return false;
		usleep(100000);
	}
	return true;
}

/* A refusal: status NOENT and nothing else but the QPNs and our nonce. */
static bool refused_clean(const struct hmsg *r, uint8_t type, uint32_t key)
{
	struct hmsg z = *r;

	if (r->h.type != type || r->h.status != ST_NOENT)
		return false;
	memset(&z.h, 0, sizeof(z.h));
	memset(z.echo, 0, sizeof(z.echo));
	if (type == RKEY_RSP) {
		if (z.b.key.rkey != key)
			return false;
		z.b.key.rkey = 0;
	}
	return all_zero(&z, sizeof(z));
}

static void show(const char *what, const struct hmsg *r)
{
	diag("%s: type %u status %u src 0x%x dst 0x%x access 0x%x rail_valid 0x%x rail_rkey[1] 0x%x nrails %u",
	     what, r->h.type, r->h.status, r->h.src_qpn, r->h.dst_qpn,
	     r->b.key.access, r->b.key.rail_valid, r->b.key.rail_rkey[1],
	     r->b.qp.nrails);
}

/* Send @m and expect exactly one refusal of @type (NOENT, no key material). */
static bool expect_refusal(struct cconn *c, const struct hmsg *m,
			   uint8_t type, const char *what)
{
	struct hmsg r;
	bool ok;

	if (cc_send(c, m)) {
		tap_ok(false, "%s: send failed", what);
		return false;
	}
	if (!cc_recv(c, &r, 3000)) {
		tap_ok(false, "%s: no answer", what);
		return false;
	}
	ok = refused_clean(&r, type, m->b.key.rkey);
	if (!ok)
		show(what, &r);
	tap_ok(ok, "%s: refused (NOENT), nothing disclosed", what);
	return ok;
}

static bool expect_silence(struct cconn *c, const void *raw, size_t len,
			   const char *what)
{
	struct hmsg r;
	bool ok;

	if (cc_send_raw(c, raw, len)) {
		tap_ok(false, "%s: send failed", what);
		return false;
	}
	ok = !cc_recv(c, &r, 500);
	if (!ok)
		show(what, &r);
	tap_ok(ok, "%s: ignored", what);
	return ok;
}

static void gid_v4(uint8_t *gid, const char *ip)
{
	memset(gid, 0, 16);
	gid[10] = 0xff;
	gid[11] = 0xff;
	inet_pton(AF_INET, ip, gid + 12);
}

/* A FENCE from @src's rail 1 for @dst's rail 1 (members as @dst's QPN). */
static void fence_msg(struct hmsg *m, uint32_t src, uint32_t dst)
{
	int i;

	msg_init(m, FENCE, src, dst);
	m->b.fence.rail = 1;
	m->b.fence.peer_rail = 1;
	m->b.fence.reason = 1;
	m->b.fence.qpn = src;
	m->b.fence.peer_qpn = dst;
	for (i = 0; i < 8; i++)
		m->echo[i] = rand();
}

static int do_forge(void)
{
	unsigned int qa = 0, qb = 0, rkey = 0, rkey2 = 0, nspray = 0;
	struct hmsg m, fake, ff, pe, hb;
	uint8_t raw[SLOT];
	struct cconn c;
	const char *why;
	char p[512];
	size_t len;
	FILE *f;
	int r, i;

	/*
	 * Host a listens on its rail addresses from its first multi-rail QP
	 * on: connect once the victim pair exists (the victim server waits
	 * for "go" before RTR, so the attack window is still open).
	 */
	if (!file_wait(opt.dir, "qpns", 120)) {
		tap_ok(false, "victim QPNs (%s/qpns)", opt.dir);
		return 1;
	}
	r = cc_connect(&c, true, &why);
	tap_ok(r == 0, "root, privileged port %d, version %d: connected (%s)",
	       opt.sport, ver, why);
	if (r)
		return 1;
	snprintf(p, sizeof(p), "%s/qpns", opt.dir);
	f = fopen(p, "r");
	if (!f || fscanf(f, "%x %x %x %x", &qa, &qb, &rkey, &rkey2) != 4) {
		tap_ok(false, "victim QPNs unreadable");
		return 1;
	}
	fclose(f);
	diag("victim QP 0x%x (host a), its peer 0x%x (host b), rkey 0x%x, other PD's rkey 0x%x",
	     qa, qb, rkey, rkey2);

	/*
	 * QP_RSP for the victim QP as its peer would answer, naming a QP that
	 * does not exist as the peer's rail 1, with a guessed nonce: taken,
	 * the victim's striped WRITEs go nowhere.  Sprayed from now until the
	 * victim's traffic is over.
	 */
	msg_init(&fake, QP_RSP, qb, qa);
	fake.h.status = ST_OK;
	fake.b.qp.nrails = 2;
	gid_v4(fake.b.qp.rail[0].gid, "10.0.1.2");
	fake.b.qp.rail[0].qpn = qb;
	gid_v4(fake.b.qp.rail[1].gid, "10.0.2.2");
	fake.b.qp.rail[1].qpn = 0xfffff0;
	fake.b.qp.rail[1].psn = 0x123456;
	fake.b.qp.rail[1].index = 1;
	for (i = 0; i < 8; i++)
		fake.echo[i] = rand();
	/*
	 * FENCE for the victim's rail 1 with a guessed nonce, naming as its
	 * member there the victim's own QPN or one of the first QPNs a member
	 * device hands out (17..48 on rxe): taken, the victim fails rail 1
	 * over.
	 */
	fence_msg(&ff, qb, qa);
	/*
	 * PEER_ERR for the victim's rail 1, likewise: taken, the victim's QP
	 * goes to error (its member there would have to be in error too).
	 */
	fence_msg(&pe, qb, qa);
	pe.h.type = PEER_ERR;
	/*
	 * HEARTBEAT claiming the longest queue there is: all it may do is
	 * delay the judgement of silence on this connection's own rail
	 * (the claim is capped), never touch the victim QP.
	 */
	msg_init(&hb, HEARTBEAT, qb, qa);
	hb.b.hb.queue_us = 0xffffffff;
	file_put(opt.dir, "go", "1\n");
	while (!file_exists(opt.dir, "traffic_done") && nspray < 20000) {
		if (cc_send(&c, &fake) || cc_send(&c, &ff) ||
		    cc_send(&c, &pe) || cc_send(&c, &hb))
			break;
		nspray++;
		for (i = 0; i < 8; i++) {
			ff.echo[i] = rand();
			pe.echo[i] = rand();
		}
		ff.b.fence.peer_qpn = nspray % 33 ? 16 + nspray % 33 : qa;
		pe.b.fence.peer_qpn = ff.b.fence.peer_qpn;
		cc_drain(&c);
		usleep(5000);
	}
	tap_ok(nspray > 0, "%u forged QP_RSPs, FENCEs, PEER_ERRs and HEARTBEATs for the victim QP sent while it negotiated and ran",
	       nspray);
	cc_drain(&c);

	/* malformed */
	msg_init(&m, QP_REQ, qb, qa);
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, 10, "truncated QP_REQ (10 bytes)");
	expect_silence(&c, raw, len - 1, "QP_REQ one byte short");
	msg_init(&m, QP_REQ, qb, qa);
	m.h.magic = 0x0badf00d;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "QP_REQ with a bad magic");
	msg_init(&m, QP_REQ, qb, qa);
	m.h.version = ver + 1;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "QP_REQ of the next protocol version");
	m.h.version = ver - 1;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "QP_REQ of the previous protocol version");
	msg_init(&m, QP_REQ, qb, qa);
	m.h.len = msg_size() + 8;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "QP_REQ with a wrong length field");
	msg_init(&m, 99, qb, qa);
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "unknown message type 99");
	msg_init(&m, RKEY_RSP, qb, qa);
	m.b.key.rkey = rkey;
	m.b.key.rail_valid = 3;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "unsolicited RKEY_RSP");
	msg_init(&m, INVAL_ACK, qb, qa);
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "unsolicited INVAL_ACK");
	msg_init(&m, HEARTBEAT, qb, qa);
	m.b.hb.queue_us = 0xffffffff;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "HEARTBEAT claiming a 4295 s queue");
	expect_silence(&c, raw, len - 1, "HEARTBEAT one byte short");
	m.h.version = ver + 1;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "HEARTBEAT of the next protocol version");
	fence_msg(&m, qb, qa);
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len,
		       "FENCE for the victim's rail 1 without its nonce");
	m.b.fence.peer_rail = 200;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "FENCE naming rail 200");
	fence_msg(&m, qb, qa);
	m.b.fence.peer_rail = 0;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len, "FENCE for the victim's home rail");
	fence_msg(&m, qb, qa);
	m.h.type = FENCE_ACK;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len,
		       "FENCE_ACK on a connection the victim did not open");

	/* forged: naming real QPs */
	msg_init(&m, QP_REQ, qb, 0xfffff1);
	expect_refusal(&c, &m, QP_RSP, "QP_REQ for no such QP");
	msg_init(&m, QP_REQ, qb ^ 0x5a5, qa);
	m.b.qp.nrails = 2;
	expect_refusal(&c, &m, QP_RSP,
		       "QP_REQ for the victim QP from a QPN it is not connected to");
	msg_init(&m, RKEY_REQ, qb ^ 0x5a5, qa);
	m.b.key.rkey = rkey;
	expect_refusal(&c, &m, RKEY_RSP,
		       "RKEY_REQ for the victim's key from a QPN it is not connected to");
	msg_init(&m, RKEY_REQ, qb, qa);
	m.b.key.rkey = rkey;
	expect_refusal(&c, &m, RKEY_RSP,
		       "RKEY_REQ for the victim's key, right QPNs, no nonce");
	for (i = 0; i < 8; i++)
		m.echo[i] = rand();
	expect_refusal(&c, &m, RKEY_RSP,
		       "RKEY_REQ for the victim's key, right QPNs, guessed nonce");
	msg_init(&m, RKEY_REQ, qb, qa);
	m.b.key.rkey = rkey2;
	expect_refusal(&c, &m, RKEY_RSP,
		       "RKEY_REQ for a key of another PD of the victim's process");
	msg_init(&m, RKEY_REQ, qb, 0xfffff1);
	m.b.key.rkey = rkey;
	expect_refusal(&c, &m, RKEY_RSP, "RKEY_REQ naming no such QP");
	msg_init(&m, RKEY_REQ, qb, qa);
	m.b.key.rkey = rkey;
	for (i = 0; i < 20; i++) {
		struct hmsg rr;

		if (cc_send(&c, &m) || !cc_recv(&c, &rr, 3000) ||
		    !refused_clean(&rr, RKEY_RSP, rkey))
			break;
	}
	tap_ok(i == 20, "the same RKEY_REQ replayed 20 times: refused every time (%d)",
	       i);
	msg_init(&m, QP_REQ, qb, 0xfffff2);
	expect_refusal(&c, &m, QP_RSP,
		       "after all that, the connection still answers");
	cc_close(&c);
	file_put(opt.dir, "forged", "1\n");
	printf("# forge: %d checks, %d failed\n", tap_n, tap_failed);
	return tap_failed ? 1 : 0;
}

/*
 * qpreq: a QP_REQ naming a real QP pair (-q the victim's QPN, -s its
 * peer's), sent from another of the peer host's rail addresses (-l) than
 * the one the victim was connected to, with a guessed nonce.  After a home
 * move a QP takes QP_REQs from any of its peer's rails - with the nonce
 * the peer gave before only: this one must be refused, and nothing about
 * the QP told.  Then once more with every byte of the nonce zero (a peer
 * that never gave one); then a QP_RSP and a home FENCE with a guessed
 * echo: ignored.
 */
static int do_qpreq(void)
{
	uint8_t raw[SLOT];
	struct cconn c;
	const char *why;
	struct hmsg m;
	size_t len;
	int r, i;

	r = cc_connect(&c, true, &why);
	tap_ok(r == 0, "root, privileged port %d, from %s: connected to %s (%s)",
	       opt.sport, opt.local ? opt.local : "any address", opt.addr,
	       why);
	if (r)
		return 1;
	msg_init(&m, QP_REQ, (uint32_t)opt.psn, (uint32_t)opt.qpn);
	m.b.qp.nrails = 2;
	if (opt.local)
		gid_v4(m.b.qp.rail[0].gid, opt.local);
	m.b.qp.rail[0].qpn = (uint32_t)opt.psn;
	m.b.qp.rail[1].qpn = 0xfffff3;
	m.b.qp.rail[1].index = 1;
	for (i = 0; i < 8; i++)
		m.nonce[i] = rand();
	expect_refusal(&c, &m, QP_RSP,
		       "QP_REQ for the QP pair from another rail of its peer, guessed nonce");
	memset(m.nonce, 0, sizeof(m.nonce));
	expect_refusal(&c, &m, QP_RSP,
		       "the same with no nonce");
	/*
	 * A QP_RSP as the peer would answer the victim's rejoin, and a FENCE
	 * of the home rail (rail 0) with a guessed echo: a QP_RSP is taken
	 * only on a connection the victim opened, a FENCE only with its
	 * nonce - both dropped, nothing answered.
	 */
	m.h.type = QP_RSP;
	m.h.status = ST_OK;
	for (i = 0; i < 8; i++)
		m.echo[i] = rand();
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len,
		       "QP_RSP for the QP pair on a connection its peer opened, guessed nonce");
	fence_msg(&m, (uint32_t)opt.psn, (uint32_t)opt.qpn);
	m.b.fence.rail = 0;
	m.b.fence.peer_rail = 0;
	len = msg_pack(&m, raw);
	expect_silence(&c, raw, len,
		       "FENCE of the QP pair's home rail from another rail of its peer, guessed nonce");
	cc_close(&c);
	printf("# qpreq: %d checks, %d failed\n", tap_n, tap_failed);
	return tap_failed ? 1 : 0;
}

/* --- victim ------------------------------------------------------------------ */

struct vwire {
	struct qp_wire qp;
	uint32_t rkey, rkey2;
	uint64_t addr, len;
} __attribute__((packed));

static int qp_rtr(struct dev *d, struct ibv_qp *qp, const struct qp_info *me,
		  const struct qp_info *peer)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = d->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int qp_rts(struct ibv_qp *qp, uint32_t psn)
{
	struct ibv_qp_attr a = {};

	a.qp_state = IBV_QPS_RTS;
	a.timeout = 18;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = psn;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

#define CHUNK	(1u << 20)

static int do_victim(void)
{
	const int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
	bool server = !opt.server, ok = true;
	size_t len = (size_t)opt.count * CHUNK;
	struct ibv_pd *pd2 = NULL;
	struct ibv_mr *mr, *mr2 = NULL, *mrc;
	struct qp_info me, peer;
	struct vwire w, pw;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_wc *wc;
	struct dev d;
	uint8_t *buf, ctl[64] = {}, other[4096];
	uint32_t psn = lrand48() & 0xffffff;
	char text[128];
	int sock, i, n;

	if (dev_open(&d, opt.dev, 1))
		return 1;
	buf = calloc(1, len);
	wc = calloc(opt.count + 4, sizeof(*wc));
	mr = ibv_reg_mr(d.pd, buf, len, acc);
	mrc = ibv_reg_mr(d.pd, ctl, sizeof(ctl), IBV_ACCESS_LOCAL_WRITE);
	cq = ibv_create_cq(d.ctx, 2 * opt.count + 16, NULL, NULL, 0);
	if (!buf || !wc || !mr || !mrc || !cq) {
		diag("victim: resources: %s", strerror(errno));
		return 1;
	}
	if (!server) {
		/* a key of another PD of this process: never to be handed out */
		pd2 = ibv_alloc_pd(d.ctx);
		mr2 = pd2 ? ibv_reg_mr(pd2, other, sizeof(other),
				       IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE) : NULL;
		if (!mr2) {
			diag("victim: second PD: %s", strerror(errno));
			return 1;
		}
		pat_fill(buf, len, 77, 0);
	}
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = opt.count + 4, .max_recv_wr = 4,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = ibv_create_qp(d.pd, &qa);
	}
	if (!qp || qp_to_init(&d, qp, acc)) {
		diag("victim: QP: %s", strerror(errno));
		return 1;
	}
	qp_local_info(&d, qp, psn, &me);
	memset(&w, 0, sizeof(w));
	qp_wire_pack(&w.qp, &me);
	w.rkey = htonl(mr->rkey);
	w.rkey2 = htonl(mr2 ? mr2->rkey : 0);
	w.addr = htobe64((uintptr_t)buf);
	w.len = htobe64(len);
	sock = tcp_connect(opt.server, opt.port, 60000);
	if (sock < 0 || xfer(sock, &w, &pw, sizeof(w))) {
		diag("victim: TCP exchange failed");
		return 1;
	}
	qp_wire_unpack(&pw.qp, &peer);
	diag("victim %s: QP 0x%x, peer QP 0x%x", server ? "server" : "client",
	     me.qpn, peer.qpn);

	if (server) {
		struct ibv_sge sge = { .addr = (uintptr_t)ctl, .length = 64,
				       .lkey = mrc->lkey };
		struct ibv_recv_wr rw = { .wr_id = 1, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		if (ibv_post_recv(qp, &rw, &bad))
			return 1;
		snprintf(text, sizeof(text), "%x %x %x %x\n", peer.qpn, me.qpn,
			 ntohl(pw.rkey), ntohl(pw.rkey2));
		file_put(opt.dir, "qpns", text);
		/* the client is at RTR and asks; the forger sprays */
		if (!file_wait(opt.dir, "go", 60))
			diag("victim server: no forger, going on");
		sleep(2);
		if (qp_rtr(&d, qp, &me, &peer) || qp_rts(qp, me.psn)) {
			diag("victim server: RTR/RTS: %s", strerror(errno));
			return 1;
		}
		sync_ok(sock, true);
		n = poll_n(cq, wc, 1, 120000);
		ok = n == 1 && wc[0].status == IBV_WC_SUCCESS &&
		     wc[0].opcode == IBV_WC_RECV;
		if (!ok)
			diag("victim server: SEND after the WRITEs: %s",
			     n ? wc_status_name(wc[0].status) : "none");
		if (ok) {
			long bad_at = pat_check(buf, len, 77, 0);

			ok = bad_at < 0;
			if (!ok)
				diag("victim server: byte %ld of %zu wrong", bad_at,
				     len);
		}
		tap_ok(ok, "victim: %d x 1 MiB WRITE + SEND arrived intact",
		       opt.count);
	} else {
		struct ibv_sge sge = { .addr = (uintptr_t)ctl, .length = 8,
				       .lkey = mrc->lkey };
		struct ibv_send_wr sw = { .wr_id = 1000, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_SEND,
					  .send_flags = IBV_SEND_SIGNALED }, *bad;

		if (qp_rtr(&d, qp, &me, &peer)) {
			diag("victim client: RTR: %s", strerror(errno));
			return 1;
		}
		if (!sync_ok(sock, true) || qp_rts(qp, me.psn)) {
			diag("victim client: RTS");
			return 1;
		}
		for (i = 0; i < opt.count && ok; i++) {
			struct ibv_sge s = {
				.addr = (uintptr_t)buf + (size_t)i * CHUNK,
				.length = CHUNK, .lkey = mr->lkey,
			};
			struct ibv_send_wr wr = {
				.wr_id = i, .sg_list = &s, .num_sge = 1,
				.opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
			};

			wr.wr.rdma.remote_addr = be64toh(pw.addr) +
						 (uint64_t)i * CHUNK;
			wr.wr.rdma.rkey = ntohl(pw.rkey);
			ok = !ibv_post_send(qp, &wr, &bad);
		}
		ok = ok && !ibv_post_send(qp, &sw, &bad);
		n = ok ? poll_n(cq, wc, opt.count + 1, 120000) : 0;
		for (i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				diag("victim client: wr %llu: %s",
				     (unsigned long long)wc[i].wr_id,
				     wc_status_name(wc[i].status));
				ok = false;
				break;
			}
		ok = ok && n == opt.count + 1;
		tap_ok(ok, "victim: %d x 1 MiB WRITE + SEND completed successfully",
		       opt.count);
	}
	ok = sync_ok(sock, ok);
	if (server)
		file_put(opt.dir, "traffic_done", "1\n");
	else if (!file_wait(opt.dir, "forged", 180))	/* keep the QP for it */
		diag("victim client: the forger did not finish");
	close(sock);
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_dereg_mr(mrc);
	if (mr2)
		ibv_dereg_mr(mr2);
	if (pd2)
		ibv_dealloc_pd(pd2);
	ibv_destroy_cq(cq);
	dev_close(&d);
	return ok ? 0 : 1;
}

/*
 * inject: one RC request from a plain QP of ours straight into a member QP
 * of the victim's bond (its QPN and expected PSN known, as to a sniffer on
 * the rail): a SEND of -n bytes into the receive the member keeps for the
 * peer's rejoin probe, or a WRITE of -n bytes to address 0 with rkey 0.
 * Prints the completion; exit 0 when the request was refused (an error
 * completion), 3 when it succeeded (the victim accepted data it has no
 * buffer for), 2 when nothing completed, 1 on setup errors.
 */
static int do_inject(void)
{
	bool send = !strcmp(opt.op, "send");
	size_t len = opt.len < 0 ? 64 : (size_t)opt.len;
	struct ibv_qp_init_attr ia = {};
	struct qp_info me, peer = {};
	struct ibv_sge sge = {};
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_qp_attr a = {};
	struct ibv_wc wc;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct dev d;
	void *buf;

	if (dev_open(&d, opt.dev, 1))
		return 1;
	buf = calloc(1, len + 1);
	cq = ibv_create_cq(d.ctx, 4, NULL, NULL, 0);
	mr = buf && cq ? ibv_reg_mr(d.pd, buf, len + 1, IBV_ACCESS_LOCAL_WRITE) :
			 NULL;
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = mr ? ibv_create_qp(d.pd, &ia) : NULL;
	if (!qp) {
		printf("# inject: setup on %s failed: %s\n", opt.dev, strerror(errno));
		return 1;
	}
	qp_local_info(&d, qp, opt.psn, &me);
	peer.qpn = opt.qpn;
	peer.psn = opt.psn;
	peer.mtu = me.mtu;
	gid_v4(peer.gid.raw, opt.addr);
	if (qp_to_init(&d, qp, 0) || qp_rtr(&d, qp, &me, &peer)) {
		printf("# inject: connect failed: %s\n", strerror(errno));
		return 1;
	}
	/* few, short retries: the victim answers at once or never */
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.sq_psn = opt.psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			  IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)) {
		printf("# inject: to RTS failed: %s\n", strerror(errno));
		return 1;
	}
	memset(buf, 0xa5, len);
	sge.addr = (uintptr_t)buf;
	sge.length = len;
	sge.lkey = mr->lkey;
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = len ? 1 : 0;
	wr.opcode = send ? IBV_WR_SEND : IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(qp, &wr, &bad)) {
		printf("# inject: post failed: %s\n", strerror(errno));
		return 1;
	}
	if (poll_n(cq, &wc, 1, 10000) != 1) {
		printf("inject: %s %zu B -> %s QPN 0x%lx PSN %lu: no completion\n",
		       send ? "SEND" : "WRITE", len, opt.addr, opt.qpn, opt.psn);
		return 2;
	}
	printf("inject: %s %zu B -> %s QPN 0x%lx PSN %lu: %s\n",
	       send ? "SEND" : "WRITE", len, opt.addr, opt.qpn, opt.psn,
	       wc_status_name(wc.status));
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	free(buf);
	dev_close(&d);
	return wc.status == IBV_WC_SUCCESS ? 3 : 0;
}

int main(int argc, char **argv)
{
	const char *mode;
	int c;

	if (argc < 2) {
		fprintf(stderr, "usage: %s probe|flood|cap|forge|qpreq|victim|inject [options]\n",
			argv[0]);
		return 1;
	}
	mode = argv[1];
	optind = 2;
	srand(getpid() ^ time(NULL));
	srand48(getpid());
	while ((c = getopt(argc, argv, "a:l:P:V:n:F:d:p:c:q:s:o:L:")) != -1) {
		switch (c) {
		case 'a': opt.addr = optarg; break;
		case 'l': opt.local = optarg; break;
		case 'P': opt.sport = atoi(optarg); break;
		case 'V': ver = atoi(optarg); break;
		case 'n': opt.n = atoi(optarg); break;
		case 'F': opt.dir = optarg; break;
		case 'd': opt.dev = optarg; break;
		case 'p': opt.port = atoi(optarg); break;
		case 'c': opt.count = atoi(optarg); break;
		case 'q': opt.qpn = strtoul(optarg, NULL, 0); break;
		case 's': opt.psn = strtoul(optarg, NULL, 0); break;
		case 'o': opt.op = optarg; break;
		case 'L': opt.len = atol(optarg); break;
		default: return 1;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(mode, "probe") && opt.addr)
		return do_probe();
	if (!strcmp(mode, "flood") && opt.addr)
		return do_flood();
	if (!strcmp(mode, "cap") && opt.addr && opt.sport)
		return do_cap();
	if (!strcmp(mode, "forge") && opt.addr && opt.dir)
		return do_forge();
	if (!strcmp(mode, "qpreq") && opt.addr && opt.qpn && opt.psn)
		return do_qpreq();
	if (!strcmp(mode, "victim") && opt.dev && opt.dir)
		return do_victim();
	if (!strcmp(mode, "inject") && opt.dev && opt.addr && opt.qpn)
		return do_inject();
	fprintf(stderr, "%s: missing options for %s\n", argv[0], mode);
	return 1;
}
