// Command vmtest runs lowlat's integration tests inside a stock Debian kernel
// booted under qemu (internal/lab/vm), where the qdiscs this host's kernel
// lacks (netem, fq_codel, fq, cake, prio, sfq…) exist.
//
// It builds lowlat and one "go test -c" binary per package, boots the VM
// once, runs each binary with -test.run (default ^TestIntegration) and
// LOWLAT_BIN=/bin/lowlat LOWLAT_IN_VM=1 LOWLAT_REQUIRE_QDISCS=…, prints their
// output and a summary, and exits non-zero when a build, a test binary or the
// VM fails.
//
// Usage, from anywhere in the module:
//
//	go run ./test/vmtest [-run REGEX] [-pkg ./internal/knob/...] [-timeout 20m]
//
// Without -pkg it runs every package under ./internal (and ./cmd) whose test
// files contain "func TestIntegration", except internal/lab/vm itself (whose
// own VM test runs on the host). See docs/vm.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errFailed) {
			fmt.Fprintln(os.Stderr, "vmtest:", err)
		}
		os.Exit(1)
	}
}
