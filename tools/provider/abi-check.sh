#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
#
# Build-time check that the installed libibverbs is one this provider's own
# declarations of the private provider ABI (verbs_private.h) were written
# for: rdma-core 42..46, private ABI IBVERBS_PRIVATE_34.
#
#   abi-check.sh lib LIBIBVERBS_SO          before compiling
#   abi-check.sh provider PROVIDER_SO       after linking
#
# Exits non-zero with a message saying what differs.
set -eu

RDMA_CORE_MIN=42
RDMA_CORE_MAX=46
PABI=IBVERBS_PRIVATE_34
# Every private symbol the provider calls (keep in sync with verbs_private.h).
PRIVATE_SYMS="verbs_register_driver_34 _verbs_init_and_alloc_context
verbs_uninit_context verbs_set_ops ibv_read_ibdev_sysfs_file __verbs_log
ibv_cmd_get_context ibv_cmd_query_device_any ibv_cmd_query_port
ibv_cmd_alloc_pd ibv_cmd_dealloc_pd ibv_cmd_reg_mr ibv_cmd_dereg_mr
ibv_cmd_create_cq ibv_cmd_destroy_cq ibv_cmd_poll_cq ibv_cmd_req_notify_cq
ibv_cmd_create_qp ibv_cmd_create_qp_ex ibv_cmd_modify_qp ibv_cmd_query_qp
ibv_cmd_destroy_qp ibv_cmd_post_send ibv_cmd_post_recv ibv_cmd_create_ah
ibv_cmd_destroy_ah ibv_cmd_create_srq ibv_cmd_modify_srq ibv_cmd_query_srq
ibv_cmd_destroy_srq ibv_cmd_post_srq_recv"

die() {
	echo "rbond provider ABI check: $*" >&2
	echo "rbond provider ABI check: this provider declares the libibverbs private ABI itself and supports only rdma-core $RDMA_CORE_MIN..$RDMA_CORE_MAX ($PABI)." >&2
	exit 1
}

rdma_core_version() {
	# pkg-config's libibverbs version is 1.14.<rdma-core major>.<minor>
	v=$(pkg-config --modversion libibverbs 2>/dev/null || true)
	if [ -n "$v" ]; then
		echo "$v" | cut -d. -f3
		return
	fi
	v=$(dpkg-query -W -f='${Version}' libibverbs-dev 2>/dev/null || true)
	[ -n "$v" ] && echo "${v%%.*}" && return
	echo ""
}

case "${1:-}" in
lib)
	so=${2:?library path}
	[ -e "$so" ] || die "$so not found (install libibverbs-dev / libibverbs1)"
	ver=$(rdma_core_version)
	case "$ver" in
	''|*[!0-9]*) die "cannot determine the rdma-core version (pkg-config libibverbs / dpkg libibverbs-dev)";;
	esac
	[ "$ver" -ge $RDMA_CORE_MIN ] && [ "$ver" -le $RDMA_CORE_MAX ] ||
		die "installed rdma-core is $ver"
	dyn=$(objdump -T "$so") || die "objdump -T $so failed (binutils)"
	echo "$dyn" | grep -q " $PABI " ||
		die "$so does not define symbol version $PABI"
	missing=""
	for s in $PRIVATE_SYMS; do
		echo "$dyn" | grep -Eq "[[:space:]]$PABI[[:space:]]+$s\$" ||
			missing="$missing $s"
	done
	[ -z "$missing" ] || die "$so lacks$missing at version $PABI"
	echo "rbond provider ABI check: rdma-core $ver, $so exports all $(echo $PRIVATE_SYMS | wc -w) private symbols at $PABI"
	;;
provider)
	so=${2:?provider path}
	dyn=$(objdump -T "$so") || die "objdump -T $so failed"
	bad=""
	for s in $PRIVATE_SYMS; do
		echo "$dyn" | grep -Eq "\*UND\*.*[[:space:]]\(?$PABI\)?[[:space:]]+$s\$" ||
			bad="$bad $s"
	done
	[ -z "$bad" ] || die "$so does not bind$bad at $PABI"
	# nothing but undefined references may be exported (version script)
	exp=$(echo "$dyn" | awk '$0 ~ /DF|DO/ && $0 !~ /\*UND\*/ {print $NF}' | grep -v '^_init$\|^_fini$' || true)
	[ -z "$exp" ] || die "$so exports unexpected symbols: $exp"
	;;
*)
	echo "usage: $0 lib LIBIBVERBS_SO | provider PROVIDER_SO" >&2
	exit 2
	;;
esac
