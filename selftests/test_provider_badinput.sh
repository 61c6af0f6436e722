#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: loop
#
# Bad input from userspace through the provider: rbond_badinput on rbond0
# (peer rbond1, then peer plain rxe_b0): limits, verbs the bond does not
# implement (EOPNOTSUPP), UD traffic with data checked and what a UD QP
# refuses, MR access rules, busy PD/CQ (EBUSY), QP state
# machine, post-time checks, completion errors.  Every call must fail with
# the expected error (a completion error: the one the member gives natively,
# recorded first on the plain rails); the kernel log must stay clean.
# BI_ONLY_WC=1: the completion errors only (-C); BI_KEEP=DIR: each run's
# whole output is kept as DIR/bi-DEV-PEER.out.
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
prov_up both

# The completion errors the member gives natively (they differ between
# kernels): recorded on the plain rails, the bond is held to exactly them.
NAT=/tmp/bi.native
timeout -k 5 200 "$PROGS/rbond_badinput" -d rxe_a0 -D rxe_b0 -C -W $NAT \
	-u "$RBOND_QP_TIMEOUT" >/tmp/bi 2>&1
rc=$?
grep -E '^not ok' /tmp/bi | sed 's/^/#   /'
log "native completion errors of rxe_a0 -> rxe_b0: $(cut -d' ' -f1 $NAT | tr '\n' ' ')"
log_test $rc "rbond_badinput -C on the plain rails: native completion errors recorded"

bi() {	# bi DEV PEER
	local rc
	timeout -k 5 400 "$PROGS/rbond_badinput" -d "$1" -D "$2" -N $NAT \
		-u "$RBOND_QP_TIMEOUT" ${BI_ONLY_WC:+-C} >/tmp/bi 2>&1
	rc=$?
	[ -n "${BI_KEEP:-}" ] && cp /tmp/bi "$BI_KEEP/bi-$1-$2.out"
	grep -q '^ok.*EOPNOTSUPP.*SKIP' /tmp/bi && { log "$1 not seen as a bond"; rc=1; }
	# each failed check with the diagnostics just before it
	awk '/^#/ { d[n++ % 3] = $0; next }
	     /^not ok/ { for (i = n - 3; i < n; i++) if (i >= 0) print d[i % 3]; print; n = 0; next }
	     { n = 0 }' /tmp/bi | sed 's/^/#   /'
	# how often the timing-dependent cases ran their race
	grep -E '^ok .*(RESET cycles|exactly the granted)' /tmp/bi | sed 's/^/#   /'
	log "UD checks passed: $(grep -c '^ok [0-9]* - UD:' /tmp/bi)"
	log_test $rc "rbond_badinput -d $1 -D $2 ($(tail -n 1 /tmp/bi | sed 's/^# //'))"
}
bi rbond0 rbond1
bi rbond0 rxe_b0
exit $ret
