// SPDX-License-Identifier: GPL-2.0
/*
 * Harness self-check: a module that WARNs at load.  tools/run-tests.sh boots
 * a guest that loads it and expects the VM harness to report a failure even
 * though insmod itself succeeds.
 */
#include <linux/module.h>

static int __init rbond_warn_init(void)
{
	WARN(1, "rdma_bond harness self-check: deliberate WARN at load\n");
	return 0;
}

static void __exit rbond_warn_exit(void)
{
}

module_init(rbond_warn_init);
module_exit(rbond_warn_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("rdma_bond test harness self-check (deliberately broken)");
