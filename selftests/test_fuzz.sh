#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# topo: manual (not in the stock-kernel suite: 6.1's rxe has bugs it finds,
#       Documentation/testing.rst "What it found"; run by name, and by the
#       debug lane, whose kernel carries fixes for them)
#
# The verbs fuzzer: rbond_fuzz (selftests/progs/rbond_fuzz.c) drives seeded
# random sequences of verbs calls through the provider on rbond0, with RC
# QPs connected to rbond1 (real traffic, multi-rail) and unconnected ones,
# boundary values from query_device and from each QP's granted caps, stale
# and foreign keys, every QP state, dereg/destroy/close/fork/exit while
# WRs are in flight.  Each seed must end with no invariant violation (exit
# 0) and no kernel report (the kernel log, and kmemleak on the debug
# kernel, are checked after every seed so that a report names its seed).
#
#   host A  rbond0 = [rxe_a0, rxe_a1]   <== rails 0,1 ==>   host B  rbond1 = [rxe_b0, rxe_b1]
#
# FUZZ_SEEDS="S1 S2 ..." runs those seeds (reproduce a failure); otherwise
# FUZZ_RUNS (3) seeds: first the regression seeds (FUZZ_REGRESS, default the
# seeds that found bugs fixed since: Documentation/testing.rst "What it
# found"; FUZZ_REGRESS= for none), then random ones.  FUZZ_SECS (20): seconds per seed;
# FUZZ_BUDGET (seconds, 0 = none): stop starting new seeds after this long
# (the debug lane runs many seeds in a fixed budget).  FUZZ_CALLS: -n CALLS
# instead of -t (exact replay of a seed's call count).  FUZZ_VERBOSE=1: every
# call and completion (-v); FUZZ_KEEP=DIR: each seed's whole output is kept
# as DIR/fuzz-SEED.out (the work tree is writable from the guest).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/progs/lib_provider.sh"
prov_require
[ -x "$PROGS/rbond_fuzz" ] || skip "rbond_fuzz not built (make progs)"
prov_up both

secs=${FUZZ_SECS:-20}
budget=${FUZZ_BUDGET:-0}
runs=${FUZZ_RUNS:-3}
# The seeds to run first (then random ones): FUZZ_SEEDS, and only those; or
# the regression seeds -- 15260148822499: the post/RESET race, the divide
# error, rxe's bad-response status; 5348682489890: rxe's reset/receive
# use-after-free, a child's MR.
if [ -n "${FUZZ_SEEDS:-}" ]; then
	first=($FUZZ_SEEDS)
	runs=${#first[@]}
else
	first=(${FUZZ_REGRESS-15260148822499 5348682489890})
fi
new_seed() { od -An -N6 -tu8 /dev/urandom | tr -d ' '; }

t0=$(date +%s)
nseeds=0 tcalls=0 twrs=0 twcs=0 failed_seeds=""
for i in $(seq "$runs"); do
	if [ "$budget" -gt 0 ] && [ $(( $(date +%s) - t0 + secs )) -gt "$budget" ]; then
		break
	fi
	seed=${first[$((i - 1))]:-$(new_seed)}
	if [ -n "${FUZZ_CALLS:-}" ]; then lim="-n $FUZZ_CALLS"; else lim="-t $secs"; fi
	# (a kernel panic kills the guest before the result line: name the seed first)
	log "seed $seed: starting ($lim)"
	mark=$(dmesg_mark)
	s0=$(date +%s)
	# -k: a fuzzer stuck in the kernel past its own watchdog is killed
	timeout -k 10 $(( secs + 420 )) "$PROGS/rbond_fuzz" -d rbond0 -D rbond1 \
		-u "$RBOND_QP_TIMEOUT" -s "$seed" $lim ${FUZZ_VERBOSE:+-v} \
		> /tmp/fuzz.out 2>&1
	rc=$?
	[ -n "${FUZZ_KEEP:-}" ] && cp /tmp/fuzz.out "$FUZZ_KEEP/fuzz-$seed.out"
	dur=$(( $(date +%s) - s0 ))
	sum=$(grep -E '^# seed [0-9]+: ' /tmp/fuzz.out | tail -n1)
	calls=$(sed -n 's/.*: \([0-9]*\) calls .*/\1/p' <<< "$sum")
	wrs=$(sed -n 's/.* \([0-9]*\) WRs posted.*/\1/p' <<< "$sum")
	wcs=$(sed -n 's/.* \([0-9]*\) completions .*/\1/p' <<< "$sum")
	nseeds=$((nseeds + 1)); tcalls=$((tcalls + ${calls:-0}))
	twrs=$((twrs + ${wrs:-0})); twcs=$((twcs + ${wcs:-0}))
	why=
	[ "$rc" -eq 0 ] || why="fuzzer exit $rc"
	[ -n "$sum" ] || why="${why:+$why, }no summary line (crashed or killed)"
	if ! kmemleak_scan || ! dmesg_check "$mark"; then
		why="${why:+$why, }kernel log report"
	fi
	if [ -n "$why" ]; then
		# the first violation with the calls before it, then the rest
		sed -n '/^VIOLATION/,$p' /tmp/fuzz.out | head -n 60 | sed 's/^/#   /'
		grep -E 'VIOLATION|reproduce' /tmp/fuzz.out | tail -n +2 | head -n 10 | sed 's/^/#   /'
		tail -n 3 /tmp/fuzz.out | sed 's/^/#   /'
		failed_seeds+=" $seed"
		log_test 1 "rbond_fuzz seed $seed: $why (${dur}s; FUZZ_SEEDS=$seed reproduces)"
		# the kernel may be unusable after a report: stop here
		break
	fi
	log_test 0 "rbond_fuzz seed $seed: ${calls:-?} calls, ${wrs:-?} WRs, ${wcs:-?} completions in ${dur}s"
done
log "fuzz: $nseeds seeds, $tcalls calls, $twrs WRs posted, $twcs completions in $(( $(date +%s) - t0 )) s${failed_seeds:+; failed seeds:$failed_seeds}"
[ "$nseeds" -gt 0 ] || log_test 1 "no seed ran (budget $budget s < $secs s per seed?)"
exit $ret
