#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: pair
#
# A hostile peer of the multi-rail control channel (Documentation/
# rdma_bond.rst, "Threat model"), from host b against host a's module, while
# a real bond QP pair runs between them:
#   1. a root process on b binds a privileged port and (progs/rbond_hostile
#      forge) sprays forged QP_RSPs at the victim QP of host a while it
#      negotiates, then sends malformed, truncated, wrong-version, replayed
#      and forged messages (QP_REQ/RKEY_REQ naming the victim QP from the
#      wrong QPN, without or with a guessed nonce, RKEY_REQ for a key of
#      another PD), FENCEs for the victim's rail 1 with a guessed nonce
#      (sprayed during its traffic), for rail 200, for the home rail, and
#      a FENCE_ACK nobody asked for: each ignored or refused as NOENT with
#      no key material, and no rail of the victim fails over;
#      the victim pair (progs/rbond_hostile victim, 24 x 1 MiB relaxed
#      WRITEs + SEND, every byte checked) completes and is striped;
#   2. an unprivileged process on b (uid nobody) connects to the control
#      port of every rail address of a: refused; it cannot bind a port
#      below 1024 (EACCES from rdma_cm: the premise of the port check);
#   3. 200 connection requests with bad private data: all refused, and
#      host a has no more rdma_cm ids afterwards than before (a refused
#      request leaves nothing behind);
#   4. 24 control connections held at once from b's address: at most 16
#      accepted (the per-address bound), the rest refused.
# RBOND_HOSTILE_PROTO=1 makes the hostile programs speak the old (version 1)
# wire format, to run this test against the module before the fixes.
#
#   guest a: rbond0 = [rxe_a0 10.0.1.1, rxe_a1 10.0.2.1]  (victim client)
#   guest b: rbond0 = [rxe_b0 10.0.1.2, rxe_b1 10.0.2.2]  (victim server,
#            the forger, the unprivileged user)
. "$(dirname "$0")/lib.sh"
require_guest
require_module
require_provider
[ "${RBOND_TOPO:-}" = pair ] || skip "pair topology only"
require_cmd setpriv rdma
H=$RBOND_TOP/selftests/progs/rbond_hostile
[ -x "$H" ] || skip "rbond_hostile not built (make progs)"
topo_up || fail "topology"
me=$(rbond_me)
provider_env
VER=${RBOND_HOSTILE_PROTO:-3}
COUNT=24
D=$(pair_dir)

rbond_install || fail "module install"
rbond_create rbond0 "$me" && _wait_gid rbond0 || fail "bond over $me's rails"
pair_sync bonds_up || fail "peer did not build its bond"

# rdma_cm ids of host a on the control port (listeners, connections)
ctrl_ids() { rdma res show cm_id 2>/dev/null | grep -c ":18515 "; }
stats() { tr '\n' ' ' < /sys/module/rdma_bond/parameters/mrail_stats; }

# --- 1. the victim pair under attack ---------------------------------------
if [ "$me" = b ]; then
	timeout -k 5 300 "$H" victim -d rbond0 -p 18661 -F "$D" -c $COUNT \
		> /tmp/victim.out 2>&1 &
	vpid=$!
	timeout -k 5 300 "$H" forge -a "$(rail_ip 0 a)" -l "$(rail_ip 0 b)" \
		-P 1000 -V "$VER" -F "$D" > /tmp/forge.out 2>&1
	frc=$?
	sed 's/^/#   /' /tmp/forge.out
	wait $vpid; vrc=$?
	sed 's/^/#   /' /tmp/victim.out
	log_test $frc "forged and malformed messages refused, nothing disclosed"
	log_test $vrc "victim server: data intact"
	pair_put forge_rc "$frc"
