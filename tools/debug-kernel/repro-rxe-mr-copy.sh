#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/debug-kernel/repro-rxe-mr-copy.sh - shows that the KASAN report fixed by
# patches/0001-rxe-mr-copy-map-overrun.patch is rxe's, not rdma_bond's: plain rxe
# <-> plain rxe, rdma_bond not loaded, rbond_verify with 1 MiB buffers.
# Boot the UNPATCHED debug kernel (exit 125 = a report, as seen on 2026-11-30):
#   tools/vm/run --kernel 6.1.192-rbond-dbg -- bash tools/debug-kernel/repro-rxe-mr-copy.sh
cd "$(dirname "$0")/../.." || exit 1
. selftests/lib.sh
. selftests/progs/lib_provider.sh
topo_up || exit 1
lsmod | grep -q rdma_bond && { echo "rdma_bond is loaded"; exit 1; }
V="-u $RBOND_QP_TIMEOUT -n 8"
prov_cs rxe_b0 rxe_a0 /tmp/vf "$PROGS/rbond_verify" $V -e -R -s 1048576

