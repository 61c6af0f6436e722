#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# The provider binds the bond and only the bond: with RDMAV_DRIVERS pointing
# at tools/provider/librbond, ibv_devices lists rbond0/rbond1 beside the rxe
# rails; ibv_devinfo -v shows one active port carrying the primary rail's
# GIDs; without the provider the bond is not usable; a renamed bond still
# binds (match by <ibdev>/bond/abi_version, not by name).
#
#   host A  rbond0 = [rxe_a0 (primary), rxe_a1]    host B  rbond1 = [rxe_b0, rxe_b1]
#           a0 10.0.1.1 <--- rail 0 ---> b0 10.0.1.2
#           a1 10.0.2.1 <--- rail 1 ---> b1 10.0.2.2
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ibv_devices ibv_devinfo rdma
prov_up both

ibv_devices >/tmp/devs 2>&1
rc=0
for d in rbond0 rbond1 rxe_a0 rxe_b0; do grep -qw "$d" /tmp/devs || rc=1; done
[ $rc -eq 0 ] || sed 's/^/#   /' /tmp/devs
log_test $rc "ibv_devices lists rbond0, rbond1 and the rxe rails"

rc=0
ibv_devinfo -v -d rbond0 >/tmp/di 2>&1 || rc=1
grep -q 'phys_port_cnt:[[:space:]]*1$' /tmp/di || { log "phys_port_cnt is not 1"; rc=1; }
grep -q 'state:[[:space:]]*PORT_ACTIVE' /tmp/di || { log "port not ACTIVE"; rc=1; }
[ $rc -eq 0 ] || sed 's/^/#   /' /tmp/di | head -n 40
log_test $rc "ibv_devinfo -v -d rbond0: one port, PORT_ACTIVE"

ibv_devinfo -v -d rxe_a0 >/tmp/di_rxe 2>&1
gid_b=$(grep -E 'GID\[ *1\]' /tmp/di | head -n1 | awk '{print $3}')
gid_r=$(grep -E 'GID\[ *1\]' /tmp/di_rxe | head -n1 | awk '{print $3}')
log "rbond0 GID[1] $gid_b, rxe_a0 GID[1] $gid_r"
[ -n "$gid_b" ] && [ "$gid_b" = "$gid_r" ]
log_test $? "rbond0's GID[1] is its primary rail's (rxe_a0) GID[1]"

rc=0
env -u RDMAV_DRIVERS ibv_devinfo -d rxe_a0 >/tmp/di_plain 2>&1 || rc=1
ibv_devinfo -d rxe_a0 >/tmp/di_prov 2>&1 || rc=1
cmp -s /tmp/di_plain /tmp/di_prov || { rc=1; diff /tmp/di_plain /tmp/di_prov | sed 's/^/#   /'; }
log_test $rc "rxe rails look the same with and without the rbond provider loaded"

rc=0
(unset RDMAV_DRIVERS; ibv_devinfo -d rbond0) >/tmp/di_none 2>&1 && rc=1
log_test $rc "without the provider libibverbs cannot open rbond0 (nothing else binds it)"

rc=0
rdma dev set rbond0 name rbx0 || rc=1
if [ $rc -eq 0 ]; then
	ibv_devinfo -d rbx0 >/tmp/di_ren 2>&1 && grep -q 'PORT_ACTIVE' /tmp/di_ren || rc=1
	timeout -k 5 200 "$PROGS/rbond_badinput" -d rbx0 >/tmp/bi_ren 2>&1 || true
	grep -q 'rdma_bond' /tmp/bi_ren || rc=1
	[ $rc -eq 0 ] || sed 's/^/#   /' /tmp/di_ren | head -n 20
	rdma dev set rbx0 name rbond0 || rc=1
fi
log_test $rc "renamed to rbx0 the bond still binds and opens; renamed back"
exit $ret
