#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: pair
# time: 120
#
# Open bug (Documentation/testing.rst, session of 2026-12-07 06:27): in
# the clean-clone CI check of 0fdb1fa (heartbeats on, 6.1 pair,
# test_pair_failover cases 3 and 4), and in two 6.12 CI checks before,
# the host without the fault judged the home rail silent and started a
# home move of its own, the faulted host one on its port event, and
# neither completed.  This script makes the first half happen on purpose:
# rbond_stream a -> b over both rails with heartbeats on; host a takes a0
# (every QP's home) down for 8 s, and for the first CM_HOLD (2) seconds
# its rail-1 egress drops rdma_bond's FENCE messages (a u32 filter on the
# BTH opcode and the message's magic and type; heartbeats, FENCE_ACKs and
# data pass), so host a's FENCE is held back while host b finds rail 0
# silent and starts its own move.  With CM_HOLD=4 (2026-12-07, 6.1, one
# run) that happened - host b "no heartbeat ... for 620 ms", its move
# done 59 ms later on host a's FENCE_ACK, host a's 497 ms after its port
# event on host b's FENCE - so crossing moves as such converge; what else
# the CI runs had (lost FENCEs both ways? a half-open rail-1 connection:
# host b took one down 4.6 s later) is open.  Exit 1 when a QP "cannot
# move" or the stream failed other than by the lost atomic reply a home
# move may give; 0 when both moves completed.
#   tools/vm/pair -- selftests/run.sh -t pair repro/crossing_home_moves.sh
# (RBOND_VM_APPEND=rdma_bond.dyndbg=+p for the module's debug output)
. "$(dirname "$0")/../lib.sh"
require_guest
require_module
require_provider
PROGS=$RBOND_TOP/selftests/progs
[ -x "$PROGS/rbond_stream" ] || skip "rbond_stream not built (make progs)"
pair_bonds_up
me=$(rbond_me)
P=/sys/module/rdma_bond/parameters
echo 1 > $P/multirail
echo 100 > $P/heartbeat_ms
echo 500 > /sys/class/infiniband/rbond0/bond/failover_silent_ms
for r in 0 1; do rail_shape "$me$r" 40mbit; done
pair_sync shaped || fail "peer did not shape its rails"
port=18790
m=$(dmesg_mark)

if [ "$me" = b ]; then
	timeout -k 5 120 "$PROGS/rbond_stream" -d rbond0 -p $port -R -s 1048576 \
		-w 1 -t 30 -u "$RBOND_QP_TIMEOUT" > /tmp/cx.srv 2>&1 &
	pid=$!
	sleep 2; pair_put cx.srv up
	pair_get cx.go 120 > /dev/null
	wait $pid; rc=$?
	out=/tmp/cx.srv
else
	pair_get cx.srv 120 > /dev/null
	timeout -k 5 120 "$PROGS/rbond_stream" -d rbond0 -p $port -R -s 1048576 \
		-w 1 -t 30 -u "$RBOND_QP_TIMEOUT" "$(rail_ip 1 b)" > /tmp/cx.cli 2>&1 &
	pid=$!
	t0=$(rail_tx_bytes a1)
	for i in $(seq 200); do
		[ $(($(rail_tx_bytes a1) - t0)) -gt 1000000 ] && break
		sleep 0.1
	done
	sleep 2
	pair_put cx.go 1
	# rdma_bond's FENCE messages out of a1 (RC SEND_ONLY, opcode 0x04,
	# whose payload starts with the control magic and has type 7 at byte
	# 5 - IP 20 + UDP 8 + BTH 12 bytes in), nothing else: heartbeats
	# and data keep rail 1 alive for host b
	tc qdisc add dev a1 clsact
	tc filter add dev a1 egress protocol ip prio 1 u32 \
		match ip protocol 17 0xff match ip dport 4791 0xffff \
		match u8 0x04 0xff at 28 \
		match u32 0x52424e44 0xffffffff at 40 \
		match u32 0x00070000 0x00ff0000 at 44 action drop
	log "a0 down at $(now_k), host a's FENCEs on rail 1 held back ${CM_HOLD:-2} s"
	rail_down a0
	sleep "${CM_HOLD:-2}"
	tc qdisc del dev a1 clsact
	sleep $((8 - ${CM_HOLD:-2}))
	rail_up a0
	wait $pid; rc=$?
	out=/tmp/cx.cli
fi
grep -E '^(ok|not ok)|^# (client|server|wr_id|FETCH)' "$out" | sed 's/^/# /'
dmesg_since "$m" | grep -E 'home|no heartbeat|FENCE' | head -n 12 | sed 's/^/# /'
bug=0
dmesg_since "$m" | grep -q 'cannot move' && bug=1
[ "$rc" = 0 ] || [ "$rc" = 3 ] || bug=1
pair_sync cx.done 120
log "host $me: stream rc $rc; $([ $bug = 1 ] && echo 'the crossing moves failed (the bug)' || echo 'both moves completed')"
exit $bug
