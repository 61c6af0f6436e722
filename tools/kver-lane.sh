#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/kver-lane.sh - build and run the selftests on another installed
# Debian kernel than the default one (by default the newest 6.12).  Prints
# "N passed, N failed, N skipped".
#
#   tools/kver-lane.sh [--kernel KVER] [--timeout S] [--build-only]
#                      [--all] [--topo "loop pair"] [--budget S] [TEST...]
#
# The work tree (tracked and untracked-not-ignored files) is copied to
# $REPO/.vm/src-KVER (inside the work tree: the guest hides /var/tmp and /tmp
# behind tmpfs), so the default-kernel build in the work tree is untouched;
# the module is built there with W=1 (any warning fails), with the provider
# and the test programs.
#
# --all (the default without TEST or RBOND_KVER_TESTS) runs the whole
# suite: the pair suite in two guests, then every loop test in one guest;
# tools/run-tests.sh does so on 6.12 after the default kernel's suites.
# --topo loop (or pair): the whole suite of that topology only.
# --budget S: the selftests must end within S seconds.  The pair suite
# (~PAIR_EST s, all or nothing) runs first if S leaves the loop suite
# LOOP_MIN s besides, its guests bounded to S - LOOP_MIN; the loop guest
# gets what is left as its RBOND_SUITE_BUDGET (selftests/run.sh skips, by
# name, a test whose "# time:" would overrun it).  TEST... (or
# RBOND_KVER_TESTS): just those, loop topology.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
. "$HERE/suite-result.sh"

PAIR_EST=540	# the 6.12 pair suite took 513-516 s in CI (2026-12-06)
LOOP_MIN=300	# the loop suite's least share (its first tests)
kver= timeout=2400 build_only=0 all=0 budget=0 topos="loop pair"
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kver=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--build-only) build_only=1; shift ;;
	--all) all=1; shift ;;
	--topo) all=1; topos=$2; shift 2 ;;
	--budget) budget=$2; shift 2 ;;
	-h|--help) sed -n '3,24p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "usage: $0 [--kernel KVER] [--timeout S] [--build-only] [--all [--budget S]] [TEST...]"; exit 2 ;;
	*) break ;;
	esac
done
t0=$(date +%s)
pass=0 failn=0 skipn=0
finish() {
	echo "# kver lane took $(( $(date +%s) - t0 )) s"
	echo "$pass passed, $failn failed, $skipn skipped"
	[ $failn -eq 0 ]
	exit
}

[ -n "$kver" ] || kver=$("$HERE/default-kver.sh" --series 6.12 --build) || {
	echo "ok - kver lane # SKIP no 6.12 kernel installed (tools/deps.sh installs one)"
	skipn=1; finish
}
if [ ! -d "/lib/modules/$kver/build" ]; then
	echo "not ok - kver lane: no /lib/modules/$kver/build"; failn=1; finish
fi

src=$REPO/.vm/src-$kver
rm -rf "$src"
mkdir -p "$src"
(cd "$REPO" && git ls-files -z -co --exclude-standard | grep -zv '^\.vm/' |
	tar --null -T - -cf -) | tar -xf - -C "$src" || { echo "not ok - copy the work tree"; failn=1; finish; }

blog=$src/.kver-build.log
if make -C "$src" -s modules KVER="$kver" > "$blog" 2>&1 && ! grep -qE 'warning:|error:' "$blog"; then
	echo "ok - build module against $kver (W=1, no warnings)"; pass=$((pass + 1))
else
	sed 's/^/# /' "$blog" | tail -n 40
	echo "not ok - build module against $kver (W=1, no warnings)"; failn=$((failn + 1)); finish
fi
[ $build_only = 1 ] && finish
for part in provider:tools/provider progs:selftests/progs; do
	[ -f "$src/${part#*:}/Makefile" ] || continue
	make -C "$src" -s "${part%%:*}" >> "$blog" 2>&1 ||
		{ sed 's/^/# /' "$blog" | tail -n 20; echo "not ok - build ${part%%:*}"; failn=$((failn + 1)); finish; }
done

# suite TOPO LOGFILE: add a selftests/run.sh run's closing line
suite() {
	local line p f s
	line=$(suite_result "$2")
	if [ -z "$line" ]; then
		echo "not ok - $1 selftests on $kver: no result line (guest died or timed out)"
		failn=$((failn + 1)); return
	fi
	read -r p f s <<< "$line"
	pass=$((pass + p)); failn=$((failn + f)); skipn=$((skipn + s))
	if [ "$f" -eq 0 ] && grep -q 'guest kernel log has a failure report' "$2"; then
		echo "not ok - guest kernel log clean after the $1 suite"; failn=$((failn + 1))
	fi
}

out=$(mktemp)
# no TEST and no RBOND_KVER_TESTS: the whole suite
[ $# -eq 0 ] && [ -z "${RBOND_KVER_TESTS:-}" ] && all=1
if [ $all = 1 ]; then
	s0=$(date +%s)
	# The pair suite first (all or nothing: it needs ~PAIR_EST s), the
	# loop suite after it with what is left (it skips by test).
	if [[ " $topos " != *" pair "* ]]; then
		:
	elif [ "$budget" -gt 0 ] && [ "$budget" -lt $((PAIR_EST + LOOP_MIN)) ]; then
		echo "ok - $kver pair suite # SKIP ${budget} s budget, it takes ~${PAIR_EST} s and the loop suite wants ${LOOP_MIN} s"
		skipn=$((skipn + 1))
	else
		# a hung pair must not take the loop suite's share of the budget
		ptimeout=1200
		[ "$budget" -gt 0 ] && [ $((budget - LOOP_MIN)) -lt $ptimeout ] &&
			ptimeout=$((budget - LOOP_MIN))
		echo "# --- selftests on $kver, pair topology (guest timeout $ptimeout s) ---"
		"$src/tools/vm/pair" --kernel "$kver" --timeout "$ptimeout" \
			-- selftests/run.sh -t pair 2>&1 | tee "$out"
		suite pair "$out"
		echo "# $kver pair suite took $(( $(date +%s) - s0 )) s"
	fi
	if [[ " $topos " == *" loop "* ]]; then
		s1=$(date +%s)
		lenv=()
		if [ "$budget" -gt 0 ]; then
			lb=$(( budget - (s1 - s0) ))
			lenv=(--env "RBOND_SUITE_BUDGET=$lb")
			[ "$timeout" -gt $((lb + 240)) ] && timeout=$((lb + 240))
		fi
		echo "# --- selftests on $kver, loop topology${lenv:+ (budget $lb s)} ---"
		"$src/tools/vm/run" --kernel "$kver" --timeout "$timeout" "${lenv[@]}" \
			-- selftests/run.sh -t loop 2>&1 | tee "$out"
		suite loop "$out"
		echo "# $kver loop suite took $(( $(date +%s) - s1 )) s"
	fi
	rm -f "$out"
	finish
fi

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	for t in $RBOND_KVER_TESTS; do
		[ -f "$src/selftests/${t%.sh}.sh" ] && tests+=("${t%.sh}.sh")
	done
fi
echo "# --- selftests on $kver: ${tests[*]} ---"
"$src/tools/vm/run" --kernel "$kver" --timeout "$timeout" \
	-- selftests/run.sh -t loop "${tests[@]}" 2>&1 | tee "$out"
suite loop "$out"
rm -f "$out"
finish
