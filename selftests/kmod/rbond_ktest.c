// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rbond_ktest: kernel-space verbs test for rdma_bond.
 *
 *   insmod rbond_ktest.ko dev_a=rbond0 dev_b=rbondb [keep=1]
 *
 * Connects one RC QP on dev_a with one on dev_b (two devices of the same
 * kernel, e.g. a bond over host A's rails and a bond or a plain rxe device
 * over host B's) and runs SEND/RECV (with and without immediate, from a
 * DMA-mapped kernel buffer through the PD's local_dma_lkey, and inline),
 * RDMA WRITE (signaled and unsignaled), RDMA READ, FETCH_ADD and CMP_SWP in
 * both directions, checking every byte and every completion (wr_id, status,
 * opcode, byte_len, qp).  Buffers that remote operations target are user
 * memory of the insmod process registered with ib_reg_user_mr() (remote
 * atomic access needs a real MR).  On a bond, a bad lkey must be refused.
 *
 * Module init returns 0 when every check passed, -EIO otherwise (pr_err
 * says which check failed).  With keep=1 the QPs stay connected until the
 * module is removed or a device goes away (ib_client remove), so tests can
 * look at them and remove members or rdma_bond underneath them.
 */
#include <linux/module.h>
#include <linux/mman.h>
#include <linux/delay.h>
#include <linux/uaccess.h>
#include <linux/completion.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

MODULE_DESCRIPTION("rdma_bond kernel verbs test");
MODULE_LICENSE("Dual BSD/GPL");

static char *dev_a = "rbond0";
module_param(dev_a, charp, 0444);
MODULE_PARM_DESC(dev_a, "first RDMA device");
static char *dev_b = "rbondb";
module_param(dev_b, charp, 0444);
MODULE_PARM_DESC(dev_b, "second RDMA device");
static bool keep;
module_param(keep, bool, 0444);
MODULE_PARM_DESC(keep, "keep the connected QPs until rmmod");
static uint timeout_ms = 20000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "completion timeout");

#define KT_BUF		4096
#define KT_PSN		0x1234

struct kt_side {
	struct ib_device *dev;
	const char *name;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_mr *mr;		/* user memory, all access rights */
	unsigned long ubuf;		/* its address in the insmod process */
	void *kbuf;			/* kernel buffer for local_dma_lkey */
	u64 kbuf_dma;
	int gid_index;
	struct completion event;
	bool is_bond;
};

static struct kt_side sides[2];
static DEFINE_MUTEX(kt_mutex);
static int kt_failures;

