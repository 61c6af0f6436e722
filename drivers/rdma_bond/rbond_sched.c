// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the scheduler.
 *
 * The post path (rbond_post.c) asks rbond_sched_allowed() which rails a
 * WQE of a class may use now (ordering, READ slots, rail windows; none:
 * the WQE waits for completions), rbond_sched_pick() for one of them by
 * the device's policy, and reports every member WQE of a multi-rail QP
 * posted and completed.  A QP with one rail up gets its home rail.  All
 * under the QP's sq_lock, except rbond_sched_release(); nothing sleeps.
 */
#include <linux/hash.h>
#include <linux/ktime.h>

#include "rbond.h"

/* Every function here but rbond_sched_release() runs under the QP's sq_lock. */
static inline void rbond_sched_assert(const struct rbond_sched *s)
{
	lockdep_assert_held(&container_of(s, struct rbond_qp, s)->sq_lock);
}

/**
 * rbond_sched_rd_free() - the rails with a free READ/atomic slot
 * @s: the QP's scheduler
 * @rails: the candidate rails
 * @op: the WQE's opcode
 * @rd_max: READ/atomic slots per member QP, 0 for no limit
 * @room: if not NULL, gets the number of free slots (UINT_MAX if unlimited)
 *
 * The rails of @rails with a free READ/atomic slot (@rd_max per member QP)
 * for a WQE of opcode @op (all of them for other opcodes); *room gets the
 * number of free slots.
 * Locks: the QP's sq_lock held.
 * Return: those rails.
 */
unsigned long rbond_sched_rd_free(const struct rbond_sched *s,
				  unsigned long rails, enum ib_wr_opcode op,
				  u32 rd_max, unsigned int *room)
{
	unsigned int r, n = 0;

	rbond_sched_assert(s);
	if (!rbond_wr_is_rd(op) || !rd_max) {
		if (room)
			*room = UINT_MAX;
		return rails;
	}
	for_each_set_bit(r, &rails, RBOND_MAX_RAILS) {
		if (s->rd_inflight[r] >= rd_max)
			rails &= ~BIT(r);
		else
			n += rd_max - s->rd_inflight[r];
	}
	if (room)
		*room = n;
	return rails;
}

/* A rate sample every this many completions, over at least... */
#define RBOND_RATE_MIN_N	4
#define RBOND_RATE_MIN_NS	(10 * NSEC_PER_MSEC)
/*
 * ... and with fewer bytes than this delivered the work, not the rail, set
 * the pace (BBR's "application limited"): such a sample may raise a known
 * rate, never lower it or set the first.
 */
#define RBOND_RATE_MIN_BYTES	(16 * 1024)
/* A rate below the fastest rail's by more than this factor is not trusted. */
#define RBOND_RATE_TRUST	256

/*
 * Adaptive: the rail where a WQE of @len bytes would be done first - the
 * bytes outstanding on the rail (all multi-rail QPs of the bond) plus @len
 * over the rail's measured rate.  Until every rate is known, or while one
 * is RBOND_RATE_TRUST times below the fastest (a rail that gets no work
 * for its rate never measures another): fewest outstanding bytes per unit
 * of link speed.
 */
static unsigned int rbond_sched_adaptive(struct rbond_sched *s,
					 unsigned long allowed, u64 len)
{
	unsigned int i, k, best = __ffs(allowed);
	u32 rate[RBOND_MAX_RAILS], top = 0;
	bool measured = true;
	u64 ob, c, best_cost = U64_MAX;

	for_each_set_bit(i, &allowed, RBOND_MAX_RAILS) {
		rate[i] = READ_ONCE(s->bond->rails[i].rate);
		top = max(top, rate[i]);
	}
	for_each_set_bit(i, &allowed, RBOND_MAX_RAILS)
		if (!rate[i] || (u64)rate[i] * RBOND_RATE_TRUST < top)
			measured = false;
	for (k = 1; k <= RBOND_MAX_RAILS; k++) {
		i = (s->rr + k) % RBOND_MAX_RAILS;
		if (!(allowed & BIT(i)))
			continue;
		ob = READ_ONCE(s->bond->rails[i].obytes);
		if (measured)
			c = div_u64((ob + len) << 10, rate[i]);
		else
			c = div_u64(ob << 4, s->weight[i] ?: 1);
		if (c < best_cost) {
			best_cost = c;
			best = i;
		}
	}
	s->rr = best;
	return best;
}

