#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 100
#
# Teardown under load: multi-rail bond QPs keep a window of striped RDMA
# WRITEs and READs in flight over both (shaped) rails (selftests/progs/
# rbond_teardown: runs of 8 of each, so WQEs also wait in the bond's pending
# queue at the ordering points), and then:
#   c1. rdma link delete of the extra rail (rxe_a1) of the client's bond
#   c2. rdma link delete of its home rail (rxe_a0)
#       -> every posted WQE completes, in posting order with its wr_id:
#          successes, then (from the first error on) only errors; no hang
#   a.  the client is killed (SIGKILL) with WQEs in flight, twice
#   b.  destroy_qp with a full window posted, ten rounds
#   d1. rmmod rdma_bond with both processes' QPs busy: no hang, unloads
#   d2. member device removal: the veth of rail 1 is deleted (rxe_a1 and
#       rxe_b1 unregister): every WQE completes as in c
#   e.  (first) the server moves its QP to the error state: the client's
#       WRITEs fail and none reaches the server's memory over any rail;
#       both QPs go to RESET and are connected again: renegotiated, striped,
#       every WRITE succeeds (rbond_teardown -E)
#   e2. as e, the server's QP reset 2 s after the client's (-W 2000): the
#       client's new connection asks for the server's rails while its QP
#       still belongs to the old connection
# After each case the bonds are deleted and rebuilt (no hang), and the
# kernel log must stay clean (selftests/run.sh).
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0,1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
[ -x "$PROGS/rbond_teardown" ] || skip "rbond_teardown not built (make progs)"
prov_up both

P=/sys/module/rdma_bond/parameters
T=$PROGS/rbond_teardown
ARGS="-s 131072 -n 16 -u $RBOND_QP_TIMEOUT"
RATE=${TD_RATE:-40mbit}
CASES=" $(echo "${TD_CASES:-e e2 c1 c2 a b d1 d2}" | tr , " ") "	# a subset: TD_CASES=c1,d2
want() { [[ "$CASES" == *" $1 "* ]]; }
SYS=/sys/class/infiniband

shape() { local d; for d in a0 a1 b0 b1; do [ -e /sys/class/net/$d ] && rail_shape $d "$RATE"; done; true; }

setup() {	# multi-rail on, both bonds over both rails, rails shaped
	echo 1 > $P/multirail || return 1
	shape
}

# rebuild: delete both bonds (must not hang), re-create missing rxe rails
rebuild() {
	local b r s rc=0
	for b in rbond0 rbond1; do
		[ -e $SYS/$b ] || continue
		timeout 120 rdma link delete $b || { log "rdma link delete $b failed or hung"; rc=1; }
	done
	lsmod | grep -q '^rdma_bond' || rbond_install || rc=1
	for r in 0 1; do
		for s in a b; do
			[ -e /sys/class/net/$s$r ] || continue
			[ -e $SYS/rxe_$s$r ] || _rxe_add $s$r || rc=1
			_wait_gid rxe_$s$r || rc=1
		done
	done
	prov_bond rbond0 a && prov_bond rbond1 b || rc=1
	setup || rc=1
	return $rc
}