/* True (and logged) when @cond does not hold. */
#define KT_BAD(cond, fmt, ...)						\
({									\
	bool __bad = !(cond);						\
	if (__bad) {							\
		pr_err("rbond_ktest: %s <-> %s: FAIL: " fmt "\n",	\
		       sides[0].name, sides[1].name, ##__VA_ARGS__);	\
		kt_failures++;						\
	}								\
	__bad;								\
})

static void kt_comp(struct ib_cq *cq, void *ctx)
{
	struct kt_side *s = ctx;

	complete(&s->event);
}

static int kt_poll(struct kt_side *s, struct ib_wc *wc)
{
	unsigned long end = jiffies + msecs_to_jiffies(timeout_ms);

	do {
		if (ib_poll_cq(s->cq, 1, wc) == 1)
			return 0;
		usleep_range(200, 1000);
	} while (time_before(jiffies, end));
	return -ETIMEDOUT;
}

/* Poll one completion and check it. */
static int kt_expect(struct kt_side *s, u64 wr_id, enum ib_wc_opcode op,
		     int byte_len)
{
	struct ib_wc wc;

	if (KT_BAD(!kt_poll(s, &wc), "%s: no completion for wr_id 0x%llx",
		   s->name, wr_id))
		return -EIO;
	if (KT_BAD(wc.status == IB_WC_SUCCESS, "%s: wr_id 0x%llx status %s",
		   s->name, wc.wr_id, ib_wc_status_msg(wc.status)))
		return -EIO;
	if (KT_BAD(wc.wr_id == wr_id, "%s: wr_id 0x%llx, expected 0x%llx",
		   s->name, wc.wr_id, wr_id))
		return -EIO;
	if (KT_BAD(wc.opcode == op, "%s: wr_id 0x%llx opcode %d, expected %d",
		   s->name, wc.wr_id, wc.opcode, op))
		return -EIO;
	if (KT_BAD(wc.qp == s->qp, "%s: wc.qp is not the QP", s->name))
		return -EIO;
	if (KT_BAD(byte_len < 0 || wc.byte_len == byte_len,
		   "%s: wr_id 0x%llx byte_len %u, expected %d", s->name,
		   wc.wr_id, wc.byte_len, byte_len))
		return -EIO;
	return 0;
}

static int kt_expect_none(struct kt_side *s)
{
	struct ib_wc wc;

	if (KT_BAD(ib_poll_cq(s->cq, 1, &wc) == 0,
		   "%s: unexpected completion wr_id 0x%llx", s->name, wc.wr_id))
		return -EIO;
	return 0;
}

/* IPv4-mapped RoCE v2 GID of port 1. */
static int kt_find_gid(struct kt_side *s)
{
	int i;

	for (i = 0; i < 16; i++) {
		const struct ib_gid_attr *a = rdma_get_gid_attr(s->dev, 1, i);
		bool v4;

		if (IS_ERR(a))
			continue;
		v4 = a->gid_type == IB_GID_TYPE_ROCE_UDP_ENCAP &&
		     ipv6_addr_v4mapped((struct in6_addr *)a->gid.raw);
		rdma_put_gid_attr(a);
		if (v4)
			return i;
	}
	return -ENOENT;
}

static void kt_side_free(struct kt_side *s)
{
	if (s->qp)
		ib_destroy_qp(s->qp);
	s->qp = NULL;
	if (s->mr)
		ib_dereg_mr(s->mr);
	s->mr = NULL;
	if (s->cq)
		ib_destroy_cq(s->cq);
	s->cq = NULL;
	if (s->kbuf) {
		ib_dma_unmap_single(s->dev, s->kbuf_dma, KT_BUF,
				    DMA_BIDIRECTIONAL);
		kfree(s->kbuf);
	}
	s->kbuf = NULL;
	if (s->pd)
		ib_dealloc_pd(s->pd);
	s->pd = NULL;
}

static int kt_side_init(struct kt_side *s)
{
	struct ib_cq_init_attr cq_attr = { .cqe = 64 };
	struct ib_qp_init_attr qp_attr = {};
	int ret;

	s->is_bond = !!strstr(s->dev->node_desc, "rdma_bond");
	init_completion(&s->event);
	s->gid_index = kt_find_gid(s);
	if (s->gid_index < 0) {
		pr_err("rbond_ktest: %s: no IPv4 RoCE v2 GID\n", s->name);
		return s->gid_index;
	}

	s->pd = ib_alloc_pd(s->dev, 0);
	if (IS_ERR(s->pd)) {
		ret = PTR_ERR(s->pd);
		s->pd = NULL;
		return ret;
	}
	s->kbuf = kzalloc(KT_BUF, GFP_KERNEL);
	if (!s->kbuf)
		return -ENOMEM;
	s->kbuf_dma = ib_dma_map_single(s->dev, s->kbuf, KT_BUF,
					DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(s->dev, s->kbuf_dma)) {
		kfree(s->kbuf);
		s->kbuf = NULL;
		return -ENOMEM;
	}

	s->cq = ib_create_cq(s->dev, kt_comp, NULL, s, &cq_attr);
	if (IS_ERR(s->cq)) {
		ret = PTR_ERR(s->cq);
		s->cq = NULL;
		return ret;
	}

	s->ubuf = vm_mmap(NULL, 0, KT_BUF, PROT_READ | PROT_WRITE,
			  MAP_ANONYMOUS | MAP_PRIVATE, 0);
	if (IS_ERR_VALUE(s->ubuf))
		return (int)s->ubuf;
	if (clear_user((void __user *)s->ubuf, KT_BUF))
		return -EFAULT;
	s->mr = ib_reg_user_mr(s->pd, s->ubuf, KT_BUF, s->ubuf,
			       IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			       IB_ACCESS_REMOTE_READ |
			       IB_ACCESS_REMOTE_ATOMIC);
	if (IS_ERR(s->mr)) {
		ret = PTR_ERR(s->mr);
		s->mr = NULL;
		pr_err("rbond_ktest: %s: reg_user_mr: %d\n", s->name, ret);
		return ret;
	}

	qp_attr.send_cq = s->cq;
	qp_attr.recv_cq = s->cq;
	qp_attr.cap.max_send_wr = 16;
	qp_attr.cap.max_recv_wr = 16;
	qp_attr.cap.max_send_sge = 2;
	qp_attr.cap.max_recv_sge = 2;
	qp_attr.cap.max_inline_data = 64;
	qp_attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	qp_attr.qp_type = IB_QPT_RC;
	s->qp = ib_create_qp(s->pd, &qp_attr);
	if (IS_ERR(s->qp)) {
		ret = PTR_ERR(s->qp);
		s->qp = NULL;
		pr_err("rbond_ktest: %s: create_qp: %d\n", s->name, ret);
		return ret;
	}
	return 0;
}

static int kt_connect(struct kt_side *s, struct kt_side *peer)
{
	const struct ib_gid_attr *pgid;
	struct ib_port_attr port;
	union ib_gid dgid;
	struct ib_qp_attr attr = {};
	int ret;

	ret = ib_query_port(s->dev, 1, &port);
	if (ret)
		return ret;

	attr.qp_state = IB_QPS_INIT;
	attr.pkey_index = 0;
	attr.port_num = 1;
	attr.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ |
			       IB_ACCESS_REMOTE_ATOMIC;
	ret = ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret) {
		pr_err("rbond_ktest: %s: INIT: %d\n", s->name, ret);
		return ret;
	}

	pgid = rdma_get_gid_attr(peer->dev, 1, peer->gid_index);
	if (IS_ERR(pgid))
		return PTR_ERR(pgid);
	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = min(port.active_mtu, IB_MTU_1024);
	attr.dest_qp_num = peer->qp->qp_num;
	attr.rq_psn = KT_PSN;
	attr.max_dest_rd_atomic = 4;
	attr.min_rnr_timer = 12;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, 1);
	dgid = pgid->gid;
	rdma_ah_set_grh(&attr.ah_attr, &dgid, 0, s->gid_index, 64, 0);
	ret = rdma_read_gid_l2_fields(pgid, NULL, attr.ah_attr.roce.dmac);
	rdma_put_gid_attr(pgid);
	if (ret)
		return ret;
	ret = ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_AV |
			   IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret) {
		pr_err("rbond_ktest: %s: RTR: %d\n", s->name, ret);
		return ret;
	}

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = KT_PSN;
	attr.timeout = 18;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 4;
	ret = ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN |
			   IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY |
			   IB_QP_MAX_QP_RD_ATOMIC);
	if (ret)
		pr_err("rbond_ktest: %s: RTS: %d\n", s->name, ret);
	return ret;
}

