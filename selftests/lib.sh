#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/lib.sh - helpers for rdma_bond selftests (run inside the guest).
#
# Topologies (names are the same in both, so a test can run in either):
#
#  loop: one guest, two emulated hosts A and B in the root namespace (rxe in
#  6.1 works only there); policy routing makes traffic between A's and B's
#  addresses cross the veth wire instead of lo.
#
#      host A                                   host B
#   rxe_a0 on a0 10.0.1.1/24 <==== veth ====> b0 10.0.1.2/24 rxe_b0  (rail 0)
#   rxe_a1 on a1 10.0.2.1/24 <==== veth ====> b1 10.0.2.2/24 rxe_b1  (rail 1)
#
#  pair: two guests, each a real host with its own kernel; one qemu socket
#  link per rail over the host's loopback.  Guest "a" has a0/a1 and rxe_a0/
#  rxe_a1, guest "b" has b0/b1 and rxe_b0/rxe_b1, same addresses as above.
#
# Exit codes: 0 pass, 1 fail, 4 skip (kselftest).

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

RBOND_TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RBOND_KO=${RBOND_KO:-$RBOND_TOP/drivers/rdma_bond/rdma_bond.ko}
RBOND_PROVIDER=$RBOND_TOP/tools/provider/librbond
RBOND_MTU=${RBOND_MTU:-9000}
RBOND_NRAILS=${RBOND_NRAILS:-2}
# Lossless-fabric emulation: long queues + an ACK timeout (IB encoding:
# 4.096 us * 2^n, 18 = ~1.07 s) above the worst queueing delay.
RBOND_QP_TIMEOUT=${RBOND_QP_TIMEOUT:-18}

# The side this script plays: a or b in the pair topology, a in loop (where
# the script drives both hosts).
rbond_me() { if [ "${RBOND_TOPO:-loop}" = pair ]; then echo "${RBOND_HOST:-a}"; else echo a; fi; }

# Addresses: rail r (0-based), side a|b.
rail_ip() { echo "10.0.$(($1 + 1)).$([ "$2" = a ] && echo 1 || echo 2)"; }

ret=$KSFT_PASS
log() { echo "# $*"; }
log_test() {	# log_test RC DESCRIPTION: record one check's result
	local rc=$1; shift
	if [ "$rc" -eq 0 ]; then
		printf '    TEST: %-60s [ OK ]\n' "$*"
	elif [ "$rc" -eq $KSFT_SKIP ]; then
		printf '    TEST: %-60s [SKIP]\n' "$*"
	else
		printf '    TEST: %-60s [FAIL]\n' "$*"
		ret=$KSFT_FAIL
	fi
}
# log_xfail RC WHY DESCRIPTION: a check that fails now and then through a
# known, open bug (WHY names it): reported [XFAIL] with WHY, not failed.
log_xfail() {
	local rc=$1 why=$2; shift 2
	if [ "$rc" -eq 0 ]; then
		printf '    TEST: %-60s [ OK ]\n' "$*"
	else
		printf '    TEST: %-60s [XFAIL]\n' "$*"
		echo "# XFAIL: $why"
	fi
}
skip() { echo "# SKIP: $*"; exit $KSFT_SKIP; }
fail() { echo "# FAIL: $*"; exit $KSFT_FAIL; }
require_cmd() {
	local c
	for c in "$@"; do command -v "$c" >/dev/null || skip "$c not installed"; done
}
require_guest() { [ -n "${RBOND_GUEST:-}" ] || skip "runs only inside the test VM (tools/vm/run)"; }
require_module() { [ -f "$RBOND_KO" ] || skip "module not built (make modules)"; }
require_provider() { [ -f "$RBOND_PROVIDER-rdmav34.so" ] || skip "provider not built (make provider)"; }

# Expect a command to fail with a given errno text / succeed.
check_ok() { "$@" >/tmp/.out 2>&1; local rc=$?; [ $rc -eq 0 ] || sed 's/^/#   /' /tmp/.out; return $rc; }
check_fail() {	# check_fail PATTERN CMD...: CMD must fail and print PATTERN
	local pat=$1; shift
	if "$@" >/tmp/.out 2>&1; then
		echo "#   unexpectedly succeeded: $*"; return 1
	fi
	grep -qiE -- "$pat" /tmp/.out && return 0
	echo "#   failed without '$pat':"; sed 's/^/#   /' /tmp/.out; return 1
}

