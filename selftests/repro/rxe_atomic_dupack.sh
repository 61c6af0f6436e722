#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 120
#
# Soft-RoCE itself, no bond: a FETCH_ADD that completes successfully with
# its result never written.  rbond_stream runs over the plain rxe rail 0
# (rxe_b0 <- rxe_a0, shaped to 40 Mbit/s) with a short ACK timeout
# (RXE_DUP_TIMEOUT, default 12: ~16 ms), so the requester retransmits
# while the responder's answers are still on their way (the bed's
# queueing delay, a slow guest).  rxe's responder answers a duplicate
# SEND or WRITE with a plain ACK of the last PSN it executed
# (rxe_resp.c, duplicate_request()) - an atomic's, if one came next - and
# rxe's completer takes a plain ACK of an atomic's PSN as that atomic's
# completion (COMPST_WRITE_SEND, rxe_comp.c), its result not copied (the
# ATOMIC_ACK itself was dropped while the queue was being rewound for the
# retry: get_wqe() finds the head WQE "posted").  The stream reports it as
# "FETCH_ADD N returned N-32: executed lost", the server's counter exact.
#
# Found under the bond (test_ctrl_renew.sh, a loaded host, 2026-12-07):
# the member's own completion said success, and the bond delivered it
# (Documentation/testing.rst).  NOT in the suite (selftests/run.sh runs
# selftests/test_*.sh).  Exit 1 when the lost result showed, 0 when not:
#   tools/vm/run -- selftests/run.sh repro/rxe_atomic_dupack.sh
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../progs/lib_provider.sh"
topo_up || fail "topology"
for d in a0 b0; do rail_shape $d "${RATE:-40mbit}"; done
d0=$(rdma_hw_stat rxe_b0 duplicate_request)
prov_cs rxe_b0 rxe_a0 /tmp/dupack "$PROGS/rbond_stream" \
	-u "${RXE_DUP_TIMEOUT:-12}" -s 1048576 -w 1 -t "${RXE_DUP_SECS:-30}"
rc=$?
prov_stream_report /tmp/dupack $rc
log "rxe_b0 duplicate requests: $(($(rdma_hw_stat rxe_b0 duplicate_request) - d0)); rxe_a0: $(rxe_retry_stats rxe_a0)"
grep -q 'executed lost' /tmp/dupack
rc=$?
[ $rc = 0 ] && log "plain rxe completed a FETCH_ADD without its result"
for d in a0 b0; do rail_unshape $d; done
[ $rc = 0 ] && exit 1
exit 0
