//go:build linux

package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns a pseudo-terminal's controlling and terminal ends.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	ctl = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { ctl.Close() })
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return ctl, tty
}

// A run longer than 2 s draws a progress bar on a terminal stderr, even with
// stdout redirected (--json > file); a shorter one does not.
func TestProbeProgressBarOnTTY(t *testing.T) {
	addr := startTestReflector(t, "")
	for _, tc := range []struct {
		dur  string
		want bool
	}{{"2100ms", true}, {"300ms", false}} {
		ctl, tty := openPTY(t)
		got := make(chan string, 1)
		go func() {
			var b strings.Builder
			buf := make([]byte, 4096)
			for {
				n, err := ctl.Read(buf)
				b.Write(buf[:n])
				if err != nil {
					got <- b.String()
					return
				}
			}
		}()
		env, stdout, _ := testEnv()
		env.Stderr = tty
		err := runProbe(context.Background(), env, []string{"udp", addr, "--interval", "10ms", "--duration", tc.dur, "--json"})
		tty.Close() // the reader sees EIO once the terminal end is gone
		out := <-got
		if err != nil {
			t.Fatal(err)
		}
		if drew := strings.Contains(out, "probe udp [") && strings.Contains(out, "%"); drew != tc.want {
			t.Errorf("--duration %s: bar drawn = %v, want %v; terminal got %q", tc.dur, drew, tc.want, out)
		}
		if !strings.HasPrefix(stdout.String(), "{") {
			t.Errorf("stdout is not the JSON result: %.40q", stdout.String())
		}
	}
}
