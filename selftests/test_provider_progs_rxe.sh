#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# The provider selftest programs themselves, against plain Soft-RoCE (no
# rdma_bond): rbond_verify moves and checks data rxe_a0 <-> rxe_b0 (polling,
# then completion events + relaxed-ordering MRs on rail 1), rbond_badinput
# checks its expectations on rxe (bond-only checks skip).  Validates the
# programs before they judge a bond.
#
#   host A  rxe_a0 <-- rail 0 --> rxe_b0  host B
#           rxe_a1 <-- rail 1 --> rxe_b1
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require none
topo_up || fail "topology"

prov_cs rxe_b0 rxe_a0 /tmp/v0 "$PROGS/rbond_verify" -n 16 -u "$RBOND_QP_TIMEOUT"
log_test $? "rbond_verify rxe_a0 -> rxe_b0 ($(grep -c '^ok' /tmp/v0) checks)"

prov_cs_r1() {	# same on rail 1
	local out=$1; shift
	PROV_PORT=$((PROV_PORT + 1))
	timeout -k 5 240 "$PROGS/rbond_verify" -d rxe_b1 -p $PROV_PORT "$@" >"$out.srv" 2>&1 &
	local spid=$! rc
	sleep 1
	timeout -k 5 240 "$PROGS/rbond_verify" -d rxe_a1 -p $PROV_PORT "$@" "$(rail_ip 1 b)" >"$out" 2>&1
	rc=$?; wait $spid || rc=1
	[ $rc -eq 0 ] || sed 's/^/#   /' "$out" | tail -n 15
	return $rc
}
prov_cs_r1 /tmp/v1 -n 16 -e -R -u "$RBOND_QP_TIMEOUT"
log_test $? "rbond_verify -e -R rxe_a1 -> rxe_b1"

# plain rxe is the reference: any error status for a failing WQE (its
# wr_id and the flush after it still checked), the one it gives recorded
timeout -k 5 300 "$PROGS/rbond_badinput" -d rxe_a0 -D rxe_b0 -W /tmp/bi.native \
	-u "$RBOND_QP_TIMEOUT" >/tmp/bi 2>&1
rc=$?
grep '^not ok' /tmp/bi | sed 's/^/#   /'
log_test $rc "rbond_badinput on rxe_a0 ($(tail -n 1 /tmp/bi | sed 's/^# //'))"
exit $ret
