#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/bench/guest.sh - benchmark body, runs inside the guest (loop
# topology).  Writes CSV rows to $OUT/raw.csv:
#   kind,config,rails,op,qps,size,rep,value,unit,cpu_s_per_gb
# kind bw: value = Mbit/s on the wires over the whole transfer (sum of every
# rail netdev's tx, sampled every 0.1 s, from the first byte to the last on
# any rail: what the application gets, ramp, stalls and uneven tails
# included); kind lat: value = p50 and p99 (two rows) in usec.
#
#   guest.sh OUT RATES REPS PLAN POLICIES
#   RATES: per-rail Mbit/s, comma separated ("50,50" or "100,50")
#   PLAN: "main" (table), "unequal" (1 and 8 QPs), "sweep" (size and QP
#         sweeps), "four" (1 and 8 QPs, for four rails), "demo" (short),
#         "check" (the hardest points, once)
# Environment: BENCH_SECS (seconds of data per point at the expected rate),
# RBOND_MULTIRAIL (default 1: the bonds negotiate their extra rails).
set -u
. "$(dirname "$0")/../../selftests/lib.sh"
OUT=$1 RATES=$2 REPS=$3 PLAN=$4 POLICIES=${5:-}
IFS=, read -r -a RATE <<< "$RATES"
LIMIT=0; for r in "${RATE[@]}"; do LIMIT=$((LIMIT + r)); done
RATES_ID=${RATES//,/+}	# CSV-safe: "50+50"
SECS=${BENCH_SECS:-8}
# Lossless-fabric emulation for many QPs: a READ responder sends as fast as
# it can (rxe paces only its requester), so 8 QPs x outstanding 1 MiB READs
# overflow a 4 MB tbf queue and go-back-N collapses.  Bandwidth runs
# therefore use a 32 MB queue (RBOND_TBF_LIMIT), an ACK timeout above its
# worst drain time (-u 21 = ~8.6 s; 32 MB at 50 Mbit/s is ~5.4 s) and at most
# 2 outstanding READs per QP (-o 2).
export RBOND_TBF_LIMIT=${RBOND_TBF_LIMIT:-32mb}
export WIRE_SAMPLE_S=0.1
U="-x 1 -u $RBOND_QP_TIMEOUT -F"
UBW="-x 1 -u ${BENCH_QP_TIMEOUT:-21} -F"
CSV=$OUT/raw.csv
[ -f "$CSV" ] || echo "kind,config,rates,op,qps,size,rep,value,unit,cpu_s_per_gb" > "$CSV"
port=20000

shape_all() {
	local r
	for r in "${!RATE[@]}"; do
		for d in a$r b$r; do rail_shape "$d" "${RATE[$r]}mbit"; done
	done
}

cpu_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }

# rdma_bond's mrail_stats, for a note after a point that explains a dip:
# QPs whose modify_qp(RTS) stopped waiting before their extra rails were
# up (they start on the home rail alone), and failovers (a rail a QP
# stopped using, by an event or the no-progress watchdog)
mstats() {
	awk '$1 == "upgrade_timeouts" { u = $2 } $1 == "failovers" { f = $2 }
	     END { if (u != "") print u, f }' \
		/sys/module/rdma_bond/parameters/mrail_stats 2>/dev/null
}
upgrade_note() {	# upgrade_note "BEFORE": what moved since
	local u f
	[ -n "$1" ] || return 0
	read -r u f <<< "$(mstats)"
	set -- $1
	[ "$u" -gt "$1" ] && printf ', %d QPs started before their extra rails were up' $((u - $1))
	[ "$f" -gt "$2" ] && printf ', %d failovers' $((f - $2))
	return 0
}

rail_devs() {	# every rail netdev of both hosts
	local r
	for r in "${!RATE[@]}"; do echo "a$r b$r"; done
}
rxe_counters() {	# "dev/counter value" for every rail device's rxe counters
	local r d
	for r in "${!RATE[@]}"; do
		for d in rxe_a$r rxe_b$r; do
			rdma statistic show link "$d/1" 2>/dev/null | tr ' ' '\n' |
				awk -v d="$d" 'NR >= 3 && NR % 2 == 1 { k = $0 } NR >= 4 && NR % 2 == 0 { print d "/" k, $0 }'
		done
	done
}
drops_note() {	# drops_note BEFORE: packets the rails' queues dropped since
	local n
	n=$(( $(tbf_drops $(rail_devs)) - $1 ))
	[ "$n" -gt 0 ] && printf ', %d packets dropped by the rail queues' "$n"
	return 0
}

