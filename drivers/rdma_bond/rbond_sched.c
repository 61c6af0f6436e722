// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * rdma_bond: the scheduler interface.
 *
 * rbond_sched_pick_rail() chooses the rail of one send WQE.  It runs under
 * the QP's send post lock, in any context, and must not sleep.  Until the
 * peer negotiation that brings up member QPs on the other rails exists,
 * every WQE goes to the QP's home rail whatever the policy: this is the
 * single-rail data path (and exactly RC semantics against any peer).
 */
#include "rbond.h"

unsigned int rbond_sched_pick_rail(struct rbond_qp *qp,
				   const struct ib_send_wr *wr)
{
	return qp->home;
}
