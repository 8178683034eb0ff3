# lowlat: build, run, test. See README.md.
#
#   make doctor   build bin/lowlat and run 'lowlat doctor' on this host
#   make test     install what the tests need, then run the whole suite
#
# The suite runs as root (privileged tests make their own network namespaces
# and clean up), on this host's kernel and again in a stock Debian kernel
# under qemu for the qdiscs this kernel lacks (fq_codel, fq, cake, netem...).

SHELL := /bin/bash
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export CGO_ENABLED := 0
export GOFLAGS := -buildvcs=false
BIN := bin/lowlat

# Debian packages the tests use: iproute2 to cross-check lowlat's netlink
# reads, qemu/busybox/xz for the stock-kernel VM, cpio to cross-check the
# initramfs writer, ethtool and time for fixtures and benchmarks, gcc and
# python3 for the socket-audit helper programs, nginx and haproxy (run only in
# test namespaces with temporary configs) for the proxy checks, chromium to
# render the lab's HTML report headless, systemd for systemd-analyze to check
# the boot units offline (and systemd-sysctl's order of the sysctl.d files),
# procps for sysctl --system's order of them, prometheus (the server and
# promtool) to scrape the monitor, lint its metrics and run its rules' unit tests, lintian and rpm to
# check the packages 'make package' builds, ansible-core, ansible-lint,
# python3-apt and openssh-server (sshd runs only in test namespaces) for the
# Ansible collection's fleet test, pylint, yamllint, python3-voluptuous and
# python3-pycodestyle for its ansible-test sanity tests (offline: they stand
# in for the pinned versions ansible-test would fetch from PyPI), mtr-tiny for the path-hops lab scenario
# (mtr beside lowlat probe path), fping and netbase (/etc/protocols) for
# cake-autorate, the peer that bench/autorate runs beside lowlat autorate and
# whose lab variants the tests check; clang, llvm and libbpf-dev to check
# that the committed BPF objects regenerate from their C (make generate;
# building lowlat needs none of them), bpftrace for the passive
# measurements' peer test (the same histograms, computed by one-liners).
DEB_PKGS := iproute2 qemu-system-x86 busybox-static xz-utils cpio ethtool time ca-certificates \
	gcc python3 nginx-light libnginx-mod-stream haproxy chromium systemd prometheus \
	lintian rpm ansible-core ansible-lint python3-apt openssh-server openssh-client bpftool mtr-tiny \
	fping netbase procps pylint yamllint python3-voluptuous python3-pycodestyle \
	clang llvm libbpf-dev bpftrace nftables

# Packages whose integration tests must also pass on the stock kernel (the
# VM loads the modules they need, socket diagnostics included: vm.DefaultModules).
# One VM: two side by side (tried) starve each other's timing-sensitive
# lab scenarios and probes on a 2-core machine.
VM_PKGS := ./internal/qdisc ./internal/mssclamp ./internal/knob ./internal/txn ./internal/cli ./internal/sockets ./internal/sockops ./internal/lab ./internal/pathprobe ./internal/passive

# Fuzz budgets are execution counts, not durations: a duration -fuzztime can
# fail with "context deadline exceeded" at its boundary on a loaded machine
# (a race in Go's fuzz coordinator, golang/go#75804, fixed in Go 1.27).
# 200,000 executions take 6-10 s per target here.
FUZZTIME ?= 200000x

# The fuzzers run beside the VM stage (vm-beside), on one CPU: one worker,
# GOMAXPROCS=1 for the go command and the compiler it runs, and taskset to
# CPU 1 where there are two or more. qemu's emulated CPU then has the other
# core to itself, so the VM's timing-sensitive scenarios see what they see
# alone, and the suite gains the fuzzers' ~90 s (the suite had reached 31
# minutes with them in series).
FUZZ_CPU := GOMAXPROCS=1 $(shell [ "$$(nproc)" -ge 2 ] && command -v taskset >/dev/null && echo taskset -c 1)
# One fuzz target: $(FUZZ) PACKAGE -fuzz TARGET.
FUZZ = $(FUZZ_CPU) $(GO) test -run '^$$' -fuzztime $(FUZZTIME) -parallel 1

.PHONY: generate check-generated build doctor man completion package test deps check unit unit-rest unit-packages packages-then-judge unit-late unit-alone fleet-judge fuzz vmtest vm-beside late-then-fuzz ansible-sanity bench bench-lab bench-autorate clean

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/lowlat

doctor: build
	./$(BIN) doctor

