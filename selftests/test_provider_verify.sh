#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Data integrity through the provider: rbond_verify (SEND/RECV, RDMA WRITE
# followed by a SEND that must see all written data, RDMA READ; every byte,
# wr_id, opcode and status checked) bond <-> bond, polling and with
# completion events + relaxed-ordering MRs, then bond <-> plain rxe both
# ways.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
#   then    rbond0                      <== rail 0 ==>              rxe_b0
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
prov_up both

V="-u $RBOND_QP_TIMEOUT -n 32"
vf() {	# vf SERVER CLIENT ARGS...
	local s=$1 c=$2; shift 2
	prov_cs "$s" "$c" /tmp/vf "$PROGS/rbond_verify" $V "$@"
	log_test $? "rbond_verify $* server $s, client $c ($(grep -c '^ok' /tmp/vf) checks)"
}
vf rbond1 rbond0
vf rbond1 rbond0 -e -R -s 1048576 -n 8
rdma link delete rbond1 || fail "rdma link delete rbond1"
vf rxe_b0 rbond0
vf rbond0 rxe_b0 -e
exit $ret
