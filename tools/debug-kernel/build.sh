#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# tools/debug-kernel/build.sh - build the debug kernel of the debug-kernel lane
# (KASAN, lockdep, kmemleak, ...) from Debian's linux-source-6.1 (or -6.12),
# once per machine, into the cache outside the repository.
#
#   tools/debug-kernel/build.sh [--series 6.1|6.12] [--print-kver] [--force] [-j N]
#
# Series (--series, or RBOND_DBG_SERIES; default 6.1): which Debian source
# package.  Source: /usr/src/linux-source-SERIES.tar.xz (package
# linux-source-6.1 is pulled by tools/deps.sh; linux-source-6.12 by
# tools/deps.sh --debug-6.12); override with RBOND_DBG_SRC=TARBALL.  Config:
# allnoconfig + kernel/configs/kvm_guest.config + tools/debug-kernel/debug.config
# (scripts/kconfig/merge_config.sh -n), with the series' patches applied
# (fixes for kernel bugs the lane found; see patches/README): patches/*.patch
# for 6.1, patches/SERIES/*.patch for another series.  The
# result is keyed by the source version, a hash of the config recipe and a
# hash of the patches; a no-op when all are unchanged, rebuilt
# (incrementally, in the same tree) when any changes.
#
# Installs into $RBOND_CACHE/kernels/KVER/ (RBOND_CACHE defaults to
# /var/tmp/rdma_bond-cache), which tools/vm/run --kernel KVER boots:
#   bzImage   the kernel image qemu boots (see below: not the PVH vmlinux)
#   modules/  the module tree (modules.dep, modules.builtin, ...) as
#             `make modules_install` leaves under lib/modules/KVER
#   build     symlink to the built source tree: KDIR for out-of-tree modules
#   config, stamp, build-seconds
# Prints KVER (e.g. 6.1.192-rbond-dbg) on the last line of stdout.
# --print-kver prints it without building.  The build runs under nice -n 19
# with -j2 (RBOND_DBG_JOBS or -j to change).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RBOND_CACHE=${RBOND_CACHE:-/var/tmp/rdma_bond-cache}
SERIES=${RBOND_DBG_SERIES:-6.1}
JOBS=${RBOND_DBG_JOBS:-2}
LOCALVERSION=-rbond-dbg
# Bump when the recipe below (not debug.config) changes what gets built.
RECIPE=3

print_only=0 force=0
while [ $# -gt 0 ]; do
	case "$1" in
	--print-kver) print_only=1; shift ;;
	--force) force=1; shift ;;
	--series) SERIES=$2; shift 2 ;;
	-j) JOBS=$2; shift 2 ;;
	-j*) JOBS=${1#-j}; shift ;;
	-h|--help) sed -n '3,31p' "$0"; exit 0 ;;
	*) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

die() { echo "debug-kernel: $*" >&2; exit 1; }
say() { echo "debug-kernel: $*" >&2; }

case "$SERIES" in
6.1) PATCHDIR=$HERE/patches deps=tools/deps.sh ;;
6.12) PATCHDIR=$HERE/patches/$SERIES deps="tools/deps.sh --debug-6.12" ;;
*) die "unknown series $SERIES (6.1 or 6.12)" ;;
esac
SRC_TAR=${RBOND_DBG_SRC:-/usr/src/linux-source-$SERIES.tar.xz}
[ -f "$SRC_TAR" ] || die "no $SRC_TAR (install linux-source-$SERIES: $deps)"
# Source version: the Debian package version when the tarball is the
# packaged one, else size+mtime of the tarball.
srcver=
if [ "$SRC_TAR" = "/usr/src/linux-source-$SERIES.tar.xz" ]; then
	srcver=$(dpkg-query -W -f='${Version}' "linux-source-$SERIES" 2>/dev/null || true)
fi
[ -n "$srcver" ] || srcver=$(stat -c '%s-%Y' "$SRC_TAR")
top=$RBOND_CACHE/debug-kernel
tree=$top/linux-$srcver

# Upstream version (VERSION.PATCHLEVEL.SUBLEVEL) from the tree once extracted,
# else from the Debian version (6.1.192-3 -> 6.1.192).
upstream_version() {
	if [ -f "$tree/.rbond-extracted" ]; then
		make -s -C "$tree" kernelversion 2>/dev/null && return
	fi
	case "$srcver" in
	[0-9]*.*-*) echo "${srcver%%-*}"; return ;;
	esac
	tar -xJOf "$SRC_TAR" --wildcards '*/Makefile' --occurrence=1 2>/dev/null |
		awk '/^VERSION =/{v=$3} /^PATCHLEVEL =/{p=$3} /^SUBLEVEL =/{s=$3} END{print v"."p"."s}'
}
kver=$(upstream_version)$LOCALVERSION
if [ $print_only = 1 ]; then
	echo "$kver"
	exit 0
fi

