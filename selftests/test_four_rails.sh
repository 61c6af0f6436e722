#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
# time: 80
#
# Four rails per host: the scheduler, negotiation, key translation and
# counters beyond two rails.
#   1. rbond_verify (relaxed 1 MiB WRITEs, READs, SENDs, every byte, wr_id
#      and completion order checked) on unshaped rails: every rail carried
#      a share (at least 1/32 of the bytes: unshaped rails are CPU-bound and
#      unequal), and every rail's tx_wqes counter moved;
#   2. rails shaped to the same rate: one QP ib_write_bw 1 MiB, the bond
#      against one plain rail measured first in the same guest; each rail
#      carries at least an eighth of the bytes, and the gain is at least
#      FR_MIN_RATIO (a floor for a loaded TCG host; the goal, 3.8x, is the
#      benchmark's four-rail point: make bench);
#   3. rbond_stream (WRITE, SEND with sequence numbers, FETCH_ADD, READ)
#      on the shaped rails: nothing lost, duplicated or out of order.
#
#   host A  rbond0 = [rxe_a0 .. rxe_a3]  <== rails 0..3 ==>  host B  rbond1 = [rxe_b0 .. rxe_b3]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
RBOND_NRAILS=4
prov_mrail

RATE=${FR_RATE:-40mbit}
ITERS=${FR_ITERS:-120}		# 1 MiB WRITEs of the bond (one rail: a quarter)
MIN_RATIO=${FR_MIN_RATIO:-2.0}
RAILS="0 1 2 3"
tx_all() { local r; for r in $RAILS; do printf '%s ' "$(rail_tx_bytes a$r)"; done; }
# shares BEFORE AFTER DIV: per-rail bytes, and 0 if each carried >= 1/DIV
shares() {
	local -a b=($1) a=($2)
	local r sum=0 ok=0 out= div=$3
	for r in $RAILS; do sum=$((sum + a[r] - b[r])); done
	for r in $RAILS; do
		out="$out a$r $(((a[r] - b[r]) / 1000000)) MB"
		[ $((a[r] - b[r])) -ge $((sum / div)) ] || ok=1
	done
	echo "$out"
	return $ok
}

[ "$(cat /sys/class/infiniband/rbond0/bond/num_rails)" = 4 ] &&
	[ "$(cat /sys/class/infiniband/rbond1/bond/num_rails)" = 4 ]
log_test $? "both bonds have four rails"

# 1. conformance on unshaped rails
for r in $RAILS; do eval "w$r=\$(rdma_hw_stat rbond0 rail${r}_tx_wqes)"; done
t0=$(tx_all)
prov_cs rbond1 rbond0 /tmp/fr_vf "$PROGS/rbond_verify" -u "$RBOND_QP_TIMEOUT" -R -n 32 -s 1048576
log_test $? "rbond_verify -R -n 32 -s 1048576 over four rails ($(grep -c '^ok' /tmp/fr_vf) checks)"
out=$(shares "$t0" "$(tx_all)" 32)
log_test $? "every rail carried a share (>= 1/32):$out"
rc=0 moved=
for r in $RAILS; do
	eval "w=\$w$r"
	now=$(rdma_hw_stat rbond0 rail${r}_tx_wqes)
	moved="$moved rail${r}_tx_wqes ${w:-?}->${now:-?}"
	[ "${now:-0}" -gt "${w:-0}" ] || rc=1
done
log_test $rc "per-rail counters moved:$moved"

# 2. bandwidth on shaped rails
for r in $RAILS; do rail_shape a$r "$RATE"; rail_shape b$r "$RATE"; done
U="-x 1 -u $RBOND_QP_TIMEOUT -F"
bw() {	# bw SERVER CLIENT ITERS: prints "rc Mbit/s"
	local samp=/tmp/fr_samp cpid spid rc
	PROV_PORT=$((PROV_PORT + 1))
	timeout -k 5 600 ib_write_bw -d "$1" -p $PROV_PORT -s 1048576 -n "$3" \
		-t 16 $U >/tmp/fr_bw.srv 2>&1 &
	spid=$!
	prov_wait_listen $PROV_PORT 60 || log "ib_write_bw server not listening"
	timeout -k 5 600 ib_write_bw -d "$2" -p $PROV_PORT -s 1048576 -n "$3" \
		-t 16 $U "$(prov_ip "$1")" >/tmp/fr_bw 2>&1 &
	cpid=$!
	wire_sample $cpid $samp
	wait $cpid; rc=$?
	wait $spid || rc=1
	echo "$rc $(wire_rate $samp)"
}
read -r rc1 one <<< "$(bw rxe_b0 rxe_a0 $((ITERS / 4)))"
t0=$(tx_all)
read -r rc2 four <<< "$(bw rbond1 rbond0 $ITERS)"
out=$(shares "$t0" "$(tx_all)" 8); sh=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ]
log_test $? "ib_write_bw 1 MiB: one plain rail and the four-rail bond completed"
log_test $sh "one QP's WRITEs went over all four rails:$out"
ratio=$(echo "scale=2; ${four:-0} / ${one:-1}" | bc)
log "RESULT four rails, one QP, 1 MiB: bond $four Mbit/s / one rail $one Mbit/s = $ratio (limit 4.00, rails at $RATE)"
[ "$(echo "$ratio >= $MIN_RATIO" | bc)" = 1 ]
log_test $? "aggregate gain $ratio x one rail (>= $MIN_RATIO)"

# 3. integrity across four shaped rails
prov_cs rbond1 rbond0 /tmp/fr_st "$PROGS/rbond_stream" -u "$RBOND_QP_TIMEOUT" \
	-s 1048576 -w 4 -n 64
rc=$?
[ $rc = 0 ] || tail -n 5 /tmp/fr_st.srv | sed 's/^/#   server: /'
log_test $rc "rbond_stream 64 x (1 MiB WRITE, SEND, FETCH_ADD, READ): nothing lost, duplicated or reordered"
exit $ret