static unsigned int rbond_pick_active_backup(struct rbond_sched *s,
					     unsigned long allowed, u64 len)
{
	return allowed & BIT(s->home) ? s->home : __ffs(allowed);
}

/* The QP's rails by hash of its QPN: QPs spread, each on one rail. */
#define RBOND_QP_HASH_BITS	8

static unsigned int rbond_pick_qp_hash(struct rbond_sched *s,
				       unsigned long allowed, u64 len)
{
	unsigned int i, n = 0;
	unsigned int k = hash_32(s->qpn, RBOND_QP_HASH_BITS) %
			 hweight_long(allowed);

	for_each_set_bit(i, &allowed, RBOND_MAX_RAILS)
		if (n++ == k)
			return i;
	return __ffs(allowed);
}

static unsigned int rbond_pick_round_robin(struct rbond_sched *s,
					   unsigned long allowed, u64 len)
{
	unsigned int i, k;

	for (k = 1; k <= RBOND_MAX_RAILS; k++) {
		i = (s->rr + k) % RBOND_MAX_RAILS;
		if (allowed & BIT(i)) {
			s->rr = i;
			return i;
		}
	}
	return __ffs(allowed);
}

/* Bytes sent so far per unit of link speed: the least loaded rail. */
static unsigned int rbond_pick_weighted(struct rbond_sched *s,
					unsigned long allowed, u64 len)
{
	unsigned int i, best = __ffs(allowed);
	u64 c, best_cost = U64_MAX;

	for_each_set_bit(i, &allowed, RBOND_MAX_RAILS) {
		c = div_u64(s->sbytes[i] << 4, s->weight[i] ?: 1);
		if (c < best_cost) {
			best_cost = c;
			best = i;
		}
	}
	return best;
}

/*
 * The policies, as rtrs' path selectors: a pick function each (called with
 * at least two rails, all up) and what else the policy implies.
 */
const struct rbond_policy_ops rbond_policies[RBOND_NR_POLICIES] = {
	[RBOND_POLICY_ADAPTIVE] = {
		.name = "adaptive",
		.pick = rbond_sched_adaptive,
		.stripes = true,
		.windowed = true,
	},
	[RBOND_POLICY_ROUND_ROBIN] = {
		.name = "round-robin",
		.pick = rbond_pick_round_robin,
		.stripes = true,
	},
	[RBOND_POLICY_WEIGHTED] = {
		.name = "weighted",
		.pick = rbond_pick_weighted,
		.stripes = true,
	},
	[RBOND_POLICY_ACTIVE_BACKUP] = {
		.name = "active-backup",
		.pick = rbond_pick_active_backup,
	},
	[RBOND_POLICY_QP_HASH] = {
		.name = "qp-hash",
		.pick = rbond_pick_qp_hash,
	},
};

static const char * const rbond_ordering_names[RBOND_NR_ORDERINGS] = {
	[RBOND_ORDER_STRICT] = "strict",
	[RBOND_ORDER_RELAXED_MR] = "relaxed-mr",
	[RBOND_ORDER_RELAXED] = "relaxed",
};

/**
 * rbond_ordering_name() - the name of an ordering
 * @i: enum rbond_ordering
 *
 * Any context.
 * Return: its name, or "?" if @i is out of range.
 */
const char *rbond_ordering_name(unsigned int i)
{
	return i < RBOND_NR_ORDERINGS ? rbond_ordering_names[i] : "?";
}

/**
 * rbond_policy_name() - the name of a policy
 * @i: enum rbond_policy
 *
 * Any context.
 * Return: its name, or "?" if @i is out of range.
 */
