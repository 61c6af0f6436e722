#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/run-tests.sh - the README's test command (and what .ci/run runs):
# install dependencies, build everything, run the selftests in the qemu test
# bed (loop topology, then pair topology), print "N passed, N failed, N skipped".
#
#   tools/run-tests.sh [--loop-only] [--kernel KVER]
set -u
cd "$(dirname "$0")/.." || exit 1
topos="loop pair harness debug"
kargs=()
while [ $# -gt 0 ]; do
	case "$1" in
	--loop-only) topos="loop"; shift ;;
	--kernel) kargs=(--kernel "$2"); shift 2 ;;
	*) echo "usage: $0 [--loop-only] [--kernel KVER]"; exit 2 ;;
	esac
done

t0=$(date +%s)
tools/deps.sh || { echo "0 passed, 1 failed"; exit 1; }

pass=0 failn=0 skipn=0
count() {	# count LOGFILE: add the closing line of a selftests/run.sh run
	local line p f s
	# (a pair run's lines carry a "[a] " prefix)
	line=$(grep -oE '^(\[a\] )?[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" |
		tail -n1 | sed 's/^\[a\] //')
	if [ -z "$line" ]; then
		echo "# $2: no result line (guest died or timed out)"
		failn=$((failn + 1)); return
	fi
	read -r p _ f _ s _ <<< "$line"
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
		echo "# --- selftests, loop topology (one guest) ---"
		tools/vm/run "${kargs[@]}" --timeout 2400 -- selftests/run.sh -t loop 2>&1 | tee "$log"
		count "$log" "loop" ;;
	pair)
		echo "# --- selftests, pair topology (two guests) ---"
		tools/vm/pair "${kargs[@]}" --timeout 2400 -- selftests/run.sh -t pair 2>&1 | tee "$log"
		count "$log" "pair" ;;
	harness)
		# The harness must fail a guest whose kernel WARNs, whatever the
		# command returns: load a module that WARNs at init.
		if [ -f selftests/harness/Kbuild ]; then
			step "harness detects a kernel WARN" bash -c "
				make -s -C /lib/modules/$kver/build M=\$PWD/selftests/harness modules &&
				! tools/vm/run ${kargs[*]} --timeout 300 -- insmod selftests/harness/rbond_warn.ko"
		fi ;;
	debug)
		# KASAN/lockdep/kmemleak kernel built from linux-source-6.1
		# (cached; the first build is long, see README), self-checks
		# with injected bugs, then a subset of the suite on it.
		echo "# --- debug-kernel lane (tools/debug-kernel/lane.sh) ---"
		# CI gives a run 90 minutes: the lane (~15 min) and, on a
		# machine without the cached kernel, its build (~20 min of
		# wall time on 2 free cores) start only if they still fit.
		dkver=$(tools/debug-kernel/build.sh --print-kver 2>/dev/null)
		cached=0
		[ -n "$dkver" ] && [ -d "${RBOND_CACHE:-/var/tmp/rdma_bond-cache}/kernels/$dkver" ] && cached=1
		elapsed=$(( ($(date +%s) - t0) / 60 ))
		need=$(( cached ? 65 : 35 ))
		if [ "${RBOND_DEBUG_LANE:-1}" = 0 ]; then
			echo "ok - debug-kernel lane # SKIP RBOND_DEBUG_LANE=0"; skipn=$((skipn + 1))
		elif [ "${RBOND_DEBUG_LANE:-1}" != force ] && [ "$elapsed" -ge "$need" ]; then
			echo "ok - debug-kernel lane # SKIP ${elapsed} min elapsed, kernel cached: $cached;" \
				"it would not fit CI's 90 min (RBOND_DEBUG_LANE=force runs it)"
			skipn=$((skipn + 1))
		else
			tools/debug-kernel/lane.sh 2>&1 | tee "$log"
			count "$log" "debug"
		fi ;;
	esac
	rm -f "$log"
done

echo "# test run took $(( $(date +%s) - t0 )) s"
echo "$pass passed, $failn failed, $skipn skipped"
[ $failn -eq 0 ]
