#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# rdma link add/delete of rdma_bond devices: autoload, create, add rail,
# sysfs, port attributes, every refusal (with no state change), delete,
# rmmod with bonds present.
#
#   host A: rbond0 = [ rxe_a0 (a0) , rxe_a1 (a1) ]      host B: rxe_b0, rxe_b1
#   spare:  x0..x4 veth (peers y0..y4) with rxe_x0..rxe_x4, c0 (no RDMA device)
#
#   a0 <==== veth ====> b0      x0..x4 <==> y0..y4 (rxe only on x*)
#   a1 <==== veth ====> b1      c0 <==> d0 (no rxe)
. "$(dirname "$0")/lib.sh"
require_guest
require_module
require_cmd rdma
topo_up || fail "topology"
spare_down() {
	local i
	for i in 0 1 2 3 4; do
		rdma link delete "rxe_x$i" 2>/dev/null
		ip link del "x$i" 2>/dev/null
	done
	ip link del c0 2>/dev/null
	true
}
trap 'spare_down; topo_down' EXIT

SYS=/sys/class/infiniband

# state of the RDMA world, to prove a refusal changed nothing
snapshot() {
	rdma dev show | sort
	for d in "$SYS"/*/bond; do [ -d "$d" ] && cat "$d/rails"; done
}

# refuse PATTERN DESCRIPTION ARGS...: rdma link add ARGS must fail with
# PATTERN and leave everything as it was
refuse() {
	local pat=$1 desc=$2 before after rc=0; shift 2
	before=$(snapshot)
	check_fail "$pat" rdma link add "$@" || rc=1
	after=$(snapshot)
	if [ "$before" != "$after" ]; then
		log "state changed:"; diff <(echo "$before") <(echo "$after") | sed 's/^/#   /'
		rc=1
	fi
	log_test $rc "refused: $desc"
}

test_autoload_create() {
	local rc=0
	rbond_install || fail "install"
	rbond_unload
	lsmod | grep -q '^rdma_bond' && rc=1
	check_ok rdma link add rbond0 type bond netdev a0 || rc=1
	lsmod | grep -q '^rdma_bond' || { log "module not autoloaded"; rc=1; }
	[ -d $SYS/rbond0/bond ] || rc=1
	[ "$(cat $SYS/rbond0/bond/abi_version 2>/dev/null)" = 1 ] || rc=1
	[ "$(cat $SYS/rbond0/bond/num_rails)" = 1 ] || rc=1
	rdma link show rbond0/1 | grep -q 'netdev a0' || rc=1
	log_test $rc "autoload and create rbond0 over a0"
}

test_add_rail() {
	local rc=0 rate1 rate2
	rate1=$(cat $SYS/rbond0/ports/1/rate)
	check_ok rdma link add rbond0 type bond netdev a1 || rc=1
	[ "$(cat $SYS/rbond0/bond/num_rails)" = 2 ] || rc=1
	log "rails:"; sed 's/^/#   /' $SYS/rbond0/bond/rails
	grep -qx '0 rxe_a0 a0 active' $SYS/rbond0/bond/rails || rc=1
	grep -qx '1 rxe_a1 a1 active' $SYS/rbond0/bond/rails || rc=1
	[ "$(cat $SYS/rbond0/bond/primary)" = 0 ] || rc=1
	rate2=$(cat $SYS/rbond0/ports/1/rate)
	log "rate with one rail: $rate1, with two: $rate2 (rxe_a0: $(cat $SYS/rxe_a0/ports/1/rate))"
	[ "${rate2%% *}" -eq $(( 2 * ${rate1%% *} )) ] || { log "speed is not the sum of the rails"; rc=1; }
	log_test $rc "add rail a1: two rails, speed = sum of rails"
}

# log_ms_bounds FILE: a time tunable takes 0 and 3600000, refuses
# 3600001, 4294967295 (ERANGE) and -1 (EINVAL) without a change; put back
log_ms_bounds() {
	local f=$1 v0 v err rc=0
	v0=$(cat "$f")
	for v in 0 3600000; do
		echo "$v" > "$f" && [ "$(cat "$f")" = "$v" ] ||
			{ log "$f: $v not taken"; rc=1; }
	done
	for v in 3600001 4294967295 -1; do
		err=$( (echo "$v" > "$f") 2>&1)
		case "$v:$err" in
		-1:*"Invalid argument"*) ;;
		-1:*) log "$f: -1: '${err:-taken}', not EINVAL"; rc=1 ;;
		*:*"out of range"*) ;;
		*) log "$f: $v: '${err:-taken}'"; rc=1 ;;
		esac
		[ "$(cat "$f")" = 3600000 ] || { log "$f: $v changed it to $(cat "$f")"; rc=1; }
	done
	echo "$v0" > "$f"
	return $rc
}

test_port_and_sysfs() {
	local rc=0 g0 gb
	grep -q ACTIVE $SYS/rbond0/ports/1/state || rc=1
	grep -q LinkUp $SYS/rbond0/ports/1/phys_state || rc=1
	[ "$(cat $SYS/rbond0/ports/1/link_layer)" = Ethernet ] || rc=1
	# GIDs of the primary rail's netdev
	g0=$(cat $SYS/rxe_a0/ports/1/gids/1); gb=$(cat $SYS/rbond0/ports/1/gids/1)
	[ "$g0" = "$gb" ] || { log "GID 1: bond $gb, rxe_a0 $g0"; rc=1; }
	grep -q '^\[adaptive\]' $SYS/rbond0/bond/policy || rc=1
	echo round-robin > $SYS/rbond0/bond/policy || rc=1
	grep -q '\[round-robin\]' $SYS/rbond0/bond/policy || rc=1
	echo bogus > $SYS/rbond0/bond/policy 2>/dev/null && rc=1
	echo adaptive > $SYS/rbond0/bond/policy
	echo strict > $SYS/rbond0/bond/ordering || rc=1
	echo 131072 > $SYS/rbond0/bond/stripe_threshold || rc=1
	[ "$(cat $SYS/rbond0/bond/stripe_threshold)" = 131072 ] || rc=1
	[ "$(cat $SYS/rbond0/bond/rail_window)" = 1048576 ] || rc=1
	echo 0x200000 > $SYS/rbond0/bond/rail_window || rc=1
	[ "$(cat $SYS/rbond0/bond/rail_window)" = 2097152 ] || rc=1
	# not a u32: refused, the value stays
	for bad in -1 4294967296 12abc ""; do
		echo "$bad" > $SYS/rbond0/bond/rail_window 2>/dev/null && rc=1
		echo "$bad" > $SYS/rbond0/bond/stripe_threshold 2>/dev/null && rc=1
	done
	[ "$(cat $SYS/rbond0/bond/rail_window)" = 2097152 ] || rc=1
	[ "$(cat $SYS/rbond0/bond/stripe_threshold)" = 131072 ] || rc=1
	# times: 0 (never) to an hour; beyond, ERANGE and the value stays
	for t in failover_stall_ms failover_silent_ms; do
		log_ms_bounds "$SYS/rbond0/bond/$t" || rc=1
	done
	# a stable node GUID derived from the primary's
	[ "$(cat $SYS/rbond0/node_guid)" != "$(cat $SYS/rxe_a0/node_guid)" ] || rc=1
	rdma statistic show link rbond0/1 | grep -q rail1_tx_wqes || rc=1
	log_test $rc "port ACTIVE, Ethernet, primary's GIDs, sysfs tunables, counters"
}

# rails follow their member ports (PORT_ERR/PORT_ACTIVE events)
test_rail_state() {
	local rc=0 i
	wait_for() { for i in $(seq 50); do eval "$1" && return 0; sleep 0.1; done; return 1; }
	ip link set a1 down
	wait_for "grep -qx '1 rxe_a1 a1 down (link down)' $SYS/rbond0/bond/rails" || rc=1
	grep -q ACTIVE $SYS/rbond0/ports/1/state || rc=1
	log "a1 down: rate $(cat $SYS/rbond0/ports/1/rate), state $(cat $SYS/rbond0/ports/1/state)"
	[ "$(cut -d' ' -f1 $SYS/rbond0/ports/1/rate)" = 10 ] || rc=1
	ip link set a0 down
	wait_for "grep -q DOWN $SYS/rbond0/ports/1/state" || rc=1
	log "a0, a1 down: state $(cat $SYS/rbond0/ports/1/state)"
	ip link set a0 up; ip link set a1 up
	wait_for "grep -q ACTIVE $SYS/rbond0/ports/1/state" || rc=1
	wait_for "grep -qx '1 rxe_a1 a1 active' $SYS/rbond0/bond/rails" || rc=1
	log_test $rc "port ACTIVE while any rail is; DOWN with none; speed follows"
}

spare_up() {
	local i
	for i in 0 1 2 3 4; do
		ip link add "x$i" type veth peer name "y$i" || return 1
		ip link set "x$i" up; ip link set "y$i" up
		rdma link add "rxe_x$i" type rxe netdev "x$i" || return 1
	done
	ip link add c0 type veth peer name d0 && ip link set c0 up
}

test_refusals() {
	spare_up || { log_test 1 "spare devices"; return; }
	refuse 'No such device' "netdev without an RDMA device" rbondx type bond netdev c0
	refuse 'busy' "device already a rail (of rbond0)" rbondx type bond netdev a0
	refuse 'busy' "device already a rail, same bond" rbond0 type bond netdev a1
	refuse 'exists' "name of a non-bond device (rxe_b0)" rxe_b0 type bond netdev b1
	refuse 'Invalid argument' "name the core rejects (rb%d)" 'rb%d' type bond netdev b1
	refuse 'No such device' "netdev that does not exist" rbondx type bond netdev nosuch0
	# too many rails: rbondx over x0..x3, then x4
	local i rc=0
	for i in 0 1 2 3; do check_ok rdma link add rbondx type bond netdev "x$i" || rc=1; done
	[ "$(cat $SYS/rbondx/bond/num_rails 2>/dev/null)" = 4 ] || rc=1
	log_test $rc "four rails on one bond"
	refuse 'No space left' "fifth rail" rbondx type bond netdev x4
	# a bond is not a rail: the bond's own netdev names its primary, a rail
	refuse 'busy' "a bond's netdev (primary of rbondx)" rbondy type bond netdev x0
	log_test $KSFT_SKIP "mixed link layers (no non-RoCE RDMA device in the guest)"
	check_ok rdma link delete rbondx
	log_test $? "delete the four-rail bond"
}

test_delete_recreate() {
	local rc=0
	check_ok rdma link delete rbond0 || rc=1
	[ -e $SYS/rbond0 ] && rc=1
	# rails are free again
	check_ok rdma link add rbond0 type bond netdev a1 || rc=1
	grep -qx '0 rxe_a1 a1 active' $SYS/rbond0/bond/rails || rc=1
	check_ok rdma link add rbond1 type bond netdev a0 || rc=1
	log_test $rc "delete frees the rails; re-create"
}

test_rmmod_with_bonds() {
	local rc=0
	rmmod rdma_bond || rc=1
	[ -e $SYS/rbond0 ] || [ -e $SYS/rbond1 ] && rc=1
	[ -e $SYS/rxe_a0 ] && [ -e $SYS/rxe_a1 ] || rc=1
	log_test $rc "rmmod with two bonds present removes them, rails stay"
}

# The module parameters are the defaults of bonds created later, parsed by
# the same option table as the sysfs tunables: a bad value refuses the load.
test_module_params() {
	local rc=0 P=/sys/module/rdma_bond/parameters
	local out

	out=$(modprobe rdma_bond policy=bogus 2>&1) && rc=1
	[ -e /sys/module/rdma_bond ] && { echo "loaded with policy=bogus"; rc=1; }
	echo "$out" | grep -q "Invalid argument\|invalid" ||
		{ echo "modprobe said: $out"; rc=1; }
	modprobe rdma_bond stripe_threshold=12abc 2>/dev/null && rc=1
	[ -e /sys/module/rdma_bond ] && rmmod rdma_bond
	modprobe rdma_bond failover_silent_ms=3600001 2>/dev/null && rc=1
	[ -e /sys/module/rdma_bond ] && { echo "loaded with failover_silent_ms=3600001"; rmmod rdma_bond; rc=1; }
	check_ok modprobe rdma_bond policy=round-robin ordering=strict \
		stripe_threshold=0x20000 rail_window=0 || rc=1
	[ "$(cat $P/policy)" = round-robin ] || { cat $P/policy; rc=1; }
	[ "$(cat $P/stripe_threshold)" = 131072 ] || rc=1
	check_ok rdma link add rbond0 type bond netdev a0 || rc=1
	grep -q '\[round-robin\]' $SYS/rbond0/bond/policy || rc=1
	grep -q '\[strict\]' $SYS/rbond0/bond/ordering || rc=1
	[ "$(cat $SYS/rbond0/bond/stripe_threshold)" = 131072 ] || rc=1
	[ "$(cat $SYS/rbond0/bond/rail_window)" = 0 ] || rc=1
	# a bond's own tunable does not change the default
	echo weighted > $SYS/rbond0/bond/policy || rc=1
	[ "$(cat $P/policy)" = round-robin ] || rc=1
	rmmod rdma_bond || rc=1
	log_test $rc "module parameters: defaults of new bonds, bad values refuse the load"
}

test_autoload_create
test_add_rail
test_port_and_sysfs
test_rail_state
test_refusals
test_delete_recreate
test_rmmod_with_bonds
test_module_params
exit $ret
