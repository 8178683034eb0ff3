//go:build linux

package host

import (
	"os"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/nsthread"
	"golang.org/x/sys/unix"
)

// TestSysctlWalkJoinsCallerNetns: the /proc/sys/net walk runs on a goroutine
// of its own and must read the caller's network namespace. When it cannot
// join it (setns fails), gathering says so under /proc/sys/net and reads no
// net.* sysctl, rather than passing off the walker thread's namespace as the
// caller's.
func TestSysctlWalkJoinsCallerNetns(t *testing.T) {
	notNS, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer notNS.Close()
	tests := []struct {
		name      string
		openNetns func() (nsthread.NS, error)
		wantErr   string // in the /proc/sys/net error; "" for none
	}{
		{name: "caller's namespace", openNetns: nil},
		{name: "setns fails", openNetns: func() (nsthread.NS, error) {
			// A dup: the walker closes what it is given.
			fd, err := unix.Dup(int(notNS.Fd()))
			return nsthread.NS(fd), err
		}, wantErr: "setns: invalid argument"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &Facts{}
			rd := &fileReader{r: Root{}, f: f, openNetns: tt.openNetns}
			rd.readAll()
			rd.flush()
			var walkErr string
			for _, e := range f.Errors {
				if e.Source == "/proc/sys/net" {
					walkErr = e.Err
				}
			}
			_, haveNet := f.Sysctls["net.ipv4.tcp_fin_timeout"]
			switch {
			case tt.wantErr == "" && (walkErr != "" || !haveNet):
				t.Errorf("walk in the caller's namespace: error %q, net.ipv4.tcp_fin_timeout read: %v", walkErr, haveNet)
			case tt.wantErr != "" && !strings.Contains(walkErr, tt.wantErr):
				t.Errorf("/proc/sys/net error = %q, want one containing %q", walkErr, tt.wantErr)
			case tt.wantErr != "" && haveNet:
				t.Errorf("net.* sysctls read although the walker could not join the caller's namespace")
			}
		})
	}
}