PORT=19700
NOT_STRIPED=0
# start_load: server on rbond1, client on rbond0; sets SPID CPID; waits
# until completions flow and the client's QP is striped
start_load() {
	local i s0
	PORT=$((PORT + 1))
	rm -f /tmp/td_flow
	s0=$(mrail_stat striped)
	timeout -k 5 300 "$T" -d rbond1 -p $PORT $ARGS >/tmp/td.srv 2>&1 &
	SPID=$!
	prov_wait_listen $PORT 60 || log "server not listening"
	timeout -k 5 300 "$T" -d rbond0 -p $PORT $ARGS -t ${1:-60} -T 60 \
		-F /tmp/td_flow "$(prov_ip rbond1)" >/tmp/td.cli 2>&1 &
	CPID=$!
	for i in $(seq 600); do [ -e /tmp/td_flow ] && break; sleep 0.1; done
	[ -e /tmp/td_flow ] || { log "no completions flowing"; sed 's/^/#   /' /tmp/td.cli; return 1; }
	for i in $(seq 300); do [ "$(mrail_stat striped)" -gt "$((s0 + 16))" ] && break; sleep 0.1; done
	# the negotiation and key translation are not this test's subject:
	# without striping a case still runs (and must pass), it says so
	if [ "$(mrail_stat striped)" -le "$((s0 + 16))" ]; then
		log "WARNING: traffic not striped: $(tr '\n' ' ' < $P/mrail_stats)"
		log "rbond0: $(rdma statistic show link rbond0/1 2>/dev/null |
			       grep -oE 'rail[0-9]_tx_wqes [0-9]+' | tr '\n' ' ')"
		tail -n 3 /tmp/td.cli | sed 's/^/#   client: /'
		NOT_STRIPED=$((NOT_STRIPED + 1))
	fi
	sleep 1
	log "$(date +%T) traffic flows, striped"
}

