package cli

import (
	"strings"
	"testing"
)

// TestApplyHoldBadInput: --hold holds what a gate keeps, for as long as
// --confirm says; without a gate or without a deadline it is refused, as is
// a deadline past the longest, before anything is read, measured or changed.
func TestApplyHoldBadInput(t *testing.T) {
	prove := []string{"--prove", "udp 192.0.2.1:7431 --duration 1s"}
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"hold without a gate", []string{"--hold", "--confirm", "10m"}, "--hold needs --prove"},
		{"hold without a deadline", append([]string{"--hold"}, prove...), "--hold needs --confirm DURATION"},
		{"a deadline past 8 days", append([]string{"--hold", "--confirm", "193h"}, prove...), "--confirm 193h0m0s: want 1s..192h (8 days)"},
		{"the same without hold", []string{"--confirm", "193h"}, "want 1s..192h"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runIsolated(t, append([]string{"apply", "--yes", "--profile", "capped-uplink", "--set", "rate=10mbit"}, tt.args...)...)
			if got := mainStderr(r.err); exitCode(r.err) != ExitUsage || !strings.Contains(got, tt.want) || strings.Count(got, "\n") != 1 {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", exitCode(r.err), got, tt.want)
			}
			if len(r.touched) > 0 || r.stdout != "" {
				t.Errorf("a refused apply touched %v, printed %q", r.touched, r.stdout)
			}
		})
	}
}
