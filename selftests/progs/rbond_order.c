// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_order - ordering conformance of one RC connection (design 5): every
 * check is written so that a reordering the verbs forbid makes it fail.
 * The client initiates every operation, the server owns the target memory
 * and watches it.
 *
 *   A. data WRITE then flag WRITE to a strict MR: the server polls the flag
 *      and checks, the moment it moves, every data region it covers;
 *   B. WRITE then READ of the same bytes: the READ returns the new data,
 *      its completion has the whole byte_len;
 *   C. atomics interleaved with WRITEs: FETCH_ADD / CMP_SWP on the last word
 *      of a region just written see the written value; a counter of
 *      FETCH_ADDs returns 0, 1, 2, ... in posting order;
 *   D. stale key: the server deregisters an MR the client has used,
 *      re-registers the same memory; the new key works, the old one fails
 *      and never changes the memory.
 * Every completion is checked: status, wr_id in posting order, opcode.
 *
 *   server:  rbond_order -d DEV [options]
 *   client:  rbond_order -d DEV [options] SERVER_ADDR
 *
 * Options: -g GID_INDEX (1)  -p TCP_PORT (18515)  -s REGION (1 MiB)
 *          -n ROUNDS (8)  -u ACK_TIMEOUT (18)  -R (data MRs relaxed-ordered)
 *          -T SECONDS (60, per wait)
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

struct wire {
	struct qp_wire qp;
	uint32_t data_rkey, flag_rkey;
	uint64_t data_addr, flag_addr, len;
} __attribute__((packed));

struct keymsg {
	uint32_t rkey, pad;
	uint64_t addr;
} __attribute__((packed));

static struct {
	const char *dev, *server;
	int gid, port, n, timeout_s, ack_timeout;
	size_t size;
	bool relaxed;
	bool error;
} opt = { .gid = 1, .port = 18515, .n = 8, .size = 1 << 20,
	  .ack_timeout = 18, .timeout_s = 60 };

static struct dev d;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static int sock = -1;
static struct wire peer;
/* client */
static struct ibv_mr *mr_src, *mr_rd, *mr_small;
static uint8_t *b_src, *b_rd;
static uint64_t *b_small;	/* flag values, atomic results */
/* server */
static struct ibv_mr *mr_data, *mr_flag;
static uint8_t *b_data;
static volatile uint64_t *b_flag;

static struct ibv_mr *reg(void **buf, size_t len, int access)
{
	struct ibv_mr *mr;

	if (posix_memalign(buf, 4096, len))
		return NULL;
	memset(*buf, 0, len);
	mr = ibv_reg_mr(d.pd, *buf, len, access);
	if (!mr)
		diag("ibv_reg_mr(%zu, 0x%x): %s", len, access, strerror(errno));
	return mr;
}

/* --- client side --------------------------------------------------------- */

static int post(uint64_t wr_id, enum ibv_wr_opcode op, void *addr, size_t len,
		uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t cmp,
		uint64_t swap)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = cmp;
		wr.wr.atomic.swap = swap;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (ibv_post_send(qp, &wr, &bad)) {
		diag("post wr_id 0x%llx: %s", (unsigned long long)wr_id,
		     strerror(errno));
		return -1;
	}
	return 0;
}

static enum ibv_wc_opcode wc_op(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_READ: return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: return IBV_WC_FETCH_ADD;
	case IBV_WR_ATOMIC_CMP_AND_SWP: return IBV_WC_COMP_SWAP;
	default: return IBV_WC_RDMA_WRITE;
	}
}

/*
 * Wait for k completions of WQEs posted with wr_id = base + 0..k-1 and
 * opcodes ops[]; check status, order and (when lens) byte_len.
 */
