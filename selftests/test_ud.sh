#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 45
#
# UD queue pairs on the bond (Documentation/rdma_bond.rst, "UD queue
# pairs"), with software nobody here wrote:
#   1. ibv_ud_pingpong rbond1 <-> rbond0 (sizes 64 B and 1024 B, the path
#      MTU), then with rbond1 deleted, rbond0 <-> plain rxe_b0 in both
#      directions: every iteration completes;
#   2. ucx_perftest between the two bonds with UCX_NET_DEVICES=rbondN:1:
#      UCP tag_lat (UD only), tag_bw (RC data with UD wireup: needs the
#      bond's UD QPs), and UCT put_bw (rc_verbs, zero copy);
#   3. the counters: rail 0's tx_wqes moved for the UD traffic;
#   4. rbond0's home rail deleted (rdma link delete rxe_a0) under a running
#      ibv_ud_pingpong: its QP and AHs lose their member objects, the
#      program ends with an error instead of hanging, and the kernel log
#      stays clean (the member AHs go before the member PD).
# UCX reads the RoCE packet type of a UD completion from wc.sl as mlx5
# reports it; rxe reports 0, so UCX takes the IPv4 header rxe puts in the
# receive buffer for a GRH and drops every UD packet ("UD endpoint ...
# unhandled timeout error", on plain rxe too): the test bed runs UCX with
# UCX_UD_VERBS_ETH_DGID_CHECK=n, which skips that check.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
require_cmd ibv_ud_pingpong
prov_mrail

# udpp SERVER_DEV CLIENT_DEV SIZE PORT: ibv_ud_pingpong, 200 iterations
udpp() {
	local s=$1 c=$2 size=$3 port=$4 rc
	timeout -k 5 60 ibv_ud_pingpong -d "$s" -g 1 -p "$port" -s "$size" -n 200 \
		> /tmp/ud.srv 2>&1 &
	prov_wait_listen "$port" 30
	timeout -k 5 60 ibv_ud_pingpong -d "$c" -g 1 -p "$port" -s "$size" -n 200 \
		"$(prov_ip "$s")" > /tmp/ud.cli 2>&1
	rc=$?
	wait $! || rc=1
	grep -q '200 iters in' /tmp/ud.cli || rc=1
	[ $rc = 0 ] || { sed 's/^/#   client: /' /tmp/ud.cli | tail -5; sed 's/^/#   server: /' /tmp/ud.srv | tail -5; }
	log "$(grep 'iters in' /tmp/ud.cli)"
	return $rc
}

w0=$(rdma_hw_stat rbond0 rail0_tx_wqes)
udpp rbond1 rbond0 64 18700
log_test $? "ibv_ud_pingpong 64 B rbond0 -> rbond1"
udpp rbond1 rbond0 1024 18701
log_test $? "ibv_ud_pingpong 1024 B rbond0 -> rbond1"
[ $(( $(rdma_hw_stat rbond0 rail0_tx_wqes) - w0 )) -ge 400 ]
log_test $? "rbond0 rail0_tx_wqes counted the UD sends (+$(( $(rdma_hw_stat rbond0 rail0_tx_wqes) - w0 )))"

# --- UCX ----------------------------------------------------------------
if command -v ucx_perftest > /dev/null; then
	export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_IB_GID_INDEX=1
	# ucx SERVER_DEV CLIENT_DEV TLS PORT ARGS...: a UCP test
	ucx() {
		local s=$1 c=$2 tls=$3 port=$4 rc; shift 4
		UCX_NET_DEVICES=$s:1 UCX_TLS=$tls timeout -k 5 90 \
			ucx_perftest -p "$port" > /tmp/ucx.srv 2>&1 &
		prov_wait_listen "$port" 30
		UCX_NET_DEVICES=$c:1 UCX_TLS=$tls timeout -k 5 90 \
			ucx_perftest -p "$port" "$@" 127.0.0.1 > /tmp/ucx.cli 2>&1
		rc=$?
		wait $! || rc=1
		grep -q '^Final:' /tmp/ucx.cli || rc=1
		[ $rc = 0 ] || { grep -iE 'error|fatal' /tmp/ucx.cli | head -4 | sed 's/^/#   client: /'; }
		log "$(grep '^Final:' /tmp/ucx.cli | tr -s ' ')"
		return $rc
	}
	ucx rbond1 rbond0 ud_verbs,self 18710 -t tag_lat -n 200
	log_test $? "ucx_perftest tag_lat over UD between the bonds"
	a1=$(rail_tx_bytes a1)
	ucx rbond1 rbond0 rc_verbs,ud_verbs,self 18711 -t tag_bw -s 1048576 -n 40
	log_test $? "ucx_perftest tag_bw 1 MiB (RC, UD wireup) between the bonds"
	log "tag_bw: rail 1 carried $(( $(rail_tx_bytes a1) - a1 )) bytes"
	timeout -k 5 90 ucx_perftest -p 18712 -d rbond1:1 -x rc_verbs > /tmp/uct.srv 2>&1 &
	prov_wait_listen 18712 30
	timeout -k 5 90 ucx_perftest -p 18712 -d rbond0:1 -x rc_verbs -t put_bw -D zcopy \
		-s 65536 -n 200 127.0.0.1 > /tmp/uct.cli 2>&1
	rc=$?; wait $! || rc=1
	grep -q '^Final:' /tmp/uct.cli || rc=1
	log "$(grep '^Final:' /tmp/uct.cli | tr -s ' ')"
	log_test $rc "ucx_perftest put_bw (UCT rc_verbs, zcopy) between the bonds"
else
	log_test $KSFT_SKIP "ucx_perftest not installed (ucx-utils)"
fi

# --- against a plain rxe device -------------------------------------------
rdma link delete rbond1 || fail "delete rbond1"
udpp rxe_b0 rbond0 512 18720
log_test $? "ibv_ud_pingpong 512 B rbond0 -> plain rxe_b0"
udpp rbond0 rxe_b0 512 18721
log_test $? "ibv_ud_pingpong 512 B plain rxe_b0 -> rbond0"

# --- the home rail deleted under UD traffic ----------------------------------
timeout -k 5 120 ibv_ud_pingpong -d rxe_b0 -g 1 -p 18730 -s 512 -n 100000000 \
	> /tmp/ud.srv 2>&1 &
spid=$!
prov_wait_listen 18730 30
timeout -k 5 120 ibv_ud_pingpong -d rbond0 -g 1 -p 18730 -s 512 -n 100000000 \
	"$(rail_ip 0 b)" > /tmp/ud.cli 2>&1 &
cpid=$!
sleep 3
rdma link delete rxe_a0
log "rbond0 rails now: $(tr '\n' ';' < /sys/class/infiniband/rbond0/bond/rails)"
t0=$(date +%s)
wait $cpid; crc=$?
kill $spid 2>/dev/null; wait $spid
log "client exit $crc after $(( $(date +%s) - t0 )) s: $(tail -n 2 /tmp/ud.cli | tr '\n' ' ')"
[ $crc -ne 0 ] && [ $crc -ne 124 ] && [ $crc -ne 137 ]
log_test $? "home rail deleted under ibv_ud_pingpong: the program gets an error, no hang"
# (UD on the remaining rail is not tried: the bond's GIDs stay the old
# primary's while its netdev lives, see Documentation/rdma_bond.rst,
# "Lifecycle")
log "rbond0 GID 1 after the removal: $(cat /sys/class/infiniband/rbond0/ports/1/gids/1)"
exit $ret
