#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Unmodified perftest through the provider: ib_write_bw, ib_read_bw,
# ib_send_bw, ib_atomic_bw, ib_write_lat, ib_send_lat, bond <-> bond, then
# (rbond1 deleted) bond <-> plain rxe with the bond as client and as server.
# Each run must finish with a result line on both sides.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
#   then    rbond0                      <== rail 0 ==>              rxe_b0
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_send_lat
prov_up both

U="-x 1 -u $RBOND_QP_TIMEOUT -F"
perf() {	# perf SERVER CLIENT TOOL ARGS...
	local s=$1 c=$2 tool=$3 rc; shift 3
	prov_cs "$s" "$c" /tmp/pf "$tool" $U "$@"
	rc=$?
	grep -qE '^ *[0-9]+ +[0-9]+ +' /tmp/pf || { log "no result line"; rc=1; }
	[ $rc -eq 0 ] && log "$(grep -E '^ *[0-9]+ +[0-9]+ +' /tmp/pf | tail -n1 | tr -s ' ')"
	log_test $rc "$tool $* server $s, client $c"
}

suite() {	# suite SERVER CLIENT
	perf "$1" "$2" ib_write_bw -s 65536 -n 200
	perf "$1" "$2" ib_read_bw -s 65536 -n 200
	perf "$1" "$2" ib_send_bw -s 65536 -n 200
	perf "$1" "$2" ib_atomic_bw -n 200
	perf "$1" "$2" ib_write_lat -s 2 -n 500
	perf "$1" "$2" ib_send_lat -s 2 -n 500
}

suite rbond1 rbond0
rdma link delete rbond1 || fail "rdma link delete rbond1"
suite rxe_b0 rbond0
suite rbond0 rxe_b0
exit $ret
