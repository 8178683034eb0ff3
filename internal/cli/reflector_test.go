package cli

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The start-up line says what a peer without a key may do, and the load
// flags change it; bad load flags are usage errors.
func TestReflectorStartupLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "lowlat reflector: unauthenticated peers may: UDP echo ≤ 100 packets/s per session, 16 sessions per address; TCP rr echo (replies no larger than requests); " +
			"CRR ≤ 64 KiB each way at ≤ 1 Mbit/s per address; 64 TCP connections per address; tests ≤ 24h; bulk load (sink, source, larger CRR): refused (no --allow-load)\n"},
		{[]string{"--allow-load", "--load-rate", "20mbit", "--load-duration", "30s", "--max-conns-per-ip", "0"},
			"lowlat reflector: unauthenticated peers may: UDP echo ≤ 100 packets/s per session, 16 sessions per address; TCP rr echo (replies no larger than requests); " +
				"CRR ≤ 64 MiB each way; TCP connections per address uncapped; tests ≤ 24h; bulk load (sink, source, CRR): allowed (--allow-load) at ≤ 20 Mbit/s per address and direction, ≤ 30s per load flow\n"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			env, _, stderr := testEnv()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- Main(ctx, append([]string{"reflector", "--listen", "127.0.0.1:0", "--quiet"}, tt.args...), env)
			}()
			time.Sleep(200 * time.Millisecond)
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("reflector did not stop on cancel")
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr:\n%s\nwant the line\n%s", stderr.String(), tt.want)
			}
		})
	}
	for _, args := range [][]string{{"--load-rate", "0"}, {"--load-rate", "fast"}, {"--load-duration", "0s"}} {
		env, _, _ := testEnv()
		if err := Main(context.Background(), append([]string{"reflector"}, args...), env); exitCode(err) != 2 || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want exit 2 with one line", args, err)
		}
	}
}

// A probe the reflector refuses prints the reflector's reason as its one
// line and exits 1, writing no result.
func TestProbeRefusedByReflector(t *testing.T) {
	addr := startTestReflector(t, "")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"load", addr, "--idle", "1s", "--duration", "1s"}, "probe load: reflector refused load: bulk modes need a key or --allow-load on the reflector"},
		{[]string{"crr", addr, "--count", "1"}, "probe crr: reflector refused: CRR requests and responses above 64 KiB are bulk; they need a key or --allow-load on the reflector"},
	} {
		t.Run(tt.args[0], func(t *testing.T) {
			env, stdout, _ := testEnv()
			err := runProbe(context.Background(), env, tt.args)
			if exitCode(err) != 1 || err.Error() != tt.want {
				t.Errorf("err = %v (exit %d), want exit 1 with %q", err, exitCode(err), tt.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout: %q", stdout.String())
			}
		})
	}
}
