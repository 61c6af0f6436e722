#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 110
#
# A multi-rail QP whose control connection dies gets a new one
# (Documentation/rdma_bond.rst, "Control channel").  rbond_verify and
# rbond_stream run bond<->bond over both rails; with heartbeats on and no
# silence verdict (failover_silent_ms 0), the control connections over
# rail 0 (every QP's home) are cut for 6 s: a u32 filter on both rail-0
# egresses drops the RoCE packets whose BTH destination QPN is a control
# QP's (rdma res show cm_id).  Their peers fall silent, and the half-open
# rule (or the control QPs' retries) take them down; each QP connects anew
# (mrail_stats conn_renewed).  Then rail 1 goes down for 8 s: the QPs'
# FENCEs go over the new connection, both hosts fail over, nothing is lost.
# Before the renewal existed, a QP kept its dead connection: the FENCE went
# nowhere and its WQEs on rail 1 failed 3 s after the link went down
# ("peer did not fence it: its WQEs fail"), the programs with them.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0,1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_fo_up "${CR_RATE:-40mbit}" "${CR_N:-24}"
CTRL_PORT=$(cat $P/ctrl_port 2>/dev/null || echo 18515)

# ctrl_qpns DEV: the QPNs of rdma_bond's connected control QPs on DEV
ctrl_qpns() {
	rdma res show cm_id link "$1/1" 2>/dev/null | grep ":$CTRL_PORT" |
		awk '{ for (i = 1; i < NF; i++) if ($i == "lqpn") print $(i + 1) }'
}
# ctrl_cut SECS: drop what goes to those QPs over rail 0, both ways, for
# SECS seconds; prints how many QPs were cut
ctrl_cut() {
	local q n=0 dst dev
	for dev in a0 b0; do tc qdisc add dev $dev clsact || return 1; done
	for dst in a b; do
		dev=b0; [ $dst = b ] && dev=a0
		for q in $(ctrl_qpns rxe_${dst}0); do
			tc filter add dev $dev egress protocol ip prio 1 u32 \
				match ip protocol 17 0xff match ip dport 4791 0xffff \
				match u32 "$(printf 0x%08x "$q")" 0x00ffffff at 32 \
				action drop || return 1
			n=$((n + 1))
		done
	done
	echo $n
	sleep "$1"
	for dev in a0 b0; do tc qdisc del dev $dev clsact; done
}

# stream_qpn DEV: the QPN of rbond_stream's QP on DEV
stream_qpn() {
	rdma res show qp link "$1/1" 2>/dev/null | grep rbond_stream |
		awk '{ for (i = 1; i < NF; i++) if ($i == "lqpn") print $(i + 1) }'
}

# stream_check RC OUT DESCRIPTION: an rbond_stream's verdict, two known
# open failures reported as XFAIL by their signs (testing.rst, session of
# 2026-12-07): a FETCH_ADD completed without its result after the home
# member retransmitted - rxe's bug, plain rxe the same (repro/
# rxe_atomic_dupack.sh); and, seen on 6.12 with the host loaded only, a
# home member that went to error with flushes alone, no rail fault ("home
# member on rail 0 flushed, no rail fault"), cause not known.
HOME_FLUSH="open: the home member erred with flushes alone (6.12, loaded host; testing.rst 2026-12-07)"
home_flushed() {
	dmesg_since "$m" | grep -q 'home member on rail 0 flushed, no rail fault'
}
stream_check() {
	local rc=$1 out=$2; shift 2
	if [ "$rc" != 0 ] && prov_stream_rxe_lost "$out" rxe_a0 "$rr0"; then
		log_xfail "$rc" "rxe completed a FETCH_ADD without its result after a retransmission (repro/rxe_atomic_dupack.sh)" "$*"
	elif [ "$rc" != 0 ] && home_flushed; then
		log_xfail "$rc" "$HOME_FLUSH" "$*"
	else
		log_test "$rc" "$*"
	fi
}
# live_check RC DESCRIPTION: a check that needs the streams' QPs alive -
# XFAIL when that open failure took them (nothing was left to check)
live_check() {
	local rc=$1; shift
	if [ "$rc" != 0 ] && home_flushed; then
		log_xfail "$rc" "$HOME_FLUSH: the QPs were gone" "$*"
	else
		log_test "$rc" "$*"
	fi
}

HB0=$(cat $P/heartbeat_ms)
echo 100 > $P/heartbeat_ms
for b in rbond0 rbond1; do
	S0[${b: -1}]=$(cat /sys/class/infiniband/$b/bond/failover_silent_ms)
	echo 0 > /sys/class/infiniband/$b/bond/failover_silent_ms
done

# the control channel's and the renewal's debug lines, for a failure's report
DDC=/sys/kernel/debug/dynamic_debug/control
DBG="file rbond_ctrl.c +p; file rbond_failover.c +p; file rbond_main.c +p"
[ -w $DDC ] && echo "$DBG" > $DDC

m=$(dmesg_mark)
r0=$(mrail_stat conn_renewed); h0=$(mrail_stat ctrl_half_open)
i0=$(mrail_stat inval_timeouts)
rr0=$(rdma_hw_stat rxe_a0 completer_retry_err)
a0=$(rdma_hw_stat rbond0 rail1_failovers); b0=$(rdma_hw_stat rbond1 rail1_failovers)
# the stream runs until the faults are over (stream_stop)
prov_fo_start /tmp/cr 200
wait_striping || log "rail 1 never carried data"
kill -0 $SPID 2>/dev/null || log "the stream ended before the cut"
sq0=$(stream_qpn rbond0); sq1=$(stream_qpn rbond1)
# A second rbond_stream (relaxed MRs: their keys are translated), its own
# programs, so its own PDs: rbond1 hands its MRs' keys out over the
# connection the cut kills, and their deregistration when it ends after
# the renewal cannot be acknowledged - the members of that PD's QPs go to
# error (rbond_mrail_mr_dereg()).  The first stream's QPs, in other PDs,
# must keep their rails: before the fix (6c52a11) every QP towards the
# peer lost its extra rails ("rail 1 failed over (member QP error)" with
# no rail fault; on 6.12 once the stream then failed).
# (prov_cs takes PROV_PORT + 1 in its subshell: past the first stream's)
PROV_PORT=$((PROV_PORT + 5))
S2PORT=$((PROV_PORT + 1))
prov_cs rbond1 rbond0 /tmp/cr_s2 "$PROGS/rbond_stream" \
	-u "$RBOND_QP_TIMEOUT" -R -s 262144 -w 1 -t 120 &
S2PID=$!
PROV_PORT=$((PROV_PORT + 5))
for i in $(seq 200); do
	[ "$(rdma res show qp link rbond0/1 | grep -c rbond_stream)" -ge 2 ] && break
	sleep 0.1
done
sleep 2		# its first WRITEs: the keys are asked for and handed out
log "control QPs cut at kernel clock $(now_k)"
n=$(ctrl_cut 6)
log "control QPs cut on rail 0 for 6 s: ${n:-none}; half-open taken down $(($(mrail_stat ctrl_half_open) - h0)), QPs given a new connection $(($(mrail_stat conn_renewed) - r0))"
[ "${n:-0}" -gt 0 ]
log_test $? "the control connections' QPs were found and cut ($n)"
# the renewal waits out its 1 s gap at most
for i in $(seq 30); do
	[ "$(mrail_stat conn_renewed)" -gt "$r0" ] && break
	sleep 0.1
done
if [ "$(mrail_stat conn_renewed)" -le "$r0" ]; then
	# why not: the connections' state, the QPs', what waits in the kernel
	rdma res show cm_id 2>/dev/null | grep ":$CTRL_PORT" | sed 's/^/#   /'
	for b in rbond0 rbond1; do qp_mrail $b | sed "s/^/#   $b: /"; done
	d_tasks | sed 's/^/#   /'
	dmesg_since "$m" | grep -E 'rbond|rdma_bond|control conn' | tail -n 40 |
		sed 's/^/#   /'