cfghash=$( { echo "recipe=$RECIPE"; cat "$HERE/debug.config"; } | sha256sum | cut -c1-16)
# Fixes for kernel bugs the lane found outside rdma_bond (patches/README).
patchhash=$( { cat "$PATCHDIR"/*.patch 2>/dev/null || true; } | sha256sum | cut -c1-16)
key="$srcver $cfghash $patchhash"
dest=$RBOND_CACHE/kernels/$kver

if [ $force = 0 ] && [ "$(cat "$dest/stamp" 2>/dev/null)" = "$key" ] &&
   [ -f "$dest/bzImage" ] && [ -f "$dest/modules/modules.dep" ] && [ -d "$dest/build/" ]; then
	say "$kver is current (source $srcver, config $cfghash)"
	echo "$kver"
	exit 0
fi

mkdir -p "$top"
exec 9>"$top/lock"
flock 9
start=$(date +%s)

# 1. Extract (once per source version).
if [ ! -f "$tree/.rbond-extracted" ]; then
	say "extracting $SRC_TAR (source $srcver)"
	rm -rf "$tree" "$tree.tmp"
	mkdir -p "$tree.tmp"
	tar -xJf "$SRC_TAR" -C "$tree.tmp" --strip-components=1
	touch "$tree.tmp/.rbond-extracted"
	mv "$tree.tmp" "$tree"
	# Old source versions of the series are dead weight (~1.5 GB each
	# once built); the other series' tree stays.
	for old in "$top/linux-$SERIES".*; do
		[ -d "$old" ] || continue
		[ "$old" = "$tree" ] || { say "removing old tree $old"; rm -rf "$old"; }
	done
fi

# 1b. Patches, in name order.  The applied set is kept in the tree; when the
# set changes it is reverted and the new one applied (make then rebuilds only
# what they touch).
if [ "$(cat "$tree/.rbond-patches" 2>/dev/null)" != "$patchhash" ]; then
	for p in $(ls -r "$tree"/.rbond-patches.d/*.patch 2>/dev/null); do
		say "reverting $(basename "$p")"
		patch -d "$tree" -p1 -R -s < "$p" || die "cannot revert $p"
		rm -f "$p"
	done
	mkdir -p "$tree/.rbond-patches.d"
	for p in "$PATCHDIR"/*.patch; do
		[ -f "$p" ] || continue
		say "applying $(basename "$p")"
		patch -d "$tree" -p1 -N -s < "$p" || die "patch $p does not apply"
		cp "$p" "$tree/.rbond-patches.d/"
	done
	echo "$patchhash" > "$tree/.rbond-patches"
fi

# 2. Configure (when the recipe or the fragment changed).
if [ "$(cat "$tree/.rbond-cfghash" 2>/dev/null)" != "$cfghash" ] || [ ! -f "$tree/.config" ]; then
	say "configuring (config $cfghash)"
	cp "$HERE/debug.config" "$tree/.rbond-debug.config"
	(cd "$tree" && scripts/kconfig/merge_config.sh -n -O . \
		kernel/configs/kvm_guest.config .rbond-debug.config) > "$tree/.rbond-merge.log" 2>&1 ||
		{ cat "$tree/.rbond-merge.log" >&2; die "merge_config failed"; }
	# Every y/m/value the fragment asks for must have survived the merge
	# (an unmet dependency silently drops an option).
	missing=0
	while IFS= read -r line; do
		case "$line" in CONFIG_*=*) ;; *) continue ;; esac
		grep -qxF -- "$line" "$tree/.config" || { say "not in final .config: $line"; missing=1; }
	done < "$HERE/debug.config"
	[ $missing = 0 ] || die "config fragment not fully applied (see $tree/.rbond-merge.log)"
	echo "$cfghash" > "$tree/.rbond-cfghash"
fi
# PVH entry + KASAN: pvh_start_xen runs xen_prepare_pvh() before KASAN's
# early shadow exists, so an instrumented enlighten.o faults and the guest
# triple-faults before printing anything.  Not instrumenting it is not enough:
# it calls xen_cpuid_base() -> memcmp() (lib/string.c, instrumented) and
# faults there.  So the lane boots bzImage (linux boot protocol; the
# decompressor reaches startup_64, which sets up the shadow first) and this
# half fix stays only because removing it costs a rebuild.  (idempotent)
pvhmk=$tree/arch/x86/platform/pvh/Makefile
grep -q '^KASAN_SANITIZE' "$pvhmk" || echo 'KASAN_SANITIZE := n' >> "$pvhmk"

got=$(make -s -C "$tree" kernelrelease)
[ "$got" = "$kver" ] || die "kernel release is $got, expected $kver"

# 3. Build: vmlinux, bzImage, and `modules` for Module.symvers (M= builds).
say "building $kver with nice -n 19 make -j$JOBS (log: $tree/.rbond-build.log)"
if ! nice -n 19 make -C "$tree" -j"$JOBS" vmlinux bzImage modules > "$tree/.rbond-build.log" 2>&1; then
	tail -n 40 "$tree/.rbond-build.log" >&2
	die "kernel build failed"
fi

# 4. Install into the cache, replacing the previous install atomically.
rm -rf "$dest.tmp"
mkdir -p "$dest.tmp"
make -s -C "$tree" modules_install INSTALL_MOD_PATH="$dest.tmp/root" > /dev/null
mv "$dest.tmp/root/lib/modules/$kver" "$dest.tmp/modules"
rm -rf "$dest.tmp/root"
rm -f "$dest.tmp/modules/build" "$dest.tmp/modules/source"
cp "$tree/arch/x86/boot/bzImage" "$dest.tmp/bzImage"
cp "$tree/.config" "$dest.tmp/config"
ln -s "$tree" "$dest.tmp/build"
secs=$(( $(date +%s) - start ))
echo "$secs" > "$dest.tmp/build-seconds"
echo "$key" > "$dest.tmp/stamp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
say "built $kver in ${secs}s: $dest"
echo "$kver"