# ---- sysctl / routing ---------------------------------------------------

_sysctl() { sysctl -qw "$1=$2" >/dev/null 2>&1; }

# Route traffic between two local addresses over the wire (loop topology).
_route_over() {	# _route_over DEV ME PEER TABLE
	ip route replace "$3" dev "$1" src "$2" table "$4"
	ip rule add pref 20 iif lo from "$2" to "$3" lookup "$4"
}

_link_setup() {	# _link_setup DEV ADDR
	_sysctl "net.ipv4.conf.$1.rp_filter" 0
	_sysctl "net.ipv4.conf.$1.accept_local" 1
	_sysctl "net.ipv6.conf.$1.keep_addr_on_down" 1
	ip link set "$1" mtu "$RBOND_MTU"
	ip addr add "$2/24" dev "$1"
	ip link set "$1" up
}

_rxe_add() {	# _rxe_add NETDEV: create rxe_NETDEV
	rdma link add "rxe_$1" type rxe netdev "$1"
}

_wait_gid() {	# wait until the IPv4 GID (index 1) of an RDMA device appears
	local i
	for i in $(seq 50); do
		[ -e "/sys/class/infiniband/$1/ports/1/gids/1" ] &&
			grep -q ':ffff:' "/sys/class/infiniband/$1/ports/1/gids/1" && return 0
		sleep 0.1
	done
	return 1
}

topo_common() {
	modprobe -q veth; modprobe -q rdma_rxe; modprobe -q sch_tbf; modprobe -q sch_netem
	modprobe -q ib_uverbs; modprobe -q rdma_ucm
	_sysctl net.ipv4.conf.all.rp_filter 0
	_sysctl net.ipv4.conf.default.rp_filter 0
	_sysctl net.ipv4.conf.all.accept_local 1
	_sysctl net.ipv4.conf.default.accept_local 1
}

# Policy routing for one emulated wire between two local netdevs (loop
# topology): packets that arrive on DA/DB are delivered locally; traffic that
# IPA sends to IPB (and back) leaves through DA (DB).  _wire DA DB IPA IPB TABLE
_wire() {
	if ip rule show | grep -q '^0:.*lookup local'; then
		ip rule del pref 0 lookup local
		ip rule add pref 100 lookup local
	fi
	ip rule add pref 10 iif "$1" lookup local
	ip rule add pref 10 iif "$2" lookup local
	_route_over "$1" "$3" "$4" "$5"
	_route_over "$2" "$4" "$3" $(($5 + 1))
	ip neigh replace "$4" dev "$1" nud permanent lladdr "$(cat "/sys/class/net/$2/address")"
	ip neigh replace "$3" dev "$2" nud permanent lladdr "$(cat "/sys/class/net/$1/address")"
}

# _rx_pin DEV RAIL: receive DEV's packets on one CPU (RPS).  A veth hands
# each packet to the backlog of the CPU that transmits it, and the qdisc
# (tbf) dequeues on whichever CPU runs it: with 2 vCPUs one flow's packets
# were processed in parallel and arrived out of order, which rxe (no drops
# anywhere) answered with go-back-N retries and, now and then, a stall of
# seconds.  One CPU per rail keeps each rail in order (a real NIC's queue).
_rx_pin() {
	local f=/sys/class/net/$1/queues/rx-0/rps_cpus
	[ -w "$f" ] || return 0
	printf '%x' $((1 << ($2 % $(nproc)))) > "$f"
}

topo_loop_up() {
	local r da db
	topo_common
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		da=a$r db=b$r
		ip link add "$da" type veth peer name "$db" || return 1
		_link_setup "$da" "$(rail_ip $r a)"
		_link_setup "$db" "$(rail_ip $r b)"
		_wire "$da" "$db" "$(rail_ip $r a)" "$(rail_ip $r b)" $((100 + 2 * r))
		_rx_pin "$da" $r; _rx_pin "$db" $r
		_rxe_add "$da" && _rxe_add "$db" || return 1
	done
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		_wait_gid "rxe_a$r" && _wait_gid "rxe_b$r" || { log "no IPv4 GID on rail $r"; return 1; }
	done
	RBOND_TOPO=loop
}

# The thing a user would try first: rxe over a Linux bond netdev of the rails
# (loop topology, balance-xor with layer3+4 hashing).  Bonds lba (A, 10.0.9.1)
# and lbb (B, 10.0.9.2) over a0.. and b0..; RDMA devices rxe_lba, rxe_lbb.
topo_lbond_up() {
	local r side
	topo_common
	modprobe -q bonding max_bonds=0
	for side in a b; do
		ip link add "lb$side" type bond mode balance-xor xmit_hash_policy layer3+4 miimon 100 ||
			return 1
		ip link set "lb$side" mtu "$RBOND_MTU"
	done
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		ip link add "a$r" type veth peer name "b$r" || return 1
		for side in a b; do
			ip link set "$side$r" mtu "$RBOND_MTU"
			_rx_pin "$side$r" $r
			ip link set "$side$r" master "lb$side" || return 1
		done
	done
	_link_setup lba 10.0.9.1
	_link_setup lbb 10.0.9.2
	_wire lba lbb 10.0.9.1 10.0.9.2 108
	_rxe_add lba && _rxe_add lbb || return 1
	_wait_gid rxe_lba && _wait_gid rxe_lbb || { log "no IPv4 GID on the Linux bond"; return 1; }
	RBOND_TOPO=lbond
}

# pair topology: this guest is host $RBOND_HOST (a or b); its NICs eth0..
# become a0.. (or b0..).
topo_pair_up() {
	local me=${RBOND_HOST:-a} r i dev
	topo_common
	modprobe -q virtio_net
	for i in $(seq 50); do [ -e /sys/class/net/eth$((RBOND_NRAILS - 1)) ] && break; sleep 0.1; done
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		dev=$me$r
		ip link set "eth$r" name "$dev" || return 1
		_link_setup "$dev" "$(rail_ip $r "$me")"
		_rxe_add "$dev" || return 1
	done
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		_wait_gid "rxe_$me$r" || { log "no IPv4 GID on rail $r"; return 1; }
	done
	# The peer's address on each rail resolves statically, as on a
	# lossless fabric and in the loop topology (_wire): a peer that boots
	# later than we start (6.12, one vCPU) must not leave a FAILED
	# neighbour entry behind, which turns our first connect into "No
	# route to host".  Its MAC is the one tools/vm/run gave its NIC r.
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		_pair_neigh "$me$r" || return 1
	done
	RBOND_TOPO=pair
}

# _pair_neigh DEV: the peer's address on DEV's rail, static (pair topology)
_pair_neigh() {
	local me=${1:0:1} r=${1:1} peer
	peer=$([ "$me" = a ] && echo b || echo a)
	ip neigh replace "$(rail_ip $r "$peer")" dev "$1" nud permanent \
		lladdr "$(printf '52:54:00:%02x:%02x:%02x' \
			$(( $(cksum <<< "$peer" | cut -d' ' -f1) % 256 )) 0 "$r")"
}

# ---- pair synchronisation (shared writable directory) ------------------

pair_peer() { [ "$(rbond_me)" = a ] && echo b || echo a; }
pair_dir() { echo "${RBOND_PAIR_DIR:?not in a pair run}"; }
pair_put() { echo "$2" > "$(pair_dir)/$1.tmp" && mv "$(pair_dir)/$1.tmp" "$(pair_dir)/$1"; }
pair_get() {	# pair_get KEY [TIMEOUT_S]: wait for the peer to put KEY
	local f i n=$(( ${2:-120} * 10 ))
	f=$(pair_dir)/$1
	for i in $(seq $n); do [ -f "$f" ] && { cat "$f"; return 0; }; sleep 0.1; done
	return 1
}
pair_sync() {	# pair_sync NAME: barrier between the two guests
	pair_put "$1.$(rbond_me)" 1
	pair_get "$1.$(pair_peer)" "${2:-120}" >/dev/null
}

# pair_bonds_up: on each host, the pair topology, the module and rbond0
# over the host's rails; then wait until the peer has its bond too
pair_bonds_up() {
	[ "${RBOND_TOPO:-}" = pair ] || skip "pair topology only"
	topo_up || fail "topology"
	provider_env
	rbond_install || fail "module install"
	rbond_create rbond0 "$(rbond_me)" && _wait_gid rbond0 ||
		fail "bond over $(rbond_me)'s rails"
	pair_sync bonds_up || fail "peer did not build its bond"
}

