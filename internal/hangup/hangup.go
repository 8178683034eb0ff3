// Package hangup catches SIGHUP from the start of the process.
//
// lowlat monitor reloads its config on SIGHUP. A SIGHUP that nothing asked
// for ends a Go program, and systemd counts a death by SIGHUP as a clean
// exit (Restart=on-failure leaves the service dead): a reload sent while the
// monitor was still starting ('systemctl reload' right after a start, a
// configuration run) stopped it for good. This package asks for SIGHUP in
// its init, which runs before main and before nearly every other package's
// (the Go runtime initialises a package once its imports are: this one
// imports only os/signal and syscall). From then on a hangup waits in
// Signals until the command takes it: the monitor as a reload, any other
// command as the end (internal/cli).
//
// What stays open is the first few milliseconds of the process, before
// the Go runtime reaches this init: a SIGHUP then still ends it.
package hangup

import (
	"os"
	"os/signal"
	"syscall"
)

// signals holds at most one hangup: a reload reads the newest config, so
// hangups that arrive before one is taken are one.
var signals = make(chan os.Signal, 1)

func init() { signal.Notify(signals, syscall.SIGHUP) }

// Signals returns the process's SIGHUPs, caught since its start.
func Signals() <-chan os.Signal { return signals }
