#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Install (idempotently) every Debian package the build, the demo and the tests need.
# Usage: tools/deps.sh [--debug]   (--debug adds what the debug-kernel lane needs)
set -euo pipefail

PKGS=(
	build-essential bc bison flex libelf-dev libssl-dev kmod cpio xz-utils
	linux-image-amd64 linux-headers-amd64
	qemu-system-x86 busybox-static
	rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev
	rdmacm-utils perftest iproute2 ethtool
	pkg-config gnuplot-nox linux-source-6.1 python3
)
[ "${1:-}" = "--debug" ] && PKGS+=(rsync dwarves)

missing=()
for p in "${PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing packages: ${missing[*]} (run as root to install)" >&2
	exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
