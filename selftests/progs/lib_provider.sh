#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/progs/lib_provider.sh - helpers of the provider selftests
# (selftests/test_provider_*.sh); sourced after selftests/lib.sh.
#
# Names used by those tests (loop topology):
#   rbond0 = bond over a0..aN (host A), rbond1 = bond over b0..bN (host B),
#   rail 0 addresses 10.0.1.1 (A) / 10.0.1.2 (B); the bond's GID index 1 is
#   its primary rail's IPv4 GID.

PROGS=$RBOND_TOP/selftests/progs
PROV_PORT=${PROV_PORT:-19000}

prov_require() {	# prov_require [needs_module]
	require_guest
	[ -x "$PROGS/rbond_verify" ] && [ -x "$PROGS/rbond_badinput" ] ||
		skip "test programs not built (make progs)"
	if [ "${1:-module}" = module ]; then
		require_module
		require_provider
	fi
	provider_env
}

# prov_bond NAME SIDE: build bond NAME over all rails of SIDE, wait for its GID
prov_bond() {
	rbond_create "$1" "$2" || { log "rdma link add $1 over side $2 failed"; return 1; }
	_wait_gid "$1" || { log "$1 has no IPv4 GID at index 1"; return 1; }
}

# prov_mrail: prov_up both, multi-rail striping on; P = the module's parameters
prov_mrail() {
	prov_require
	require_cmd ib_write_bw
	prov_up both
	P=/sys/module/rdma_bond/parameters
	echo 1 > $P/multirail || fail "cannot enable multirail"
}

# prov_fo_up RATE N: prov_mrail, then every rail shaped to RATE (sets
# RATE, and N: the failover tests' 1 MiB chunks per rbond_verify phase)
prov_fo_up() {
	local d
	prov_mrail
	RATE=$1 N=$2
	for d in a0 a1 b0 b1; do rail_shape $d "$RATE"; done
}

prov_up() {	# prov_up [both|a]: topology, module, bonds
	topo_up || fail "topology"
	rbond_install || fail "cannot install the module into the guest"
	prov_bond rbond0 a || fail "bond rbond0"
	if [ "${1:-both}" = both ]; then
		prov_bond rbond1 b || fail "bond rbond1"
	fi
}

# ip of the host that owns DEV on rail 0 (rbond0/rxe_a* -> A, else B)
prov_ip() {
	case "$1" in
	rbond0|rxe_a*|*_a) rail_ip 0 a ;;
	*) rail_ip 0 b ;;
	esac
}

prov_wait_listen() {	# prov_wait_listen PORT SECONDS: wait for a TCP listener
	local i
	for i in $(seq $(($2 * 10))); do
		ss -Htln "sport = :$1" 2>/dev/null | grep -q . && return 0
		sleep 0.1
	done
	return 1
}

# prov_cs SRV_DEV CLI_DEV OUT CMD ARGS...: run CMD as server on SRV_DEV and
# as client on CLI_DEV (connecting to SRV_DEV's host address), both under
# timeout; client output in OUT, server output in OUT.srv.  Returns non-zero
# if either side failed.
prov_cs() {
	local sdev=$1 cdev=$2 out=$3 cmd=$4 spid rc src; shift 4
	PROV_PORT=$((PROV_PORT + 1))
	timeout -k 5 "${PROV_TIMEOUT:-240}" "$cmd" -d "$sdev" -p "$PROV_PORT" "$@" \
		>"$out.srv" 2>&1 &
	spid=$!
	prov_wait_listen "$PROV_PORT" 60 || log "server on $sdev not listening on $PROV_PORT"
	timeout -k 5 "${PROV_TIMEOUT:-240}" "$cmd" -d "$cdev" -p "$PROV_PORT" "$@" \
		"$(prov_ip "$sdev")" >"$out" 2>&1
	rc=$?
	wait $spid; src=$?
	# rbond_stream's lost atomic reply, checked by both (stream_ok in lib.sh)
	[ $rc = 3 ] && [ $src = 3 ] && return 3
	if [ $rc -ne 0 ] || [ $src -ne 0 ]; then
		log "$cmd $*: client($cdev) rc=$rc server($sdev) rc=$src"
		tail -n 15 "$out" | sed 's/^/#   client: /'
		tail -n 15 "$out.srv" | sed 's/^/#   server: /'
		return 1
	fi
	return 0
}

