#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Failover of an extra rail under traffic (Documentation/rdma_bond.rst,
# "Failover").  Every case runs rbond_verify (WRITE then SEND with every
# byte checked on the receiver, READ back checked, every wr_id, opcode,
# byte_len, status and completion order) bond<->bond with relaxed-ordered
# MRs, so that 1 MiB WRITEs and READs are striped over both rails, and
# breaks rail 1 in the middle of it:
#   1. link down (ip link set down) for 8 s: both hosts see a port error;
#   2. silent loss (netem loss 100%) on both directions: no event, the
#      watchdog finds the rail making no progress;
#   3. loss in one direction only (host B's egress): host A's work on the
#      rail stalls, A fails over and has B fence its member (FENCE), B
#      fails over too;
#   4. the member device removed (rdma link delete rxe_a1);
#   5. ib_write_bw, one QP, 64 KiB, rail 1 down for good half-way.
# Each must complete with no error and intact data; the counters must
# show the failover (rail1_failovers), and the rail comes back for new QPs.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]  <== rails 0,1 ==>  host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
require_cmd ib_write_bw
prov_up both

P=/sys/module/rdma_bond/parameters
echo 1 > $P/multirail || fail "cannot enable multirail"
RATE=${FO_RATE:-40mbit}
N=${FO_N:-24}			# 1 MiB chunks per rbond_verify phase
stat() { awk -v k="$1" '$1 == k { print $2 }' $P/mrail_stats; }
# hw counter of a bond: hwc BOND NAME
hwc() { rdma statistic show link "$1/1" 2>/dev/null |
	tr ' ' '\n' | awk -v k="$2" 'p { print; exit } $0 == k { p = 1 }'; }
shape_all() { local d; for d in a0 a1 b0 b1; do rail_shape $d "$RATE"; done; }
shape_all

# rail 1 carries data: wait up to 20 s for its tx counter to move by 1 MB
wait_striping() {
	local t0 i
	t0=$(($(rail_tx_bytes a1) + $(rail_tx_bytes b1)))
	for i in $(seq 200); do
		[ $(($(rail_tx_bytes a1) + $(rail_tx_bytes b1) - t0)) -gt 1000000 ] &&
			return 0
		sleep 0.1
	done
	return 1
}

# readd_rail1: after a removal, rxe_a1 again and rail 1 of rbond0 again
readd_rail1() {
	rdma link add rxe_a1 type rxe netdev a1 2>/dev/null
	_wait_gid rxe_a1
	rdma link add rbond0 type bond netdev a1
}

# fo_case LABEL BREAK REPAIR: rbond_verify with rail 1 broken by BREAK
# once it carries data, repaired by REPAIR after FO_HOLD seconds
fo_case() {
	local label=$1 brk=$2 fix=$3 f0 r0 a0 a1= b0 vpid rc us=
	f0=$(stat failovers); r0=$(stat failover_replayed)
	a0=$(hwc rbond0 rail1_failovers); b0=$(hwc rbond1 rail1_failovers)
	prov_cs rbond1 rbond0 /tmp/fo_v "$PROGS/rbond_verify" \
		-u "$RBOND_QP_TIMEOUT" -R -n "$N" -s 1048576 -T 120 &
	vpid=$!
	if wait_striping; then
		eval "$brk"
		log "$label: rail 1 broken ($brk)"
		sleep "${FO_HOLD:-8}"
		grep '^1 ' /sys/class/infiniband/rbond0/bond/rails | sed 's/^/# rbond0 rails: /'
		# before the repair: a rail added again starts from zero
		a1=$(hwc rbond0 rail1_failovers); us=$(hwc rbond0 rail1_failover_us)
		eval "$fix"
	else
		log "$label: rail 1 never carried data"
	fi
	wait $vpid; rc=$?
	[ -n "$a1" ] || a1=$(hwc rbond0 rail1_failovers)
	log "$label: failovers $(($(stat failovers) - f0)), replayed WQEs $(($(stat failover_replayed) - r0)), rbond0 rail1_failovers $((a1 - a0)), rbond1 $(($(hwc rbond1 rail1_failovers) - b0)), failure to resumed traffic ${us:-?} us"
	[ $rc = 0 ]
	log_test $? "$label: rbond_verify intact across the failure ($(grep -c '^ok' /tmp/fo_v) checks)"
	[ "$(stat failovers)" -gt "$f0" ] && [ "$a1" -gt "$a0" ]
	log_test $? "$label: rbond0 failed over from rail 1"
	FO_B=$(($(hwc rbond1 rail1_failovers) - b0))
}

# 1. link down for 8 s (both hosts: a veth pair loses carrier on both ends)
m=$(dmesg_mark)
fo_case "link down" "rail_down a1" "rail_up a1"
[ "$FO_B" -gt 0 ]
log_test $? "link down: rbond1 failed over from rail 1 too"
[ "$(dmesg | tail -n +$((m + 1)) | grep -c 'rbond0: rail 1 down')" = 1 ]
log_test $? "link down: logged once for rbond0"
_wait_gid rxe_a1; _wait_gid rxe_b1
grep -q '^1 .* active$' /sys/class/infiniband/rbond0/bond/rails
log_test $? "link down: rail 1 active again"

# 2. silent loss, both directions
fo_case "silent loss" \
	"rail_shape a1 $RATE '' 100%; rail_shape b1 $RATE '' 100%" \
	"rail_shape a1 $RATE; rail_shape b1 $RATE"

# 3. loss of B's egress only: A stalls, fences B's member through FENCE
fo_case "one-way loss" "rail_shape b1 $RATE '' 100%" "rail_shape b1 $RATE"
[ "$FO_B" -gt 0 ]
log_test $? "one-way loss: rbond1 fenced and failed over on rbond0's request"

# 4. member device removed
fo_case "device removed" "rdma link delete rxe_a1" "readd_rail1"
grep -q '^1 rxe_a1 a1 active$' /sys/class/infiniband/rbond0/bond/rails
log_test $? "device removed: rail 1 back in rbond0"

# 5. ib_write_bw, one QP, 64 KiB, rail 1 down for good half-way: completes
f0=$(stat failovers)
PROV_PORT=$((PROV_PORT + 1))
timeout -k 5 300 ib_write_bw -d rbond1 -p $PROV_PORT -s 65536 -n 1500 -F \
	-x 1 -u "$RBOND_QP_TIMEOUT" >/tmp/fo_bw.srv 2>&1 &
spid=$!
prov_wait_listen $PROV_PORT 60 || log "ib_write_bw server not listening"
timeout -k 5 300 ib_write_bw -d rbond0 -p $PROV_PORT -s 65536 -n 1500 -F \
	-x 1 -u "$RBOND_QP_TIMEOUT" "$(prov_ip rbond1)" >/tmp/fo_bw 2>&1 &
cpid=$!
wait_striping && sleep 2
rail_down a1
t0=$(date +%s.%N); w0=$(rail_tx_bytes a0)
wait $cpid; rc=$?
wait $spid || rc=1
t1=$(date +%s.%N); w1=$(rail_tx_bytes a0)
log "ib_write_bw after rail 1 down: rail 0 carried $(((w1 - w0) / 1000000)) MB in $(echo "$t1 - $t0" | bc) s"
[ $rc = 0 ]
log_test $? "ib_write_bw completes with rail 1 down for good (rc $rc)"
[ "$(stat failovers)" -gt "$f0" ]
log_test $? "ib_write_bw: QPs failed over ($(($(stat failovers) - f0)))"
rail_up a1

for d in a0 a1 b0 b1; do rail_unshape $d; done
echo 0 > $P/multirail
exit $ret
