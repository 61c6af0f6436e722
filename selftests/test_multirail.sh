#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: none (not in the default loop set until the chunked relaxed READ case passes; run it by name)
#
# Multi-rail (Documentation/rdma_bond.rst, "Multi-rail"), gated by the
# module parameter multirail=1, which this test sets:
#   1. conformance: rbond_verify bond<->bond (WRITE then SEND with the data
#      checked on the SEND completion, READ back, every wr_id and completion
#      order), strict MRs and relaxed-ordering MRs, small and chunked sizes;
#   2. single-QP ib_write_bw bond<->bond over two rails shaped to the same
#      rate: both rails carry data and the bond beats one rail (plain rxe
#      over rail 0, measured in the same run);
#   3. bond<->plain rxe: still correct, single-rail.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0,1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ib_write_bw
prov_up both

P=/sys/module/rdma_bond/parameters
echo 1 > $P/multirail || fail "cannot enable multirail"
RATE=${MR_RATE:-40mbit}
SIZE=${MR_SIZE:-1048576}
ITERS=${MR_ITERS:-30}

stats() { tr '\n' ' ' < $P/mrail_stats; }
stat() { awk -v k="$1" '$1 == k { print $2 }' $P/mrail_stats; }

# 1. conformance, unshaped rails
V="-u $RBOND_QP_TIMEOUT"
vf() {	# vf SERVER CLIENT ARGS...
	local s=$1 c=$2; shift 2
	prov_cs "$s" "$c" /tmp/mr_vf "$PROGS/rbond_verify" $V "$@"
	log_test $? "rbond_verify $* server $s, client $c ($(grep -c '^ok' /tmp/mr_vf) checks)"
}
vf rbond1 rbond0 -n 64
vf rbond1 rbond0 -R -n 64 -s 4096
vf rbond1 rbond0 -R -n 8 -s 1048576
vf rbond1 rbond0 -e -n 8 -s 262144
log "after conformance: $(stats)"
[ "$(stat qp_up)" -ge 2 ]
log_test $? "bond QPs went multi-rail (qp_up=$(stat qp_up))"

# 2. bandwidth, rails shaped to the same rate
for d in a0 a1 b0 b1; do rail_shape $d "$RATE"; done
# -t: a short send queue keeps the client posting while the rails come up
U="-x 1 -u $RBOND_QP_TIMEOUT -F -s $SIZE -n $ITERS -t ${MR_TXDEPTH:-4}"
bw() {	# bw SERVER CLIENT LABEL: prints MB/s
	local t0 t1 a0 a1 rc
	a0=$(rail_tx_bytes a0); a1=$(rail_tx_bytes a1)
	t0=$(date +%s.%N)
	prov_cs "$1" "$2" /tmp/mr_bw ib_write_bw $U; rc=$?
	t1=$(date +%s.%N)
	a0=$(( $(rail_tx_bytes a0) - a0 )); a1=$(( $(rail_tx_bytes a1) - a1 ))
	local mbs
	mbs=$(grep -E '^ *[0-9]+ +[0-9]+ +' /tmp/mr_bw | tail -n1 | awk '{print $4}')
	log "$3: perftest ${mbs:-?} MB/s, wall $(echo "$t1 - $t0" | bc) s, a0 tx $((a0 / 1000000)) MB, a1 tx $((a1 / 1000000)) MB"
	echo "$3 $rc $mbs $a0 $a1" >> /tmp/mr_res
}
rm -f /tmp/mr_res
bw rxe_b0 rxe_a0 one-rail
bw rbond1 rbond0 bond
set -- $(grep '^one-rail' /tmp/mr_res); rc1=$2; one=$3
set -- $(grep '^bond' /tmp/mr_res); rc2=$2; two=$3; t0=$4; t1=$5
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]
log_test $? "ib_write_bw one rail and bond completed"
ratio=$(echo "scale=2; ${two:-0} / ${one:-1}" | bc)
log "ratio bond / one rail = $ratio (rails at $RATE each, limit 2.00)"
# both rails carried a real share of the bond's payload
[ "$t0" -gt $((SIZE * ITERS / 5)) ] && [ "$t1" -gt $((SIZE * ITERS / 5)) ]
log_test $? "both rails carried data (a0 $t0 B, a1 $t1 B)"
[ "$(echo "$ratio >= ${MR_MIN_RATIO:-1.5}" | bc)" = 1 ]
log_test $? "aggregate gain: $ratio x one rail"
log "after bandwidth: $(stats)"
for d in a0 a1 b0 b1; do rail_unshape $d; done

# 3. bond <-> plain rxe: single-rail and correct
rdma link delete rbond1 || fail "rdma link delete rbond1"
vf rxe_b0 rbond0 -n 32
vf rbond0 rxe_b0 -R -n 8 -s 262144
log "after plain peer: $(stats)"
echo 0 > $P/multirail
exit $ret
