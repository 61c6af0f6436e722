#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 90
#
# The adaptive policy's rail rates follow the rails (rbond_sched.c,
# Documentation/rdma_bond.rst "Scheduling"): a rail's rate is measured over
# the time it has member WQEs outstanding, also when that time comes in
# bursts.  An application that posts one large WQE at a time (UCX's
# rendezvous READs, ib_write_bw -t 1) leaves every rail idle between
# bursts with only a few chunks on each; its WQEs must still be split by
# what the rails carry now, not by what they carried before.
#   1. rails unshaped: ib_write_bw with a deep queue measures both rails;
#   2. rail 0 shaped to RATE0, rail 1 to RATE1 (4:1 by default);
#   3. ib_write_bw -t 1: one 1 MiB WRITE at a time (relaxed: split into
#      chunks over both rails), WARM WQEs, then ITERS more measured:
#      bond/rail_rates shows rail 0 at least twice rail 1, and rail 0
#      carried at least SHARE% of the measured WQEs' bytes (a stale
#      estimate from step 1 splits them about evenly).
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0, 1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_mrail

RATE0=${SR_RATE0:-40mbit}
RATE1=${SR_RATE1:-10mbit}
WARM=${SR_WARM:-12}
ITERS=${SR_ITERS:-24}
SHARE=${SR_SHARE:-65}
U="-x 1 -u $RBOND_QP_TIMEOUT -F"
SYS=/sys/class/infiniband

rates() { tr '\n' ' ' < $SYS/rbond0/bond/rail_rates; }
rate_of() { awk -v r="$1" '$1 == r { print $2 }' $SYS/rbond0/bond/rail_rates; }
# wbw ITERS TXDEPTH: one QP ib_write_bw 1 MiB rbond0 -> rbond1
wbw() {
	prov_cs rbond1 rbond0 /tmp/sr_bw ib_write_bw -s 1048576 -n "$1" -t "$2" $U
}

[ -f $SYS/rbond0/bond/rail_rates ] && [ "$(wc -l < $SYS/rbond0/bond/rail_rates)" = 2 ]
log_test $? "bond/rail_rates has a line per rail: $(rates)"

# 1. unshaped: a deep queue, every rail busy for long
wbw 200 64
rc=$?
r0=$(rate_of 0) r1=$(rate_of 1)
[ $rc = 0 ] && [ "${r0:-0}" -gt 0 ] && [ "${r1:-0}" -gt 0 ]
log_test $? "unshaped rails: ib_write_bw -t 64, both rails measured (kbit/s: $(rates))"

# 2. 4:1
for d in a b; do rail_shape ${d}0 "$RATE0"; rail_shape ${d}1 "$RATE1"; done

# 3. one WQE at a time
wbw "$WARM" 1
rc=$?
a0=$(rail_tx_bytes a0) a1=$(rail_tx_bytes a1)
wbw "$ITERS" 1 || rc=1
a0=$(( $(rail_tx_bytes a0) - a0 )) a1=$(( $(rail_tx_bytes a1) - a1 ))
log_test $rc "shaped rails ($RATE0, $RATE1): ib_write_bw -t 1 1 MiB x $WARM, then x $ITERS"
r0=$(rate_of 0) r1=$(rate_of 1)
[ "${r0:-0}" -ge $(( 2 * ${r1:-0} )) ] && [ "${r1:-0}" -gt 0 ]
log_test $? "the rates followed the shaping: rail 0 at least 2x rail 1 (kbit/s: $(rates))"
pct=$(( a0 * 100 / (a0 + a1 + 1) ))
[ $pct -ge "$SHARE" ]
log_test $? "one WQE at a time split by the rates: rail 0 carried $pct% (>= $SHARE%; $((a0 / 1000)) kB and $((a1 / 1000)) kB)"
exit $ret
