# SPDX-License-Identifier: GPL-2.0
#
# rdma_bond: top-level build.  `make help` lists the targets.
#
# KDIR: kernel build tree to build the module against.  Default: the running
# kernel's; when the running kernel has no build tree (e.g. the test host,
# which only boots Debian's kernel inside qemu) the project's default kernel,
# the one the guests boot (tools/default-kver.sh: Debian's stock 6.1, even
# with 6.12 headers installed too).  KVER=<release> builds for another one.

KVER ?= $(shell if [ -d /lib/modules/$$(uname -r)/build ]; then uname -r; \
	else $(CURDIR)/tools/default-kver.sh --build; fi)
KDIR ?= /lib/modules/$(KVER)/build
W ?= 1
DESTDIR ?=
PREFIX ?= /usr
CHECKPATCH ?= $(shell tools/checkpatch-path.sh)

MOD_DIR := drivers/rdma_bond
COMPAT_H := $(MOD_DIR)/rbond_compat_autoconf.h
# kernel-style sources (generated files excluded)
CHECKPATCH_FILES = $(filter-out %.mod.c $(COMPAT_H),$(wildcard $(MOD_DIR)/*.[ch] selftests/kmod/*.[ch] \
	selftests/harness/*.[ch])) include/uapi/rdma/rdma_bond-abi.h

.PHONY: all modules provider progs install modules_install provider_install \
	checkpatch check test demo bench bench-failover clean help deps FORCE

all: modules provider progs

help:
	@echo 'Targets:'
	@echo '  all              module + provider + test programs (default)'
	@echo '  modules          build rdma_bond.ko against KDIR=$(KDIR) with W=$(W)'
	@echo '  provider         build librbond-rdmav34.so (rdma-core provider)'
	@echo '  progs            build the selftest programs (selftests/progs)'
	@echo '  install          modules_install + provider_install (DESTDIR-aware)'
	@echo '  checkpatch       scripts/checkpatch.pl --strict on the kernel sources'
	@echo '  deps             install the Debian packages build/demo/tests need'
	@echo '  test             build, boot the qemu guests, run the selftests (= .ci/run)'
	@echo '  demo             two emulated hosts, two rails, rbond via rdma link add'
	@echo '  bench            benchmark runner (tools/bench)'
	@echo '  bench-failover   data silence on the wire per rail fault kind (loop guest)'
	@echo '  clean            remove build products'
	@echo 'Variables: KDIR=<kernel build tree> KVER=<kernel release> W=<kbuild warning level>'

deps:
	tools/deps.sh

# Compile probes for the compat header: regenerated for every KDIR, rewritten
# only when its content changes.
$(COMPAT_H): FORCE
	@$(MOD_DIR)/compat-probe.sh $(KDIR) > $@.tmp || { rm -f $@.tmp; exit 1; }
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

modules: $(COMPAT_H)
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=$(W) modules

provider:
	$(MAKE) -C tools/provider

progs:
	$(MAKE) -C selftests/progs

modules_install: modules
	install -D -m 0644 $(MOD_DIR)/rdma_bond.ko \
		$(DESTDIR)/lib/modules/$(KVER)/extra/rdma_bond.ko
	if [ -z "$(DESTDIR)" ]; then depmod -a $(KVER); fi

provider_install: provider
	$(MAKE) -C tools/provider install DESTDIR=$(DESTDIR) PREFIX=$(PREFIX)

install: modules_install provider_install

checkpatch:
	@test -n "$(CHECKPATCH)" || { echo "checkpatch.pl not found (tools/deps.sh --debug installs linux-source)"; exit 1; }
	$(CHECKPATCH) --strict --no-tree --quiet --ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG -f \
		$(CHECKPATCH_FILES)

test:
	tools/run-tests.sh

demo:
	tools/demo.sh

bench:
	tools/bench/run.sh

# the time data stops on the wire per rail fault kind (one loop guest)
bench-failover:
	tools/deps.sh
	$(MAKE) -s modules provider progs
	tools/vm/run --timeout 900 -- selftests/run.sh bench/failover_wire.sh

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean
	-$(MAKE) -C tools/provider clean
	-$(MAKE) -C selftests/progs clean
	rm -f $(COMPAT_H)

FORCE:
