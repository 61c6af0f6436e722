#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 300
#
# Benchmark, not a test (selftests/run.sh runs selftests/test_*.sh only):
# how long data stops ON THE WIRE when a rail fails under traffic, per
# fault kind, against the longest pause of the same workload with no
# fault, measured in the same guest:
#
#   tools/vm/run -- selftests/run.sh bench/failover_wire.sh    (make bench-failover)
#
# tcpdump on host B's rail ends (b0, b1: every packet of the rails, both
# directions) keeps the RoCE packets that carry data (UDP 4791, more than
# 600 bytes: WRITE and SEND payload, READ responses - not ACKs, not the
# control channel's heartbeats).  For each case: the longest silence of
# data on all rails together from the fault command to 6 s after it, and
# when data flowed again (from the fault command, on the same clock).
# The workload is rbond_stream (1 MiB WRITE, SEND with sequence number and
# checksum, FETCH_ADD, 1 MiB READ back, one iteration at a time) between
# rbond0 and rbond1, rails 40 Mbit/s each; the fault hits host A's end of
# the rail (a veth pair: both ends lose carrier on link down):
#   extra rail (1): link down; silent loss (netem loss 100%, both ends)
#   home rail (0):  link down; silent loss (found by the heartbeat, on
#                   for the bench: WIRE_HB_MS 100, WIRE_SILENT_MS 500)
# The baseline's longest pause is the stream's own (its READ waits a round
# trip, its SEND waits for the WRITE): a failover that costs nothing on
# the wire shows about that.  Each case also checks the stream's verdict
# (nothing lost, duplicated or corrupted): a case whose data did not
# survive prints FAIL and the bench exits 1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../progs/lib_provider.sh"
require_cmd tcpdump
prov_mrail
RATE=${WIRE_RATE:-40mbit}
WIN=${WIRE_WIN:-6}	# seconds after the fault in which the silence is sought
for d in a0 a1 b0 b1; do rail_shape $d "$RATE"; done
# the heartbeat (opt-in) for the home rail's silent loss: nothing else
# finds it before the members' retries run out
HB0=$(cat $P/heartbeat_ms)
echo "${WIRE_HB_MS:-100}" > $P/heartbeat_ms
for b in rbond0 rbond1; do
	echo "${WIRE_SILENT_MS:-500}" > /sys/class/infiniband/$b/bond/failover_silent_ms
done
CAP=/tmp/wire
ok=0

# cap_start: capture the data packets on b0 and b1
cap_start() {
	local d
	CAPS=
	for d in b0 b1; do
		tcpdump -i "$d" -n -s 64 -U -w "$CAP.$d.pcap" \
			'udp dst port 4791 and greater 600' 2>/dev/null &
		CAPS="$CAPS $!"
	done
	sleep 1
}
cap_stop() { kill -INT $CAPS 2>/dev/null; wait $CAPS 2>/dev/null; }

# silence T0: "LONGEST_MS RESUMED_MS" - the longest gap between data
# packets (both rails merged) from T0 (epoch seconds, the fault command)
# to T0 + WIN, the time before the first packet counting as a gap; and
# when the packet that ended it came, from T0 (-1: silent to T0 + WIN)
silence() {
	local d
	for d in b0 b1; do tcpdump -tt -n -r "$CAP.$d.pcap" 2>/dev/null; done |
		awk '{ print $1 }' | sort -n |
		awk -v t0="$1" -v win="$WIN" '
			$1 < t0 { last = $1; next }
			$1 > t0 + win { exit }
			{ from = (last == "" || last < t0) ? t0 : last
			  if ($1 - from > best) { best = $1 - from; end = $1 }
			  last = $1 }
			END { from = (last == "" || last < t0) ? t0 : last
			      if (t0 + win - from > best) {	# silent to the end
				      printf "%.0f -1\n", (t0 + win - from) * 1000; exit }
			      printf "%.0f %.0f\n", best * 1000, (end - t0) * 1000 }'
}


# wire_case LABEL BREAK REPAIR: the stream, BREAK once rail 1 carries
# data, measured, REPAIR 8 s later; "" BREAK: the baseline (no fault)
wire_case() {
	local label=$1 brk=$2 fix=$3 t0 s rc m
	rm -f "$CAP".*.pcap
	m=$(dmesg_mark)
	prov_cs rbond1 rbond0 /tmp/wire_s "$PROGS/rbond_stream" \
		-u "$RBOND_QP_TIMEOUT" -R -s 1048576 -w 1 -t 20 &
	SPID=$!
	PROV_PORT=$((PROV_PORT + 1))	# prov_cs took the next in its subshell
	cap_start
	wait_striping || log "$label: rail 1 never carried data"
	sleep 2
	t0=$(date +%s.%N)
	[ -n "$brk" ] && eval "$brk"
	sleep 8
	[ -n "$fix" ] && eval "$fix"
	wait $SPID; rc=$?
	cap_stop
	s=$(silence "$t0")
	set -- $s
	if [ "$rc" != 0 ] && ! { [ "$rc" = 3 ] && [ -n "$brk" ]; }; then
		prov_stream_report /tmp/wire_s $rc
		log "$label: FAIL: rbond_stream failed (rc $rc)"
		ok=1
	fi
	[ -z "$brk" ] && BASE=$1
	if [ -z "$brk" ]; then
		printf '%-28s %8s ms %s\n' "$label" "$1" "(the stream's own longest pause)" >> /tmp/wire_table
	else
		awk -v l="$label" -v g="$1" -v e="$2" -v b="$BASE" 'BEGIN {
			if (g <= b * 1.5)
				w = "no stop beyond the stream'"'"'s own pauses"
			else if (e < 0)
				w = "no data again in the window"
			else
				w = sprintf("data again %d ms after the fault", e)
			printf "%-28s %8d ms   %.1fx the baseline: %s\n", l, g, g / b, w }' >> /tmp/wire_table
	fi
	log "$label: longest data silence ${1} ms, data again ${2} ms after the fault command (stream rc $rc)"
	dmesg_since "$m" | grep -E 'rbond[01]: .*(down|failed|moved|heartbeat)' |
		head -n 6 | sed 's/^/#   /'
	return 0
}

rest() { rail_up "$1"; _wait_gid "rxe_$1"; sleep 3; }
lossy() { rail_shape "$1" "$RATE" '' 100%; rail_shape "$2" "$RATE" '' 100%; }
shaped() { rail_shape "$1" "$RATE"; rail_shape "$2" "$RATE"; }

: > /tmp/wire_table
wire_case "no fault (baseline)" "" ""
wire_case "extra rail: link down" "rail_down a1" "rest a1"
wire_case "extra rail: silent loss" "lossy a1 b1" "shaped a1 b1; sleep 3"
wire_case "home rail: link down" "rail_down a0" "rest a0"
wire_case "home rail: silent loss" "lossy a0 b0" "shaped a0 b0; sleep 3"
log "heartbeat_ms $(cat $P/heartbeat_ms), failover_silent_ms $(cat /sys/class/infiniband/rbond0/bond/failover_silent_ms), failover_stall_ms $(cat /sys/class/infiniband/rbond0/bond/failover_stall_ms), rails $RATE"
sed 's/^/# BENCH wire: /' /tmp/wire_table
for d in a0 a1 b0 b1; do rail_unshape $d; done
echo "$HB0" > $P/heartbeat_ms
echo 0 > $P/multirail
exit $ok
