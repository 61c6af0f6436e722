#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Debug-lane self-check, run as a test by selftests/run.sh:
#   RBOND_INJECT=uaf|sleep|leak|abba|none selftests/run.sh harness/rbond_inject.sh
# Loads selftests/harness/rbond_inject/rbond_inject.ko (built by
# tools/debug-kernel/lane.sh against the running kernel) with that bug and
# unloads it.  The test itself passes: the runner's kernel-log and kmemleak
# checks after it, and the VM harness, must turn the bug into a failure.
# Only meaningful on the debug kernel.
# topo: none
. "$(dirname "$0")/../lib.sh"
require_guest
ko=$RBOND_TOP/selftests/harness/rbond_inject/rbond_inject.ko
[ -f "$ko" ] || skip "rbond_inject.ko not built"
bug=${RBOND_INJECT:-none}
insmod "$ko" bug="$bug"
log_test $? "load rbond_inject bug=$bug"
rmmod rbond_inject
log_test $? "unload rbond_inject"
exit $ret
