#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side of tools/demo.sh (runs inside the VM): demo-guest.sh OUT RATE
# Shows the bond being built and what ibv_devinfo sees, then measures with
# the benchmark's own pieces (tools/bench/guest.sh, plan "demo").
set -u
. "$(dirname "$0")/../selftests/lib.sh"
out=$1 rate=${2:-50}
say() { printf '\n$ %s\n' "$*"; "$@"; }

topo_up || { echo "topology setup failed"; exit 1; }
echo "Two emulated hosts A and B, two Soft-RoCE rails each:"
rdma link show
rbond_install || { echo "module not built"; exit 1; }
provider_env
say rdma link add rbond0 type bond netdev a0 || exit 1
say rdma link add rbond0 type bond netdev a1 || exit 1
rbond_create rbond1 b || exit 1
say rdma link show
say cat /sys/class/infiniband/rbond0/bond/rails
say ibv_devinfo -d rbond0
topo_down
trap - EXIT

echo
echo "ib_write_bw, 1 QP, 64 KiB messages, every rail shaped to $rate Mbit/s:"
bash "$(dirname "$0")/bench/guest.sh" "$out" "$rate,$rate" 1 demo adaptive
