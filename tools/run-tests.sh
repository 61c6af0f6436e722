#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/run-tests.sh - the README's test command (and what .ci/run runs):
# install dependencies, build everything, run the debug-kernel lane (KASAN,
# lockdep, kmemleak; its kernel build, the verbs fuzzer) with a deadline,
# then the selftests in the qemu test bed (loop topology, then pair
# topology), the same two suites on bookworm's 6.12 (tools/kver-lane.sh
# --all), print "N passed, N failed, N skipped".
#
#   tools/run-tests.sh [--loop-only] [--kernel KVER]
#
# CI gives a run RBOND_CI_MIN (90) minutes on 2 cores.  The debug lane goes
# first (on a fresh machine its kernel build alone is ~16 min) but must end
# RBOND_SUITES_MIN (56) minutes before that budget runs out: the loop and
# pair suites on the default kernel, the harness check and both suites on
# 6.12 (~64 min measured, Documentation/testing.rst) come after it.  The
# 6.12 suites get what is left less 6 min and give way when it is short:
# the pair suite runs only if it fits, a loop test that would overrun is
# skipped by name (tools/kver-lane.sh --budget).  RBOND_DEBUG_LANE=0 skips
# the lane, =force runs it whole without a deadline; RBOND_K612=0 leaves out
# the 6.12 suites.
set -u
cd "$(dirname "$0")/.." || exit 1
. tools/suite-result.sh
topos="debug loop pair harness k612"
kargs=()
while [ $# -gt 0 ]; do
	case "$1" in
	--loop-only) topos="loop"; shift ;;
	--kernel) kargs=(--kernel "$2"); shift 2 ;;
	*) echo "usage: $0 [--loop-only] [--kernel KVER]"; exit 2 ;;
	esac
done

t0=$(date +%s)
dbg=${RBOND_DEBUG_LANE:-1}
[[ " $topos " == *" debug "* ]] || dbg=0
deps=()
[ "$dbg" != 0 ] && deps=(--debug)
tools/deps.sh "${deps[@]}" || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
echo "# dependencies ready after $(( $(date +%s) - t0 )) s"

pass=0 failn=0 skipn=0
fails=$(mktemp)
count() {	# count LOGFILE: add the closing line of a selftests/run.sh run
	local line p f s
	line=$(suite_result "$1")
	if [ -z "$line" ]; then
		echo "# $2: no result line (guest died or timed out)"
		failn=$((failn + 1)); return
	fi
	read -r p f s <<< "$line"
	pass=$((pass + p)); failn=$((failn + f)); skipn=$((skipn + s))
}
step() {	# step NAME CMD...: one build/meta check counted as one test
	local name=$1; shift
	if "$@" > /tmp/rbond-step.log 2>&1; then
		echo "ok - $name"; pass=$((pass + 1))
	else
		echo "not ok - $name"; sed 's/^/# /' /tmp/rbond-step.log | tail -n 40
		failn=$((failn + 1))
	fi
}

# Build.  A part not written yet is reported as skipped, not failed.
kver=${kargs[1]:-$(tools/default-kver.sh)}
if [ -f drivers/rdma_bond/Kbuild ]; then
	step "build module (W=1, no warnings, KVER=$kver)" \
		bash -c "make -s modules KVER=$kver 2>&1 | tee /dev/stderr | (! grep -E 'warning:|error:')"
	if tools/checkpatch-path.sh | grep -q .; then
		step "checkpatch --strict" make -s checkpatch
	fi
	# Compat check: the module also builds against bookworm's 6.12
	# headers (in a copy of the tree, .vm/src-KVER; ~1 min).  The guests
	# keep booting the default kernel; tools/kver-lane.sh runs the suite
	# on 6.12 by hand (Documentation/testing.rst).
	if k612=$(tools/default-kver.sh --series 6.12 --build); then
		step "build module against $k612 (W=1, no warnings)" \
			tools/kver-lane.sh --build-only --kernel "$k612"
	else
		echo "ok - build module against 6.12 # SKIP no 6.12 headers (tools/deps.sh installs them)"
		skipn=$((skipn + 1))
	fi
else
	echo "ok - build module # SKIP not written yet"; skipn=$((skipn + 1))
fi
for part in provider:tools/provider progs:selftests/progs; do
	if [ -f "${part#*:}/Makefile" ]; then
		step "build ${part%%:*}" make -s "${part%%:*}"
	fi
done

