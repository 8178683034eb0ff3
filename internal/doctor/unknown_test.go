package doctor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file hold doctor to what the facts say, on the corpus
// of real trees and on generated hosts with a file taken away: a check
// that could not read its data is "not checked", never passed, and names
// what it could not read.

func corpus(t *testing.T, name string) *host.Facts { return hosttest.Corpus(t, name) }

func generated(t *testing.T, s *hostgen.Spec, edit func(*hostgen.Spec)) *host.Facts {
	t.Helper()
	if edit != nil {
		edit(s)
	}
	f, err := s.Facts()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// rows returns the report's rows of check id.
func rows(r *Report, id string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func summaries(fs []Finding) string {
	var b strings.Builder
	for _, f := range fs {
		fmt.Fprintf(&b, "[not_checked=%v] %s; ", f.NotChecked, f.Summary)
	}
	return b.String()
}

// notChecked fails unless check id has exactly one row, not checked, whose
// summary says want.
func notChecked(t *testing.T, r *Report, id, want string) {
	t.Helper()
	fs := rows(r, id)
	if len(fs) != 1 || !fs[0].NotChecked || !strings.Contains(fs[0].Summary, want) {
		t.Errorf("%s: %d rows %s; want one not-checked row saying %q", id, len(fs), summaries(fs), want)
	}
}

// TestMissingSysctlBlamesItsPath: a check whose sysctl could not be read
// names the directory that is missing, not the first unrelated error.
func TestMissingSysctlBlamesItsPath(t *testing.T) {
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		id   string
		want string
	}{
		{"corpus procfs", func(t *testing.T) *host.Facts { return corpus(t, "procfs") },
			"congestion-control", "cannot read net.ipv4.tcp_congestion_control (/proc/sys/net: no such file or directory)"},
		{"corpus node_exporter", func(t *testing.T) *host.Facts { return corpus(t, "node_exporter") },
			"default-qdisc-fifo", "cannot read net.core.default_qdisc (/proc/sys/net/core: no such file or directory)"},
		{"generated: ipv4 lost", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.DualI40E(), func(s *hostgen.Spec) { s.Remove = []string{"/proc/sys/net/ipv4"} })
		}, "tcp-fastopen-server-off", "cannot read net.ipv4.tcp_fastopen (/proc/sys/net/ipv4: no such file or directory)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Run(tt.f(t), Options{})
			notChecked(t, r, tt.id, tt.want)
			for _, f := range r.Findings {
				if strings.Contains(f.Summary, "cannot read net.") && strings.Contains(f.Summary, "osrelease") {
					t.Errorf("%s blames kernel.osrelease: %s", f.ID, f.Summary)
				}
			}
		})
	}
}
