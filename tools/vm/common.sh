# SPDX-License-Identifier: GPL-2.0
# Host-side helpers of the VM harness: kernel selection, vmlinux extraction,
# initramfs, qemu argument building.  Sourced by tools/vm/run and tools/vm/pair.

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
RBOND_CACHE=${RBOND_CACHE:-/var/tmp/rdma_bond-cache}

vm_die() { echo "vm: $*" >&2; exit 2; }

# Kernel release to boot: $1, or the project's default (tools/default-kver.sh:
# Debian's stock 6.1, even when a 6.12 image is installed as well).
vm_pick_kver() {
	local k=$1
	[ -n "$k" ] || k=$("$REPO/tools/default-kver.sh")
	[ -n "$k" ] || vm_die "no kernel in /boot (run tools/deps.sh)"
	echo "$k"
}

# Path of the kernel image for KVER.  A debug kernel (issue: debug lane) lives
# in the cache; a Debian kernel is /boot/vmlinuz-KVER, decompressed once to an
# ELF vmlinux (PVH entry) because decompression costs ~4 s under TCG.
vm_kernel_image() {
	local kver=$1 img out off tmp fmt
	for out in vmlinux bzImage; do
		if [ -f "$RBOND_CACHE/kernels/$kver/$out" ]; then
			echo "$RBOND_CACHE/kernels/$kver/$out"
			return
		fi
	done
	img=/boot/vmlinuz-$kver
	[ -f "$img" ] || vm_die "no $img"
	out=$RBOND_CACHE/vmlinux-$kver
	if [ ! -s "$out" ] || [ "$out" -ot "$img" ]; then
		mkdir -p "$RBOND_CACHE"
		# The payload of a compressed bzImage starts at its compressor's
		# magic: xz FD 37 7A 58 5A 00 (Debian's 6.1), zstd 28 B5 2F FD
		# (Debian's 6.12).  Without the tool or the magic: boot the bzImage.
		tmp=$out.tmp.$$
		for fmt in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd'; do
			command -v "${fmt%%:*}" >/dev/null || continue
			off=$(LC_ALL=C grep -obUaP "${fmt#*:}" "$img" | head -n1 | cut -d: -f1)
			[ -n "$off" ] || continue
			tail -c +$((off + 1)) "$img" | "${fmt%%:*}" -dc 2>/dev/null > "$tmp"
			if [ -s "$tmp" ] && head -c 4 "$tmp" | grep -q ELF; then
				mv "$tmp" "$out"
				break
			fi
		done
		rm -f "$tmp"
		if [ ! -s "$out" ] || [ "$out" -ot "$img" ]; then
			echo "$img"
			return
		fi
	fi
	echo "$out"
}

# Modules of KVER the initramfs loads (dependency order) to reach the 9p root.
VM_INITRD_MODS="virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev
virtio_pci netfs fscache 9pnet 9pnet_virtio 9p"

vm_initramfs() {
	local kver=$1 out=$RBOND_CACHE/initramfs-$kver.cpio.gz
	local stamp m f tmp modroot=/lib/modules/$kver
	[ -d "$RBOND_CACHE/kernels/$kver/modules" ] && modroot=$RBOND_CACHE/kernels/$kver/modules
	# (xz-compressed modules, Debian's 6.12: stored decompressed, so that
	# busybox insmod needs no fallback; the marker re-keys such images only)
	stamp=$( { cat "$VM_DIR/init" "$modroot/modules.dep" /bin/busybox
		   grep -q '\.ko\.xz:' "$modroot/modules.dep" && echo xz-decompressed; } 2>/dev/null |
		 md5sum | cut -c1-16)
	if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then
		echo "$out"
		return
	fi
	[ -x /bin/busybox ] || vm_die "busybox-static missing (run tools/deps.sh)"
	tmp=$(mktemp -d)
	mkdir -p "$tmp"/{bin,dev,proc,sys,newroot,mods}
	cp /bin/busybox "$tmp/bin/busybox"
	cp "$VM_DIR/init" "$tmp/init"
	chmod 755 "$tmp/init"
	: > "$tmp/mods/order"	# a kernel with all of them built in loads none
	for m in $VM_INITRD_MODS; do
		f=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$modroot/modules.dep" | cut -d: -f1)
		if [ -z "$f" ]; then
			# built in: nothing to load
			continue
		fi
		case $f in
		*.ko.xz)
			xz -dc "$modroot/$f" > "$tmp/mods/$(basename "$f" .xz)" ||
				vm_die "cannot decompress $modroot/$f"
			f=${f%.xz} ;;
		*)	cp "$modroot/$f" "$tmp/mods/" ;;
		esac
		echo "$(basename "$f")" >> "$tmp/mods/order"
	done
	mkdir -p "$RBOND_CACHE"
	(cd "$tmp" && find . | cpio -o -H newc --quiet | gzip -1) > "$out.tmp.$$"
	mv "$out.tmp.$$" "$out"
	echo "$stamp" > "$out.stamp"
	rm -rf "$tmp"
	echo "$out"
}

