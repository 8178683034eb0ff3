//go:build linux

package testnet

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

const standInEnv = "LOWLAT_TESTNET_STANDIN"

// StandIn returns a command for a stand-in process whose command line reads
// argv0 (what /proc/PID/cmdline shows), made from the test binary itself so
// it runs wherever the test does (the VM has no sleep or sh). mode says how
// it takes SIGTERM: "die" (the default action), "ignore", or "slow" (exit 0
// 0.2 s later, as a daemon setting its shaper back first). It runs at most
// a minute. It writes "ready" on its standard output once its SIGTERM
// disposition is in place. TestMain must call Main.
func StandIn(argv0, mode string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(self)
	cmd.Args[0] = argv0
	cmd.Env = append(os.Environ(), standInEnv+"="+mode)
	return cmd
}

// StartStandIn starts a StandIn and returns once it is ready: its command
// line and its SIGTERM disposition in place, as a real daemon's are by the
// time it writes its pid file. Right after Start they may not be: between
// a successful exec and the new program's argument pages, /proc/PID/cmdline
// reads empty (on the VM's slow CPU a test once saw it so).
func StartStandIn(argv0, mode string) (*exec.Cmd, error) {
	cmd := StandIn(argv0, mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("stand-in %s: %q, %v before it was ready", argv0, line, err)
	}
	return cmd, nil
}

func standInMain(mode string) {
	switch mode {
	case "ignore":
		signal.Ignore(syscall.SIGTERM)
	case "slow":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		go func() {
			<-c
			time.Sleep(200 * time.Millisecond)
			os.Exit(0)
		}()
	}
	// Ready: the SIGTERM disposition is set (Go's runtime catches SIGTERM
	// from the start, so /proc/PID/status cannot tell).
	os.Stdout.WriteString("ready\n")
	time.Sleep(time.Minute)
	os.Exit(0)
}