const char *rbond_policy_name(unsigned int i)
{
	return i < RBOND_NR_POLICIES ? rbond_policies[i].name : "?";
}

/**
 * rbond_sched_pick() - one rail for a WQE, by the device's policy
 * @s: the QP's scheduler
 * @pol: the policy
 * @allowed: the rails the WQE may use now
 * @len: its bytes
 *
 * Only a rail that is up (a rail being removed left rails_up first).
 * Locks: the QP's sq_lock held.
 * Return: the rail, or RBOND_MAX_RAILS (none), which rbond_post_chunk()
 * refuses.
 */
unsigned int rbond_sched_pick(struct rbond_sched *s, enum rbond_policy pol,
			      unsigned long allowed, u64 len)
{
	rbond_sched_assert(s);
	allowed &= s->rails_up;
	if (!allowed)
		return RBOND_MAX_RAILS;
	if (allowed == BIT(s->home))
		return s->home;
	if (pol >= RBOND_NR_POLICIES)
		pol = RBOND_POLICY_ADAPTIVE;
	return rbond_policies[pol].pick(s, allowed, len);
}

/* A rail with fewer member WQEs than this in flight has room, whatever their size */
#define RBOND_WIN_MIN_WQES	2
/* ... and so has one holding less than this much time at its measured rate */
#define RBOND_WIN_NS		(200 * NSEC_PER_USEC)

/*
 * Adaptive: the rails of @rails with room for more relaxed work.  A rail
 * is full when the bond's multi-rail QPs together have more outstanding
 * on it than the device's rail_window bytes, RBOND_WIN_NS at its measured
 * rate and RBOND_WIN_MIN_WQES WQEs.  Work for full rails waits in the QP's
 * pending queue and goes out on the QP's next completion to whichever rail
 * has drained: the rails pull work at their real speed, also a burst
 * posted before any rate is measured or while an estimate is off, and no
 * rail is left with a long tail.  A QP with nothing in flight may always
 * post (it has no completion to wait for); with one rail to choose from,
 * holding work back gains nothing.
 */
static unsigned long rbond_sched_room(const struct rbond_sched *s,
				      unsigned long rails)
{
	u64 win = READ_ONCE(s->bond->rail_window);
	struct rbond_rail *rail;
	unsigned long full = 0;
	unsigned int r, n = 0;

	if (!win || hweight_long(rails) < 2 ||
	    !rbond_policy_windowed(READ_ONCE(s->bond->policy)))
		return rails;
	for (r = 0; r < RBOND_MAX_RAILS; r++)
		n += s->inflight[r];
	if (!n)
		return rails;
	for_each_set_bit(r, &rails, RBOND_MAX_RAILS) {
		rail = &s->bond->rails[r];
		if (READ_ONCE(rail->busy) >= RBOND_WIN_MIN_WQES &&
		    READ_ONCE(rail->obytes) >=
		    max(win, (u64)READ_ONCE(rail->rate) * RBOND_WIN_NS >> 20))
			full |= BIT(r);
	}
	return rails & ~full;
}

/* Relaxed WQEs kept to one rail this long have it drained (below). */
#define RBOND_SOLO_MS		100

/*
 * A relaxed WQE of class @cl may go on @ok of @allowed: the rails its
 * ordering leaves it.  A QP whose relaxed traffic mixes WRITEs and READs
 * can settle on one rail for good (after a failover put everything on
 * the home rail, or a burst of one class filled one rail): that rail
 * always takes the next WQE (RC orders it there), and the idle rails
 * never do, since the busy rail always holds WQEs of the other class
 * as well.  After RBOND_SOLO_MS of that, relaxed WQEs wait until the
 * rail holds their class only (one drain: its WQEs of the other class
 * complete), and then spread over the rails again.  What this costs a
 * QP that alternates classes WQE by WQE: one drain per RBOND_SOLO_MS.
 */
