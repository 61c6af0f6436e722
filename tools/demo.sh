#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/demo.sh - the README's main job: in a qemu guest, two emulated hosts
# with two Soft-RoCE rails each (shaped to a wire rate), the bond built with
# `rdma link add`, ibv_devinfo of the bond, and a one-rail vs bond bandwidth
# comparison printed as a table.
#
#   tools/demo.sh [--rate MBIT] [--multirail]
#
# --multirail loads the module with multirail=1 (multi-rail negotiation and
# striping; experimental, off by default in the module).
#
# The measurement uses the benchmark's pieces (tools/bench): wire rate
# sampled from the rails' byte counters while data flows, against one rail
# alone and rxe over a Linux bond netdev of the same rails.
set -u
cd "$(dirname "$0")/.." || exit 1
rate=50 modparams=
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--multirail) modparams=multirail=1; shift ;;
	*) echo "usage: $0 [--rate MBIT] [--multirail]"; exit 2 ;;
	esac
done
tools/deps.sh || exit 1
make -s modules provider || exit 1
out=results/demo-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
out=$(cd "$out" && pwd)
BENCH_SECS=${BENCH_SECS:-6} tools/vm/run --timeout 1200 --env "BENCH_SECS=${BENCH_SECS:-6}" \
	--env "RBOND_MODPARAMS=$modparams" -- \
	bash tools/demo-guest.sh "$out" "$rate" || exit 1
echo "rails: 2 x $rate Mbit/s (tbf); one run each; module parameters: ${modparams:-defaults}; results in $out" \
	> "$out/settings.txt"
echo
python3 tools/bench/report.py "$out" | sed -n '/^### Bandwidth/,$p'
