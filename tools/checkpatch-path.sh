#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Print the path of a usable checkpatch.pl, extracting it (with the data files
# it reads) from Debian's linux-source tarball into a cache on first use.
cache=${RBOND_CACHE:-/var/tmp/rdma_bond-cache}/checkpatch
if [ -x "$cache/scripts/checkpatch.pl" ]; then
	echo "$cache/scripts/checkpatch.pl"
	exit 0
fi
tarball=$(ls -1 /usr/src/linux-source-*.tar.xz 2>/dev/null | sort -V | tail -n1)
[ -n "$tarball" ] || exit 0
top=$(basename "$tarball" .tar.xz)
mkdir -p "$cache" || exit 0
tar -C "$cache" --strip-components=1 -xJf "$tarball" \
	"$top/scripts/checkpatch.pl" "$top/scripts/spelling.txt" \
	"$top/scripts/const_structs.checkpatch" 2>/dev/null || exit 0
echo "$cache/scripts/checkpatch.pl"