static unsigned long rbond_sched_unstick(struct rbond_sched *s, u8 cl,
					 unsigned long allowed,
					 unsigned long ok)
{
	unsigned long idle = 0;
	unsigned int r;

	for_each_set_bit(r, &allowed, RBOND_MAX_RAILS)
		if (!s->inflight[r])
			idle |= BIT(r);
	if (hweight_long(ok) > 1 || !(idle & ~ok)) {
		s->solo_since = 0;	/* spread, or nowhere else to go */
		s->draining = false;
		return ok;
	}
	if (!ok)	/* the one rail is full: still stuck, keep the clock */
		return 0;
	r = __ffs(ok);
	if (s->inflight[r] == s->inflight_cl[r][cl] +
			      s->inflight_cl[r][RBOND_CL_UNRESOLVED(cl)]) {
		s->draining = false;	/* drained: the next one spreads */
		return ok;
	}
	if (!s->draining) {
		if (!s->solo_since) {
			s->solo_since = jiffies;
			return ok;
		}
		if (time_before(jiffies, s->solo_since +
					 msecs_to_jiffies(RBOND_SOLO_MS)))
			return ok;
		s->draining = true;
	}
	return 0;	/* an ordering point: wait for the drain */
}

/**
 * rbond_sched_allowed() - the rails a WQE may go on now
 * @s: the QP's scheduler
 * @cl: the WQE's class (enum rbond_class)
 * @wr: the WQE
 * @ord: the device's ordering
 * @rd_max: READ/atomic slots per member QP, 0 for no limit
 * @allowed: the rails the WQE may use at all
 *
 * Ordering (design 5): the rails of @allowed a WQE @wr of class @cl may go
 * on now (0: it waits for completions).  A strict WQE may use rail r only
 * when no other rail has WQEs in flight (RC order on r covers the rest); a
 * relaxed WRITE (READ) may use rail r when everything in flight on the
 * other rails belongs to the same relaxed class (unresolved WQEs to the
 * same key included: they are WRITEs (READs) to the same relaxed memory).
 * With nothing in flight a strict WQE may use any rail it is allowed
 * (flowlet switching).  A READ or atomic also needs a free responder slot
 * (@rd_max) on the rail: one that would queue inside the member QP is
 * better placed on a rail with room, and the member never sits at its
 * limit.  Relaxed WQEs under the adaptive policy also need room in the
 * rail's window (rbond_sched_room()), and wait for a drain when mixed
 * classes have kept them on one rail too long (rbond_sched_unstick()).
 * Locks: the QP's sq_lock held.
 * Return: those rails, 0 if the WQE must wait for completions.
 */
unsigned long rbond_sched_allowed(struct rbond_sched *s, u8 cl,
				  const struct ib_send_wr *wr,
				  enum rbond_ordering ord, u32 rd_max,
				  unsigned long allowed)
{
	u32 rkey = rdma_wr(wr)->rkey, mine;
	unsigned long ok = 0, busy_other;
	bool relaxed = cl == RBOND_CL_WRITE || cl == RBOND_CL_READ;
	bool same_unres = false;
	unsigned int r, o;

	rbond_sched_assert(s);
	if ((cl == RBOND_CL_UWRITE || cl == RBOND_CL_UREAD) &&
	    s->inflight_cl[s->home][cl])
		return 0;	/* one at a time while keys are translated */
	if (relaxed)
		same_unres = ord == RBOND_ORDER_RELAXED ||
			     s->unres_rkey[cl - RBOND_CL_WRITE] == rkey;
	allowed &= s->rails_up;		/* the home rail too: it may be gone */
	for_each_set_bit(r, &allowed, RBOND_MAX_RAILS) {
		busy_other = 0;
		for (o = 0; o < RBOND_MAX_RAILS; o++) {
			if (o == r || !s->inflight[o])
				continue;
			if (!relaxed) {
				busy_other = 1;	/* strict or unresolved */
				continue;
			}
			mine = s->inflight_cl[o][cl];
			if (same_unres)
				mine += s->inflight_cl[o][RBOND_CL_UNRESOLVED(cl)];
			if (s->inflight[o] != mine)
				busy_other = 1;
		}
		if (!busy_other)
			ok |= BIT(r);
	}
	ok = rbond_sched_rd_free(s, ok, wr->opcode, rd_max, NULL);
	if (!relaxed)
		return ok;
	return rbond_sched_unstick(s, cl, allowed, rbond_sched_room(s, ok));
}

