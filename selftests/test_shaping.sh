#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# The shaping helper holds a rail to its rate: rail 0 shaped to 40 Mbit/s
# carries an ib_write_bw stream at 40 Mbit/s (+-15%) measured from the netdev
# byte counters, while unshaped it goes clearly faster.
#
#   host A  rxe_a0/a0 [tbf 40mbit] <-- rail 0 --> b0/rxe_b0  host B
. "$(dirname "$0")/lib.sh"
require_guest
require_cmd ib_write_bw
topo_up || fail "topology"

measure() {	# measure ITERS: print Mbit/s seen on a0's wire mid-transfer
	local n=$1 b0 b1 t0 t1 pid
	perf_pair 0 18800 ib_write_bw -x 1 -s 1048576 -n "$n" -u $RBOND_QP_TIMEOUT -F \
		>/tmp/.bw 2>&1 &
	pid=$!
	sleep 5	# past connection setup
	b0=$(rail_tx_bytes a0); t0=$(date +%s%N)
	sleep 6
	b1=$(rail_tx_bytes a0); t1=$(date +%s%N)
	wait $pid || { sed 's/^/#   /' /tmp/.bw | tail; return 1; }
	echo $(( (b1 - b0) * 8 * 1000 / (t1 - t0) ))
}

test_shaped_rate() {
	local rate=40 got rc=0
	rail_shape a0 ${rate}mbit
	rail_shape b0 ${rate}mbit
	got=$(measure 100) || rc=1	# 100 MiB: ~21 s at 40 Mbit/s, the window is well inside
	log "rail 0 shaped to $rate Mbit/s: ${got:-?} Mbit/s on the wire "
	if [ $rc -eq 0 ]; then
		[ "$got" -ge $((rate * 85 / 100)) ] && [ "$got" -le $((rate * 105 / 100)) ] || rc=1
	fi
	log_test $rc "tbf holds rail 0 to $rate Mbit/s"
}

test_shaped_rate
exit $ret