# Man pages and shell completions for packages, generated from the command
# tree that --help prints (bin/man/lowlat.1, lowlat-apply.1, ...).
man: build
	rm -rf bin/man
	./$(BIN) man bin/man

completion: build
	mkdir -p bin/completion
	./$(BIN) completion bash > bin/completion/lowlat.bash
	./$(BIN) completion zsh > bin/completion/_lowlat
	./$(BIN) completion fish > bin/completion/lowlat.fish

# The .deb and .rpm for amd64 and arm64 (docs/packages.md), built with nfpm
# pinned in tools/go.mod: bin/pkg/lowlat_$(VERSION)_amd64.deb,
# bin/pkg/lowlat-$(VERSION).x86_64.rpm, ...
VERSION ?= 0.1.0
package:
	GO=$(GO) deploy/package/build.sh $(VERSION) bin/pkg

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "make deps: need root to apt-get install:" $$missing >&2; exit 1; fi; \
		echo "installing:" $$missing; \
		guard=; if [ ! -e /usr/sbin/policy-rc.d ]; then \
			printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && guard=1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
		rc=$$?; [ -n "$$guard" ] && rm -f /usr/sbin/policy-rc.d; exit $$rc; \
	fi
	@# bpffs at /sys/fs/bpf, as systemd mounts it at boot: the sock_ops
	@# tests pin programs there, and lowlat will not mount it itself where it
	@# cannot tell its mount namespace is the host's (a bare VM or container
	@# whose /proc/1/ns is unreadable).
	@if [ "$$(id -u)" = 0 ] && ! grep -q ' - bpf ' /proc/self/mountinfo; then \
		mount -t bpf bpf /sys/fs/bpf && echo "mounted bpffs at /sys/fs/bpf"; fi
	$(GO) mod download
	cd tools && $(GO) mod download

check: check-generated
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:" $$out >&2; exit 1; fi
	$(GO) vet ./...

# The BPF programs of the passive measurements: C compiled by clang through
# cilium/ebpf's bpf2go into an object and its Go loader, both committed so
# that go build needs no clang.
BPF_GENERATED := internal/passive/passive_bpfel.go internal/passive/passive_bpfel.o
generate:
	$(GO) generate ./internal/passive

# The committed objects are what their C compiles to (clang's output is
# reproducible: a clone elsewhere builds the same bytes).
check-generated:
	@tmp=$$(mktemp -d) && cp $(BPF_GENERATED) $$tmp/ && \
	$(GO) generate ./internal/passive && \
	for f in $(BPF_GENERATED); do cmp -s $$f $$tmp/$$(basename $$f) || { echo "$$f is not what 'make generate' builds from its C: run make generate and commit it" >&2; cp $$tmp/$$(basename $$f) $$f; rm -rf $$tmp; exit 1; }; done; \
	rm -rf $$tmp

# The package and fleet tests (test/packages), then the judged fleet
# (fleet-judge), run beside the other packages' tests: they mostly wait on
# dpkg, lintian, SSH, the gates' measurements and the judge's windows, and in
# one 'go test ./...' they would hold one of its two slots for ~9 of its ~12
# minutes. Measured here (a busy machine): unit-rest 10.5 min, unit-packages
# 11.4, then fleet-judge 4.8: the host phase is ~16 minutes.
unit:
	@$(MAKE) --no-print-directory -j2 --output-sync=target packages-then-judge unit-rest

packages-then-judge:
	@$(MAKE) --no-print-directory unit-packages
	@$(MAKE) --no-print-directory fleet-judge

unit-rest:
	LOWLAT_VM_REQUIRED=1 LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 20m -skip '^($(LATE_TESTS)|$(LATE_CLI_TESTS)|$(ALONE_TESTS))$$' $$($(GO) list ./... | grep -v '/test/packages$$')

# LATE_TESTS run after the package and fleet tests, never beside them: their
# four upload flows and a daemon reading the shaper 50 times a second made
# the fleet's gates see a noisy baseline and keep a fix they must refuse.
# They run beside the VM stage's first ~2.5 minutes instead (vm-beside),
# before the fuzzers: the VM builds, boots and runs its exactness tests
# (qdisc, knob, txn) then, which time nothing, and their own checks have
# margins of 10x and more (docs/autorate.md). In series they cost the suite
# ~150 s of its 30 minutes.
LATE_TESTS := TestIntegrationCappedUplinkVarying
# LATE_CLI_TESTS (./internal/cli) run there too: Debian's Prometheus
# scraping exporters and monitors for the canary judge and the dashboard's
# queries (~70 s). They wait on scrapes, time nothing, and judge effects
# of 2x and more; in the host phase they would add their minute to the
# suite.
LATE_CLI_TESTS := TestIntegrationCanaryJudgePrometheus|TestIntegrationDashboardQueries

