#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/bench/run.sh - `make bench`: boot the test guest, build the rails, and
# measure in one run, on the same shaped rails: one rail alone (1.0x), rxe
# over a Linux bond netdev (balance-xor, layer3+4), rdma_bond per policy.
#
#   tools/bench/run.sh [--rate MBIT] [--unequal A,B] [--reps N] [--secs S]
#                      [--policies "adaptive round-robin ..."] [--no-sweep]
#                      [--no-four] [--single-rail] [--out DIR]
#
# Four rails (unless --no-four): 4 x MBIT and MBIT,MBIT,MBIT/2,MBIT/2, one
# QP and eight, the first policy.
#
# --single-rail leaves the module's multirail parameter at 0 (the bond then
# runs every QP on its home rail: the overhead baseline).
#
# Results: results/<date>/ with raw.csv, results.csv (medians and spread),
# results.md (the tables) and PNG plots (bandwidth vs message size and vs QP
# count); kernel version, rates and settings are recorded in results.md.
set -u
cd "$(dirname "$0")/../.." || exit 1
rate=40 unequal=50,25 reps=2 sweep=1 four=1 out= multirail=1 secs=${BENCH_SECS:-4}
policies="adaptive round-robin weighted active-backup qp-hash"
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--unequal) unequal=$2; shift 2 ;;
	--reps) reps=$2; shift 2 ;;
	--policies) policies=$2; shift 2 ;;
	--no-sweep) sweep=0; shift ;;
	--no-four) four=0; shift ;;
	--single-rail) multirail=0; shift ;;
	--secs) secs=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	*) sed -n '3,21p' "$0"; exit 2 ;;
	esac
done
out=${out:-results/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(date +%s)
module=$(git describe --always --dirty 2>/dev/null)	# what gets built below

tools/deps.sh || exit 1
make -s modules provider || exit 1

guest() {	# guest RATES PLAN REPS POLICIES
	tools/vm/run --timeout 3000 --env "BENCH_SECS=$secs" --env "RBOND_MULTIRAIL=$multirail" -- \
		bash tools/bench/guest.sh "$out" "$1" "$3" "$2" "'$4'" 2>&1 | tee -a "$out/log.txt"
}
guest "$rate,$rate" main "$reps" "$policies"
# unequal rails: the first policy, and round-robin for contrast
upol=${policies%% *}
case " $policies " in *" round-robin "*) [ "$upol" = round-robin ] || upol="$upol round-robin" ;; esac
[ -n "$unequal" ] && guest "$unequal" unequal "$reps" "$upol"
[ "$sweep" = 1 ] && guest "$rate,$rate" sweep 1 "${policies%% *}"
if [ "$four" = 1 ]; then
	guest "$rate,$rate,$rate,$rate" four "$reps" "${policies%% *}"
	guest "$rate,$rate,$((rate / 2)),$((rate / 2))" four "$reps" "${policies%% *}"
fi

{
	echo "kernel: $(tools/default-kver.sh) (qemu TCG guest, loop topology)"
	echo "rails: 2 x $rate Mbit/s (tbf, burst 64kb, limit 32mb), unequal: $unequal Mbit/s"
	echo "perftest: bw -x 1 -u 21 -F (READ: -o 2), lat -x 1 -u 18 -F, MTU ${RBOND_MTU:-9000}; ~$secs s of data per point; reps $reps"
	echo "module: $module, multirail=$multirail, policies: $policies"
	echo "wall time: $(( $(date +%s) - t0 )) s"
} > "$out/settings.txt"
python3 tools/bench/report.py "$out"