static int kt_post_recv(struct kt_side *s, u64 wr_id, u32 off, u32 len)
{
	struct ib_sge sge = {
		.addr = s->ubuf + off, .length = len, .lkey = s->mr->lkey,
	};
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				 .num_sge = 1 };

	return ib_post_recv(s->qp, &wr, NULL);
}

static int kt_fill(struct kt_side *s, u32 off, u32 len, u8 seed)
{
	u8 tmp[256];
	u32 i, n;

	while (len) {
		n = min_t(u32, len, sizeof(tmp));
		for (i = 0; i < n; i++)
			tmp[i] = seed + off + i;
		if (copy_to_user((void __user *)(s->ubuf + off), tmp, n))
			return -EFAULT;
		off += n;
		len -= n;
	}
	return 0;
}

/* Compare @len bytes at @doff of @d with the pattern kt_fill(seed) wrote
 * at @soff.
 */
static bool kt_same(struct kt_side *d, u32 doff, u32 soff, u32 len, u8 seed)
{
	u8 tmp[256];
	u32 i, n;

	while (len) {
		n = min_t(u32, len, sizeof(tmp));
		if (copy_from_user(tmp, (void __user *)(d->ubuf + doff), n))
			return false;
		for (i = 0; i < n; i++)
			if (tmp[i] != (u8)(seed + soff + i))
				return false;
		doff += n;
		soff += n;
		len -= n;
	}
	return true;
}

