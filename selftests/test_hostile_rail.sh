#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 75
#
# Hostile requests on the data path of an extra rail (Documentation/
# rdma_bond.rst, "Threat model").  Every extra member QP of a multi-rail QP
# keeps one receive, without a buffer, for the peer's rejoin probe; and it
# holds the application's relaxed MRs' rail keys.  An unprivileged user on
# the peer host who knows the member's QPN and expected PSN (a sniffer on
# the rail) sends, from a plain RC QP of its own on the peer's member
# device:
#   1. a 64-byte SEND into that receive: refused (the receive has no
#      buffer; mrail_stats' probe_recv_errors counts it, probe_recvs does
#      not move), and
#   2. a 64-byte RDMA WRITE with rkey 0,
# each while rbond_stream runs striped between the two bonds (WRITE,
# SEND with sequence number and checksum, FETCH_ADD, READ back).  A
# refused request moves the member to error (the RC responder's rule), so
# the QP fails over from the rail as from any broken rail and takes it back
# later: the stream must end with nothing lost, duplicated or corrupted, a
# new stream afterwards must be striped again, and the guest's kernel log
# stay clean.  The injector itself never hears an answer (the victim's
# NAK goes to the QPN its member is connected to, the peer bond's member,
# not to the injector): its retry-exceeded completion is only logged.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0,1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
#   the injector: uid nobody, on rxe_b1, into rbond0's member on rxe_a1
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
require_cmd setpriv
prov_mrail
H=$PROGS/rbond_hostile
[ -x "$H" ] || skip "rbond_hostile not built (make progs)"
RATE=${HR_RATE:-40mbit}
for d in a0 a1 b0 b1; do rail_shape $d "$RATE"; done

# member_qpn: rbond0's QP's member QPN on rail 1 (its only QP)
member_qpn() {
	rdma res show qp link rbond0/1 -dd 2>/dev/null |
		grep -o 'drv_rail1_qpn [0-9]*' | head -n1 | cut -d' ' -f2
}

# hr_case N OP LABEL: inject OP into rbond0's rail-1 member during a stream
hr_case() {
	local n=$1 op=$2 label=$3 spid src q psn r0 e0 a0
	a0=$(rdma_hw_stat rbond0 rail1_failovers)
	prov_cs rbond1 rbond0 /tmp/hr_s$n "$PROGS/rbond_stream" \
		-u "$RBOND_QP_TIMEOUT" -R -s 1048576 -w 1 -t 16 &
	spid=$!
	if ! wait_striping; then
		wait $spid
		log_test 1 "$label: rail 1 carried the stream before the injection"
		return
	fi
	q=$(member_qpn)
	psn=$(rdma res show qp link rxe_a1/1 lqpn "${q:-0}" -dd 2>/dev/null |
		grep -o 'rq-psn [0-9]*' | cut -d' ' -f2)
	log "$label: rbond0's member on rail 1: QPN ${q:-?}, expected PSN ${psn:-?}"
	if [ -z "$q" ] || [ -z "$psn" ]; then
		wait $spid
		log_test 1 "$label: found rbond0's rail-1 member and its PSN"
		return
	fi
	r0=$(mrail_stat probe_recvs); e0=$(mrail_stat probe_recv_errors)
	setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$H" inject -d rxe_b1 -a "$(rail_ip 1 a)" -q "$q" -s "$psn" \
		-o "$op" -L 64 2>&1 | sed 's/^/# injector: /'
	log "$label: probe_recvs +$(($(mrail_stat probe_recvs) - r0)), probe_recv_errors +$(($(mrail_stat probe_recv_errors) - e0))"
	if [ "$op" = send ]; then
		[ $(($(mrail_stat probe_recv_errors) - e0)) -ge 1 ] && [ "$(mrail_stat probe_recvs)" = "$r0" ]
		log_test $? "$label: the member refused it (probe_recv_errors moved, probe_recvs did not)"
	fi
	wait $spid; src=$?
	prov_stream_report /tmp/hr_s$n $src
	[ $src = 0 ]
	log_test $? "$label: rbond_stream intact across it (nothing lost, duplicated or corrupted)"
	log "$label: rbond0 rail1_failovers +$(($(rdma_hw_stat rbond0 rail1_failovers) - a0))," \
		"failovers $(mrail_stat failovers), replayed $(mrail_stat failover_replayed)"
}

hr_case 1 send "64-byte SEND into the probe receive"
hr_case 2 write "64-byte WRITE with rkey 0"
# the bonds still work: a fresh stream, striped, intact
t1=$(rail_tx_bytes a1)
prov_cs rbond1 rbond0 /tmp/hr_s3 "$PROGS/rbond_stream" \
	-u "$RBOND_QP_TIMEOUT" -R -s 1048576 -w 1 -t 6
log_test $? "afterwards: a new stream between the bonds is intact"
t1=$(($(rail_tx_bytes a1) - t1))
[ $t1 -gt 1000000 ]
log_test $? "afterwards: it is striped (rail 1 sent $t1 bytes)"
exit $ret
