// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

int tap_n, tap_failed, tap_skipped;

void tap_ok(bool ok, const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	if (!ok)
		tap_failed++;
	printf("%s %d - ", ok ? "ok" : "not ok", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

int tap_end(void)
{
	printf("1..%d\n# %d failed, %d skipped\n", tap_n, tap_failed,
	       tap_skipped);
	return tap_failed || tap_n == 0 ? 1 : 0;
}

void tap_skip(const char *fmt, ...)
{
	va_list ap;

	tap_n++;
	tap_skipped++;
	printf("ok %d - ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(" # SKIP\n");
	fflush(stdout);
}

void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int dev_open(struct dev *d, const char *name, int gid_index)
{
	struct ibv_device **list;
	char path[256];
	int i, n;

	memset(d, 0, sizeof(*d));
	d->name = name;
	d->gid_index = gid_index;
	list = ibv_get_device_list(&n);
	if (!list) {
		diag("ibv_get_device_list: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	if (i == n) {
		diag("device %s not found (provider not loaded? RDMAV_DRIVERS)", name);
		ibv_free_device_list(list);
		return -1;
	}
	d->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!d->ctx) {
		diag("ibv_open_device(%s): %s", name, strerror(errno));
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		diag("ibv_alloc_pd(%s): %s", name, strerror(errno));
		return -1;
	}
	if (ibv_query_port(d->ctx, 1, &d->port)) {
		diag("ibv_query_port(%s): %s", name, strerror(errno));
		return -1;
	}
	if (ibv_query_gid(d->ctx, 1, gid_index, &d->gid)) {
		diag("ibv_query_gid(%s, %d): %s", name, gid_index, strerror(errno));
		return -1;
	}
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/bond", name);
	d->is_bond = access(path, F_OK) == 0;
	return 0;
}

void dev_close(struct dev *d)
{
	if (d->pd)
		ibv_dealloc_pd(d->pd);
	if (d->ctx)
		ibv_close_device(d->ctx);
	memset(d, 0, sizeof(*d));
}

void conn_opts_default(struct conn_opts *o)
{
	o->timeout = 18;
	o->retry_cnt = 7;
	o->rnr_retry = 7;
	o->min_rnr_timer = 12;
	o->max_rd_atomic = 1;
}

void qp_local_info(struct dev *d, struct ibv_qp *qp, uint32_t psn,
		   struct qp_info *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = qp->qp_num;
	out->psn = psn & 0xffffff;
	out->gid = d->gid;
	out->lid = d->port.lid;
	out->mtu = d->port.active_mtu;
}

void qp_wire_pack(struct qp_wire *w, const struct qp_info *in)
{
	memset(w, 0, sizeof(*w));
	w->qpn = htobe32(in->qpn);
	w->psn = htobe32(in->psn);
	memcpy(w->gid, in->gid.raw, sizeof(w->gid));
	w->lid = htobe16(in->lid);
	w->mtu = in->mtu;
}

void qp_wire_unpack(const struct qp_wire *w, struct qp_info *out)
{
	memset(out, 0, sizeof(*out));
	out->qpn = be32toh(w->qpn);
	out->psn = be32toh(w->psn);
	memcpy(out->gid.raw, w->gid, sizeof(w->gid));
	out->lid = be16toh(w->lid);
	out->mtu = w->mtu;
}

int qp_to_init(struct dev *d, struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = 1,
		.qp_access_flags = access,
	};

	(void)d;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

int qp_connect(struct dev *d, struct ibv_qp *qp, const struct qp_info *me,
	       const struct qp_info *peer, const struct conn_opts *o,
	       int access)
{
	struct ibv_qp_attr a;
	int ret;

	ret = qp_to_init(d, qp, access);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = me->mtu < peer->mtu ? me->mtu : peer->mtu;
	a.dest_qp_num = peer->qpn;
	a.rq_psn = peer->psn;
	a.max_dest_rd_atomic = o->max_rd_atomic;
	a.min_rnr_timer = o->min_rnr_timer;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = peer->lid;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = peer->gid;
	a.ah_attr.grh.sgid_index = d->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	ret = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = o->timeout;
	a.retry_cnt = o->retry_cnt;
	a.rnr_retry = o->rnr_retry;
	a.sq_psn = me->psn;
	a.max_rd_atomic = o->max_rd_atomic;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	int got = 0, r;

	while (got < n) {
		r = ibv_poll_cq(cq, n - got, wc + got);
		if (r < 0) {
			diag("ibv_poll_cq: %d (%s)", r, strerror(errno));
			return got;
		}
		got += r;
		if (r == 0) {
			if (now_ms() > end)
				break;
			usleep(50);
		}
	}
	return got;
}

void pat_fill(void *buf, size_t len, uint32_t seed, uint64_t off)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pat_byte(seed, off + i);
}

long pat_check(const void *buf, size_t len, uint32_t seed, uint64_t off)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat_byte(seed, off + i))
			return (long)i;
	return -1;
}

