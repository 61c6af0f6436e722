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

test_rxe_devices
test_traffic_on_wire
exit $ret
