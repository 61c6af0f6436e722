#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Lifecycle with live kernel QPs on the bonds (rbond_ktest keep=1):
#   - a rail that is not the QPs' home goes away (rdma link delete rxe_a1)
#   - the home rail goes away (netdev deleted: rxe unregisters): the QPs
#     move their home to the remaining rail first and stay RTS; the bond
#     keeps that rail, which becomes primary
#   - the last rail goes away: the bond unregisters itself
#   - rmmod rdma_bond with QPs alive: kernel consumers get their remove()
#   - rdma link delete while a process holds a context with a QP on the bond
#     (ibv_rc_pingpong server through the provider): disassociated, no hang
#
#   rbond0 ─ rxe_a0 (a0) <==== veth ====> (b0) rxe_b0 ─ rbondb
#          ─ rxe_a1 (a1) <==== veth ====> (b1) rxe_b1 ─
. "$(dirname "$0")/lib.sh"
require_guest
require_module
KT=$RBOND_TOP/selftests/kmod/rbond_ktest.ko
[ -f "$KT" ] || skip "rbond_ktest.ko not built (make modules)"
RBOND_NRAILS=3
topo_up || fail "topology"
trap 'rmmod rbond_ktest 2>/dev/null; topo_down' EXIT
rbond_install || fail "install"
SYS=/sys/class/infiniband

setup() {
	rbond_create rbond0 a && rbond_create rbondb b &&
		insmod "$KT" dev_a=rbond0 dev_b=rbondb keep=1
}

test_member_removal() {
	local rc=0
	setup || { log_test 1 "setup"; return; }
	check_ok rdma link delete rxe_a1 || rc=1
	[ "$(cat $SYS/rbond0/bond/num_rails)" = 2 ] || rc=1
	log_test $rc "non-home rail removed under live QPs"

	rc=0
	# deletes the veth pair a0/b0: rxe_a0 and rxe_b0 unregister themselves,
	# both bonds lose their primary (the QPs' home) rail; the removal
	# moves the QPs' home to rail 2 first (home_remove_move), so the
	# kernel QPs stay connected (RTS), not flushed
	m=$(dmesg_mark)
	ip link del a0 || rc=1
	for i in $(seq 50); do [ -e $SYS/rxe_a0 ] || break; sleep 0.1; done
	[ -e $SYS/rxe_a0 ] && rc=1
	sed 's/^/#   /' $SYS/rbond0/bond/rails
	[ "$(cat $SYS/rbond0/bond/num_rails)" = 1 ] || rc=1
	grep -q '^2 rxe_a2 a2' $SYS/rbond0/bond/rails || rc=1
	[ "$(cat $SYS/rbond0/bond/primary)" = 2 ] || rc=1
	rdma link show rbond0/1 | grep -q 'netdev a2' || rc=1
	log_test $rc "home rail's netdev deleted: rail 2 becomes primary"

	rc=0
	for i in $(seq 50); do
		[ "$(dmesg_since "$m" | grep -c 'home moved to rail 2')" -ge 2 ] && break
		sleep 0.1
	done
	dmesg_since "$m" | grep -E 'removed|home moved' | sed 's/^/#   /'
	for b in rbond0 rbondb; do
		dmesg_since "$m" | grep -q "$b: QP .*home moved to rail 2" || rc=1
		rdma res show qp link $b/1 | grep 'type RC' | sed 's/^/#   /'
		rdma res show qp link $b/1 | grep 'type RC' | grep -q 'state RTS' || rc=1
	done
	log_test $rc "home rail's netdev deleted: both hosts' kernel QPs moved home to rail 2, still RTS"

	rc=0
	check_ok rdma link delete rxe_a2 || rc=1
	for i in $(seq 50); do [ -e $SYS/rbond0 ] || break; sleep 0.1; done
	[ -e $SYS/rbond0 ] && { log "rbond0 still there"; rc=1; }
	dmesg | grep -q 'rbond_ktest: rbond0 going away' || rc=1
	log_test $rc "last rail gone: bond unregisters, consumers released"
	rmmod rbond_ktest
}

test_rmmod_live() {
	local rc=0
	# a0/b0 went with the veth pair; rbondb's primary is now rail 1 (b1)
	check_ok rdma link add rxe_a1 type rxe netdev a1 || rc=1
	check_ok rdma link add rbond0 type bond netdev a1 || rc=1
	_wait_gid rbond0 || rc=1
	insmod "$KT" dev_a=rbond0 dev_b=rbondb keep=1 || rc=1
	rmmod rdma_bond || rc=1
	[ -e $SYS/rbond0 ] || [ -e $SYS/rbondb ] && rc=1
	lsmod | grep -q '^rdma_bond' && rc=1
	dmesg | grep -q 'rbond_ktest: rbondb going away' || rc=1
	rmmod rbond_ktest || rc=1
	log_test $rc "rmmod rdma_bond with live kernel QPs"
}

test_user_context() {
	local rc=0 pid
	if [ ! -f "$RBOND_PROVIDER-rdmav34.so" ] || ! command -v ibv_rc_pingpong >/dev/null; then
		log_test $KSFT_SKIP "delete with a user context open (no provider)"
		return
	fi
	rbond_create rbond0 a && _wait_gid rbond0 || { log_test 1 "setup"; return; }
	RDMAV_DRIVERS=$RBOND_PROVIDER ibv_rc_pingpong -d rbond0 -g 1 -p 18999 >/tmp/.pp 2>&1 &
	pid=$!
	sleep 3
	kill -0 $pid 2>/dev/null || { sed 's/^/#   /' /tmp/.pp; rc=1; }
	timeout 120 rdma link delete rbond0 || { log "delete hung or failed"; rc=1; }
	[ -e $SYS/rbond0 ] && rc=1
	kill $pid 2>/dev/null; wait $pid 2>/dev/null
	log_test $rc "rdma link delete with a user context and QP open"
}

test_user_context
test_member_removal
test_rmmod_live
exit $ret