static bool wait_stream(const char *what, uint64_t base, int k,
			const enum ibv_wr_opcode *ops, const uint32_t *lens)
{
	struct ibv_wc *wc = calloc(k, sizeof(*wc));
	bool ok = true;
	int got, i;

	got = poll_n(cq, wc, k, opt.timeout_s * 1000);
	if (got != k) {
		diag("%s: %d of %d completions", what, got, k);
		ok = false;
	}
	for (i = 0; ok && i < got; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			diag("%s #%d: status %s", what, i, wc_status_name(wc[i].status));
			ok = false;
		} else if (wc[i].wr_id != base + i) {
			diag("%s #%d: wr_id 0x%llx, expected 0x%llx (order)", what, i,
			     (unsigned long long)wc[i].wr_id,
			     (unsigned long long)(base + i));
			ok = false;
		} else if (wc[i].opcode != wc_op(ops[i])) {
			diag("%s #%d: opcode %d, expected %d", what, i,
			     wc[i].opcode, wc_op(ops[i]));
			ok = false;
		} else if (lens && lens[i] && wc[i].byte_len != lens[i]) {
			diag("%s #%d: byte_len %u, expected %u", what, i,
			     wc[i].byte_len, lens[i]);
			ok = false;
		}
	}
	free(wc);
	return ok;
}

static size_t region(int r)
{
	return (size_t)r * opt.size;
}

static bool client_flag(void)
{
	int n = opt.n, r, k = 0;
	enum ibv_wr_opcode *ops = calloc(2 * n, sizeof(*ops));
	bool ok = true;

	for (r = 0; r < n; r++) {
		pat_fill(b_src + region(r), opt.size, 100 + r, 0);
		b_small[r] = r + 1;
	}
	ok = sync_ok(sock, ok);
	for (r = 0; ok && r < n; r++) {
		ops[k] = IBV_WR_RDMA_WRITE;
		ok = !post(0xA000 + k++, IBV_WR_RDMA_WRITE, b_src + region(r),
			   opt.size, mr_src->lkey, peer.data_addr + region(r),
			   peer.data_rkey, 0, 0);
		ops[k] = IBV_WR_RDMA_WRITE;
		ok = ok && !post(0xA000 + k++, IBV_WR_RDMA_WRITE, &b_small[r], 8,
				 mr_small->lkey, peer.flag_addr, peer.flag_rkey,
				 0, 0);
	}
	ok = ok && wait_stream("data+flag WRITE", 0xA000, k, ops, NULL);
	tap_ok(ok, "A. %d x (data WRITE %zu B, flag WRITE to a strict MR): completions in order",
	       n, opt.size);
	free(ops);
	return sync_ok(sock, ok);
}

static bool server_flag(void)
{
	int n = opt.n, seen = 0;
	uint64_t end = now_ms() + opt.timeout_s * 1000ull, v;
	bool ok = true;
	long bad;

	memset(b_data, 0, region(n));
	*b_flag = 0;
	ok = sync_ok(sock, ok);
	while (ok && seen < n) {
		v = *b_flag;
		__sync_synchronize();
		if (v > (uint64_t)n) {
			diag("flag %llu out of range", (unsigned long long)v);
			ok = false;
			break;
		}
		for (; ok && (uint64_t)seen < v; seen++) {
			bad = pat_check(b_data + region(seen), opt.size, 100 + seen, 0);
			if (bad >= 0) {
				diag("flag %llu visible, region %d byte %ld not written yet",
				     (unsigned long long)v, seen, bad);
				ok = false;
			}
		}
		if (now_ms() > end) {
			diag("flag stuck at %llu", (unsigned long long)v);
			ok = false;
		}
	}
	tap_ok(ok, "A. flag polled: every data region complete when its flag became visible");
	return sync_ok(sock, ok);
}