unit-late:
	LOWLAT_VM_REQUIRED=1 LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 10m -p 1 -run '^($(LATE_TESTS))$$' ./internal/lab
	LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 5m -run '^($(LATE_CLI_TESTS))$$' ./internal/cli

# ALONE_TESTS run last, with nothing beside them (~7 s):
# TestIntegrationRXReceiverBesideHog (internal/passive) pins a CPU hog at
# nice -19 to CPU 0 and measures a receiver beside it, then on CPU 1. Beside
# the other packages the hog moved a path-probe test's delay to the wrong
# hop; beside the VM stage, qemu on CPU 1 made the moved receiver as slow as
# the one beside the hog (read p99 33 ms against 101 ms).
ALONE_TESTS := TestIntegrationRXReceiverBesideHog

unit-alone:
	LOWLAT_VM_REQUIRED=1 LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 5m -run '^($(ALONE_TESTS))$$' ./internal/passive

unit-packages:
	LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 20m -skip '^($(FLEET_JUDGE_TESTS))$$' ./test/packages

# FLEET_JUDGE_TESTS: the canary judged end to end (six namespaced hosts with
# monitors, Debian's Prometheus, Ansible over sshd, three runs of a window of
# 24 to 40 s each, ~5 minutes). They run after the package tests, in their
# slot of the host phase (packages-then-judge): never beside them, as both
# install and remove the package with dpkg, and the judged fleet's uploads
# beside the other fleet's gates would be the noise LATE_TESTS keep away from
# them. The other packages' tests (unit-rest) have usually ended by then.
# Never beside the VM stage either (tried, when the test took ~10 minutes):
# it slowed the VM by 2.7 minutes and the VM's game-egress scenario failed.
FLEET_JUDGE_TESTS := TestFleetCanaryJudge

fleet-judge:
	LOWLAT_HEAVY_TESTS=1 $(GO) test -count=1 -timeout 20m -run '^($(FLEET_JUDGE_TESTS))$$' ./test/packages

fuzz:
	$(FUZZ) ./internal/probe -fuzz FuzzDecodeUDP
	$(FUZZ) ./internal/probe -fuzz FuzzDecodeHello
	$(FUZZ) ./internal/journal -fuzz FuzzDecode
	$(FUZZ) ./internal/qdisc -fuzz FuzzParse
	$(FUZZ) ./internal/qdisc -fuzz FuzzDecodeOptions
	$(FUZZ) ./internal/profile -fuzz FuzzParse
	$(FUZZ) ./internal/sockets -fuzz FuzzParseNginx
	$(FUZZ) ./internal/sockets -fuzz FuzzParseHAProxy
	$(FUZZ) ./internal/sockets -fuzz FuzzDecodeDiag

# ansible-test sanity on the Ansible collection alone (the fleet test runs it
# too), offline, with Debian's tools (docs/fleet.md); the collection is
# copied where ansible-test wants it, under git.
ansible-sanity:
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && c=$$d/ansible_collections/lowlat/lowlat && \
	mkdir -p $$(dirname $$c) && cp -r deploy/ansible $$c && git -C $$c init -q && \
	cd $$c && HOME=$$d /usr/bin/python3 $(CURDIR)/test/packages/testdata/ansible_test_offline.py sanity --python-interpreter /usr/bin/python3

vmtest:
	$(GO) run ./test/vmtest $(addprefix -pkg ,$(VM_PKGS)) -timeout 30m

# The VM stage, and beside it on the other core the late tests and then the
# fuzzers.
vm-beside:
	@$(MAKE) --no-print-directory -j2 --output-sync=target vmtest late-then-fuzz

late-then-fuzz:
	@$(MAKE) --no-print-directory unit-late
	@$(MAKE) --no-print-directory fuzz

test: deps check unit vm-beside unit-alone

bench: build
	bash bench/foundation/run.sh
	bash bench/probe/run.sh
	bash bench/nic/run.sh
	bash bench/sockets/run.sh
	bash bench/monitor/run.sh

# The lab's scenarios on this host and in the VM, with figures (~12 min, root).
bench-lab: build
	bash bench/lab/run.sh

# lowlat autorate beside cake-autorate (fetched from GitHub) in the VM (~15 min, root).
bench-autorate: build
	bash bench/autorate/run.sh

clean:
	rm -rf bin