fi
[ "$(mrail_stat conn_renewed)" -gt "$r0" ]
live_check $? "QPs whose control connection died connected anew (conn_renewed +$(($(mrail_stat conn_renewed) - r0)))"
stream_stop rbond0 $S2PORT
wait $S2PID; s2rc=$?
log "second stream ended (rc $s2rc); keys not revoked at the peer, forced: $(($(mrail_stat inval_timeouts) - i0))"
stream_check $s2rc /tmp/cr_s2 "the second stream, ended after the renewal: intact (rc $s2rc)"
early=$(dmesg_since "$m" | grep -E "rbond0: QP 0x$(printf %x "${sq0:-0}"): rail 1 failed over|rbond1: QP 0x$(printf %x "${sq1:-0}"): rail 1 failed over")
[ -n "$sq0" ] && [ -n "$sq1" ] && [ -z "$early" ]
log_test $? "the stream's QPs (0x$(printf %x "${sq0:-0}"), 0x$(printf %x "${sq1:-0}")) kept their rails when another PD's keys were forced"
[ -z "$early" ] || echo "$early" | sed 's/^/#   /'
sleep 1
qa=$(qp_mrail rbond0; qp_mrail rbond1)
kill -0 $SPID 2>/dev/null || log "the first stream ended before rail 1 went down"
rail_down a1
log "rail 1 down at $(date +%T) (kernel clock $(now_k))"
sleep 8
rail_up a1
sleep 2
stream_stop rbond0
wait $VPID; vrc=$?
wait $SPID; src=$?
[ $vrc = 0 ] || tail -n 5 /tmp/cr_v /tmp/cr_v.srv | sed 's/^/#   /'
[ $vrc = 0 ]
log_test $? "rbond_verify intact across the cut and the rail's failure (rc $vrc)"
prov_stream_report /tmp/cr_s $src
# what the wire lost (the rails' tbf queues) and what the members retried:
# the bed is meant to be lossless (testbed notes)
log "tbf drops: a0 $(tbf_drops a0) a1 $(tbf_drops a1) b0 $(tbf_drops b0) b1 $(tbf_drops b1)"
for d in rxe_a0 rxe_b0; do log "$d: $(rxe_retry_stats $d)"; done
stream_ok $src 0 "control connection renewed"; rc=$?
stream_check $rc /tmp/cr_s "rbond_stream: SENDs in order, none lost or duplicated, data intact (rc $src)"
a1=$(rdma_hw_stat rbond0 rail1_failovers); b1=$(rdma_hw_stat rbond1 rail1_failovers)
[ "$a1" -gt "$a0" ] && [ "$b1" -gt "$b0" ]
rc=$?
[ $rc = 0 ] || echo "$qa" | sed 's/^/#   QPs before rail 1 went down: /'
live_check $rc "both bonds failed over from rail 1 (rbond0 +$((a1 - a0)), rbond1 +$((b1 - b0)))"
dmesg_since "$m" | grep -E 'peer did not fence|rail 1 failed over' | sed 's/^/# /'
[ "$src" = 0 ] || dmesg_since "$m" | grep -E 'rbond|rdma_bond' |
	grep -vE 'heartbeat|QP_RSP' | tail -n 60 | sed 's/^/#   /'
! dmesg_since "$m" | grep -q 'peer did not fence'
log_test $? "every FENCE was answered (no 'peer did not fence it')"

[ -w $DDC ] && echo "${DBG//+p/-p}" > $DDC
echo "$HB0" > $P/heartbeat_ms
for b in rbond0 rbond1; do
	echo "${S0[${b: -1}]}" > /sys/class/infiniband/$b/bond/failover_silent_ms
done
for d in a0 a1 b0 b1; do rail_unshape $d; done
exit $ret