static u64 kt_get_u64(struct kt_side *s, u32 off)
{
	u64 v = 0;

	if (copy_from_user(&v, (void __user *)(s->ubuf + off), sizeof(v)))
		return ~0ULL;
	return v;
}

static int kt_put_u64(struct kt_side *s, u32 off, u64 v)
{
	return copy_to_user((void __user *)(s->ubuf + off), &v, sizeof(v)) ?
	       -EFAULT : 0;
}

/* Buffer layout (offsets into each side's user MR). */
#define OFF_SEND	0	/* 256 source for SEND */
#define OFF_RECV	256	/* 256 receive */
#define OFF_WSRC	512	/* 1024 WRITE source */
#define OFF_WDST	1536	/* 1024 WRITE destination */
#define OFF_RDST	2560	/* 512 READ destination */
#define OFF_ATOM	3072	/* 8 atomic target */
#define OFF_ARES	3080	/* 8 atomic result */

/* Kernel buffer layout (offsets into kbuf; step 3 uses its first 64 bytes). */
#define KOFF_SRC	1024	/* 256 SEND and WRITE source */
#define KOFF_RECV	1536	/* 100 + 156 at KOFF_RECV2: two receive SGEs */
#define KOFF_RECV2	2048
#define KOFF_RD		2560	/* 256 READ destination */
#define KOFF_AT		3072	/* 8 atomic result */

static struct ib_sge kt_ksge(struct kt_side *s, u32 off, u32 len)
{
	return (struct ib_sge) { .addr = s->kbuf_dma + off, .length = len,
				 .lkey = s->pd->local_dma_lkey };
}

/*
 * SEND (two SGEs) into a two-SGE receive, WRITE from, READ into and
 * FETCH_ADD into kernel buffers through the PD's local_dma_lkey: on a bond
 * the path that maps them per member device (rdma_bond's rbond_dma.c).
 */