else
	tx0=$(rail_tx_bytes a1)
	fenced0=$(dmesg | grep -c 'failed over (peer fenced)')
	timeout -k 5 300 "$H" victim -d rbond0 -p 18661 -F "$D" -c $COUNT \
		"$(rail_ip 0 b)" > /tmp/victim.out 2>&1
	vrc=$?
	sed 's/^/#   /' /tmp/victim.out
	tx1=$(( $(rail_tx_bytes a1) - tx0 ))
	log "rail 1 carried $tx1 bytes of $((COUNT << 20)); $(stats)"
	log_test $vrc "victim client: every WRITE and the SEND completed"
	[ "$tx1" -ge $(( (COUNT << 20) / 5 )) ]
	log_test $? "victim QP striped over both rails despite the forged QP_RSPs"
	pair_get forge_rc 300 >/dev/null
	fenced=$(( $(dmesg | grep -c 'failed over (peer fenced)') - fenced0 ))
	[ "$fenced" -eq 0 ]
	log_test $? "forged FENCEs failed no rail over ($fenced failovers 'peer fenced')"
fi
pair_sync victim_done 300

# --- 2. unprivileged connects, 3. a flood of bad requests ------------------
if [ "$me" = a ]; then
	pair_get probes_done 300 >/dev/null
	sleep 2
	before=$(ctrl_ids)
	pair_put ids_before "$before"
	pair_get flood_done 600 >/dev/null
	sleep 2
	after=$(ctrl_ids)
	log "control-port rdma_cm ids on host a: $before before, $after after"
	[ "$after" -le "$before" ]
	log_test $? "refused requests leave no rdma_cm id behind ($before -> $after)"
	[ "$after" -le "$before" ] || rdma res show cm_id | tail -n 5 | sed 's/^/#   /'
	pair_put ids_checked 1
else
	for r in $(seq 0 $((RBOND_NRAILS - 1))); do
		out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
			timeout -k 5 60 "$H" probe -a "$(rail_ip "$r" a)" \
			-l "$(rail_ip "$r" b)" -V "$VER" 2>&1)
		rc=$?
		log "$out"
		[ $rc -eq 2 ]
		log_test $? "unprivileged (uid 65534) connect to $(rail_ip "$r" a):18515 refused"
	done
	# the premise: rdma_cm does not let an unprivileged user bind port < 1024
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups \
		timeout -k 5 60 "$H" probe -a "$(rail_ip 0 a)" \
		-l "$(rail_ip 0 b)" -P 999 -V "$VER" 2>&1)
	log "$out"
	grep -q EACCES <<< "$out"
	log_test $? "unprivileged bind of port 999: EACCES from rdma_cm"
	out=$(timeout -k 5 60 "$H" probe -a "$(rail_ip 0 a)" -l "$(rail_ip 0 b)" \
		-P 999 -V "$VER" 2>&1)
	rc=$?
	log "$out"
	log_test $rc "root from a privileged port: accepted (the listener is there)"
	pair_put probes_done 1
	pair_get ids_before 120 >/dev/null
	out=$(timeout -k 5 600 "$H" flood -a "$(rail_ip 0 a)" -l "$(rail_ip 0 b)" \
		-n 200 2>&1)
	rc=$?
	log "$out"
	log_test $rc "200 requests with bad private data refused"
	pair_put flood_done 1
	pair_get ids_checked 120 >/dev/null
	# 4. a peer address cannot hold more than 16 control connections
	out=$(timeout -k 5 600 "$H" cap -a "$(rail_ip 0 a)" -l "$(rail_ip 0 b)" \
		-P 900 -n 24 -V "$VER" 2>&1)
	log "$out"
	acc=$(sed -n 's/.*: \([0-9]*\) accepted, \([0-9]*\) refused.*/\1/p' <<< "$out" | tail -n1)
	ref=$(sed -n 's/.*: \([0-9]*\) accepted, \([0-9]*\) refused.*/\2/p' <<< "$out" | tail -n1)
	[ -n "$acc" ] && [ "$acc" -ge 1 ] && [ "$acc" -le 16 ] && [ $((acc + ref)) -eq 24 ]
	log_test $? "24 connections at once from one address: at most 16 accepted ($acc), the rest refused"
fi
pair_sync done 600
exit $ret
