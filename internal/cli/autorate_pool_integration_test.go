//go:build linux

package cli_test

import (
	"context"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/probe"
)

// TestIntegrationAutorateReflectorPool: four candidates, two active. The
// first does not answer at start and goes to the back of the line; the
// next two are made active. When one of them stops answering, the first
// standing by replaces it, and the state file names the new one.
func TestIntegrationAutorateReflectorPool(t *testing.T) {
	w := newARWorld(t)
	removeAutorateFiles(t, "ar0")
	stop := map[string]context.CancelFunc{}
	for _, port := range []string{"7501", "7502"} {
		r := probe.NewReflector(probe.ReflectorConfig{MaxSessionsPerIP: -1})
		if err := w.peer.Do(func() error { return r.Listen(context.Background(), "10.78.0.2:"+port) }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = r.Serve(ctx); close(done) }()
		stop[port] = func() { cancel(); <-done }
		t.Cleanup(stop[port])
	}
	const dead, a, b, spare = "10.78.0.2:7599", "10.78.0.2:7501", "10.78.0.2:7502", "10.78.0.2:7500"
	cmd, logb, exited := w.startAutorate(t, nil, "--iface", "ar0", "--base", "2mbit", "--dry-run", "--passive=false",
		"--reflector", dead, "--reflector", a, "--reflector", b, "--reflector", spare, "--active-reflectors", "2")
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waitExit(t, exited, logb)
	})
	waitState(t, "ar0", exited, logb)
	if got, want := waitReflectors(t), []string{a, b}; !slices.Equal(got, want) {
		t.Errorf("active at start %v, want %v (the first two that answered)\n%s", got, want, logb.String())
	}
	stop["7501"]()
	deadline := time.Now().Add(10 * time.Second)
	want := "reflector " + a + ": no answer for 3s; replaced by " + spare
	for !strings.Contains(logb.String(), want) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(logb.String(), want) {
		t.Fatalf("no %q within 10 s of %s's end\n%s", want, a, logb.String())
	}
	time.Sleep(time.Second)
	if got, want := waitReflectors(t), []string{spare, b}; !slices.Equal(got, want) {
		t.Errorf("active after the replacement %v, want %v\n%s", got, want, logb.String())
	}
}

// waitReflectors waits up to 5 s for ar0's state to list two healthy
// reflectors, and returns the reflectors it lists, sorted.
func waitReflectors(t *testing.T) []string {
	t.Helper()
	var out []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		st, _, err := autorate.ReadState(autorate.StatePath("ar0"))
		if err != nil {
			continue
		}
		out = out[:0]
		healthy := 0
		for _, s := range st.Signals {
			if r, ok := strings.CutPrefix(s.Name, "owd:"); ok {
				out = append(out, r)
				if s.Healthy {
					healthy++
				}
			}
		}
		if healthy == 2 {
			break
		}
	}
	slices.Sort(out)
	return out
}
