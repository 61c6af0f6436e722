#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: pair
#
# UD and UCX between two hosts, each with rbond0 over its two rails
# (Documentation/rdma_bond.rst, "UD queue pairs"):
#   1. ibv_ud_pingpong rbond0 (a) <-> rbond0 (b);
#   2. ucx_perftest with UCX_NET_DEVICES=rbond0:1: tag_lat over ud_verbs,
#      tag_bw over rc_verbs with UD wireup, UCT put_bw (rc_verbs, zcopy);
#   3. a benchmark line (not a check): tag_bw 1 MiB x UCX_N over one plain
#      rail (rxe_a0 <-> rxe_b0), then over the bonds, rails shaped to
#      UCX_RATE each: the bond's bandwidth (as ucx_perftest reports it)
#      against the plain rail's, and both rails' byte counters.
# UCX runs with UCX_UD_VERBS_ETH_DGID_CHECK=n: on rxe its UD check drops
# every packet (see test_ud.sh); and with UCX_IB_PCI_RELAXED_ORDERING=on:
# UCX then registers its memory with IBV_ACCESS_RELAXED_ORDERING, which
# is what lets the bond (ordering relaxed-mr, the default) split one
# rendezvous READ over both rails.  UCX completes a rendezvous only when
# the READ's completion arrives, so it never observes placement order.
#
#   guest a: rbond0 = [rxe_a0 10.0.1.1, rxe_a1 10.0.2.1]  (clients)
#   guest b: rbond0 = [rxe_b0 10.0.1.2, rxe_b1 10.0.2.2]  (servers)
. "$(dirname "$0")/lib.sh"
require_guest
require_module
require_provider
require_cmd ibv_ud_pingpong ucx_perftest
pair_bonds_up
me=$(rbond_me)
export UCX_UD_VERBS_ETH_DGID_CHECK=n UCX_IB_GID_INDEX=1 UCX_IB_PCI_RELAXED_ORDERING=on

pair_cs ud ibv_ud_pingpong -d rbond0 -g 1 -p 18740 -s 1024 -n 500
rc=$?
if [ "$me" = a ]; then
	grep -q '500 iters in' /tmp/ud.cli || rc=1
	log "$(grep 'iters in' /tmp/ud.cli)"
fi
log_test $rc "ibv_ud_pingpong 1024 B rbond0 (a) <-> rbond0 (b)"

# ucx_final NAME RC: RC, or 1 if the client printed no "Final:" line
ucx_final() {
	local rc=$2
	if [ "$me" = a ]; then
		grep -q '^Final:' "/tmp/$1.cli" || rc=1
		log "$1: $(grep '^Final:' "/tmp/$1.cli" | tr -s ' ')"
	fi
	return $rc
}
# ucx NAME DEV TLS PORT CLIENT_ARGS: ucx_perftest server on b, client on a
ucx() {
	local name=$1 dev=$2 tls=$3 port=$4; shift 4
	UCX_NET_DEVICES=$dev:1 UCX_TLS=$tls pair_cs "$name" bash -c \
		'exec ucx_perftest -p '"$port"' ${1:+'"$*"' "$1"}' _
	ucx_final "$name" $?
}
ucx tl rbond0 ud_verbs,self 18741 -t tag_lat -n 300
log_test $? "ucx_perftest tag_lat over UD, bond <-> bond"
ucx tb rbond0 rc_verbs,ud_verbs,self 18742 -t tag_bw -s 1048576 -n 40
log_test $? "ucx_perftest tag_bw 1 MiB (RC data, UD wireup), bond <-> bond"
pair_cs pb bash -c 'exec ucx_perftest -p 18743 -d rbond0:1 -x rc_verbs ${1:+-t put_bw -D zcopy -s 65536 -n 300 "$1"}' _
ucx_final pb $?
log_test $? "ucx_perftest put_bw (UCT rc_verbs, zcopy), bond <-> bond"

# --- benchmark: one plain rail against the bond, rails shaped --------------
for r in 0 1; do rail_shape "$me$r" "${UCX_RATE:-40mbit}"; done
pair_sync shaped || fail "peer did not shape its rails"
n=${UCX_N:-120}
bench() {	# bench NAME DEV: seconds of tag_bw 1 MiB x n (client side)
	local t0 t1 b0 b1 c0 c1
	t0=$(date +%s%N); b0=$(rail_tx_bytes "${me}0"); c0=$(rail_tx_bytes "${me}1")
	ucx "$1" "$2" rc_verbs,ud_verbs,self "$3" -t tag_bw -s 1048576 -n "$n" || return 1
	t1=$(date +%s%N); b1=$(rail_tx_bytes "${me}0"); c1=$(rail_tx_bytes "${me}1")
	[ "$me" = a ] && log "$1: $(( (t1 - t0) / 1000000 )) ms, rail 0 sent $((b1 - b0)) B, rail 1 $((c1 - c0)) B"
	echo $(( (t1 - t0) / 1000000 )) > "/tmp/$1.ms"
}
bench plain "rxe_${me}0" 18744
rc1=$?
# each host's adaptive rail rates, once a second: how the bond split the
# rendezvous READs (host b posts them) is read from these
( while :; do tr '\n' ' ' < /sys/class/infiniband/rbond0/bond/rail_rates
	echo; sleep 1; done ) > /tmp/rates.log &
rpid=$!
bench bonded rbond0 18745
rc2=$?
kill $rpid
if [ "$me" = b ]; then
	pair_put rates "$(tr '\n' '|' < /tmp/rates.log)"
else
	log "rail_rates (kbit/s) each second, a: $(tr '\n' '|' < /tmp/rates.log)"
	log "rail_rates (kbit/s) each second, b: $(pair_get rates 60)"
fi
if [ "$me" = a ] && [ $rc1 = 0 ] && [ $rc2 = 0 ]; then
	# UCX's own figure: "Final:" ... overall bandwidth (MB/s) is field 7
	bw_p=$(awk '/^Final:/ { print $7 }' /tmp/plain.cli)
	bw_b=$(awk '/^Final:/ { print $7 }' /tmp/bonded.cli)
	log "BENCH ucx tag_bw 1 MiB x $n, rails ${UCX_RATE:-40mbit}: plain rail $bw_p MB/s" \
		"($(cat /tmp/plain.ms) ms), bond $bw_b MB/s ($(cat /tmp/bonded.ms) ms):" \
		"bond/plain $(awk -v p="$bw_p" -v b="$bw_b" 'BEGIN { printf "%.2f", b / p }')x"
fi
[ $rc1 = 0 ] && [ $rc2 = 0 ]
log_test $? "ucx_perftest tag_bw over a shaped plain rail and over the bond"
pair_sync done 600
exit $ret
