#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 65
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
#   4. both rails at RATE_EQ, eight QPs posting 1 MiB WRITEs together
#      (ib_write_bw -q 8, the benchmark's hardest point): their
#      completions come in bunches.  No rail may fail over (the stall
#      watchdog allows a rail's queue to drain at its measured rate), and
#      no rate sampled during the run may exceed twice the shaping, and
#      rail 1's (a quarter of it after step 3) must rise.  On 6.12 it
#      rose only to 19500 kbit/s in this step (2026-12-03; 6.1: 42114);
#      why is not known yet.  Before
#      the delivery-rate sample and the rail-wide stall check: 3 failovers,
#      a rate of 254119 kbit/s sampled on 40 Mbit/s rails.
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
RATE_EQ=${SR_RATE_EQ:-40}	# Mbit/s, step 4
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

# 4. eight QPs at once on equal rails: a queue as deep as the benchmark's
RBOND_TBF_LIMIT=32mb
for d in a0 a1 b0 b1; do rail_shape $d "${RATE_EQ}mbit"; done
fo0=$(mrail_stat failovers)
r1_was=$(rate_of 1)
echo 0 > /tmp/sr_max
( max=0
  while :; do
	for r in 0 1; do
		v=$(rate_of $r)
		[ "${v:-0}" -gt $max ] && max=$v && echo $max > /tmp/sr_max
	done
	sleep 0.2
  done ) &
spid=$!
prov_cs rbond1 rbond0 /tmp/sr_bw8 ib_write_bw -s 1048576 -q 8 -n 12 -x 1 -u 21 -F
rc=$?
kill $spid; wait $spid 2>/dev/null
fo=$(( $(mrail_stat failovers) - fo0 ))
log_test $rc "equal rails (${RATE_EQ} Mbit/s): ib_write_bw -q 8 1 MiB x 12"
[ "$fo" = 0 ]
log_test $? "no rail failed over during it ($fo failovers)"
max=$(cat /tmp/sr_max) r1=$(rate_of 1)
[ "$max" -le $(( 2 * RATE_EQ * 1000 )) ] && [ "${r1:-0}" -gt "${r1_was:-0}" ]
log_test $? "the rates stayed within 2x the shaping (max sampled $max kbit/s), rail 1's rose from step 3's $r1_was (kbit/s: $(rates))"
exit $ret