static bool client_write_read(void)
{
	int n = opt.n, r, k = 0;
	enum ibv_wr_opcode *ops = calloc(2 * n, sizeof(*ops));
	uint32_t *lens = calloc(2 * n, sizeof(*lens));
	bool ok = true;
	long bad;

	for (r = 0; r < n; r++)
		pat_fill(b_src + region(r), opt.size, 200 + r, 0);
	memset(b_rd, 0, region(n));
	ok = sync_ok(sock, ok);
	for (r = 0; ok && r < n; r++) {
		ops[k] = IBV_WR_RDMA_WRITE;
		lens[k] = opt.size;
		ok = !post(0xB000 + k++, IBV_WR_RDMA_WRITE, b_src + region(r),
			   opt.size, mr_src->lkey, peer.data_addr + region(r),
			   peer.data_rkey, 0, 0);
		ops[k] = IBV_WR_RDMA_READ;
		lens[k] = opt.size;
		ok = ok && !post(0xB000 + k++, IBV_WR_RDMA_READ, b_rd + region(r),
				 opt.size, mr_rd->lkey, peer.data_addr + region(r),
				 peer.data_rkey, 0, 0);
	}
	ok = ok && wait_stream("WRITE+READ", 0xB000, k, ops, lens);
	tap_ok(ok, "B. %d x (WRITE, READ of the same %zu B): completions in order, READ byte_len whole",
	       n, opt.size);
	for (r = 0; ok && r < n; r++) {
		bad = pat_check(b_rd + region(r), opt.size, 200 + r, 0);
		if (bad >= 0) {
			diag("READ %d: byte %ld is not what the WRITE before it wrote", r, bad);
			ok = false;
		}
	}
	tap_ok(ok, "B. every READ returned the bytes of the WRITE posted before it");
	free(ops);
	free(lens);
	return sync_ok(sock, ok);
}

static bool server_write_read(void)
{
	pat_fill(b_data, region(opt.n), 999, 0);
	return sync_ok(sock, sync_ok(sock, true));
}

static uint64_t word_val(int r)
{
	return 0x100000ull * (r + 1);
}

static bool client_atomics(void)
{
	int n = opt.n, r, k = 0;
	enum ibv_wr_opcode *ops = calloc(4 * n, sizeof(*ops));
	uint64_t *res = b_small + n;	/* 3 results per round */
	bool ok = true;
	size_t last = opt.size - 8;

	for (r = 0; r < n; r++) {
		pat_fill(b_src + region(r), opt.size, 300 + r, 0);
		memcpy(b_src + region(r) + last, &(uint64_t){ word_val(r) }, 8);
	}
	memset(res, 0, 3 * n * 8);
	ok = sync_ok(sock, ok);
	for (r = 0; ok && r < n; r++) {
		uint64_t w = peer.data_addr + region(r) + last;

		ops[k] = IBV_WR_RDMA_WRITE;
		ok = !post(0xC000 + k++, IBV_WR_RDMA_WRITE, b_src + region(r),
			   opt.size, mr_src->lkey, peer.data_addr + region(r),
			   peer.data_rkey, 0, 0);
		ops[k] = IBV_WR_ATOMIC_FETCH_AND_ADD;
		ok = ok && !post(0xC000 + k++, IBV_WR_ATOMIC_FETCH_AND_ADD,
				 &res[3 * r], 8, mr_small->lkey, w,
				 peer.data_rkey, 1, 0);
		ops[k] = IBV_WR_ATOMIC_CMP_AND_SWP;
		ok = ok && !post(0xC000 + k++, IBV_WR_ATOMIC_CMP_AND_SWP,
				 &res[3 * r + 1], 8, mr_small->lkey, w,
				 peer.data_rkey, word_val(r) + 1,
				 word_val(r) + 5);
		ops[k] = IBV_WR_ATOMIC_FETCH_AND_ADD;
		ok = ok && !post(0xC000 + k++, IBV_WR_ATOMIC_FETCH_AND_ADD,
				 &res[3 * r + 2], 8, mr_small->lkey,
				 peer.flag_addr + 8, peer.flag_rkey, 1, 0);
	}
	ok = ok && wait_stream("WRITE+atomics", 0xC000, k, ops, NULL);
	tap_ok(ok, "C. %d x (WRITE %zu B, FETCH_ADD, CMP_SWP, counter FETCH_ADD): completions in order",
	       n, opt.size);
	for (r = 0; ok && r < n; r++) {
		if (le64toh(res[3 * r]) != word_val(r) ||
		    le64toh(res[3 * r + 1]) != word_val(r) + 1) {
			diag("round %d: FETCH_ADD saw 0x%llx, CMP_SWP 0x%llx; the WRITE before them wrote 0x%llx",
			     r, (unsigned long long)le64toh(res[3 * r]),
			     (unsigned long long)le64toh(res[3 * r + 1]),
			     (unsigned long long)word_val(r));
			ok = false;
		}
		if (le64toh(res[3 * r + 2]) != (uint64_t)r) {
			diag("counter FETCH_ADD %d returned %llu", r,
			     (unsigned long long)le64toh(res[3 * r + 2]));
			ok = false;
		}
	}
	tap_ok(ok, "C. each atomic saw the WRITE before it; counter FETCH_ADDs returned 0..%d in order",
	       n - 1);
	free(ops);
	ok = sync_ok(sock, ok);
	return sync_ok(sock, ok);	/* the server checked its memory */
}

