#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/demo.sh - the README's main job: in a qemu guest, two emulated hosts
# with two Soft-RoCE rails each (shaped to a wire rate), the bond built with
# `rdma link add`, ibv_devinfo of the bond, and a one-rail vs bond bandwidth
# comparison printed as a table.
#
#   tools/demo.sh [--rate MBIT] [--iters N]
set -u
cd "$(dirname "$0")/.." || exit 1
rate=50 iters=30
while [ $# -gt 0 ]; do
	case "$1" in
	--rate) rate=$2; shift 2 ;;
	--iters) iters=$2; shift 2 ;;
	*) echo "usage: $0 [--rate MBIT] [--iters N]"; exit 2 ;;
	esac
done
tools/deps.sh || exit 1
make -s modules provider || exit 1
exec tools/vm/run --timeout 1200 -- bash tools/demo-guest.sh "$rate" "$iters"
