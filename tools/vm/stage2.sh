#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# rdma_bond VM harness, stage 2: runs in the guest on the host's read-only root.
# Makes the writable places a test needs (tmpfs, an overlay on /lib/modules so
# modules can be installed and autoloaded), runs the command the host wrote
# into the run directory, and records its exit status and the kernel log there.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/root TERM=dumb LANG=C.UTF-8
arg() { tr ' ' '\n' < /proc/cmdline | sed -n "s/^$1=//p"; }
out=$(arg rbond.out)
work=$(arg rbond.work)

kver=$(uname -r)
# A kernel from the cache (the debug kernel, tools/debug-kernel) has its
# module tree there, not in the host's /lib/modules: copy it to a writable
# /lib/modules/KVER now, before tmpfs hides /var/tmp (where the cache lives).
cmods=$(arg rbond.modules)
if [ -n "$cmods" ]; then
	mount -t tmpfs -o mode=755 tmpfs /lib/modules &&
		cp -a "$cmods" "/lib/modules/$kver" || echo "stage2: cannot install $cmods"
fi

# The work tree may live below one of the tmpfs places (a CI clone in /tmp,
# say): park its mount on devtmpfs meanwhile (a 9p tag mounts only once).
mkdir -p /dev/.rbond-work
mount --move "$work" /dev/.rbond-work
for d in /tmp /run /var/tmp /var/log /var/lib /var/cache /root /home /mnt /media; do
	mount -t tmpfs -o mode=1777 tmpfs "$d"
done
mkdir -p "$work" 2>/dev/null
mount --move /dev/.rbond-work "$work" || echo "stage2: cannot mount the work tree at $work"
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t configfs configfs /sys/kernel/config 2>/dev/null
if [ -z "$cmods" ] && modprobe overlay 2>/dev/null; then
	mkdir -p /tmp/.mods/up /tmp/.mods/work
	mount -t overlay -o lowerdir=/lib/modules/$kver,upperdir=/tmp/.mods/up,workdir=/tmp/.mods/work \
		overlay /lib/modules/$kver || echo "stage2: no overlay on /lib/modules"
fi
hostname "$(arg rbond.host || echo guest)"
ip link set lo up
ulimit -l unlimited
ulimit -c 0
echo 0 > /proc/sys/kernel/panic_on_oops 2>/dev/null
exec 3>/dev/ttyS1
stty -F /dev/ttyS1 raw -echo 2>/dev/null

export RBOND_GUEST=1 RBOND_HOST=$(arg rbond.host) RBOND_RUN=$out
cd "$work" || exit 1
: > "$out/started"	# tools/vm/run: the boot is over
bash "$out/cmd" >&3 2>&3 </dev/null
rc=$?
dmesg > "$out/dmesg" 2>/dev/null
echo "$rc" > "$out/rc"
sync
# Power off; never return (init exiting would panic the guest).
while :; do
	echo o > /proc/sysrq-trigger
	sleep 5
done
