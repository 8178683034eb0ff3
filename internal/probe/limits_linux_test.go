//go:build linux

package probe

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
	"golang.org/x/sys/unix"
)

// A target with no route: every probe says "unreachable" in one line, at
// once, and writes nothing. The namespace is the test's own, with only lo.
func TestIntegrationUnreachable(t *testing.T) {
	ns := testnet.New(t)
	const target = "10.77.9.9:7431"
	err := ns.Do(func() error {
		for _, tc := range []struct {
			kind string
			run  func() error
		}{
			{"udp", func() error {
				_, err := UDP(testCtx(t, 10*time.Second), UDPConfig{Target: target, Duration: Duration(time.Second)})
				return err
			}},
			{"tcp", func() error {
				_, err := TCP(testCtx(t, 10*time.Second), TCPConfig{Target: target, Connections: 3, Duration: Duration(time.Second)})
				return err
			}},
			{"crr", func() error {
				_, err := CRR(testCtx(t, 10*time.Second), CRRConfig{Target: target, Parallel: 2, Count: 4})
				return err
			}},
			{"load", func() error {
				_, err := Load(testCtx(t, 10*time.Second), LoadConfig{Target: target, Duration: Duration(time.Second), Idle: Duration(time.Second)})
				return err
			}},
		} {
			start := time.Now()
			err := tc.run()
			if err == nil || !strings.Contains(err.Error(), "unreachable") || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: err = %v, want one line saying unreachable", tc.kind, err)
			}
			t.Logf("%s: %v", tc.kind, err)
			if el := time.Since(start); el > 2*time.Second {
				t.Errorf("%s: took %s to say so", tc.kind, el)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Without the right to raise RLIMIT_NOFILE, a run that needs more descriptors
// than allowed fails before it dials, saying how many connections are possible
// and why. The limit is per process, so a child test binary takes it.
func TestIntegrationFileLimit(t *testing.T) {
	if os.Getenv("LOWLAT_TEST_NOFILE") == "1" {
		fileLimitChild()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIntegrationFileLimit$", "-test.v")
	cmd.Env = append(os.Environ(), "LOWLAT_TEST_NOFILE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	got := string(out)
	for _, l := range strings.Split(got, "\n") {
		if strings.HasPrefix(l, "RESULT") {
			t.Logf("child: %s", l)
		}
	}
	if !strings.Contains(got, "RESULT can open at most ") || !strings.Contains(got, "connections (RLIMIT_NOFILE=200") || !strings.Contains(got, "raise it with ulimit -n") {
		t.Errorf("child said:\n%s", got)
	}
}

// fileLimitChild lowers RLIMIT_NOFILE to 200, gives up CAP_SYS_RESOURCE on its
// thread (the one that will try to raise the limit) and asks for 1000
// connections.
func fileLimitChild() {
	runtime.LockOSThread()
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: 200, Max: 200}); err != nil {
		println("RESULT setrlimit:", err.Error())
		return
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		println("RESULT capget:", err.Error())
		return
	}
	const bit = 1 << (unix.CAP_SYS_RESOURCE % 32)
	data[unix.CAP_SYS_RESOURCE/32].Effective &^= bit
	data[unix.CAP_SYS_RESOURCE/32].Permitted &^= bit
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		println("RESULT capset:", err.Error())
		return
	}
	_, err := TCP(context.Background(), TCPConfig{Target: "127.0.0.1:9", Connections: 1000, Duration: Duration(time.Second)})
	var ce *ConfigError
	if err == nil || errors.As(err, &ce) {
		println("RESULT unexpected:", err)
		return
	}
	println("RESULT " + err.Error())
}
