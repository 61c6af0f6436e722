#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/run.sh - run rdma_bond selftests inside the guest, print TAP and a
# closing "N passed, N failed, N skipped" line.
#
#   selftests/run.sh [-t loop|pair] [TEST...]
#
# Every selftests/test_*.sh declares the topologies it runs in with a header
# line "# topo: loop pair".  Each test runs in its own process, builds and
# tears down its own topology, and fails if the kernel log gained a report
# (WARN, oops, lockdep, KASAN, kmemleak, ...) while it ran.
#
# RBOND_SUITE_BUDGET=S (loop topology only; a pair's two sides must agree):
# a test whose "# time: N" header (seconds on a 2-core TCG host, 60 if
# absent) would end past S seconds after the suite started is skipped,
# named, so that CI's budget holds (tools/run-tests.sh, tools/kver-lane.sh).
# RBOND_SUITE_TIME_PCT scales those headers (the debug kernel: 250).
cd "$(dirname "$0")" || exit 1
. ./lib.sh

topo=loop
while getopts "t:" o; do
	case $o in
	t) topo=$OPTARG ;;
	*) echo "usage: $0 [-t loop|pair] [TEST...]"; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
export RBOND_TOPO=$topo

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	for t in test_*.sh; do
		# "# topo: loop pair (comment)": the words before any "("
		topos=$(sed -n 's/^# topo://p' "$t" | head -n1 | cut -d'(' -f1)
		[[ " $topos " == *" $topo "* ]] && tests+=("$t")
	done
fi

pass=0 failn=0 skipn=0 n=0
budget=${RBOND_SUITE_BUDGET:-0}
[ "$topo" = loop ] || budget=0
suite_t0=$(date +%s)
kmemleak_baseline
echo "TAP version 13"
echo "1..${#tests[@]}"
for t in "${tests[@]}"; do
	# selftests/NAME, a harness self-check (harness/rbond_inject.sh), a
	# reproduction of an open bug or a benchmark (repro/*.sh, bench/*.sh:
	# not in the suite)
	case $t in harness/*|repro/*|bench/*) ;; *) t=$(basename "$t") ;; esac
	n=$((n + 1))
	name=$(basename "${t%.sh}")
	if [ "$budget" -gt 0 ]; then
		est=$(sed -n 's/^# time: *\([0-9][0-9]*\).*/\1/p' "$t" | head -n1)
		est=$(( ${est:-60} * ${RBOND_SUITE_TIME_PCT:-100} / 100 ))
		if [ $(( $(date +%s) - suite_t0 + est )) -gt "$budget" ]; then
			echo "ok $n $name # SKIP ~${est} s would overrun the suite's ${budget} s budget"
			skipn=$((skipn + 1))
			continue
		fi
	fi
	if [ "$topo" = pair ]; then
		export RBOND_PAIR_DIR=$RBOND_PAIR_BASE/$n-$name
		mkdir -p "$RBOND_PAIR_DIR"
		pair_sync start 300 || echo "# peer did not start $name"
	fi
	echo "# $name ($topo)"
	mark=$(dmesg_mark)
	start=$(date +%s)
	timeout -k 10 "${RBOND_TEST_TIMEOUT:-900}" bash "./$t" 2>&1 | sed 's/^/  /'
	rc=${PIPESTATUS[0]}
	secs=$(( $(date +%s) - start ))
	if ! kmemleak_scan || ! dmesg_check "$mark"; then
		echo "# $name: kernel log report"
		rc=1
	fi
	if [ "$rc" -eq 0 ]; then
		echo "ok $n $name # ${secs}s"; pass=$((pass + 1))
	elif [ "$rc" -eq $KSFT_SKIP ]; then
		echo "ok $n $name # SKIP"; skipn=$((skipn + 1))
	else
		[ "$rc" -eq 124 ] && echo "# $name: timed out"
		echo "not ok $n $name # exit $rc, ${secs}s"; failn=$((failn + 1))
	fi
	[ "$topo" = pair ] && pair_sync "end" 600
done
echo "$pass passed, $failn failed, $skipn skipped"
[ $failn -eq 0 ]
