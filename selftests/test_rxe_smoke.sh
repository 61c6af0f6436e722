#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop pair
#
# Plain Soft-RoCE over each rail, no rdma_bond involved: ibv_rc_pingpong and
# ib_write_bw between host A and host B on rail 0 and on rail 1, with the
# bytes seen on that rail's wire.
#
#   host A  rxe_a0 <-- rail 0 --> rxe_b0  host B
#           rxe_a1 <-- rail 1 --> rxe_b1
. "$(dirname "$0")/lib.sh"
require_guest
require_cmd ibv_rc_pingpong ib_write_bw
topo_up || fail "topology"
me=$(rbond_me)

test_pingpong() {	# test_pingpong RAIL
	local r=$1 rc sdev=rxe_b$1 cdev=rxe_a$1
	if [ "$RBOND_TOPO" = pair ] && [ "$me" = b ]; then
		timeout -k 5 120 ibv_rc_pingpong -d "$sdev" -g 1 -p $((18600 + r)) -n 20 >/tmp/.pp 2>&1 &
		local spid=$!
		sleep 1; pair_put pp.$r up; wait $spid; rc=$?
	elif [ "$RBOND_TOPO" = pair ]; then
		pair_get pp.$r 60 >/dev/null
		timeout -k 5 120 ibv_rc_pingpong -d "$cdev" -g 1 -p $((18600 + r)) -n 20 \
			"$(rail_ip "$r" b)" >/tmp/.pp 2>&1; rc=$?
	else
		timeout -k 5 60 ibv_rc_pingpong -d "$sdev" -g 1 -p $((18600 + r)) -n 200 >/tmp/.pps 2>&1 &
		sleep 0.5
		timeout -k 5 60 ibv_rc_pingpong -d "$cdev" -g 1 -p $((18600 + r)) -n 200 \
			"$(rail_ip "$r" b)" >/tmp/.pp 2>&1; rc=$?
		wait $! || rc=1
	fi
	grep -q 'iters in' /tmp/.pp || rc=1
	[ $rc -eq 0 ] && log "$(grep 'iters in' /tmp/.pp)" || sed 's/^/#   /' /tmp/.pp
	log_test $rc "ibv_rc_pingpong on rail $r"
}

test_write_bw() {	# test_write_bw RAIL
	local r=$1 rc before after moved n=20 size=1048576
	before=$(rail_tx_bytes $me$r)
	perf_pair "$r" $((18700 + r)) ib_write_bw -x 1 -s $size -n $n -u $RBOND_QP_TIMEOUT -F \
		>/tmp/.bw 2>&1; rc=$?
	after=$(rail_tx_bytes $me$r)
	moved=$((after - before))
	if [ "$me" = a ]; then
		grep -E '^ *[0-9]+ +[0-9]+ ' /tmp/.bw | sed 's/^/# /'
		[ $moved -ge $((n * size)) ] || { log "rail $r: only $moved bytes on the wire"; rc=1; }
	fi
	[ $rc -eq 0 ] || sed 's/^/#   /' /tmp/.bw | tail -n 20
	log_test $rc "ib_write_bw 1 MiB x $n on rail $r ($moved bytes on the wire)"
}

test_pingpong 0
test_pingpong 1
test_write_bw 0
test_write_bw 1
exit $ret