# Module tree of a cached (debug) kernel, for stage 2 to install at
# /lib/modules/KVER in the guest; empty for a kernel of the host's /lib/modules.
vm_cached_modules() {
	[ -f "$RBOND_CACHE/kernels/$1/modules/modules.dep" ] && echo "$RBOND_CACHE/kernels/$1/modules"
	true
}

# vm_depmod_stage KVER: the module index of KVER's modules plus this tree's
# rdma_bond.ko (when it is built for KVER), computed on the host into
# $REPO/.vm/depmod-KVER/lib/modules/KVER, so that rbond_install in the guest
# copies it instead of running depmod -a there (under TCG that reads every
# module: 5-8 min for 6.12's .ko.xz, ~20 s natively).  Redone when the .ko
# changes; serialized by a lock (the two guests of a pair start together).
vm_depmod_stage() {
	local kver=$1 ko=$REPO/drivers/rdma_bond/rdma_bond.ko m=/lib/modules/$1
	local st=$REPO/.vm/depmod-$1 f
	local d=$st/lib/modules/$kver
	[ -f "$ko" ] && [ -d "$m/kernel" ] && command -v depmod >/dev/null || return 0
	[ "$(modinfo -F vermagic "$ko" 2>/dev/null | cut -d' ' -f1)" = "$kver" ] || return 0
	mkdir -p "$REPO/.vm"
	(
		flock 9
		cmp -s "$ko" "$d/extra/rdma_bond.ko" && [ -s "$d/modules.dep.bin" ] && exit 0
		rm -rf "$st"
		mkdir -p "$d/extra" && cp -rs "$m/kernel" "$d/" || exit 1
		for f in modules.order modules.builtin modules.builtin.modinfo; do
			[ -f "$m/$f" ] && ln -s "$m/$f" "$d/$f"
		done
		cp "$ko" "$d/extra/" && depmod -b "$st" "$kver" 2>/dev/null ||
			{ rm -rf "$st"; exit 1; }
	) 9> "$REPO/.vm/depmod-$kver.lock" || echo "vm: host depmod for $kver failed; the guest runs its own" >&2
	return 0
}

# Does the guest kernel log $1 hold a report that fails a test?
VM_BAD_RE='Kernel panic|Oops|BUG:|WARNING:|general protection fault|Call Trace:|KASAN|UBSAN|kmemleak: [0-9]+ new suspected|unreferenced object|possible circular locking|possible recursive locking|inconsistent lock state|suspicious RCU usage|sleeping function called from invalid context|scheduling while atomic|list_add corruption|list_del corruption|refcount_t:|hung_task|blocked for more than'
vm_log_bad() {
	grep -E "$VM_BAD_RE" "$1" >/dev/null 2>&1
}

# One line naming the first report in log $1: its first line, the first
# RIP and the first frames, so that a summary that keeps only the
# "failure report" line (run-tests.sh, a CI excerpt) still says what broke.
vm_log_first_report() {
	awk -v re="$VM_BAD_RE" '
		!seen && $0 ~ re { seen = 1; out = $0; next }
		seen && / Comm: / && !comm { comm = 1; out = out " | " $0 }
		seen && /RIP: / && !rip { rip = 1; out = out " | " $0 }
		seen && n < 8 && match($0, /\]  [A-Za-z_][A-Za-z0-9_.]*\+0x/) {
			n++; out = out " < " substr($0, RSTART + 3, RLENGTH - 6) }
		seen && n >= 8 && rip { exit }
		END { if (seen) print out }' "$1" 2>/dev/null |
		sed -E 's/\[ *[0-9]+\.[0-9]+\] //g' | cut -c1-700
}
