#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/kver-lane.sh - build and run the selftests on another installed
# Debian kernel than the default one (by default the newest 6.12), in one
# loop-topology guest.  Manual: not part of tools/run-tests.sh (which only
# builds against 6.12).  Prints "N passed, N failed, N skipped".
#
#   tools/kver-lane.sh [--kernel KVER] [--timeout S] [--build-only] [TEST...]
#
# The work tree (tracked and untracked-not-ignored files) is copied to
# $REPO/.vm/src-KVER (inside the work tree: the guest hides /var/tmp and /tmp
# behind tmpfs), so the default-kernel build in the work tree is untouched;
# the module is built there with W=1 (any warning fails), with the provider
# and the test programs.  TEST... defaults to $RBOND_KVER_TESTS, else the
# list below.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
DEFAULT_TESTS="test_rbond_link test_rbond_lifecycle test_rbond_ktest test_provider_verify
test_provider_pingpong test_provider_devices test_provider_badinput test_provider_perftest"

kver= timeout=2400 build_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--kernel) kver=$2; shift 2 ;;
	--timeout) timeout=$2; shift 2 ;;
	--build-only) build_only=1; shift ;;
	-h|--help) sed -n '3,16p' "$0"; exit 0 ;;
	--) shift; break ;;
	-*) echo "usage: $0 [--kernel KVER] [--timeout S] [--build-only] [TEST...]"; exit 2 ;;
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

tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
	for t in ${RBOND_KVER_TESTS:-$DEFAULT_TESTS}; do
		[ -f "$src/selftests/${t%.sh}.sh" ] && tests+=("${t%.sh}.sh")
	done
fi
out=$(mktemp)
echo "# --- selftests on $kver: ${tests[*]} ---"
"$src/tools/vm/run" --kernel "$kver" --timeout "$timeout" \
	-- selftests/run.sh -t loop "${tests[@]}" 2>&1 | tee "$out"
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$out" | tail -n1)
if [ -z "$line" ]; then
	echo "not ok - selftests on $kver: no result line (guest died or timed out)"; failn=$((failn + 1))
else
	read -r p _ f _ s _ <<< "$line"
	pass=$((pass + p)); failn=$((failn + f)); skipn=$((skipn + s))
	if [ "$f" -eq 0 ] && grep -q 'guest kernel log has a failure report' "$out"; then
		echo "not ok - guest kernel log clean after the suite"; failn=$((failn + 1))
	fi
fi
rm -f "$out"
finish
