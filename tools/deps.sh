#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Install (idempotently) every Debian package the build, the demo and the tests need.
# Usage: tools/deps.sh [--debug] [--debug-6.12]
#   --debug adds what the debug-kernel lane needs, --debug-6.12 also the 6.12
#   source for its 6.12 debug kernel (tools/debug-kernel/build.sh --series 6.12)
set -euo pipefail

PKGS=(
	build-essential bc bison flex libelf-dev libssl-dev kmod cpio xz-utils zstd
	linux-image-amd64 linux-headers-amd64
	qemu-system-x86 busybox-static
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
	rdmacm-utils perftest iproute2 ethtool ucx-utils
	pkg-config gnuplot-nox linux-source-6.1 python3 tcpdump
)
for a in "$@"; do
	case "$a" in
	--debug) PKGS+=(rsync dwarves) ;;
	--debug-6.12) PKGS+=(rsync dwarves linux-source-6.12) ;;
	*) echo "deps: unknown argument $a" >&2; exit 2 ;;
	esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
export DEBIAN_FRONTEND=noninteractive
updated=0

missing=()
for p in "${PKGS[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing packages: ${missing[*]} (run as root to install)" >&2
		exit 1
	fi
	echo "deps: installing ${missing[*]}"
	apt-get update -qq
	updated=1
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Optional: bookworm's 6.12 kernel (linux-image/headers-6.12.N+deb12-amd64,
# the newest N apt knows) for the compat build (tools/run-tests.sh builds
# the module against it too) and manual runtime checks
# (tools/kver-lane.sh).  Never the default kernel (tools/default-kver.sh);
# never fatal: without it those checks are skipped.  RBOND_K612=0 skips it.
[ "${RBOND_K612:-1}" = 0 ] && exit 0
# The newest N whose image AND headers both have an installation candidate
# (the mirror may carry a newer kernel's headers before its image: seen
# 2026-12-02 with 6.12.118, which made every 6.12 check skip).
has_candidate() {
	apt-cache policy "$1" 2>/dev/null | grep 'Candidate: [0-9]' > /dev/null
}
newest_612() {
	local k
	for k in $(apt-cache pkgnames linux-headers-6.12. 2>/dev/null |
		   grep -E '^linux-headers-6\.12\.[0-9]+\+deb12-amd64$' |
		   sed 's/^linux-headers-//' | sort -rV); do
		if has_candidate "linux-image-$k" && has_candidate "linux-headers-$k"; then
			echo "$k"
			return
		fi
	done
}
k612=$(newest_612)
if [ -z "$k612" ] && [ $updated = 0 ] && [ "$(id -u)" -eq 0 ]; then
	apt-get update -qq || true
	k612=$(newest_612)
fi
if [ -z "$k612" ]; then
	echo "deps: warning: no linux-headers-6.12.*+deb12-amd64 in apt; 6.12 checks will be skipped" >&2
	exit 0
fi
installed "linux-image-$k612" && installed "linux-headers-$k612" && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: warning: 6.12 kernel $k612 not installed (run as root to install)" >&2
	exit 0
fi
echo "deps: installing linux-image-$k612 linux-headers-$k612 (optional 6.12 checks)"
apt-get install -y -qq --no-install-recommends "linux-image-$k612" "linux-headers-$k612" >/dev/null ||
	echo "deps: warning: could not install the 6.12 kernel $k612; 6.12 checks will be skipped" >&2
exit 0