for topo in $topos; do
	log=$(mktemp)
	case $topo in
	loop)
		echo "# --- selftests, loop topology (one guest), $(( ($(date +%s) - t0) / 60 )) min elapsed ---"
		s0=$(date +%s)
		tools/vm/run "${kargs[@]}" --timeout 2400 -- selftests/run.sh -t loop 2>&1 | tee "$log"
		count "$log" "loop"
		echo "# loop suite took $(( $(date +%s) - s0 )) s" ;;
	pair)
		echo "# --- selftests, pair topology (two guests), $(( ($(date +%s) - t0) / 60 )) min elapsed ---"
		s0=$(date +%s)
		tools/vm/pair "${kargs[@]}" --timeout 2400 -- selftests/run.sh -t pair 2>&1 | tee "$log"
		count "$log" "pair"
		echo "# pair suite took $(( $(date +%s) - s0 )) s" ;;
	harness)
		# The harness must fail a guest whose kernel WARNs, whatever the
		# command returns: load a module that WARNs at init.
		if [ -f selftests/harness/Kbuild ]; then
			step "harness detects a kernel WARN" bash -c "
				make -s -C /lib/modules/$kver/build M=\$PWD/selftests/harness modules &&
				! tools/vm/run ${kargs[*]} --timeout 300 -- insmod selftests/harness/rbond_warn.ko"
		fi ;;
	k612)
		# Both suites again on bookworm's 6.12 (its module, provider
		# and programs built in .vm/src-KVER), in what is left of CI's
		# budget less 6 min (the copy and build take ~2 min of it)
		if [ -z "${k612:-}" ] || [ -n "${kargs[*]}" ] || [ "${RBOND_K612:-1}" = 0 ]; then
			why="no 6.12 kernel (tools/deps.sh installs one)"
			[ -n "${k612:-}" ] && why="RBOND_K612=0 or --kernel given"
			echo "ok - selftests on 6.12 # SKIP $why"
			skipn=$((skipn + 1))
		else
			echo "# --- selftests on $k612 (tools/kver-lane.sh --all), $(( ($(date +%s) - t0) / 60 )) min elapsed ---"
			s0=$(date +%s)
			kb=$(( t0 + ${RBOND_CI_MIN:-90} * 60 - 240 - s0 - 120 ))
			if [ "$kb" -lt 600 ]; then
				echo "ok - selftests on $k612 # SKIP only $kb s left of CI's budget"
				skipn=$((skipn + 1))
			else
				tools/kver-lane.sh --kernel "$k612" --all --budget "$kb" 2>&1 | tee "$log"
				count "$log" "$k612"
			fi
			echo "# $k612 suites took $(( $(date +%s) - s0 )) s"
		fi ;;
	debug)
		# KASAN/lockdep/kmemleak kernel built from linux-source-6.1
		# (cached in /var/tmp/rdma_bond-cache), self-checks with
		# injected bugs, the verbs fuzzer, a subset of the suite.  It
		# must end by $deadline so that the stock-kernel suites still
		# fit; lane.sh trims itself to it (fuzz budget, suite subset)
		# and stops a kernel build that would overrun it (the next run
		# continues that build from the cache).
		echo "# --- debug-kernel lane (tools/debug-kernel/lane.sh), $(( ($(date +%s) - t0) / 60 )) min elapsed ---"
		ci=${RBOND_CI_MIN:-90}
		deadline=$(( t0 + (ci - ${RBOND_SUITES_MIN:-56}) * 60 ))
		if [ "$dbg" = 0 ]; then
			echo "ok - debug-kernel lane # SKIP RBOND_DEBUG_LANE=0"; skipn=$((skipn + 1))
		else
			lenv=()
			if [ "$dbg" != force ]; then
				# the fuzzer's share: 240 s (lane.sh's own
				# default is 360) keeps the lane with its
				# selftest subset near 21 min (2026-12-06)
				lenv=(RBOND_LANE_DEADLINE="$deadline"
				      RBOND_LANE_FUZZ_BUDGET="${RBOND_LANE_FUZZ_BUDGET:-240}")
				echo "# lane deadline: $(( (deadline - t0) / 60 )) min into the run" \
					"($(( (deadline - $(date +%s)) / 60 )) min from now)"
			fi
			l0=$(date +%s)
			env "${lenv[@]}" tools/debug-kernel/lane.sh 2>&1 | tee "$log"
			count "$log" "debug"
			echo "# debug-kernel lane took $(( $(date +%s) - l0 )) s"
		fi ;;
	esac
	# what failed, for the closing summary
	grep -E '\[FAIL\]|^(\[a\] )?not ok|# FAIL:|: no result line|kernel log report|has a failure report|timed out' \
		"$log" | sed "s/^/# [$topo] /" >> "$fails"
	rm -f "$log"
done

echo "# test run took $(( $(date +%s) - t0 )) s"
if [ -s "$fails" ]; then
	echo "# --- what failed (the full lines are above) ---"
	head -n 40 "$fails"
fi
rm -f "$fails"
echo "$pass passed, $failn failed, $skipn skipped"
[ $failn -eq 0 ]