static bool server_atomics(void)
{
	bool ok;
	int r;
	size_t last = opt.size - 8;
	long bad;

	memset(b_data, 0, region(opt.n));
	b_flag[1] = 0;
	ok = sync_ok(sock, true);
	ok = sync_ok(sock, ok);
	for (r = 0; ok && r < opt.n; r++) {
		uint64_t v;

		bad = pat_check(b_data + region(r), last, 300 + r, 0);
		memcpy(&v, b_data + region(r) + last, 8);
		if (bad >= 0 || le64toh(v) != word_val(r) + 5) {
			diag("region %d: byte %ld, last word 0x%llx", r, bad,
			     (unsigned long long)le64toh(v));
			ok = false;
		}
	}
	if (le64toh(b_flag[1]) != (uint64_t)opt.n) {
		diag("counter %llu, expected %d", (unsigned long long)le64toh(b_flag[1]), opt.n);
		ok = false;
	}
	tap_ok(ok, "C. target memory: data, swapped words and counter as posted");
	return sync_ok(sock, ok);
}

static bool client_stale(void)
{
	struct keymsg k1, k2, none = { 0 };
	enum ibv_wr_opcode ops[1] = { IBV_WR_RDMA_WRITE };
	struct ibv_wc wc;
	bool ok = true;
	int i;

	if (xfer(sock, &none, &k1, sizeof(k1)))
		return false;
	k1.rkey = be32toh(k1.rkey);
	k1.addr = be64toh(k1.addr);
	/* use the key a few times (its translation gets cached) */
	pat_fill(b_src, opt.size, 400, 0);
	for (i = 0; ok && i < 4; i++) {
		ok = !post(0xD000 + i, IBV_WR_RDMA_WRITE, b_src, opt.size,
			   mr_src->lkey, k1.addr, k1.rkey, 0, 0) &&
		     wait_stream("WRITE with the first key", 0xD000 + i, 1, ops, NULL);
		usleep(200000);
	}
	tap_ok(ok, "D. WRITEs with the first key of the memory");
	ok = sync_ok(sock, ok);
	/* the server re-registered: new key */
	if (!ok || xfer(sock, &none, &k2, sizeof(k2)))
		return false;
	k2.rkey = be32toh(k2.rkey);
	k2.addr = be64toh(k2.addr);
	pat_fill(b_src, opt.size, 401, 0);
	ok = !post(0xD100, IBV_WR_RDMA_WRITE, b_src, opt.size, mr_src->lkey,
		   k2.addr, k2.rkey, 0, 0) &&
	     wait_stream("WRITE with the new key", 0xD100, 1, ops, NULL);
	tap_ok(ok, "D. WRITE with the new key (rkey 0x%x, old 0x%x)", k2.rkey, k1.rkey);
	ok = sync_ok(sock, ok);
	ok = sync_ok(sock, ok);	/* server checked and cleared the memory */
	if (!ok)
		return false;
	/* the stale key: must fail, and must not touch the memory */
	pat_fill(b_src, opt.size, 402, 0);
	ok = !post(0xD200, IBV_WR_RDMA_WRITE, b_src, opt.size, mr_src->lkey,
		   k1.addr, k1.rkey, 0, 0);
	if (ok && poll_n(cq, &wc, 1, opt.timeout_s * 1000) != 1) {
		diag("no completion for the WRITE with the stale key");
		ok = false;
	}
	if (ok && wc.status == IBV_WC_SUCCESS) {
		diag("WRITE with the stale key 0x%x succeeded", k1.rkey);
		ok = false;
	}
	if (ok && wc.wr_id != 0xD200) {
		diag("stale WRITE: wr_id 0x%llx", (unsigned long long)wc.wr_id);
		ok = false;
	}
	tap_ok(ok, "D. WRITE with the deregistered key fails (%s)",
	       ok ? wc_status_name(wc.status) : "-");
	return sync_ok(sock, ok);
}

