#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: pair
#
# Two real hosts (two guests, two kernels, two copies of the module), each
# with its own bond built by `rdma link add`: unmodified ibv_rc_pingpong and
# ib_write_bw run bond <-> bond across the qemu socket links, and
# rbond_verify checks every byte, wr_id and status of SEND, WRITE(+SEND) and
# READ traffic.
#
#   guest a: rbond0 = [rxe_a0 on a0 10.0.1.1, rxe_a1 on a1 10.0.2.1]
#                 ||  qemu socket link per rail (127.0.0.1)  ||
#   guest b: rbond0 = [rxe_b0 on b0 10.0.1.2, rxe_b1 on b1 10.0.2.2]
. "$(dirname "$0")/lib.sh"
require_guest
require_module
require_provider
require_cmd ibv_rc_pingpong ib_write_bw
pair_bonds_up
me=$(rbond_me)
PROGS=$RBOND_TOP/selftests/progs
log "$(cat /sys/class/infiniband/rbond0/bond/rails | tr '\n' ';')"

pair_cs pp ibv_rc_pingpong -d rbond0 -g 1 -p 18610 -n 20
rc=$?; [ "$me" = a ] && { grep -q 'iters in' /tmp/pp.cli || rc=1; log "$(grep 'iters in' /tmp/pp.cli)"; }
log_test $rc "ibv_rc_pingpong rbond0 (host a) <-> rbond0 (host b)"

pair_cs bw ib_write_bw -d rbond0 -x 1 -p 18611 -s 1048576 -n 20 -u "$RBOND_QP_TIMEOUT" -F
log_test $? "ib_write_bw 1 MiB x 20 bond <-> bond"

if [ -x "$PROGS/rbond_verify" ]; then
	pair_cs verify "$PROGS/rbond_verify" -d rbond0 -p 18612 -n 16
	log_test $? "rbond_verify: SEND, WRITE+SEND, READ data and completions bond <-> bond"
fi
pair_sync done 600
exit $ret
