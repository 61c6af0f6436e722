# SPDX-License-Identifier: GPL-2.0
# Sourced by tools/run-tests.sh and tools/kver-lane.sh.
#
# suite_result LOGFILE: prints "PASSED FAILED SKIPPED" from the last closing
# line ("N passed, N failed, N skipped") of a selftests/run.sh run in
# LOGFILE (a pair run's lines carry an "[a] " prefix); nothing when there is
# none (the guest died or timed out).
suite_result() {
	grep -oE '^(\[a\] )?[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$1" |
		tail -n1 | sed -E 's/^\[a\] //; s/ (passed|failed|skipped),?//g'
}