/*
 * A rail's rate after @sample: smoothed 3:1, but a sample more than twice
 * or less than half the rate replaces it - the rail changed (shaped,
 * congested, renegotiated), and a rail that gets little work because its
 * rate is stale yields few samples to correct it with.
 */
static u32 rbond_rate_update(u32 rate, u64 sample)
{
	if (!rate || sample > 2ULL * rate || 2 * sample < rate)
		return max_t(u64, sample, 1);
	return max_t(u64, (3ULL * rate + sample) / 4, 1);
}

/*
 * A member WQE (slot @e, @len bytes) goes out on @r: it remembers what the
 * rail had delivered by then, and when - the last completion, or now if
 * the rail was idle (its time on the rail starts with it).
 */
static void rbond_sched_busy(struct rbond_sched *s, struct rbond_swqe *e,
			     unsigned int r, u64 len)
{
	struct rbond_rail *rail = &s->bond->rails[r];
	unsigned long flags;

	spin_lock_irqsave(&rail->rate_lock, flags);
	WRITE_ONCE(rail->obytes, rail->obytes + len);
	if (!rail->busy++)
		WRITE_ONCE(rail->delivered_t, ktime_get_ns());
	e->rate_del = rail->delivered;
	e->rate_t = rail->delivered_t;
	spin_unlock_irqrestore(&rail->rate_lock, flags);
}

/*
 * @n member WQEs of @bytes left rail @r; @e: the slot of the one that
 * completed (NULL: a QP gave back what it had outstanding, not counted).
 * Every RBOND_RATE_MIN_N completions, a rate sample: the bytes the rail
 * delivered while @e was on it (from the delivery before it went out to
 * its own) over that time, if at least RBOND_RATE_MIN_NS - the delivery
 * rate of TCP's BBR.  Completions of many QPs that share a rail come in
 * bunches (each of 8 QPs' 1 MiB WQEs, posted together, completes within a
 * few ms of the others); a window from one sample to the next counted a
 * bunch over its few ms, many times the rail's rate, and the stall
 * watchdog, which allows a rail's queue to drain at that rate, failed the
 * rail over while it was working.  A WQE's own time on the rail spans the
 * whole queue ahead of it.  Work posted one WQE at a time (a rendezvous
 * READ per message) is measured over each WQE's time, idle gaps apart.
 */
static void rbond_sched_unbusy(struct rbond_sched *s, unsigned int r, u32 n,
			       u64 bytes, const struct rbond_swqe *e)
{
	struct rbond_rail *rail = &s->bond->rails[r];
	unsigned long flags;
	u64 now, dt, del, sample;

	/* also from process context (rbond_sched_release) */
	spin_lock_irqsave(&rail->rate_lock, flags);
	rail->busy -= min(rail->busy, n);
	WRITE_ONCE(rail->obytes, rail->obytes - min(rail->obytes, bytes));
	if (e) {
		now = ktime_get_ns();
		rail->delivered += bytes;
		WRITE_ONCE(rail->delivered_t, now);
		dt = now - e->rate_t;
		if (++rail->since_sample >= RBOND_RATE_MIN_N &&
		    dt >= RBOND_RATE_MIN_NS) {
			del = rail->delivered - e->rate_del;
			sample = min_t(u64, div64_u64(del << 20, dt), U32_MAX);
			if (del >= RBOND_RATE_MIN_BYTES ||
			    (rail->rate && sample > rail->rate))
				WRITE_ONCE(rail->rate,
					   rbond_rate_update(rail->rate, sample));
			rail->since_sample = 0;
		}
	}
	spin_unlock_irqrestore(&rail->rate_lock, flags);
}