static bool server_stale(void)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		  (opt.relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
	struct ibv_mr *m1, *m2, *spare;
	struct keymsg km, none;
	uint32_t old;
	uint8_t *x;
	bool ok = true;
	long bad;
	int i;

	m1 = reg((void **)&x, opt.size, acc);
	if (!m1)
		return false;
	km.rkey = htobe32(m1->rkey);
	km.addr = htobe64((uintptr_t)x);
	if (xfer(sock, &km, &none, sizeof(km)))
		return false;
	ok = sync_ok(sock, true);
	bad = pat_check(x, opt.size, 400, 0);
	if (ok && bad >= 0) {
		diag("first key: byte %ld differs", bad);
		ok = false;
	}
	old = m1->rkey;
	ibv_dereg_mr(m1);
	memset(x, 0, opt.size);
	m2 = ibv_reg_mr(d.pd, x, opt.size, acc);
	/* a reused key would be legitimate natively: take another one */
	for (i = 0; m2 && m2->rkey == old && i < 8; i++) {
		spare = ibv_reg_mr(d.pd, x, opt.size, acc);
		ibv_dereg_mr(m2);
		m2 = spare;
	}
	if (!m2 || m2->rkey == old) {
		diag("cannot re-register with a new key");
		ok = false;
	}
	km.rkey = htobe32(m2 ? m2->rkey : 0);
	if (xfer(sock, &km, &none, sizeof(km)))
		return false;
	ok = sync_ok(sock, ok);
	bad = pat_check(x, opt.size, 401, 0);
	if (ok && bad >= 0) {
		diag("new key: byte %ld differs", bad);
		ok = false;
	}
	tap_ok(ok, "D. memory re-registered; the WRITE with the new key landed");
	memset(x, 0, opt.size);
	ok = sync_ok(sock, ok);
	ok = sync_ok(sock, ok);	/* client saw the stale WRITE complete */
	usleep(500000);		/* anything still on a wire lands now */
	for (i = 0; i < (int)opt.size && !x[i]; i++)
		;
	tap_ok(i == (int)opt.size,
	       "D. the deregistered key never reached the re-registered memory%s",
	       i == (int)opt.size ? "" : " (byte written)");
	if (i != (int)opt.size)
		diag("byte %d changed by the stale WRITE", i);
	if (m2)
		ibv_dereg_mr(m2);
	free(x);
	return ok && i == (int)opt.size;
}