int tcp_connect(const char *server, int port, int timeout_ms)
{
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
	struct sockaddr_in a = { .sin_family = AF_INET };
	uint64_t end = now_ms() + timeout_ms;
	struct addrinfo *res;
	int s, l, one = 1;
	char sport[16];

	if (server) {
		snprintf(sport, sizeof(sport), "%d", port);
		if (getaddrinfo(server, sport, &hints, &res)) {
			diag("cannot resolve %s", server);
			return -1;
		}
		for (;;) {
			s = socket(AF_INET, SOCK_STREAM, 0);
			if (s >= 0 && !connect(s, res->ai_addr, res->ai_addrlen))
				break;
			if (s >= 0)
				close(s);
			if (now_ms() > end) {
				diag("connect %s:%d: %s", server, port, strerror(errno));
				freeaddrinfo(res);
				return -1;
			}
			usleep(100000);
		}
		freeaddrinfo(res);
		return s;
	}
	a.sin_port = htons(port);
	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l >= 0)
		setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (l < 0 || bind(l, (void *)&a, sizeof(a)) || listen(l, 1)) {
		diag("listen on %d: %s", port, strerror(errno));
		if (l >= 0)
			close(l);
		return -1;
	}
	s = accept(l, NULL, NULL);
	close(l);
	return s;
}

int tcp_begin(const char *server, int port, struct dev *d, struct ibv_qp *qp,
	      struct qp_info *me, struct qp_wire *w)
{
	int sock = tcp_connect(server, port, 20000);

	if (sock < 0) {
		tap_ok(false, "TCP handshake");
		return -1;
	}
	qp_local_info(d, qp, (getpid() * 2654435761u) & 0xffffff, me);
	qp_wire_pack(w, me);
	return sock;
}

int xfer(int sock, const void *out, void *in, size_t len)
{
	size_t done;
	ssize_t r;

	for (done = 0; done < len; done += r) {
		r = write(sock, (const char *)out + done, len - done);
		if (r <= 0)
			return -1;
	}
	for (done = 0; done < len; done += r) {
		r = read(sock, (char *)in + done, len - done);
		if (r <= 0)
			return -1;
	}
	return 0;
}

bool sync_ok(int sock, bool ok)
{
	uint8_t a = ok, b = 0;

	if (xfer(sock, &a, &b, sizeof(a)))
		return false;
	return ok && b;
}

const char *wc_status_name(enum ibv_wc_status s)
{
	return ibv_wc_status_str(s);
}

long long mrail_stat(const char *key)
{
	FILE *f = fopen("/sys/module/rdma_bond/parameters/mrail_stats", "r");
	char k[64];
	long long v, r = -1;

	if (!f)
		return -1;
	while (fscanf(f, "%63s %lld", k, &v) == 2)
		if (!strcmp(k, key))
			r = v;
	fclose(f);
	return r;
}
