// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-check for the debug-kernel lane: a module that commits one
 * deliberate bug at load, chosen by the "bug" parameter, so that the lane can
 * prove each of its tools catches its kind of bug and fails the suite:
 *
 *   bug=uaf    read of a freed kmalloc object           KASAN
 *   bug=sleep  msleep() under a spinlock (as if in a post_send fast path)
 *              DEBUG_ATOMIC_SLEEP
 *   bug=leak   kmalloc() never freed                    kmemleak
 *   bug=abba   lock A then B, later B then A            lockdep
 *   bug=none   nothing (the control: a clean load and unload)
 *
 * Never load this outside a throwaway test guest.
 */
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/mutex.h>
#include <linux/delay.h>
#include <linux/string.h>

static char *bug = "none";
module_param(bug, charp, 0444);
MODULE_PARM_DESC(bug, "bug to commit at load: none, uaf, sleep, leak, abba");

static DEFINE_SPINLOCK(rbond_inject_sq_lock);
static DEFINE_MUTEX(rbond_inject_lock_a);
static DEFINE_MUTEX(rbond_inject_lock_b);

struct rbond_inject_obj {
	u64 wr_id;
	u32 len;
	u8 payload[48];
};

static noinline int rbond_inject_uaf(void)
{
	struct rbond_inject_obj *obj;
	u64 v;

	obj = kzalloc(sizeof(*obj), GFP_KERNEL);
	if (!obj)
		return -ENOMEM;
	obj->wr_id = 42;
	kfree(obj);
	v = READ_ONCE(obj->wr_id);	/* use after free */
	pr_info("rbond_inject: read %llu from a freed object\n", v);
	return 0;
}

/* Stands in for a post_send that sleeps while holding the send-queue lock. */
static noinline int rbond_inject_post_send(void)
{
	unsigned long flags;

	spin_lock_irqsave(&rbond_inject_sq_lock, flags);
	msleep(20);	/* sleeping in atomic context */
	spin_unlock_irqrestore(&rbond_inject_sq_lock, flags);
	return 0;
}

/*
 * kmemleak does not report an object while some scanned memory still holds
 * its address: a stale copy in a cached (vmap) thread stack or a register
 * spilled somewhere can hide one leaked object for a while, and once made
 * the lane's self-check miss it (CI, 2026-12-02).  Leak several, each
 * address overwritten by the next, so that at least one is truly
 * unreferenced whatever stale copy of the last one survives.
 */
#define RBOND_INJECT_LEAKS 8

static noinline int rbond_inject_leak(void)
{
	struct rbond_inject_obj *obj;
	int i;

	for (i = 0; i < RBOND_INJECT_LEAKS; i++) {
		obj = kmalloc(sizeof(*obj), GFP_KERNEL);
		if (!obj)
			return -ENOMEM;
		memset(obj, 0x5a, sizeof(*obj));
		/* never freed nor stored: the next kmalloc() overwrites obj */
	}
	pr_info("rbond_inject: leaked %d objects of %zu bytes\n",
		RBOND_INJECT_LEAKS, sizeof(*obj));
	return 0;
}

static noinline int rbond_inject_abba(void)
{
	mutex_lock(&rbond_inject_lock_a);
	mutex_lock(&rbond_inject_lock_b);
	mutex_unlock(&rbond_inject_lock_b);
	mutex_unlock(&rbond_inject_lock_a);

	mutex_lock(&rbond_inject_lock_b);
	mutex_lock(&rbond_inject_lock_a);	/* inverted order */
	mutex_unlock(&rbond_inject_lock_a);
	mutex_unlock(&rbond_inject_lock_b);
	return 0;
}

static int __init rbond_inject_init(void)
{
	pr_info("rbond_inject: bug=%s\n", bug);
	if (!strcmp(bug, "none"))
		return 0;
	if (!strcmp(bug, "uaf"))
		return rbond_inject_uaf();
	if (!strcmp(bug, "sleep"))
		return rbond_inject_post_send();
	if (!strcmp(bug, "leak"))
		return rbond_inject_leak();
	if (!strcmp(bug, "abba"))
		return rbond_inject_abba();
	pr_err("rbond_inject: unknown bug '%s'\n", bug);
	return -EINVAL;
}

static void __exit rbond_inject_exit(void)
{
}

module_init(rbond_inject_init);
module_exit(rbond_inject_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rdma_bond debug-lane self-check (deliberately broken)");
