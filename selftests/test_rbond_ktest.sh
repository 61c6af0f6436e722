#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Kernel verbs consumers on rdma_bond (selftests/kmod/rbond_ktest.ko): RC
# SEND/RECV (+imm, DMA-lkey and inline), WRITE, READ, FETCH_ADD, CMP_SWP in
# both directions, data and completions checked, between
#   - two bonds:          rbond0 [rxe_a0, rxe_a1] <-> rbondb [rxe_b0, rxe_b1]
#   - a bond and rxe:     rbond0 [rxe_a0, rxe_a1] <-> rxe_b0 (plain), both
#                         orders (the bond's GID is its primary's, rail 0)
# and the per-rail counters and `rdma res show qp -dd` while QPs live.
#
#   rbond0 ─ rxe_a0 (a0) <==== veth ====> (b0) rxe_b0 ─ rbondb
#          ─ rxe_a1 (a1) <==== veth ====> (b1) rxe_b1 ─
. "$(dirname "$0")/lib.sh"
require_guest
require_module
KT=$RBOND_TOP/selftests/kmod/rbond_ktest.ko
[ -f "$KT" ] || skip "rbond_ktest.ko not built (make modules)"
topo_up || fail "topology"
trap 'rmmod rbond_ktest 2>/dev/null; topo_down' EXIT
rbond_install || fail "install"


ktest() {	# ktest DEV_A DEV_B [keep=1]: load rbond_ktest, report
	local rc
	insmod "$KT" dev_a="$1" dev_b="$2" ${3:-}; rc=$?
	dmesg | grep 'rbond_ktest:' | tail -n 3 | sed 's/^/# /'
	return $rc
}

test_bond_bond() {
	local rc=0 before after
	rbond_create rbond0 a && rbond_create rbondb b || { log_test 1 "bonds"; return; }
	before=$(rdma_hw_stat rbond0 rail0_tx_wqes)
	ktest rbond0 rbondb keep=1 || rc=1
	after=$(rdma_hw_stat rbond0 rail0_tx_wqes)
	log "rbond0 rail0_tx_wqes $before -> $after"
	[ "$after" -gt "$before" ] || rc=1
	[ "$(rdma_hw_stat rbond0 rail0_completions)" -gt 0 ] || rc=1
	[ "$(rdma_hw_stat rbond0 rail0_rx_bytes)" -gt 0 ] || rc=1
	[ "$(rdma_hw_stat rbond0 rail0_errors)" -eq 0 ] || rc=1
	log_test $rc "bond <-> bond: SEND/RECV, WRITE, READ, atomics; counters move"

	rc=0
	rdma res show qp link rbond0/1 -dd | tee /tmp/.res | sed 's/^/# /'
	grep -q 'drv_home_rail 0' /tmp/.res && grep -q 'drv_rail0_qpn' /tmp/.res || rc=1
	grep -q 'state RTS' /tmp/.res || rc=1
	log_test $rc "rdma res show qp -dd shows the QP's rails"
	rmmod rbond_ktest
	check_ok rdma link delete rbondb
}

test_bond_rxe() {
	local rc=0
	ktest rbond0 rxe_b0 || rc=1
	rmmod rbond_ktest 2>/dev/null
	log_test $rc "bond <-> plain rxe: SEND/RECV, WRITE, READ, atomics"
	rc=0
	ktest rxe_b0 rbond0 || rc=1
	rmmod rbond_ktest 2>/dev/null
	log_test $rc "plain rxe <-> bond (bond as responder first)"
}

# Per-member DMA (drivers/rdma_bond/rbond_dma.c): a kernel consumer's
# DMA-lkey buffers are mapped for the member device of the rail that
# carries them.  rxe rails do virtual DMA (the mapping is the address);
# dma_always=1 runs the mapping path for them too: data still intact, and
# every mapping undone once the QPs are gone.
test_dma_always() {
	local rc=0 m0 u0 m1 u1 p=/sys/module/rdma_bond/parameters/dma_always
	if [ ! -f $p ]; then
		log_test 1 "per-member DMA: no dma_always parameter"
		return
	fi
	echo 1 > $p
	m0=$(mrail_stat dma_mapped); u0=$(mrail_stat dma_unmapped)
	rbond_create rbondb b || { log_test 1 "bonds"; echo 0 > $p; return; }
	ktest rbond0 rbondb keep=1 || rc=1
	m1=$(mrail_stat dma_mapped)
	rmmod rbond_ktest
	ktest rbond0 rxe_b0 || rc=1
	rmmod rbond_ktest 2>/dev/null
	check_ok rdma link delete rbondb
	log_test $rc "dma_always=1: bond <-> bond and bond <-> rxe, every check passed"
	m1=$(mrail_stat dma_mapped); u1=$(mrail_stat dma_unmapped)
	log "dma_mapped $m0 -> $m1, dma_unmapped $u0 -> $u1"
	[ $((m1 - m0)) -gt 0 ] && [ $((m1 - m0)) = $((u1 - u0)) ]
	log_test $? "dma_always=1: kernel SGEs mapped per member ($((m1 - m0))), every one unmapped"
	echo 0 > $p
}

test_bond_bond
test_bond_rxe
test_dma_always
exit $ret