/*
 * E (-E, alone: it leaves the QP in error).  n WRITEs, one WRITE past the
 * end of the peer's MR, n more WRITEs and a SEND, all signaled: RC says the
 * n first succeed, the bad one fails with its own error, everything after
 * it is flushed (even WQEs that another rail had already carried), the
 * SEND never reaches the peer's receive, and the QP is in the error state,
 * where a new WQE is flushed as well.
 */
static bool client_error(void)
{
	int n = opt.n, k = 2 * n + 1, got, i, t;
	struct ibv_wc *wc = calloc(k + 1, sizeof(*wc));
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr qa;
	bool ok = sync_ok(sock, wc != NULL);

	pat_fill(b_src, region(n), 500, 0);
	/*
	 * Warm up for ~2 s so that a bond QP is multi-rail (and has the
	 * rkey's translation) before the error: WQEs posted right after
	 * connecting run on the home rail only.
	 */
	for (t = 0; ok && t < 10; t++) {
		for (i = 0; ok && i < n; i++)
			ok = !post(0xE200 + i, IBV_WR_RDMA_WRITE, b_src + region(i),
				   opt.size, mr_src->lkey, peer.data_addr + region(i),
				   peer.data_rkey, 0, 0);
		got = ok ? poll_n(cq, wc, n, opt.timeout_s * 1000) : 0;
		for (i = 0; ok && i < n; i++)
			ok = got == n && wc[i].status == IBV_WC_SUCCESS;
		usleep(200000);
	}
	tap_ok(ok, "E. warm-up: 10 x %d WRITEs", n);
	for (i = 0; ok && i < k; i++) {
		uint64_t raddr = peer.data_addr + region(i % n);

		if (i == n)	/* past the end of the remote MR */
			raddr = peer.data_addr + region(n);
		ok = !post(0xE000 + i, IBV_WR_RDMA_WRITE, b_src + region(i % n),
			   opt.size, mr_src->lkey, raddr, peer.data_rkey, 0, 0);
	}
	/* the SEND: its receive on the peer must stay unconsumed */
	ok = ok && !post(0xE000 + k, IBV_WR_SEND, b_src, 64, mr_src->lkey,
			 0, 0, 0, 0);
	k++;
	got = ok ? poll_n(cq, wc, k, opt.timeout_s * 1000) : 0;
	if (ok && got != k) {
		diag("%d of %d completions", got, k);
		ok = false;
	}
	for (i = 0; ok && i < k; i++) {
		bool good;

		if (wc[i].wr_id != 0xE000 + (uint64_t)i) {
			diag("#%d: wr_id 0x%llx, expected 0x%llx (order)", i,
			     (unsigned long long)wc[i].wr_id,
			     (unsigned long long)(0xE000 + i));
			ok = false;
			break;
		}
		if (i < n)
			good = wc[i].status == IBV_WC_SUCCESS;
		else if (i == n)
			good = wc[i].status != IBV_WC_SUCCESS &&
			       wc[i].status != IBV_WC_WR_FLUSH_ERR;
		else
			good = wc[i].status == IBV_WC_WR_FLUSH_ERR;
		if (!good) {
			diag("#%d (%s): status %s", i,
			     i < n ? "before the bad WRITE" : i == n ?
			     "the bad WRITE" : "after the bad WRITE",
			     wc_status_name(wc[i].status));
			ok = false;
		}
	}
	tap_ok(ok, "E. %d WRITEs succeed, the bad one fails (%s), the %d WRITEs and the SEND after it are flushed, in order",
	       n, ok ? wc_status_name(wc[n].status) : "-", n);
	/* the QP is in error (the bond moves its members there: allow 5 s) */
	qa.qp_state = IBV_QPS_RTS;
	for (t = 0; t < 50; t++) {
		if (ibv_query_qp(qp, &qa, IBV_QP_STATE, &ia) ||
		    qa.qp_state == IBV_QPS_ERR)
			break;
		usleep(100000);
	}
	tap_ok(qa.qp_state == IBV_QPS_ERR, "E. QP state after the error: %d (IBV_QPS_ERR = %d)",
	       qa.qp_state, IBV_QPS_ERR);
	ok = ok && qa.qp_state == IBV_QPS_ERR;
	/* posted in the error state: flushed (or refused at post time) */
	if (!post(0xE100, IBV_WR_RDMA_WRITE, b_src, opt.size, mr_src->lkey,
		  peer.data_addr, peer.data_rkey, 0, 0)) {
		got = poll_n(cq, wc, 1, opt.timeout_s * 1000);
		tap_ok(got == 1 && wc[0].wr_id == 0xE100 &&
		       wc[0].status == IBV_WC_WR_FLUSH_ERR,
		       "E. WRITE posted in the error state is flushed (%s)",
		       got == 1 ? wc_status_name(wc[0].status) : "no completion");
	} else {
		tap_ok(true, "E. WRITE posted in the error state refused at post time");
	}
	free(wc);
	return sync_ok(sock, ok);
}

