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
# initramfs writer, ethtool and time for fixtures and benchmarks.
DEB_PKGS := iproute2 qemu-system-x86 busybox-static xz-utils cpio ethtool time ca-certificates

# Packages whose integration tests must also pass on the stock kernel.
VM_PKGS := ./internal/qdisc ./internal/knob ./internal/txn ./internal/cli

FUZZTIME ?= 15s

.PHONY: build doctor test deps check unit fuzz vmtest bench clean

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/lowlat

doctor: build
	./$(BIN) doctor

deps:
	@missing=$$(for p in $(DEB_PKGS); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" != 0 ]; then echo "make deps: need root to apt-get install:" $$missing >&2; exit 1; fi; \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	$(GO) mod download

check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:" $$out >&2; exit 1; fi
	$(GO) vet ./...

unit:
	LOWLAT_VM_REQUIRED=1 $(GO) test -count=1 -timeout 20m ./...

fuzz:
	$(GO) test ./internal/probe -run '^$$' -fuzz FuzzDecodeUDP -fuzztime $(FUZZTIME)
	$(GO) test ./internal/probe -run '^$$' -fuzz FuzzDecodeHello -fuzztime $(FUZZTIME)
	$(GO) test ./internal/journal -run '^$$' -fuzz FuzzDecode -fuzztime $(FUZZTIME)
	$(GO) test ./internal/qdisc -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)
	$(GO) test ./internal/profile -run '^$$' -fuzz FuzzParse -fuzztime $(FUZZTIME)

vmtest:
	$(GO) run ./test/vmtest $(addprefix -pkg ,$(VM_PKGS)) -timeout 25m

test: deps check unit fuzz vmtest

bench: build
	bash bench/foundation/run.sh
	bash bench/probe/run.sh

clean:
	rm -rf bin