# _pair_reap PID KEY: wait for PID, the command of our side of a pair_cs;
# once the peer has put KEY (its side is over) the command gets
# RBOND_PAIR_GRACE (30) s more and is then killed: a side left hanging by
# the other's failure must not hold both guests for its whole timeout.
_pair_reap() {
	local pid=$1 key=$2 grace=${RBOND_PAIR_GRACE:-30} seen=
	while kill -0 "$pid" 2>/dev/null; do
		if [ -z "$seen" ]; then
			[ -f "$(pair_dir)/$key" ] && seen=$SECONDS
		elif [ $((SECONDS - seen)) -ge "$grace" ]; then
			log "peer done, $grace s later still running: killed"
			kill "$pid" 2>/dev/null
			break
		fi
		sleep 0.2
	done
	wait "$pid"
}

# pair_cs NAME CMD ARGS...: CMD as server on host b, as client on host a
# (with b's rail-0 address appended); both return the pair's result (the
# client's output is in /tmp/NAME.cli, the server's in /tmp/NAME.srv).
pair_cs() {
	local name=$1 rc pid; shift
	if [ "$(rbond_me)" = b ]; then
		timeout -k 5 300 "$@" >/tmp/$name.srv 2>&1 &
		pid=$!
		sleep 2; pair_put "$name.srv" up
		_pair_reap $pid "$name.cli_rc"; rc=$?
		pair_put "$name.srv_rc" $rc
		pair_get "$name.cli_rc" 400 >/dev/null
		return $rc
	fi
	pair_get "$name.srv" 120 >/dev/null || return 1
	timeout -k 5 300 "$@" "$(rail_ip 0 b)" >/tmp/$name.cli 2>&1 &
	pid=$!
	_pair_reap $pid "$name.srv_rc"; rc=$?
	pair_put "$name.cli_rc" $rc
	[ "$(pair_get "$name.srv_rc" 400)" = 0 ] || rc=1
	[ $rc -eq 0 ] || sed 's/^/#   /' /tmp/$name.cli | tail -n 15
	return $rc
}

# ---- rails: shaping, link state, counters ------------------------------

# rail_shape DEV RATE [DELAY [LOSS]]: shape DEV's egress (tbf with a long
# queue: lossless-fabric emulation; netem when delay/loss are asked for).
rail_shape() {
	local dev=$1 rate=$2 delay=${3:-} loss=${4:-}
	if [ -n "$delay" ] || [ -n "$loss" ]; then
		tc qdisc replace dev "$dev" root netem rate "$rate" limit 100000 \
			${delay:+delay $delay} ${loss:+loss $loss}
	else
		tc qdisc replace dev "$dev" root tbf rate "$rate" burst 64kb \
			limit "${RBOND_TBF_LIMIT:-4mb}"
	fi
}
# tbf_drops DEV...: packets the DEVs' root qdiscs dropped, summed
tbf_drops() {
	local d n=0
	for d in "$@"; do
		n=$((n + $(tc -s qdisc show dev "$d" root 2>/dev/null |
			awk '/dropped/ { sub(",", "", $7); print $7; exit }' | grep . || echo 0)))
	done
	echo $n
}
# parked_after BOND RAIL CMD...: run CMD (which brings RAIL's port up),
# then wait up to 10 s for BOND's member objects kept for that port to
# go; prints "KEPT LEFT" (railN_parked before CMD, and at the end)
parked_after() {
	local b=$1 r=$2 kept i
	shift 2
	kept=$(rdma_hw_stat "$b" "rail${r}_parked")
	"$@" >&2
	for i in $(seq 50); do
		[ "$(rdma_hw_stat "$b" "rail${r}_parked")" = 0 ] && break
		sleep 0.2
	done
	echo "${kept:-?} $(rdma_hw_stat "$b" "rail${r}_parked")"
}
# readd_rail DEV [BOND]: after the removal of rxe_DEV, rxe_DEV again and
# DEV as a rail of BOND (rbond0) again
readd_rail() {
	_rxe_add "$1" 2>/dev/null
	_wait_gid "rxe_$1"
	rdma link add "${2:-rbond0}" type bond netdev "$1"
}
# mrail_stat KEY: a counter of rdma_bond's module-wide mrail_stats
mrail_stat() {
	awk -v k="$1" '$1 == k { print $2 }' /sys/module/rdma_bond/parameters/mrail_stats
}
# stream_ok RC LOST0 LABEL [server]: whether rbond_stream's exit status
# RC is a pass: 0; or 3 - the stream ended at a FETCH_ADD that ran on a
# failed home rail but whose reply was lost with it, the one error a home
# move gives (Documentation/rdma_bond.rst, "The home rail"), after both
# sides checked it (every SEND before it arrived, it ran exactly once) -
# and this host's atomics_lost counter is past LOST0 (on the client's
# host: the server's has nothing to count); 3 is logged under LABEL
stream_ok() {
	case $1 in
	0) return 0 ;;
	3)	log "$3: rbond_stream ended early, at a FETCH_ADD whose reply was lost with the home rail (atomics_lost +$(($(mrail_stat atomics_lost) - $2)) here): the one error a home move gives, checked by both sides"
		[ "${4:-}" = server ] || [ "$(mrail_stat atomics_lost)" -gt "$2" ] ;;
	*) return 1 ;;
	esac
}