/**
 * rbond_sched_posted() - account a member WQE that went out
 * @s: the QP's scheduler
 * @e: its shadow slot
 * @rail: the rail it went out on
 * @cl: its class (enum rbond_class)
 * @rd: it is a READ or atomic (takes a READ/atomic slot)
 * @rkey: its remote key (remembered for an unresolved class)
 * @len: its bytes
 *
 * A member WQE of @len bytes for slot @e went out on @rail.
 * Locks: the QP's sq_lock held.
 */
void rbond_sched_posted(struct rbond_sched *s, struct rbond_swqe *e,
			unsigned int rail, u8 cl, bool rd, u32 rkey, u64 len)
{
	rbond_sched_assert(s);
	e->flags |= RBOND_SWQE_MRAIL | (cl << RBOND_SWQE_CL_SHIFT);
	if (cl == RBOND_CL_UWRITE || cl == RBOND_CL_UREAD)
		s->unres_rkey[cl - RBOND_CL_UWRITE] = rkey;
	if (rd)
		s->rd_inflight[rail]++;
	if (!s->inflight[rail])
		s->progress[rail] = jiffies;
	rbond_sched_busy(s, e, rail, len);
	s->inflight[rail]++;
	s->inflight_cl[rail][cl]++;
	s->obytes[rail] += len;
	s->sbytes[rail] += len;
}

static void __rbond_sched_done(struct rbond_sched *s, struct rbond_swqe *e,
			       bool count)
{
	u8 cl = (e->flags & RBOND_SWQE_CL_MASK) >> RBOND_SWQE_CL_SHIFT;
	unsigned int r = e->rail;

	rbond_sched_assert(s);
	if (!(e->flags & RBOND_SWQE_MRAIL) || r >= RBOND_MAX_RAILS)
		return;
	/* a READ or atomic (also each of its chunks) held a slot */
	if (rbond_wc_is_rd(e->opcode) && s->rd_inflight[r])
		s->rd_inflight[r]--;
	e->flags &= ~(RBOND_SWQE_MRAIL | RBOND_SWQE_CL_MASK);
	if (!WARN_ON_ONCE(!s->inflight[r]))
		s->inflight[r]--;
	if (cl < RBOND_NR_CLASSES && s->inflight_cl[r][cl])
		s->inflight_cl[r][cl]--;
	s->obytes[r] -= min_t(u64, e->byte_len, s->obytes[r]);
	if (count)
		s->progress[r] = jiffies;
	rbond_sched_unbusy(s, r, 1, e->byte_len, count ? e : NULL);
}

/**
 * rbond_sched_done() - a member WQE completed
 * @s: the QP's scheduler
 * @e: its shadow slot
 *
 * Its rail's outstanding counts go down and the rail's rate counts its
 * bytes.  Nothing for a slot the scheduler did not account.
 * Locks: sq_lock held.
 */
void rbond_sched_done(struct rbond_sched *s, struct rbond_swqe *e)
{
	__rbond_sched_done(s, e, true);
}

/**
 * rbond_sched_drop() - a member WQE leaves a failed rail without completing
 * @s: the QP's scheduler
 * @e: its shadow slot, about to be posted again elsewhere (failover)
 *
 * As rbond_sched_done(), but the rail's rate does not count its bytes.
 * Locks: sq_lock held.
 */
void rbond_sched_drop(struct rbond_sched *s, struct rbond_swqe *e)
{
	__rbond_sched_done(s, e, false);
}

void rbond_sched_release(struct rbond_sched *s)
{
	unsigned int r;

	for (r = 0; r < RBOND_MAX_RAILS; r++) {
		if (s->inflight[r])
			rbond_sched_unbusy(s, r, s->inflight[r], s->obytes[r],
					   NULL);
		s->inflight[r] = 0;
		s->obytes[r] = 0;
	}
}