# wait_pid PID SECONDS: wait for PID to exit within SECONDS; its status
wait_pid() {
	local i
	for i in $(seq $(($2 * 10))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$1" 2>/dev/null; then
		log "pid $1 still running after $2 s"; kill -9 "$1" 2>/dev/null
		wait "$1" 2>/dev/null; return 124
	fi
	wait "$1"
}

# the client's verdict: every WQE completed, in order (rc 0 of rbond_teardown)
check_client() {	# check_client RC LABEL
	local res
	res=$(grep '^result' /tmp/td.cli)
	log "$2: ${res:-no result}"
	[ "$1" = 0 ] || sed 's/^/#   client: /' /tmp/td.cli | tail -n 8
	[ "$1" = 0 ] && grep -q 'order ok' <<< "$res"
}

# c1/c2/d2: remove something under load, every WQE completes in order
under_load() {	# under_load LABEL CMD...
	local label=$1 rc crc; shift
	rc=0
	start_load 120 || rc=1
	log "$(date +%T) $label: $*"
	timeout 120 "$@" || { log "$* failed or hung"; rc=1; }
	log "$(date +%T) done; the client stops posting"
	# to rbond_teardown itself (CPID is its timeout(1))
	kill -USR1 $(pgrep -P $CPID) 2>/dev/null
	wait_pid $CPID 90; crc=$?
	check_client $crc "$label" || rc=1
	kill -TERM $SPID 2>/dev/null
	wait_pid $SPID 30 >/dev/null
	log_test $rc "$label under multi-rail load: every WQE completes in order, no hang"
}

setup || fail "setup"

# error_case LABEL [SERVER_ARGS]: rbond_teardown -E (QP to error, RESET,
# connect again)
error_case() {
	PORT=$((PORT + 1))
	timeout -k 5 300 "$T" -d rbond1 -p $PORT $ARGS -E ${2:-} >/tmp/td.srv 2>&1 &
	SPID=$!
	prov_wait_listen $PORT 60 || log "server not listening"
	timeout -k 5 300 "$T" -d rbond0 -p $PORT $ARGS -E "$(prov_ip rbond1)" >/tmp/td.cli 2>&1
	crc=$?
	wait_pid $SPID 60; src=$?
	grep -E '^(not )?ok' /tmp/td.cli | sed 's/^/#   /'
	[ $crc = 0 ] && [ $src = 0 ] || { grep '^#' /tmp/td.cli | sed 's/^/#   client: /'; sed 's/^/#   server: /' /tmp/td.srv | tail -4; false; }
	log_test $? "$1"
}
want e && error_case "e. QP to error: no access over any rail; RESET and reuse renegotiates"
# e2: the server's QP is reset 2 s after the client's: the client's new
# connection asks it for its rails while it still belongs to the old one
# (the race behind a flushed first WQE after a reconnect, once in CI)
# (its rejoin QP_REQs reached the client's QP between its RESET and its
# RTR and were answered: the server's new connection dropped that answer,
# a control message not for it - bad_msgs - and the client had learnt the
# old connection's nonce)
if want e2; then
	b0=$(mrail_stat bad_msgs)
	error_case "e2. as e, the server resets 2 s after the client" "-W 2000"
	[ "$(mrail_stat bad_msgs)" = "$b0" ]
	log_test $? "e2. no control message of the old connection taken or answered (bad_msgs +$(($(mrail_stat bad_msgs) - b0)))"
fi

if want c1; then
	under_load "c1. rdma link delete of the extra rail" rdma link delete rxe_a1
	rebuild; log_test $? "c1. bonds deleted and rebuilt"
fi
if want c2; then
	under_load "c2. rdma link delete of the home rail" rdma link delete rxe_a0
	rebuild; log_test $? "c2. bonds deleted and rebuilt"
fi

if want a; then
rc=0
for k in 1 2; do
	start_load 30 || rc=1
	sleep "0.$((RANDOM % 10))"
	kill -9 $(pgrep -P $CPID); wait $CPID 2>/dev/null	# rbond_teardown
	wait_pid $SPID 60 || { log "server did not finish after the client was killed"; rc=1; }
done
rebuild || rc=1
log_test $rc "a. client killed (SIGKILL) twice with WQEs in flight"
fi

if want b; then
rc=0
PORT=$((PORT + 1))
timeout -k 5 300 "$T" -d rbond1 -p $PORT $ARGS -D 10 >/tmp/td.srv 2>&1 &
SPID=$!
prov_wait_listen $PORT 60 || log "server not listening"
timeout -k 5 300 "$T" -d rbond0 -p $PORT $ARGS -D 10 "$(prov_ip rbond1)" >/tmp/td.cli 2>&1
crc=$?
wait_pid $SPID 60; src=$?
log "b. $(grep '^result' /tmp/td.cli)"
[ $crc = 0 ] && [ $src = 0 ] || { rc=1; sed 's/^/#   client: /' /tmp/td.cli | tail -5; sed 's/^/#   server: /' /tmp/td.srv | tail -5; }
rebuild || rc=1
log_test $rc "b. destroy_qp with a full window of WQEs pending, 10 rounds"
fi

if want d1; then
rc=0
start_load 240 || rc=1	# still posting when rmmod comes (start_load waits)
log "$(date +%T) rmmod"
t0=$(date +%s)
timeout 120 rmmod rdma_bond || { log "rmmod failed or hung"; rc=1; }
# not waiting for the processes to end on their own (they post for 240 s)
[ $(($(date +%s) - t0)) -lt 60 ] || { log "rmmod took $(($(date +%s) - t0)) s"; rc=1; }
lsmod | grep -q '^rdma_bond' && { log "rdma_bond still loaded"; rc=1; }
wait_pid $CPID 60; crc=$?
wait_pid $SPID 60; src=$?
log "d1. client rc $crc, server rc $src: $(tail -n 1 /tmp/td.cli)"
[ $crc = 124 ] || [ $src = 124 ] && rc=1
rebuild || rc=1
log_test $rc "d1. rmmod rdma_bond under multi-rail load: unloads, processes not stuck"
fi

if want d2; then
under_load "d2. member device removal (veth of rail 1 deleted)" ip link del a1
for i in $(seq 50); do [ -e $SYS/rxe_a1 ] || [ -e $SYS/rxe_b1 ] || break; sleep 0.1; done
for b in rbond0 rbond1; do
	timeout 120 rdma link delete $b || { log "rdma link delete $b failed or hung"; ret=1; }
done
timeout 120 rmmod rdma_bond
! lsmod | grep -q '^rdma_bond'
log_test $? "d2. bonds deleted, module unloads"
fi
log "cases whose traffic was not striped: $NOT_STRIPED"
exit $ret