# one_bw CONFIG DEV_A DEV_B SERVER_IP OP QPS SIZE REP [EXPECTED_MBIT]
one_bw() {
	local cfg=$1 da=$2 db=$3 ip=$4 op=$5 qps=$6 size=$7 rep=$8 exp=${9:-$LIMIT}
	local iters spid cpid samp=/tmp/bench.samp c0 c1 hz rate gb cpu rc
	# enough data for ~SECS at the rate the config can reach (one rail:
	# its own), at least 8 per QP
	iters=$(( exp * 125000 * SECS / size / qps ))
	[ "$iters" -lt 8 ] && iters=8
	port=$((port + 1))
	local ub=$UBW ut0 d0 dm0 tag=$cfg-$op-q$qps-s$size-$rep
	ut0=$(mstats)
	d0=$(tbf_drops $(rail_devs))
	rxe_counters > /tmp/bench.cnt0
	dm0=$(dmesg_mark)
	[ "$op" = read ] && ub="$ub -o 2"
	timeout -k 5 600 "ib_${op}_bw" -d "$db" -p $port -q "$qps" -s "$size" -n "$iters" $ub \
		>/tmp/bench.srv 2>&1 &
	spid=$!
	sleep 1
	c0=$(cpu_ticks)
	timeout -k 5 600 "ib_${op}_bw" -d "$da" -p $port -q "$qps" -s "$size" -n "$iters" $ub "$ip" \
		>/tmp/bench.cli 2>&1 &
	cpid=$!
	wire_sample $cpid $samp
	c1=$(cpu_ticks)
	rc=0
	wait $cpid || rc=1
	wait $spid || rc=1
	if [ $rc != 0 ]; then
		echo "# $cfg $op q$qps s$size rep $rep: perftest failed (log: fail-$cfg-$op-q$qps-s$size-$rep.txt)" >&2
		{ echo "== client"; cat /tmp/bench.cli; echo "== server"; cat /tmp/bench.srv
		  echo "== dmesg"; dmesg | tail -20; } > "$OUT/fail-$cfg-$op-q$qps-s$size-$rep.txt"
	fi
	rate=$(wire_rate $samp transfer)
	# the per-rail wire timeline of every point, for a dip to be read later,
	# and what the rails' rxe counted and the kernel said meanwhile
	cp $samp "$OUT/samp-$tag.txt"
	{ rxe_counters | paste -d' ' /tmp/bench.cnt0 - |
		awk '$2 != $4 { print $1, $4 - $2 }'
	  cat /sys/class/infiniband/rbond0/bond/rail_rates 2>/dev/null
	  dmesg_since "$dm0"; } > "$OUT/diag-$tag.txt" 2>&1
	hz=$(getconf CLK_TCK)
	gb=$(awk '{ b = 0; for (k = 2; k <= NF; k++) b += $k }
		NR == 1 { a = b } END { printf "%.4f", (b - a) / 1e9 }' $samp)
	cpu=$(awk -v c=$((c1 - c0)) -v hz="$hz" -v gb="$gb" \
		'BEGIN { if (gb > 0) printf "%.1f", c / hz / gb; else print "" }')
	echo "bw,$cfg,$RATES_ID,$op,$qps,$size,$rep,$rate,Mbit/s,$cpu" >> "$CSV"
	printf '# %-14s %-5s q=%d size=%-7d rep %d: %7s Mbit/s (%s x limit %d)%s\n' "$cfg" "$op" \
		"$qps" "$size" "$rep" "$rate" "$(awk -v a="$rate" -v b="$LIMIT" 'BEGIN{printf "%.2f", a/b}')" "$LIMIT" \
		"$(upgrade_note "$ut0")$(drops_note "$d0")"
}

# one_lat CONFIG DEV_A DEV_B SERVER_IP OP REP
one_lat() {
	local cfg=$1 da=$2 db=$3 ip=$4 op=$5 rep=$6 line
	port=$((port + 1))
	timeout -k 5 300 "ib_${op}_lat" -d "$db" -p $port -s 2 -n 1000 $U >/tmp/bench.srv 2>&1 &
	sleep 1
	timeout -k 5 300 "ib_${op}_lat" -d "$da" -p $port -s 2 -n 1000 $U "$ip" >/tmp/bench.cli 2>&1
	wait
	# columns: bytes iters t_min t_max t_typical t_avg t_stdev 99% 99.9%
	line=$(grep -E '^ *2 +1000 ' /tmp/bench.cli | tail -n1)
	[ -n "$line" ] || { echo "# $cfg $op lat failed" >&2; return; }
	set -- $line
	echo "lat,$cfg,$RATES_ID,$op,1,2,$rep,$5,usec p50," >> "$CSV"
	echo "lat,$cfg,$RATES_ID,$op,1,2,$rep,$8,usec p99," >> "$CSV"
	echo "# $cfg $op lat rep $rep: p50 $5 us, p99 $8 us"
}

# The configurations: name and the two devices + server address
cfg_devs() {
	case $1 in
	rail) echo "rxe_a0 rxe_b0 $(rail_ip 0 b)" ;;
	lbond) echo "rxe_lba rxe_lbb 10.0.9.2" ;;
	rbond-*) echo "rbond0 rbond1 $(rail_ip 0 b)" ;;
	esac
}

set_policy() {	# set_policy POLICY: on both bonds; fails if unknown
	local d
	for d in rbond0 rbond1; do
		echo "$1" > "/sys/class/infiniband/$d/bond/policy" 2>/dev/null || return 1
	done
}