static int kt_run_kbuf(struct kt_side *x, struct kt_side *y, u8 seed)
{
	struct ib_sge rs[2] = { kt_ksge(y, KOFF_RECV, 100),
				kt_ksge(y, KOFF_RECV2, 156) };
	struct ib_sge ss[2] = { kt_ksge(x, KOFF_SRC, 128),
				kt_ksge(x, KOFF_SRC + 128, 128) };
	struct ib_recv_wr rwr = { .wr_id = 0x110, .sg_list = rs, .num_sge = 2 };
	struct ib_send_wr swr = { .wr_id = 0x210, .sg_list = ss, .num_sge = 2,
				  .opcode = IB_WR_SEND,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_rdma_wr wwr = { .wr = swr };
	struct ib_atomic_wr awr = { .wr = swr };
	u8 *src = x->kbuf + KOFF_SRC;
	u8 tmp[256];
	int i, ret;

	for (i = 0; i < 256; i++)
		src[i] = seed * 3 + i;
	ret = ib_post_recv(y->qp, &rwr, NULL);
	if (KT_BAD(!ret, "%s: post_recv into kbuf: %d", y->name, ret))
		return -EIO;
	ret = ib_post_send(x->qp, &swr, NULL);
	if (KT_BAD(!ret, "%s: post SEND from kbuf: %d", x->name, ret))
		return -EIO;
	if (kt_expect(x, 0x210, IB_WC_SEND, -1) ||
	    kt_expect(y, 0x110, IB_WC_RECV, 256))
		return -EIO;
	if (KT_BAD(!memcmp(y->kbuf + KOFF_RECV, src, 100) &&
		   !memcmp(y->kbuf + KOFF_RECV2, src + 100, 156),
		   "kbuf SEND data differs"))
		return -EIO;

	/* WRITE 256 bytes from kbuf into the peer's user MR */
	wwr.wr.wr_id = 0x310;
	wwr.wr.opcode = IB_WR_RDMA_WRITE;
	wwr.remote_addr = y->ubuf + OFF_WDST;
	wwr.rkey = y->mr->rkey;
	ret = ib_post_send(x->qp, &wwr.wr, NULL);
	if (KT_BAD(!ret, "post WRITE from kbuf: %d", ret) ||
	    kt_expect(x, 0x310, IB_WC_RDMA_WRITE, -1))
		return -EIO;
	if (KT_BAD(!copy_from_user(tmp, (void __user *)(y->ubuf + OFF_WDST), 256) &&
		   !memcmp(tmp, src, 256), "kbuf WRITE data differs"))
		return -EIO;

	/* READ it back into kbuf */
	memset(x->kbuf + KOFF_RD, 0, 256);
	ss[0] = kt_ksge(x, KOFF_RD, 256);
	wwr.wr.num_sge = 1;
	wwr.wr.wr_id = 0x410;
	wwr.wr.opcode = IB_WR_RDMA_READ;
	ret = ib_post_send(x->qp, &wwr.wr, NULL);
	if (KT_BAD(!ret, "post READ into kbuf: %d", ret) ||
	    kt_expect(x, 0x410, IB_WC_RDMA_READ, 256))
		return -EIO;
	if (KT_BAD(!memcmp(x->kbuf + KOFF_RD, src, 256),
		   "kbuf READ data differs"))
		return -EIO;

	/* FETCH_ADD with its result in kbuf */
	if (KT_BAD(!kt_put_u64(y, OFF_ATOM, 100 + seed), "put"))
		return -EIO;
	ss[0] = kt_ksge(x, KOFF_AT, 8);
	*(u64 *)(x->kbuf + KOFF_AT) = 0;
	awr.wr.num_sge = 1;
	awr.wr.wr_id = 0x510;
	awr.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	awr.remote_addr = y->ubuf + OFF_ATOM;
	awr.rkey = y->mr->rkey;
	awr.compare_add = 1;
	ret = ib_post_send(x->qp, &awr.wr, NULL);
	if (KT_BAD(!ret, "post FETCH_ADD into kbuf: %d", ret) ||
	    kt_expect(x, 0x510, IB_WC_FETCH_ADD, 8))
		return -EIO;
	if (KT_BAD(*(u64 *)(x->kbuf + KOFF_AT) == 100 + seed &&
		   kt_get_u64(y, OFF_ATOM) == 101 + seed,
		   "kbuf FETCH_ADD: got %llu, target %llu",
		   *(u64 *)(x->kbuf + KOFF_AT), kt_get_u64(y, OFF_ATOM)))
		return -EIO;
	return 0;
}

static int kt_run_dir(struct kt_side *x, struct kt_side *y, u8 seed)
{
	struct ib_sge sge = { .lkey = x->mr->lkey };
	struct ib_send_wr swr = { .sg_list = &sge, .num_sge = 1 };
	struct ib_rdma_wr rwr = { .wr.sg_list = &sge, .wr.num_sge = 1 };
	struct ib_atomic_wr awr = { .wr.sg_list = &sge, .wr.num_sge = 1 };
	struct ib_wc wc;
	int ret;

	/* 1. SEND, with the receiver's CQ armed: its comp_handler must run. */
	reinit_completion(&y->event);
	ib_req_notify_cq(y->cq, IB_CQ_NEXT_COMP);
	if (KT_BAD(!kt_fill(x, OFF_SEND, 200, seed), "fill"))
		return -EIO;
	if (KT_BAD(!kt_post_recv(y, 0x100 + seed, OFF_RECV, 256),
		   "%s: post_recv", y->name))
		return -EIO;
	sge.addr = x->ubuf + OFF_SEND;
	sge.length = 200;
	swr.wr_id = 0x200 + seed;
	swr.opcode = IB_WR_SEND;
	swr.send_flags = IB_SEND_SIGNALED;
	ret = ib_post_send(x->qp, &swr, NULL);
	if (KT_BAD(!ret, "%s: post_send SEND: %d", x->name, ret))
		return -EIO;
	if (kt_expect(x, 0x200 + seed, IB_WC_SEND, -1))
		return -EIO;
	ret = wait_for_completion_timeout(&y->event,
					  msecs_to_jiffies(timeout_ms));
	if (KT_BAD(ret, "%s: no completion event", y->name))
		return -EIO;
	if (kt_expect(y, 0x100 + seed, IB_WC_RECV, 200))
		return -EIO;
	if (KT_BAD(kt_same(y, OFF_RECV, OFF_SEND, 200, seed),
		   "SEND data differs"))
		return -EIO;

	/* 2. SEND_WITH_IMM */
	if (KT_BAD(!kt_post_recv(y, 0x101, OFF_RECV, 256), "post_recv"))
		return -EIO;
	swr.wr_id = 0x201;
	swr.opcode = IB_WR_SEND_WITH_IMM;
	swr.ex.imm_data = cpu_to_be32(0xabcd0000 + seed);
	sge.length = 16;
	if (KT_BAD(!ib_post_send(x->qp, &swr, NULL), "post SEND_WITH_IMM"))
		return -EIO;
	if (kt_expect(x, 0x201, IB_WC_SEND, -1))
		return -EIO;
	if (KT_BAD(!kt_poll(y, &wc), "no SEND_WITH_IMM receive"))
		return -EIO;
	if (KT_BAD(wc.status == IB_WC_SUCCESS && wc.wr_id == 0x101 &&
		   wc.opcode == IB_WC_RECV && (wc.wc_flags & IB_WC_WITH_IMM) &&
		   wc.ex.imm_data == cpu_to_be32(0xabcd0000 + seed) &&
		   wc.byte_len == 16,
		   "SEND_WITH_IMM receive: status %d wr_id 0x%llx op %d flags 0x%x len %u",
		   wc.status, wc.wr_id, wc.opcode, wc.wc_flags, wc.byte_len))
		return -EIO;

	/* 3. SEND from a kernel buffer (local_dma_lkey) and inline. */
	memset(x->kbuf, 0x5a + seed, 64);
	if (KT_BAD(!kt_post_recv(y, 0x102, OFF_RECV, 256), "post_recv"))
		return -EIO;
	if (KT_BAD(!kt_post_recv(y, 0x103, OFF_RECV + 128, 128), "post_recv"))
		return -EIO;
	{
		struct ib_sge ksge = { .addr = x->kbuf_dma, .length = 64,
				       .lkey = x->pd->local_dma_lkey };
		struct ib_send_wr kwr = { .wr_id = 0x202, .sg_list = &ksge,
					  .num_sge = 1, .opcode = IB_WR_SEND,
					  .send_flags = IB_SEND_SIGNALED };
		struct ib_send_wr iwr = kwr;

		ret = ib_post_send(x->qp, &kwr, NULL);
		if (KT_BAD(!ret, "post SEND local_dma_lkey: %d", ret))
			return -EIO;
		iwr.wr_id = 0x203;
		iwr.send_flags |= IB_SEND_INLINE;
		ksge.length = 32;
		ret = ib_post_send(x->qp, &iwr, NULL);
		if (KT_BAD(!ret, "post SEND inline: %d", ret))
			return -EIO;
	}
	if (kt_expect(x, 0x202, IB_WC_SEND, -1) ||
	    kt_expect(x, 0x203, IB_WC_SEND, -1) ||
	    kt_expect(y, 0x102, IB_WC_RECV, 64) ||
	    kt_expect(y, 0x103, IB_WC_RECV, 32))
		return -EIO;
	{
		u8 tmp[64];
		int i;

		if (KT_BAD(!copy_from_user(tmp, (void __user *)(y->ubuf + OFF_RECV), 64),
			   "copy"))
			return -EIO;
		for (i = 0; i < 64; i++)
			if (KT_BAD(tmp[i] == (u8)(0x5a + seed), "kernel-buffer SEND data"))
				return -EIO;
	}

	/* 3b. Kernel buffers (local_dma_lkey) at both ends, every opcode. */
	ret = kt_run_kbuf(x, y, seed);
	if (ret)
		return ret;

	/* 4. RDMA WRITE: unsignaled then signaled, one completion. */
	if (KT_BAD(!kt_fill(x, OFF_WSRC, 1024, seed + 1), "fill"))
		return -EIO;
	rwr.remote_addr = y->ubuf + OFF_WDST;
	rwr.rkey = y->mr->rkey;
	rwr.wr.opcode = IB_WR_RDMA_WRITE;
	rwr.wr.wr_id = 0x300;
	rwr.wr.send_flags = 0;
	sge.addr = x->ubuf + OFF_WSRC;
	sge.length = 512;
	if (KT_BAD(!ib_post_send(x->qp, &rwr.wr, NULL), "post WRITE 1"))
		return -EIO;
	rwr.remote_addr += 512;
	rwr.wr.wr_id = 0x301;
	rwr.wr.send_flags = IB_SEND_SIGNALED;
	sge.addr += 512;
	if (KT_BAD(!ib_post_send(x->qp, &rwr.wr, NULL), "post WRITE 2"))
		return -EIO;
	if (kt_expect(x, 0x301, IB_WC_RDMA_WRITE, -1) || kt_expect_none(x))
		return -EIO;
	if (KT_BAD(kt_same(y, OFF_WDST, OFF_WSRC, 1024, seed + 1),
		   "RDMA WRITE data differs"))
		return -EIO;

	/* 5. RDMA READ back what was written. */
	rwr.remote_addr = y->ubuf + OFF_WDST;
	rwr.wr.opcode = IB_WR_RDMA_READ;
	rwr.wr.wr_id = 0x400;
	sge.addr = x->ubuf + OFF_RDST;
	sge.length = 512;
	if (KT_BAD(!ib_post_send(x->qp, &rwr.wr, NULL), "post READ"))
		return -EIO;
	if (kt_expect(x, 0x400, IB_WC_RDMA_READ, 512))
		return -EIO;
	if (KT_BAD(kt_same(x, OFF_RDST, OFF_WSRC, 512, seed + 1),
		   "RDMA READ data differs"))
		return -EIO;

	/* 6. FETCH_ADD then CMP_SWP. */
	if (KT_BAD(!kt_put_u64(y, OFF_ATOM, 10), "put"))
		return -EIO;
	awr.remote_addr = y->ubuf + OFF_ATOM;
	awr.rkey = y->mr->rkey;
	awr.wr.opcode = IB_WR_ATOMIC_FETCH_AND_ADD;
	awr.wr.wr_id = 0x500;
	awr.wr.send_flags = IB_SEND_SIGNALED;
	awr.compare_add = 5;
	sge.addr = x->ubuf + OFF_ARES;
	sge.length = 8;
	if (KT_BAD(!ib_post_send(x->qp, &awr.wr, NULL), "post FETCH_ADD"))
		return -EIO;
	if (kt_expect(x, 0x500, IB_WC_FETCH_ADD, 8))
		return -EIO;
	if (KT_BAD(kt_get_u64(x, OFF_ARES) == 10 && kt_get_u64(y, OFF_ATOM) == 15,
		   "FETCH_ADD: got %llu, target %llu", kt_get_u64(x, OFF_ARES),
		   kt_get_u64(y, OFF_ATOM)))
		return -EIO;
	awr.wr.opcode = IB_WR_ATOMIC_CMP_AND_SWP;
	awr.wr.wr_id = 0x501;
	awr.compare_add = 15;
	awr.swap = 42;
	if (KT_BAD(!ib_post_send(x->qp, &awr.wr, NULL), "post CMP_SWP"))
		return -EIO;
	if (kt_expect(x, 0x501, IB_WC_COMP_SWAP, 8))
		return -EIO;
	if (KT_BAD(kt_get_u64(x, OFF_ARES) == 15 && kt_get_u64(y, OFF_ATOM) == 42,
		   "CMP_SWP: got %llu, target %llu", kt_get_u64(x, OFF_ARES),
		   kt_get_u64(y, OFF_ATOM)))
		return -EIO;

	/* 7. A bond refuses an lkey it does not know, without side effect. */
	if (x->is_bond) {
		const struct ib_send_wr *bad = NULL;

		sge.lkey = 0xdeadbe00;
		swr.wr_id = 0x600;
		swr.opcode = IB_WR_SEND;
		ret = ib_post_send(x->qp, &swr, &bad);
		if (KT_BAD(ret == -EINVAL && bad == &swr,
			   "bad lkey: post_send returned %d", ret))
			return -EIO;
		if (kt_expect_none(x))
			return -EIO;
	}
	pr_info("rbond_ktest: %s -> %s: SEND, SEND_WITH_IMM, dma/inline SEND, kbuf SEND/WRITE/READ/FETCH_ADD, WRITE, READ, FETCH_ADD, CMP_SWP ok\n",
		x->name, y->name);
	return 0;
}

static int kt_run(void)
{
	int ret, i;

	for (i = 0; i < 2; i++) {
		ret = kt_side_init(&sides[i]);
		if (ret) {
			pr_err("rbond_ktest: %s: setup failed: %d\n",
			       sides[i].name, ret);
			return ret;
		}
	}
	ret = kt_connect(&sides[0], &sides[1]);
	if (!ret)
		ret = kt_connect(&sides[1], &sides[0]);
	if (ret)
		return ret;
	ret = kt_run_dir(&sides[0], &sides[1], 0);
	if (!ret)
		ret = kt_run_dir(&sides[1], &sides[0], 7);
	return ret;
}

static int kt_client_add(struct ib_device *dev)
{
	int i;

	mutex_lock(&kt_mutex);
	for (i = 0; i < 2; i++)
		if (!sides[i].dev && !strcmp(dev_name(&dev->dev), sides[i].name))
			sides[i].dev = dev;
	mutex_unlock(&kt_mutex);
	return 0;
}

static void kt_free_all(void)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (sides[i].dev && sides[i].qp) {
			ib_destroy_qp(sides[i].qp);
			sides[i].qp = NULL;
		}
	}
	for (i = 0; i < 2; i++)
		if (sides[i].dev)
			kt_side_free(&sides[i]);
}

