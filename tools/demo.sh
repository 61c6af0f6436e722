#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/demo.sh - the README's main job: in a qemu guest, two emulated hosts
# with two Soft-RoCE rails each (shaped to a wire rate), the bond built with
# `rdma link add`, ibv_devinfo of the bond, and a one-rail vs bond bandwidth
# comparison printed as a table.
#
#   tools/demo.sh [--rate MBIT] [--single-rail]
#
# The bonds run multi-rail (module parameter multirail=1: negotiation of
# the extra rails with the peer's module and striping); --single-rail
# leaves it at 0 (every QP on its home rail).
#
# The measurement uses the benchmark's pieces (tools/bench): wire rate
# sampled from the rails' byte counters while data flows, against one rail
# alone and rxe over a Linux bond netdev of the same rails.
set -u
cd "$(dirname "$0")/.." || exit 1
rate=50 multirail=1
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--single-rail) multirail=0; shift ;;
	*) echo "usage: $0 [--rate MBIT] [--single-rail]"; exit 2 ;;
	esac
done
tools/deps.sh || exit 1
make -s modules provider || exit 1
out=results/demo-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(cd "$out" && pwd)
BENCH_SECS=${BENCH_SECS:-6} tools/vm/run --timeout 1200 --env "BENCH_SECS=${BENCH_SECS:-6}" \
	--env "RBOND_MULTIRAIL=$multirail" -- \
	bash tools/demo-guest.sh "$out" "$rate" || exit 1
echo "rails: 2 x $rate Mbit/s (tbf); one run each; multirail=$multirail; results in $out" \
	> "$out/settings.txt"
echo
python3 tools/bench/report.py "$out" | sed -n '/^### Bandwidth/,$p'
