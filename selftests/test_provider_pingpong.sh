#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Unmodified ibv_rc_pingpong through the provider, polling and with
# completion events (-e): bond <-> bond both ways, then (rbond1 deleted)
# bond <-> plain rxe both ways.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
#   then    rbond0                      <== rail 0 ==>              rxe_b0
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ibv_rc_pingpong
prov_up both

pp() {	# pp SERVER CLIENT [-e]
	local rc
	prov_cs "$1" "$2" /tmp/pp ibv_rc_pingpong -g 1 -n 200 $3
	rc=$?
	grep -q 'iters in' /tmp/pp && grep -q 'iters in' /tmp/pp.srv || rc=1
	[ $rc -eq 0 ] && log "$(grep 'iters in' /tmp/pp)"
	log_test $rc "ibv_rc_pingpong ${3:+$3 }server $1, client $2"
}

pp rbond1 rbond0
pp rbond0 rbond1
pp rbond1 rbond0 -e
pp rbond0 rbond1 -e
rdma link delete rbond1 || fail "rdma link delete rbond1"
pp rxe_b0 rbond0
pp rbond0 rxe_b0
pp rxe_b0 rbond0 -e
pp rbond0 rxe_b0 -e
exit $ret
