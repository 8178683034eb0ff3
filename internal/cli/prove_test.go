package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/probe"
)

// TestProveBaselineMustMatch: 'prove --baseline FILE' refuses, with one
// line and exit 2, a baseline measured toward another target or with other
// probe flags than --prove measures with (on main it judged the change
// against it). The same probe is accepted: the run goes on to the journal.
func TestProveBaselineMustMatch(t *testing.T) {
	baseline := func(t *testing.T, cfg probe.UDPConfig) string {
		n, err := probe.Normalized(cfg)
		if err != nil {
			t.Fatal(err)
		}
		res := probe.UDPResult{Meta: probe.Meta{Type: "udp", Target: cfg.Target}, Config: n.(probe.UDPConfig), Sent: 100, Received: 100,
			RTT: probe.Percentiles{Count: 100, P50: 50}, Histograms: map[string]string{}}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "before.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	base := probe.UDPConfig{Target: "192.0.2.7:7431", Duration: probe.Duration(2e9)}
	tests := []struct {
		name  string
		cfg   func(c probe.UDPConfig) probe.UDPConfig
		prove string
		want  string // "" : accepted
	}{
		{"same probe", func(c probe.UDPConfig) probe.UDPConfig { return c }, "udp 192.0.2.7:7431 --duration 2s", ""},
		{"same probe, defaults spelled out", func(c probe.UDPConfig) probe.UDPConfig { return c }, "udp 192.0.2.7:7431 --duration 2s --interval 10ms", ""},
		{"other target", func(c probe.UDPConfig) probe.UDPConfig { c.Target = "192.0.2.8:7431"; return c }, "udp 192.0.2.7:7431 --duration 2s",
			`target: "192.0.2.8:7431" in the result, "192.0.2.7:7431" now`},
		{"other interval", func(c probe.UDPConfig) probe.UDPConfig { c.Interval = probe.Duration(20e6); return c }, "udp 192.0.2.7:7431 --duration 2s",
			`interval: "20ms" in the result, "10ms" now`},
		{"other duration", func(c probe.UDPConfig) probe.UDPConfig { return c }, "udp 192.0.2.7:7431 --duration 3s",
			`duration: "2s" in the result, "3s" now`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := baseline(t, tt.cfg(base))
			r := runIsolated(t, "prove", "--txn", "20261127T000000Z-abcdef", "--prove", tt.prove, "--baseline", file, "--slo", "p99<=8ms")
			var ee *ExitError
			refused := errors.As(r.err, &ee) && ee.Code == 2 && strings.Contains(r.err.Error(), "was measured otherwise")
			if tt.want == "" {
				if refused || r.err == nil {
					t.Fatalf("the same probe: %v", r.err)
				}
				return
			}
			if !refused || !strings.Contains(r.err.Error(), tt.want) || strings.Contains(r.err.Error(), "\n") {
				t.Fatalf("got %v; want one line, exit 2, naming %s", r.err, tt.want)
			}
		})
	}
}