/* A device goes away (member removal, rdma_bond unload): let it go. */
static void kt_client_remove(struct ib_device *dev, void *data)
{
	int i;

	mutex_lock(&kt_mutex);
	for (i = 0; i < 2; i++) {
		if (sides[i].dev != dev)
			continue;
		pr_info("rbond_ktest: %s going away, freeing test objects\n",
			sides[i].name);
		kt_free_all();
		sides[i].dev = NULL;
	}
	mutex_unlock(&kt_mutex);
}

static struct ib_client kt_client = {
	.name = "rbond_ktest",
	.add = kt_client_add,
	.remove = kt_client_remove,
};

static int __init kt_init(void)
{
	int ret;

	sides[0].name = dev_a;
	sides[1].name = dev_b;
	ret = ib_register_client(&kt_client);
	if (ret)
		return ret;

	mutex_lock(&kt_mutex);
	if (!sides[0].dev || !sides[1].dev) {
		pr_err("rbond_ktest: device %s or %s not found\n", dev_a, dev_b);
		ret = -ENODEV;
	} else {
		ret = kt_run();
		if (!ret && kt_failures)
			ret = -EIO;
	}
	if (ret || !keep)
		kt_free_all();
	mutex_unlock(&kt_mutex);

	if (ret) {
		pr_err("rbond_ktest: %s <-> %s: FAILED (%d)\n", dev_a, dev_b, ret);
		ib_unregister_client(&kt_client);
		return ret == -ENODEV ? ret : -EIO;
	}
	pr_info("rbond_ktest: %s <-> %s: PASS%s\n", dev_a, dev_b,
		keep ? " (keeping QPs)" : "");
	return 0;
}

static void __exit kt_exit(void)
{
	ib_unregister_client(&kt_client);
	mutex_lock(&kt_mutex);
	kt_free_all();
	mutex_unlock(&kt_mutex);
}

module_init(kt_init);
module_exit(kt_exit);
