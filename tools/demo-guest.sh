#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Guest side of tools/demo.sh (runs inside the VM): demo-guest.sh RATE ITERS
set -u
. "$(dirname "$0")/../selftests/lib.sh"
rate=${1:-50} iters=${2:-30} size=1048576
say() { printf '\n$ %s\n' "$*"; "$@"; }

topo_up || { echo "topology setup failed"; exit 1; }
for r in 0 1; do rail_shape a$r ${rate}mbit; rail_shape b$r ${rate}mbit; done
echo "Two emulated hosts A and B, two rails each, every rail shaped to $rate Mbit/s:"
rdma link show
rbond_install || { echo "module not built"; exit 1; }
provider_env

say rdma link add rbond0 type bond netdev a0 || exit 1
say rdma link add rbond0 type bond netdev a1 || exit 1
rdma link add rbond1 type bond netdev b0 && rdma link add rbond1 type bond netdev b1 || exit 1
say rdma link show
say cat /sys/class/infiniband/rbond0/bond/rails
say ibv_devinfo -d rbond0

# wall-clock throughput of one ib_write_bw run between devices DA and DB
bw() {	# bw DEV_A DEV_B SERVER_IP PORT -> Mbit/s
	local t0 t1
	t0=$(date +%s%N)
	timeout -k 5 600 ib_write_bw -d "$2" -x 1 -s $size -n "$iters" -u $RBOND_QP_TIMEOUT -F \
		-p "$4" >/tmp/demo.srv 2>&1 &
	sleep 1
	timeout -k 5 600 ib_write_bw -d "$1" -x 1 -s $size -n "$iters" -u $RBOND_QP_TIMEOUT -F \
		-p "$4" "$3" >/tmp/demo.cli 2>&1 || { cat /tmp/demo.cli >&2; echo 0; return; }
	wait
	t1=$(date +%s%N)
	echo $(( size * iters * 8 * 1000 / (t1 - t0) ))
}
echo
echo "ib_write_bw, 1 QP, $iters x 1 MiB (wall clock, includes connection setup):"
one=$(bw rxe_a0 rxe_b0 "$(rail_ip 0 b)" 19001)
bond=$(bw rbond0 rbond1 "$(rail_ip 0 b)" 19002)
limit=$((2 * rate))
printf '\n| %-26s | %8s | %10s | %14s |\n' setup Mbit/s "x one rail" "x limit ($limit)"
printf '|%s|%s|%s|%s|\n' "----------------------------" "----------" "------------" "----------------"
for row in "one rail (plain rxe):$one" "rdma_bond (2 rails):$bond"; do
	v=${row#*:}
	printf '| %-26s | %8s | %10s | %14s |\n' "${row%%:*}" "$v" \
		"$(awk -v a="$v" -v b="$one" 'BEGIN{printf "%.2fx", b ? a/b : 0}')" \
		"$(awk -v a="$v" -v b="$limit" 'BEGIN{printf "%.2f", a/b}')"
done