rail_unshape() { tc qdisc del dev "$1" root 2>/dev/null; true; }
rail_down() { ip link set "$1" down; }
# rail_up DEV: the link up again, with what its going down removed: an
# administratively downed netdev loses its routes and neighbour entries,
# permanent ones too, and only the connected route comes back.  The test
# bed's own - the loop topology's per-wire route (_wire) and the static
# neighbours of both topologies - are put back, or new rdma_cm connections
# over the rail would resolve through the local table (loop) or a FAILED
# neighbour and time out (seen as "unreachable (-110)" after a flap).
rail_up() {
	local me=${1:0:1} r=${1:1} peer=a t
	ip link set "$1" up || return 1
	case "${RBOND_TOPO:-}" in
	loop)
		t=$((100 + 2 * r + 1))	# _wire's table of the b side
		[ "$me" = a ] && peer=b t=$((t - 1))
		ip route replace "$(rail_ip $r $peer)" dev "$1" src "$(rail_ip $r $me)" table $t
		ip neigh replace "$(rail_ip $r $peer)" dev "$1" nud permanent \
			lladdr "$(cat "/sys/class/net/$peer$r/address")" ;;
	pair)
		_pair_neigh "$1" ;;
	esac
}
# rdma_hw_stat DEV COUNTER: a counter of DEV's port 1 (rdma statistic)
rdma_hw_stat() {
	rdma statistic show link "$1/1" 2>/dev/null | tr ' ' '\n' |
		awk -v k="$2" 'p { print; exit } $0 == k { p = 1 }'
}
# qp_mrail DEV: DEV's QPs as "lqpn N home_rail R multirail S negotiation
# S rails_up 0xM rails_failed 0xM ", one line each (-dd driver attributes)
qp_mrail() {
	local l
	rdma res show qp link "$1/1" -dd 2>&1 | while read -r l; do
		grep -oE '^[a-z].*(rror|not supported).*|lqpn [0-9]+|drv_home_rail [0-9]+|drv_(multirail|negotiation) [a-z_-]+|drv_rails_(up|failed) 0x[0-9a-f]+' <<< "$l" |
			sed 's/^drv_//' | tr '\n' ' '
		echo
	done
}
# wait_qp_rails DEV MASK SECS: until a QP of DEV has rails_up MASK
wait_qp_rails() {
	local i
	for i in $(seq $(($3 * 10))); do
		qp_mrail "$1" | grep -q "rails_up $2 " && return 0
		sleep 0.1
	done
	return 1
}
# rxe_retry_stats DEV: a Soft-RoCE device's loss and retry counters
rxe_retry_stats() {
	local k out=
	for k in completer_retry_err rcvd_seq_err duplicate_request out_of_seq_request rcvd_rnr_err; do
		out+="$k $(rdma_hw_stat "$1" $k) "
	done
	echo "${out% }"
}
rail_tx_bytes() { cat "/sys/class/net/$1/statistics/tx_bytes"; }
rail_rx_bytes() { cat "/sys/class/net/$1/statistics/rx_bytes"; }
# wait_striping: up to 20 s for rail 1 (a1 + b1, loop topology) to carry
# 1 MB more than when called
wait_striping() {
	local t0 i
	t0=$(($(rail_tx_bytes a1) + $(rail_tx_bytes b1)))
	for i in $(seq 200); do
		[ $(($(rail_tx_bytes a1) + $(rail_tx_bytes b1) - t0)) -gt 1000000 ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# ---- wire rate ------------------------------------------------------------
# The steady-state rate of a transfer, from the rails' byte counters (not
# perftest's own figure, which counts setup and is unreliable under TCG).
#
# wire_sample PID FILE: while PID runs, append every WIRE_SAMPLE_S (0.5) s a
# line "NANOSECONDS BYTES_RAIL0 BYTES_RAIL1 ..."  (tx of aR + bR: both hosts)
wire_sample() {
	local pid=$1 f=$2 r x y line files=() fd fifo
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		files+=("/sys/class/net/a$r/statistics/tx_bytes"
			"/sys/class/net/b$r/statistics/tx_bytes")
	done
	: > "$f"
	# no fork in the loop (a starved TCG guest still samples on time): the
	# pause is a read that times out on a FIFO nobody writes to
	fifo=$(mktemp -u /tmp/.wire_sample.XXXXXX)
	mkfifo "$fifo" && exec {fd}<>"$fifo" && rm -f "$fifo" || return 1
	while kill -0 "$pid" 2>/dev/null; do
		line="${EPOCHREALTIME/./}000"
		for ((r = 0; r < ${#files[@]}; r += 2)); do
			read -r x < "${files[r]}"
			read -r y < "${files[r + 1]}"
			line+=" $((x + y))"
		done
		echo "$line" >> "$f"
		read -r -t "${WIRE_SAMPLE_S:-0.5}" -u "$fd" x
	done
	exec {fd}<&-
}
# wire_rate FILE [steady|transfer]: Mbit/s over all rails.  steady (the
# default): while every rail that carries data does, from 1 s after the LAST
# of them started to the sample where the FIRST of them stopped (the
# selftests' measure of striping, without ramp and uneven tail).  transfer:
# from the first byte to the last on any rail (the benchmark's measure: what
# the application gets, stalls and a rail that finishes late included).
# 0 when nothing flowed.
wire_rate() {
	awk -v mode="${2:-steady}" '
		{ t[NR] = $1 / 1e9; b[NR] = 0; nf = NF
		  for (k = 2; k <= NF; k++) { r[NR, k] = $k; b[NR] += $k } }
		END {
			for (i = 2; i <= NR; i++) {
				if (b[i] - b[i-1] > 20000) { if (!f) f = i - 1; l = i }
				for (k = 2; k <= nf; k++)
					if (r[i, k] - r[i-1, k] > 20000) {
						if (!fk[k]) fk[k] = i - 1
						lk[k] = i
					}
			}
			if (!f) { print 0; exit }
			if (mode == "transfer") {
				if (t[l] > t[f]) printf "%.1f\n", (b[l] - b[f]) * 8 / (t[l] - t[f]) / 1e6
				else print 0
				exit
			}
			for (k = 2; k <= nf; k++) {
				if (fk[k] > f) f = fk[k]
				if (lk[k] && lk[k] < l) l = lk[k]
			}
			if (l <= f) { f = 1; l = NR }
			s = f; while (s < l && t[s] - t[f] < 1) s++
			if (l - s < 2) s = f
			if (t[l] > t[s]) printf "%.1f\n", (b[l] - b[s]) * 8 / (t[l] - t[s]) / 1e6
			else print 0
		}' "$1"
}
# wire_intervals FILE: Mbit/s of every 0.5 s interval, all rails (for logs)
wire_intervals() {
	awk '{ b = 0; for (k = 2; k <= NF; k++) b += $k }
	     NR > 1 { printf "%.0f ", (b - p) * 8 / (($1 - pt) / 1e9) / 1e6 }
	     { p = b; pt = $1 }' "$1"
}

# ---- module ---------------------------------------------------------------

# Install the freshly built module into the guest's (overlay) module tree so
# that `rdma link add ... type bond` autoloads it.
# RBOND_MODPARAMS (e.g. "multirail=1"): load it now with those parameters.
rbond_install() {
	local d=/lib/modules/$(uname -r)/extra
	[ -f "$RBOND_KO" ] || return 1
	# depmod reads every module of the kernel: minutes under TCG for
	# xz-compressed ones (Debian's 6.12); once per guest is enough.
	# The host may have computed the index already (tools/vm/common.sh:
	# vm_depmod_stage) for this very .ko: then copy it.
	local st=$RBOND_TOP/.vm/depmod-$(uname -r)/lib/modules/$(uname -r) f
	if ! cmp -s "$RBOND_KO" "$d/rdma_bond.ko" ||
	   ! grep -q '^extra/rdma_bond.ko:' "/lib/modules/$(uname -r)/modules.dep"; then
		mkdir -p "$d" && cp "$RBOND_KO" "$d/" || return 1
		if cmp -s "$RBOND_KO" "$st/extra/rdma_bond.ko" && [ -s "$st/modules.dep.bin" ]; then
			for f in "$st"/modules.*; do
				[ -L "$f" ] || cp "$f" "/lib/modules/$(uname -r)/" || return 1
			done
		else
			depmod -a || return 1
		fi
	fi
	[ -z "${RBOND_MODPARAMS:-}" ] || modprobe rdma_bond $RBOND_MODPARAMS
}
rbond_unload() { modprobe -r rdma_bond 2>/dev/null || rmmod rdma_bond 2>/dev/null; true; }
rbond_bonds() { rdma link show 2>/dev/null | awk '{print $2}' | cut -d/ -f1 | sort -u; }

# Build bond NAME over the rails of side a|b: rbond_create NAME SIDE
rbond_create() {
	local name=$1 side=$2 r
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		rdma link add "$name" type bond netdev "$side$r" || return 1
	done
}

# Userspace provider without touching /etc/libibverbs.d.
provider_env() { export RDMAV_DRIVERS=$RBOND_PROVIDER; }

# ---- kernel log -------------------------------------------------------------

DMESG_BAD_RE='Kernel panic|Oops|BUG:|WARNING:|general protection fault|Call Trace:|KASAN|UBSAN|kmemleak: [0-9]+ new suspected|unreferenced object|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|scheduling while atomic|list_add corruption|list_del corruption|refcount_t:|blocked for more than'
# A mark is a line of its own written into the kernel log, not a line count:
# once the ring buffer is full a count points at the wrong line (a CI run
# lost the debug lines a test counted that way).  dmesg_since MARK prints
# the log after the mark, the whole log if the mark has rotated out.
dmesg_mark() {
	local id
	id="$$-$(date +%s%N)"
	if echo "rdma_bond selftests: mark $id" 2>/dev/null > /dev/kmsg; then
		echo "$id"
	else
		echo "n$(dmesg | wc -l)"
	fi
}
dmesg_since() {
	case $1 in
	n*) dmesg | tail -n +"$(( ${1#n} + 1 ))" ;;
	*) dmesg | awk -v m="rdma_bond selftests: mark $1" \
		'{ l[NR] = $0 } index($0, m) { s = NR }
		 END { for (i = s + 1; i <= NR; i++) print l[i] }' ;;
	esac
}
# Times on the kernel's clock (the log's timestamps): now_k, the seconds of
# the kernel log line(s) on stdin (klog_s), and the ms from T0 to T1
# (ms_between T0 T1)
now_k() { cut -d' ' -f1 /proc/uptime; }
# stream_stop DEV [PORT]: the rbond_stream client on DEV (its TCP
# port PORT) ends its stream now (SIGUSR1), as its time would have: a test
# started it with more time than it needs and stops it once its faults are
# over, however slow the guest
stream_stop() {
	local p
	for p in $(pgrep -f "rbond_stream -d $1 ${2:+-p $2 }"); do
		[ "$(cat /proc/$p/comm 2>/dev/null)" = rbond_stream ] &&
			kill -USR1 "$p"
	done
}
# d_tasks: the tasks in D state and where they wait (the kernel's stack)
d_tasks() {
	local p
	for p in /proc/[0-9]*; do
		grep -q '^State:.*D' "$p/status" 2>/dev/null || continue
		echo "D: $(cat "$p/comm") $(head -n 8 "$p/stack" 2>/dev/null |
			sed 's/^\[<[0-9a-f]*>\] //; s/+0x.*//' | tr '\n' ' ');"
	done
}
klog_s() { sed -n 's/^\[ *\([0-9.]*\)\].*/\1/p'; }
ms_between() { echo "($2 - $1) * 1000 / 1" | bc; }
dmesg_check() {	# dmesg_check MARK: fail if the log since MARK has a report
	local new
	new=$(dmesg_since "$1")
	if grep -qE "$DMESG_BAD_RE" <<< "$new"; then
		echo "# kernel log report:"; sed 's/^/#   /' <<< "$new" | tail -n 60
		return 1
	fi
	return 0
}
# Ask kmemleak (debug kernel only; a no-op elsewhere) for a scan and fail,
# showing the suspects, if it found any.  kmemleak reports only objects older
# than 5 s whose contents did not change between two scans: scan, wait past
# that age, scan again.  The debug kernel runs no background scans
# (tools/debug-kernel/debug.config), so scans happen only here.
kmemleak_scan() {
	[ -w /sys/kernel/debug/kmemleak ] || return 0
	echo scan > /sys/kernel/debug/kmemleak; sleep "${RBOND_KMEMLEAK_AGE:-5}"
	echo scan > /sys/kernel/debug/kmemleak
	if grep -q unreferenced /sys/kernel/debug/kmemleak; then
		cat /sys/kernel/debug/kmemleak | head -n 60 | sed 's/^/# /'
		echo clear > /sys/kernel/debug/kmemleak
		return 1
	fi
}
# Forget what kmemleak suspects from before the tests (boot): scan, clear.
kmemleak_baseline() {
	[ -w /sys/kernel/debug/kmemleak ] || return 0
	echo scan > /sys/kernel/debug/kmemleak
	echo clear > /sys/kernel/debug/kmemleak
}

# ---- teardown -------------------------------------------------------------

# Undo whatever topo_*_up and the tests built; safe to call more than once.
topo_down() {
	local d r me
	me=$(rbond_me)
	for d in /sys/class/infiniband/*/bond; do
		[ -d "$d" ] && rdma link delete "$(basename "$(dirname "$d")")" 2>/dev/null
	done
	rbond_unload
	for d in /sys/class/infiniband/rxe_*; do
		[ -e "$d" ] && rdma link delete "$(basename "$d")" 2>/dev/null
	done
	if [ "${RBOND_TOPO:-}" = pair ]; then
		for r in $(seq 0 $((RBOND_NRAILS - 1))); do
			tc qdisc del dev "$me$r" root 2>/dev/null
			ip addr flush dev "$me$r" 2>/dev/null
			ip link set "$me$r" down 2>/dev/null
			ip link set "$me$r" name "eth$r" 2>/dev/null
		done
	else
		for r in $(seq 0 3); do ip link del "a$r" 2>/dev/null; done
		ip link del lba 2>/dev/null; ip link del lbb 2>/dev/null
	fi
	while ip rule del pref 10 2>/dev/null; do :; done
	while ip rule del pref 20 2>/dev/null; do :; done
	ip rule show | grep -q '^0:' || ip rule add pref 0 lookup local
	ip rule del pref 100 lookup local 2>/dev/null
	for r in $(seq 100 109); do ip route flush table $r 2>/dev/null; done
	true
}

# Standard test prologue: topology per $RBOND_TOPO (loop unless the runner
# says pair), teardown on exit.
topo_up() {
	# what a previous test left (killed by its timeout before its own
	# topo_down, e.g. rails still renamed) must not fail this one
	topo_down >/dev/null 2>&1
	trap 'topo_down' EXIT
	if [ "${RBOND_TOPO:-loop}" = pair ]; then topo_pair_up; else topo_loop_up; fi
}

# Run a perftest (or any) server/client pair on rail R between sides a and b,
# whichever topology.  Prints the client's output.  perf_pair R PORT CMD ARGS...
perf_pair() {
	local r=$1 port=$2 cmd=$3 spid rc; shift 3
	local sdev=rxe_b$r cdev=rxe_a$r sip
	sip=$(rail_ip "$r" b)
	if [ "${RBOND_TOPO:-loop}" = pair ]; then
		if [ "$RBOND_HOST" = b ]; then
			timeout -k 5 300 "$cmd" -d "$sdev" -p "$port" "$@" >/tmp/.srv 2>&1 &
			spid=$!
			sleep 1; pair_put "srv.$port" up
			wait $spid; rc=$?
			pair_get "cli.$port" 300 >/dev/null
			return $rc
		fi
		pair_get "srv.$port" 60 >/dev/null || return 1
		timeout -k 5 300 "$cmd" -d "$cdev" -p "$port" "$@" "$sip"; rc=$?
		pair_put "cli.$port" "$rc"
		return $rc
	fi
	timeout -k 5 300 "$cmd" -d "$sdev" -p "$port" "$@" >/tmp/.srv.$port 2>&1 &
	spid=$!
	sleep 1
	timeout -k 5 300 "$cmd" -d "$cdev" -p "$port" "$@" "$sip"; rc=$?
	wait $spid || { sed 's/^/# server: /' /tmp/.srv.$port | tail -5; [ $rc -eq 0 ] && rc=1; }
	return $rc
}
