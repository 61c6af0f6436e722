#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 95
#
# Shared receive queues through the provider: unmodified ibv_srq_pingpong
# (16 RC QPs on one SRQ per side, every received buffer checked with -c),
# polling and with completion events, bond <-> bond both ways (multi-rail
# QPs: their SENDs and receives stay on the home rail, the SRQ's), then
# bond <-> plain rxe both ways.  The device reports SRQ limits, and the
# rail's receive counter moves.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
#   then    rbond0                      <== rail 0 ==>              rxe_b0
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ibv_srq_pingpong ibv_devinfo
prov_up both
echo 1 > /sys/module/rdma_bond/parameters/multirail


info=$(ibv_devinfo -v -d rbond0)
srq=$(echo "$info" | awk '$1 == "max_srq:" { print $2 }')
srq_wr=$(echo "$info" | awk '$1 == "max_srq_wr:" { print $2 }')
srq_sge=$(echo "$info" | awk '$1 == "max_srq_sge:" { print $2 }')
rxe_srq=$(ibv_devinfo -v -d rxe_a0 | awk '$1 == "max_srq:" { print $2 }')
[ "${srq:-0}" -gt 0 ] && [ "$srq" -le "${rxe_srq:-0}" ] &&
	[ "${srq_wr:-0}" -gt 0 ] && [ "${srq_wr:-0}" -le 16384 ] &&
	[ "${srq_sge:-0}" -gt 0 ] && [ "${srq_sge:-0}" -le 16 ]
log_test $? "rbond0 reports SRQs: max_srq $srq (rxe: $rxe_srq), max_srq_wr $srq_wr, max_srq_sge $srq_sge"

pp() {	# pp SERVER CLIENT [-e]
	local rc
	prov_cs "$1" "$2" /tmp/sp ibv_srq_pingpong -g 1 -n 100 -c $3
	rc=$?
	grep -q 'iters in' /tmp/sp && grep -q 'iters in' /tmp/sp.srv || rc=1
	[ $rc -eq 0 ] && log "$(grep 'iters in' /tmp/sp)"
	log_test $rc "ibv_srq_pingpong -c ${3:+$3 }server $1, client $2"
}

rx0=$(rdma_hw_stat rbond0 rail0_rx_wqes)
pp rbond1 rbond0
pp rbond0 rbond1
pp rbond1 rbond0 -e
rx1=$(rdma_hw_stat rbond0 rail0_rx_wqes)
[ "${rx1:-0}" -gt "${rx0:-0}" ]
log_test $? "receives posted to the SRQ counted on its rail (rail0_rx_wqes ${rx0:-?} -> ${rx1:-?})"
rdma link delete rbond1 || fail "rdma link delete rbond1"
pp rxe_b0 rbond0
pp rbond0 rxe_b0
pp rbond0 rxe_b0 -e
exit $ret
