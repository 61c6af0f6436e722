#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: bench  (a measurement, not a pass/fail test: run by name or by make bench)
#
# Single-rail overhead of the bond against plain rxe, same run, same rail:
# ib_write_bw 64 KiB and ib_write_lat 2 B between rxe_a0 and rxe_b0, then
# between two one-rail bonds over the same devices.  Reports the ratios
# (bond / rxe); fails only if a run fails.  Rails are not shaped: the cost
# measured is the kernel data path's CPU cost under TCG.
#
#   host A  rbond0 = [rxe_a0]  a0 10.0.1.1 <--- rail 0 ---> b0 10.0.1.2  rbond1 = [rxe_b0]  host B
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ib_write_bw ib_write_lat
topo_up || fail "topology"
rbond_install || fail "module install"
rdma link add rbond0 type bond netdev a0 && _wait_gid rbond0 || fail "one-rail bond rbond0"
rdma link add rbond1 type bond netdev b0 && _wait_gid rbond1 || fail "one-rail bond rbond1"

N_BW=${N_BW:-400} N_LAT=${N_LAT:-2000}
U="-x 1 -u $RBOND_QP_TIMEOUT -F"
bw() { prov_cs "$1" "$2" /tmp/ov ib_write_bw $U -s 65536 -n "$N_BW" &&
	grep -E '^ *65536 +[0-9]+ ' /tmp/ov | tail -n1 | awk '{print $4}'; }
lat() { prov_cs "$1" "$2" /tmp/ov ib_write_lat $U -s 2 -n "$N_LAT" &&
	grep -E '^ *2 +[0-9]+ ' /tmp/ov | tail -n1 | awk '{print $6}'; }

rxe_bw=$(bw rxe_b0 rxe_a0);   log_test $? "ib_write_bw 64 KiB rxe_a0 -> rxe_b0: $rxe_bw MB/s"
bond_bw=$(bw rbond1 rbond0);  log_test $? "ib_write_bw 64 KiB rbond0 -> rbond1: $bond_bw MB/s"
rxe_lat=$(lat rxe_b0 rxe_a0); log_test $? "ib_write_lat 2 B rxe_a0 -> rxe_b0: t_avg $rxe_lat us"
bond_lat=$(lat rbond1 rbond0); log_test $? "ib_write_lat 2 B rbond0 -> rbond1: t_avg $bond_lat us"
# a second rxe bandwidth run bounds the run-to-run noise
rxe_bw2=$(bw rxe_b0 rxe_a0);  log_test $? "ib_write_bw 64 KiB rxe_a0 -> rxe_b0 again: $rxe_bw2 MB/s"

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
log "RESULT single-rail bw ratio bond/rxe (64 KiB): $(ratio "$bond_bw" "$rxe_bw") ($bond_bw / $rxe_bw MB/s; rxe repeat $rxe_bw2)"
log "RESULT single-rail latency ratio bond/rxe (2 B): $(ratio "$bond_lat" "$rxe_lat") ($bond_lat / $rxe_lat us)"
exit $ret
