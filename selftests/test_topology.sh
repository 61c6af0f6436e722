#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop pair
#
# The test bed itself: each rail has an rxe device with an IPv4 GID, and
# traffic between the two hosts' addresses of a rail crosses that rail's wire
# (its netdev counters move), never lo.
#
#   host A  rxe_a0/a0 10.0.1.1 <-- rail 0 --> 10.0.1.2 b0/rxe_b0  host B
#           rxe_a1/a1 10.0.2.1 <-- rail 1 --> 10.0.2.2 b1/rxe_b1
. "$(dirname "$0")/lib.sh"
require_guest
topo_up || fail "topology"
me=$(rbond_me)

test_rxe_devices() {
	local r rc=0
	for r in 0 1; do
		[ -e /sys/class/infiniband/rxe_$me$r ] || rc=1
		grep -q "ffff:0a00:0$((r + 1))0" /sys/class/infiniband/rxe_$me$r/ports/1/gids/1 || rc=1
	done
	log_test $rc "rxe device with IPv4 GID on every rail"
}

test_traffic_on_wire() {
	local r rc=0 before after
	for r in 0 1; do
		before=$(rail_tx_bytes $me$r) || { rc=1; continue; }
		if [ "$me" = a ]; then
			[ "${RBOND_TOPO}" = pair ] && pair_get peer_ready.$r 60 >/dev/null
			# from A's rail address: policy routing keys on the source
			busybox ping -c 3 -W 2 -I "$(rail_ip $r a)" "$(rail_ip $r b)" >/dev/null || rc=1
		else
			pair_put peer_ready.$r 1
			sleep 4
			continue
		fi
		after=$(rail_tx_bytes $me$r) || { rc=1; continue; }
		[ $((after - before)) -ge 250 ] || { log "rail $r: only $((after - before)) bytes on the wire"; rc=1; }
	done
	log_test $rc "traffic between the hosts crosses each rail's wire"
}

# A rail whose link went down and up (rail_down/rail_up, as the failover
# tests do) is a wire again.  Before rail_up put back what the link's going
# down removed, the route from A's to B's rail 0 address went through lo
# after a flap ("local 10.0.1.2 from 10.0.1.1 dev lo table local"), and the
# bond's control connections over the rail timed out
test_after_flap() {
	local rc=0 w0 via
	rail_down a0; sleep 1; rail_up a0
	_wait_gid rxe_a0 || rc=1
	via=$(ip route get "$(rail_ip 0 b)" from "$(rail_ip 0 a)" | head -n1)
	[[ " $via " == *" dev a0 "* ]] || { log "after a flap: $via"; rc=1; }
	w0=$(rail_tx_bytes a0)
	busybox ping -c 5 -s 1000 -W 2 -I "$(rail_ip 0 a)" "$(rail_ip 0 b)" >/dev/null || rc=1
	[ $(($(rail_tx_bytes a0) - w0)) -ge 5000 ] ||
		{ log "after a flap: only $(($(rail_tx_bytes a0) - w0)) bytes on rail 0's wire"; rc=1; }
	log_test $rc "rail 0 after its link went down and up: traffic crosses its wire"
}

test_rxe_devices
test_traffic_on_wire
[ "$RBOND_TOPO" = loop ] && test_after_flap
exit $ret