# prov_stream_report OUT RC: rbond_stream's summary (OUT, OUT.srv) as
# comment lines; when RC is not 0 also every check and diagnostic of both
# sides, so that the reason stands next to the failed test line
prov_stream_report() {
	local pat='^# client:\|^ok'
	[ "$2" = 0 ] || pat='^#\|^ok\|^not ok'
	grep -h "$pat" "$1" "$1.srv" 2>/dev/null | grep -v '^# [0-9]* failed' |
		sed 's/^/# stream: /'
}

# prov_wait_out FILE PATTERN [SECS]: up to SECS (60) for a line matching
# PATTERN (grep -E) in FILE, e.g. a program's "QP connected" before a
# fault that must find the QP connected (a rail that is down when a QP
# connects over it is "Network is unreachable", natively too)
prov_wait_out() {
	local i
	for i in $(seq $((${3:-60} * 10))); do
		grep -qE "$2" "$1" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# prov_fo_start OUT STREAM_SECS [-r]: the failover tests' workload in the
# background, rbond1 <- rbond0: rbond_verify (WRITE/READ/atomics checked,
# output OUT_v) and rbond_stream (sequenced SENDs for STREAM_SECS,
# OUT_s; -r: then RESET, connected again, 8 more iterations); returns
# once rbond_verify's QP is connected (a fault before that is a connect
# error, natively too). Sets VPID and SPID.  Not -r where the stream may
# end while a failover is still under way: a RESET then raced it on 6.12
# (the first WQE after the reconnect flushed; open, testing.rst).
prov_fo_start() {
	local out=$1 secs=$2 again=${3:-}
	rm -f "${out}_v" "${out}_s"
	prov_cs rbond1 rbond0 "${out}_v" "$PROGS/rbond_verify" \
		-u "$RBOND_QP_TIMEOUT" -R -n "$N" -s 1048576 -T 120 &
	VPID=$!
	PROV_PORT=$((PROV_PORT + 5))
	prov_cs rbond1 rbond0 "${out}_s" "$PROGS/rbond_stream" \
		-u "$RBOND_QP_TIMEOUT" -R $again -s 1048576 -w 1 -t "$secs" &
	SPID=$!
	prov_wait_out "${out}_v" '^ok .*QP connected' ||
		log "rbond_verify did not connect"
}

# prov_stream_rxe_lost OUT DEV RETRIES0: whether rbond_stream (OUT, OUT.srv)
# failed only through FETCH_ADDs whose result never arrived - each counted
# once by the server, nothing else wrong on either side - while DEV, the
# rxe device of the client's home rail, retransmitted (completer_retry_err
# past RETRIES0): Soft-RoCE's own bug, which plain rxe shows the same way
# (selftests/repro/rxe_atomic_dupack.sh), not the bond's
prov_stream_rxe_lost() {
	local out=$1 dev=$2 r0=$3
	grep -q 'executed lost' "$out" || return 1
	grep -qE 'executed twice|bytes differ|wr_id 0x|out of order' "$out" &&
		return 1
	grep -q '^not ok' "$out.srv" && return 1
	grep '^not ok' "$out" | grep -qv 'FETCH_ADDs returned their sequence number' &&
		return 1
	[ "$(rdma_hw_stat "$dev" completer_retry_err)" -gt "$r0" ]
}

# prov_bw_start SERVER CLIENT ITERS [TOOL [ARGS...]]: a perftest pair in
# the background, 64 KiB, one QP unless ARGS say otherwise (sets SPID,
# CPID; output in /tmp/prov_bw and /tmp/prov_bw.srv); prov_bw_wait: both
# exit status
prov_bw_start() {
	local s=$1 c=$2 n=$3 tool=${4:-ib_write_bw}
	shift 3; [ $# -gt 0 ] && shift
	PROV_PORT=$((PROV_PORT + 1))
	timeout -k 5 300 $tool -d "$s" -p $PROV_PORT -s 65536 -n "$n" -F \
		-x 1 -u "$RBOND_QP_TIMEOUT" "$@" >/tmp/prov_bw.srv 2>&1 &
	SPID=$!
	prov_wait_listen $PROV_PORT 60 || log "$tool server not listening"
	timeout -k 5 300 $tool -d "$c" -p $PROV_PORT -s 65536 -n "$n" -F \
		-x 1 -u "$RBOND_QP_TIMEOUT" "$@" "$(prov_ip "$s")" >/tmp/prov_bw 2>&1 &
	CPID=$!
}
prov_bw_wait() { local rc; wait $CPID; rc=$?; wait $SPID || rc=1; return $rc; }

# prov_rail_rate N: bytes/s one plain rxe rail N (rxe_bN <- rxe_aN) moves
# with ib_write_bw, 64 KiB, from the time data flows (the baseline of a
# survivor's rate after a rail is lost)
prov_rail_rate() {
	local r=$1 w0 t0 i
	prov_bw_start rxe_b$r rxe_a$r 800
	w0=$(rail_tx_bytes a$r)
	for i in $(seq 200); do
		[ $(($(rail_tx_bytes a$r) - w0)) -gt 1000000 ] && break; sleep 0.1
	done
	w0=$(rail_tx_bytes a$r); t0=$(date +%s.%N)
	prov_bw_wait || log "baseline ib_write_bw on rail $r failed"
	echo "($(rail_tx_bytes a$r) - $w0) / ($(date +%s.%N) - $t0)" | bc
}

# prov_survivor_check WHAT AFTER BASE: a rail that survives a loss for good
# must carry the traffic, not trickle: AFTER (bytes/s on the survivor from
# the fault to the end) at least half of BASE (one plain rail, same guest).
# The issue's target (within 1.2x of the time, >= 0.83) is a speed target:
# printed as a BENCH line, not asserted (TCG makes it vary, 0.77-0.99)
prov_survivor_check() {
	local what=$1 after=$2 base=$3 ratio
	ratio=$(echo "scale=2; $after / $base" | bc)
	log "BENCH survivor after $what: $((after / 1000)) kB/s, one plain rail $((base / 1000)) kB/s: ratio $ratio (target >= 0.83)"
	[ "$(echo "$ratio >= 0.5" | bc)" = 1 ]
	log_test $? "$what: the surviving rail carries the traffic ($ratio x one plain rail, >= 0.5)"
}

# prov_pp_start OUT [SDEV CDEV SECS]: ibv_rc_pingpong -c, 20000 x 4 KiB,
# SDEV (rbond1) <- CDEV (rbond0), in the background for at most SECS (200)
# (sets ppid, pcid)
prov_pp_start() {
	local out=$1 s=${2:-rbond1} c=${3:-rbond0} t=${4:-200}
	PROV_PORT=$((PROV_PORT + 1))
	timeout -k 5 "$t" ibv_rc_pingpong -d "$s" -g 1 -p $PROV_PORT -c \
		-n 20000 -s 4096 >"$out.srv" 2>&1 &
	ppid=$!
	prov_wait_listen $PROV_PORT 60 || log "pingpong server not listening"
	timeout -k 5 "$t" ibv_rc_pingpong -d "$c" -g 1 -p $PROV_PORT -c \
		-n 20000 -s 4096 "$(prov_ip "$s")" >"$out" 2>&1 &
	pcid=$!
}
# prov_pp_outcome OUT CRC SRC: how a pingpong of prov_pp_start ended, both
# sides (client's exit status CRC, server's SRC): "ok" (both finished),
# "error" (a side reported a completion error and none finished: an RC QP
# whose link died fails the side with a send outstanding, while the side
# waiting only for a receive may wait for ever, natively too - which side
# that is depends on when the link went), "hang" (both ended by the
# timeout), else "client X server Y"
prov_pp_outcome() {
	local c s
	c=$(_pp_side "$1" "$2"); s=$(_pp_side "$1.srv" "$3")
	if [ "$c" = ok ] && [ "$s" = ok ]; then echo ok
	elif [ "$c$s" = hanghang ]; then echo hang
	elif [[ "$c$s" =~ ^(error|hang)(error|hang)$ ]]; then echo error
	else echo "client $c server $s"
	fi
}
_pp_side() {	# _pp_side OUT RC
	if [ "$2" = 124 ] || [ "$2" = 137 ]; then echo hang
	elif [ "$2" != 0 ] && grep -qiE 'Failed status|error' "$1"; then echo error
	elif [ "$2" = 0 ]; then echo ok
	else echo "rc$2"
	fi
}
