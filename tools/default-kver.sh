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
# --series X.Y: instead, the newest installed Debian release of series X.Y
# (e.g. 6.12 -> 6.12.117+deb12-amd64), -amd64 flavour only; exit 1 if none.
set -u
need_build=0 series=
while [ $# -gt 0 ]; do
	case "$1" in
	--build) need_build=1; shift ;;
	--series) series=$2; shift 2 ;;
	*) echo "usage: $0 [--build] [--series X.Y]" >&2; exit 2 ;;
	esac
done

usable() {
	[ -n "$1" ] || return 1
	if [ $need_build = 1 ]; then
		[ -d "/lib/modules/$1/build" ]
	else
		[ -f "/boot/vmlinuz-$1" ]
	fi
}

if [ -n "$series" ]; then
	for k in $( (ls -1 /boot/vmlinuz-* 2>/dev/null | sed 's|.*/vmlinuz-||';
		     ls -1d /lib/modules/*/build 2>/dev/null | cut -d/ -f4) |
		   grep -E "^${series//./\\.}\.[0-9]+(-[0-9]+|\+deb[0-9]+)-amd64\$" | sort -uV -r); do
		usable "$k" && { echo "$k"; exit 0; }
	done
	exit 1
fi

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
oldest=$(head -n1 <<< "$list" | cut -d. -f1,2)
grep -E "^${oldest//./\\.}\\." <<< "$list" | tail -n1