run_cfg() {	# run_cfg CONFIG: every measurement of the plan for one config
	local cfg=$1 rep op qps size w
	read -r da db ip <<< "$(cfg_devs "$cfg")"
	local exp=$LIMIT	# one rail alone can reach its own rate only
	[ "$cfg" = rail ] && exp=${RATE[0]}
	for rep in $(seq "$REPS"); do
		case $PLAN in
		main)
			# the full matrix for one rail, the Linux bond and the
			# first policy; the other policies: the points that
			# tell them apart (the budget is 30 min on 2 cores)
			if [ "$cfg" = rail ] || [ "$cfg" = lbond ] || [ "$cfg" = "rbond-$LEAD" ]; then
				set -- "write 1 65536" "write 1 1048576" "write 8 65536" \
				       "write 8 1048576" "read 1 65536" "read 1 1048576" \
				       "read 8 65536" "read 8 1048576"
			else
				set -- "write 1 65536" "write 1 1048576" "write 8 1048576"
			fi
			for w in "$@"; do
				read -r op qps size <<< "$w"
				one_bw "$cfg" "$da" "$db" "$ip" "$op" "$qps" "$size" "$rep" "$exp"
			done
			if [ $# = 8 ]; then
				one_lat "$cfg" "$da" "$db" "$ip" write "$rep"
				one_lat "$cfg" "$da" "$db" "$ip" send "$rep"
			fi ;;
		unequal)
			for w in "write 1 1048576" "write 8 1048576"; do
				read -r op qps size <<< "$w"
				one_bw "$cfg" "$da" "$db" "$ip" "$op" "$qps" "$size" "$rep" "$exp"
			done ;;
		sweep)	# with main's 64 KiB, 1 MiB and 1/8 QP points
			for size in 4096 16384 262144; do
				one_bw "$cfg" "$da" "$db" "$ip" write 1 "$size" "$rep" "$exp"
			done
			for qps in 2 4; do
				one_bw "$cfg" "$da" "$db" "$ip" write "$qps" 1048576 "$rep" "$exp"
			done ;;
		four)	# four rails (equal or not): one QP and eight, 1 MiB,
			# at least 12 s of data: with 8 QPs, 4 s is 9 WQEs per
			# QP and the ramp and tail of the QPs' staggered starts
			# weigh (4 s: 2.90x one rail, 12 s: 3.9x; 2026-12-02)
			local SECS=$(( SECS < 12 ? 12 : SECS ))
			for w in "write 1 1048576" "write 8 1048576"; do
				read -r op qps size <<< "$w"
				one_bw "$cfg" "$da" "$db" "$ip" "$op" "$qps" "$size" "$rep" "$exp"
			done ;;
		demo)
			one_bw "$cfg" "$da" "$db" "$ip" write 1 65536 "$rep" "$exp" ;;
		check)	# the hardest points, once: a quick look before a long run
			for w in "write 1 1048576" "write 8 1048576" "read 8 1048576" \
				 "read 1 65536"; do
				read -r op qps size <<< "$w"
				one_bw "$cfg" "$da" "$db" "$ip" "$op" "$qps" "$size" "$rep" "$exp"
			done ;;
		esac
	done
}

LEAD=${POLICIES%% *}; LEAD=${LEAD:-adaptive}	# gets the full matrix
export RBOND_NRAILS=${#RATE[@]}
echo "# kernel $(uname -r), rails ${RATES} Mbit/s (limit $LIMIT), plan $PLAN, reps $REPS"

# 1) one rail alone and rdma_bond, on the rail topology
topo_loop_up || { echo "topology failed"; exit 1; }
shape_all
run_cfg rail
if rbond_install && rbond_create rbond0 a && rbond_create rbond1 b &&
   _wait_gid rbond0 && _wait_gid rbond1; then
	provider_env
	# multi-rail unless RBOND_MULTIRAIL=0 (run.sh/demo.sh --single-rail);
	# the parameter applies to QPs created after it is set
	echo "${RBOND_MULTIRAIL:-1}" > /sys/module/rdma_bond/parameters/multirail ||
		echo "# cannot set multirail=${RBOND_MULTIRAIL:-1}"
	# let modify_qp(RTS) wait for the extra rails: perftest posts a whole
	# short run at once, which otherwise goes on the home rail (the ramp)
	echo "${RBOND_UPGRADE_WAIT_MS:-1000}" > /sys/module/rdma_bond/parameters/upgrade_wait_ms ||
		echo "# cannot set upgrade_wait_ms"
	echo "# rdma_bond multirail=$(cat /sys/module/rdma_bond/parameters/multirail)" \
	     "upgrade_wait_ms=$(cat /sys/module/rdma_bond/parameters/upgrade_wait_ms)"
	for p in ${POLICIES:-adaptive}; do
		if [ -f /sys/class/infiniband/rbond0/bond/policy ] && ! set_policy "$p"; then
			echo "# policy $p not supported by this module: skipped"
			continue
		fi
		run_cfg "rbond-$p"
	done
else
	echo "# rdma_bond not available: its rows are missing"
fi
topo_down

# 2) rxe over a Linux bond netdev of the same rails
if topo_lbond_up; then
	shape_all
	run_cfg lbond
else
	echo "# Linux bond topology failed"
fi
topo_down