/*
 * E, the target: one receive posted before the client's WQEs; once the
 * client is done, it must not have completed successfully (a SEND posted
 * after the failed WRITE would have consumed it).  Flushed, or still
 * posted, are both what RC gives.
 */
static bool server_error(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)b_flag + 2048, .length = 64,
			       .lkey = mr_flag->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 0xE300, .sg_list = &sge,
				   .num_sge = 1 }, *bad;
	struct ibv_wc wc;
	bool ok;
	int got;

	ok = !ibv_post_recv(qp, &rwr, &bad);
	if (!ok)
		diag("ibv_post_recv: %s", strerror(errno));
	ok = sync_ok(sock, ok);
	ok = sync_ok(sock, ok);		/* the client's checks are done */
	got = ibv_poll_cq(cq, 1, &wc);
	tap_ok(got == 0 || (got == 1 && wc.wr_id == 0xE300 &&
			    wc.status != IBV_WC_SUCCESS),
	       "E. (target) the SEND after the failed WRITE never arrived (receive %s)",
	       got == 0 ? "still posted" : got < 0 ? "poll error" :
	       wc_status_name(wc.status));
	return ok && got >= 0 && (got == 0 || wc.status != IBV_WC_SUCCESS);
}

int main(int argc, char **argv)
{
	int dacc, c;
	struct conn_opts co;
	struct qp_info me, pi;
	struct wire w;
	size_t len;

	while ((c = getopt(argc, argv, "d:g:p:s:n:u:T:REh")) != -1) {
		switch (c) {
		case 'd': opt.dev = optarg; break;
		case 'g': opt.gid = atoi(optarg); break;
		case 'p': opt.port = atoi(optarg); break;
		case 's': opt.size = strtoul(optarg, NULL, 0); break;
		case 'n': opt.n = atoi(optarg); break;
		case 'u': opt.ack_timeout = atoi(optarg); break;
		case 'T': opt.timeout_s = atoi(optarg); break;
		case 'R': opt.relaxed = true; break;
		case 'E': opt.error = true; break;
		default:
			fprintf(stderr, "usage: %s -d DEV [-g GIDX] [-p PORT] [-s REGION] [-n ROUNDS] [-u ACK_TIMEOUT] [-T SEC] [-R] [-E] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		opt.server = argv[optind];
	if (!opt.dev || opt.n < 1 || opt.n > 256 || opt.size < 16 ||
	    opt.size % 8 || opt.size > (1u << 26)) {
		fprintf(stderr, "%s: -d DEV required, 1 <= ROUNDS <= 256, REGION a multiple of 8 in 16..64 MiB\n",
			argv[0]);
		return 2;
	}
	printf("TAP version 13\n");
	diag("%s on %s, %d rounds x %zu bytes%s", opt.server ? "client" : "server",
	     opt.dev, opt.n, opt.size, opt.relaxed ? ", relaxed-ordering data MRs" : "");
	if (dev_open(&d, opt.dev, opt.gid)) {
		tap_ok(false, "open %s", opt.dev);
		goto out;
	}
	cq = ibv_create_cq(d.ctx, 4 * opt.n + 16, NULL, NULL, 0);
	{
		struct ibv_qp_init_attr qa = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 4 * opt.n + 8, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		qp = cq ? ibv_create_qp(d.pd, &qa) : NULL;
	}
	if (!cq || !qp) {
		tap_ok(false, "create CQ/QP: %s", strerror(errno));
		goto out;
	}
	len = region(opt.n);
	dacc = IBV_ACCESS_LOCAL_WRITE | (opt.relaxed ? IBV_ACCESS_RELAXED_ORDERING : 0);
	if (opt.server) {
		mr_src = reg((void **)&b_src, len, dacc);
		mr_rd = reg((void **)&b_rd, len, dacc);
		mr_small = reg((void **)&b_small, 4096 + 32 * opt.n, IBV_ACCESS_LOCAL_WRITE);
		if (!mr_src || !mr_rd || !mr_small) {
			tap_ok(false, "register buffers");
			goto out;
		}
	} else {
		mr_data = reg((void **)&b_data, len, dacc | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
		/* the flag MR is strict: never IBV_ACCESS_RELAXED_ORDERING */
		mr_flag = reg((void **)&b_flag, 4096, IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
		if (!mr_data || !mr_flag) {
			tap_ok(false, "register buffers");
			goto out;
		}
	}
	memset(&w, 0, sizeof(w));
	sock = tcp_begin(opt.server, opt.port, &d, qp, &me, &w.qp);
	if (sock < 0)
		goto out;
	if (mr_data) {
		w.data_rkey = htobe32(mr_data->rkey);
		w.flag_rkey = htobe32(mr_flag->rkey);
		w.data_addr = htobe64((uintptr_t)b_data);
		w.flag_addr = htobe64((uintptr_t)b_flag);
	}
	w.len = htobe64(len);
	if (xfer(sock, &w, &peer, sizeof(peer))) {
		tap_ok(false, "exchange connection data");
		goto out;
	}
	peer.data_rkey = be32toh(peer.data_rkey);
	peer.flag_rkey = be32toh(peer.flag_rkey);
	peer.data_addr = be64toh(peer.data_addr);
	peer.flag_addr = be64toh(peer.flag_addr);
	if (be64toh(peer.len) != len) {
		tap_ok(false, "peer region differs: same -n/-s on both ends");
		goto out;
	}
	qp_wire_unpack(&peer.qp, &pi);
	conn_opts_default(&co);
	co.timeout = opt.ack_timeout;
	co.max_rd_atomic = 16;
	errno = qp_connect(&d, qp, &me, &pi, &co, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	if (errno) {
		tap_ok(false, "connect QP: %s", strerror(errno));
		goto out;
	}
	if (!sync_ok(sock, true)) {
		tap_ok(false, "QP connected on both ends");
		goto out;
	}
	if (opt.error) {
		if (opt.server)
			client_error();
		else
			tap_ok(server_error(), "E. (target) the client's error case ran");
	} else if (opt.server) {
		if (client_flag() && client_write_read() && client_atomics())
			client_stale();
	} else {
		if (server_flag() && server_write_read() && server_atomics())
			server_stale();
	}
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (mr_src)
		ibv_dereg_mr(mr_src);
	if (mr_rd)
		ibv_dereg_mr(mr_rd);
	if (mr_small)
		ibv_dereg_mr(mr_small);
	if (mr_data)
		ibv_dereg_mr(mr_data);
	if (mr_flag)
		ibv_dereg_mr(mr_flag);
	if (cq)
		ibv_destroy_cq(cq);
	if (d.ctx)
		dev_close(&d);
	if (sock >= 0)
		close(sock);
	return tap_end();
}
