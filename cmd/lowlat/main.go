// Command lowlat diagnoses, plans, applies (reversibly), measures and rolls back
// network-latency tuning on Linux servers. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/lowlat/lowlat/internal/cli"
	// SIGHUP is caught from this package's init on, before main runs:
	// a reload sent to a starting monitor must not end it.
	_ "github.com/lowlat/lowlat/internal/hangup"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Main(ctx, os.Args[1:], cli.StdEnv())
	stop()
	if err != nil {
		var ee *cli.ExitError
		if errors.As(err, &ee) {
			if ee.Err != nil {
				fmt.Fprintln(os.Stderr, "lowlat:", ee.Err)
			}
			os.Exit(ee.Code)
		}
		fmt.Fprintln(os.Stderr, "lowlat:", err)
		os.Exit(1)
	}
}
