#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/default-kver.sh [--build] - print the project's default kernel
# release: the one the qemu guests boot and the module is built against
# unless KVER / --kernel says otherwise.
#
# Order: $RBOND_KVER; else the release Debian's linux-image-amd64
# meta-package depends on (bookworm: the stock 6.1 kernel), when its
# /boot/vmlinuz is installed; else the oldest installed Debian kernel series'
# newest release (so that an extra linux-image-6.12 installed for the compat
# build never becomes the default).  Debug kernels (-dbg) are never picked.
# --build: only releases with /lib/modules/KVER/build count.
set -u
need_build=0
[ "${1:-}" = "--build" ] && need_build=1

usable() {
	[ -n "$1" ] || return 1
	if [ $need_build = 1 ]; then
		[ -d "/lib/modules/$1/build" ]
	else
		[ -f "/boot/vmlinuz-$1" ]
	fi
}

if [ -n "${RBOND_KVER:-}" ]; then
	echo "$RBOND_KVER"
	exit 0
fi

k=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
	grep -oE 'linux-image-[^ ,]+' | head -n1 | sed 's/^linux-image-//')
if usable "$k"; then
	echo "$k"
	exit 0
fi

if [ $need_build = 1 ]; then
	list=$(ls -1d /lib/modules/*/build 2>/dev/null | cut -d/ -f4)
else
	list=$(ls -1 /boot/vmlinuz-* 2>/dev/null | sed 's|.*/vmlinuz-||')
fi
list=$(grep -v -- '-dbg$' <<< "$list" | grep . | sort -V)
[ -n "$list" ] || exit 1
# newest release of the oldest MAJOR.MINOR series
series=$(head -n1 <<< "$list" | cut -d. -f1,2)
grep -F "$series." <<< "$list" | grep -E "^${series//./\\.}\\." | tail -n1
