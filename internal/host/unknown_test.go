package host_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file hold lowlat to what a tree says, on the corpus of
// real trees (hosttest.Corpus) and on generated hosts with a file taken away:
// what could not be read stays unknown, with the path that is missing.

// generated gathers a generated host after edit changed its spec.
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

func onlineCPUs(f *host.Facts) []int {
	var out []int
	for _, c := range f.CPUs {
		if c.Online {
			out = append(out, c.ID)
		}
	}
	return out
}

func errorsText(f *host.Facts) string {
	var b strings.Builder
	for _, e := range f.Errors {
		fmt.Fprintf(&b, "%s: %s\n", e.Source, e.Err)
	}
	return b.String()
}

// TestCPUOnlineRule: the online list; else the offline list; else a CPU
// without an online file is online (it cannot be unplugged).
func TestCPUOnlineRule(t *testing.T) {
	tests := []struct {
		name string
		f    func(t *testing.T) *host.Facts
		want []int
	}{
		// procfs's tree has no online list, an offline list "2", an
		// online file for cpu0 only, and an empty cpu2.
		{"corpus procfs", func(t *testing.T) *host.Facts { return hosttest.Corpus(t, "procfs") }, []int{0, 1}},
		// node_exporter's has the online list "0-3" and no online files.
		{"corpus node_exporter", func(t *testing.T) *host.Facts { return hosttest.Corpus(t, "node_exporter") }, []int{0, 1, 2, 3}},
		{"generated: offline list", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.CentOS7(), func(s *hostgen.Spec) {
				s.Remove = []string{"/sys/devices/system/cpu/online"}
				s.Files = map[string]string{"/sys/devices/system/cpu/offline": "3,5\n"}
			})
		}, []int{0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{"generated: online files only", func(t *testing.T) *host.Facts {
			return generated(t, hostgen.CentOS7(), func(s *hostgen.Spec) {
				s.Remove = []string{"/sys/devices/system/cpu/online", "/sys/devices/system/cpu/offline", "/sys/devices/system/cpu/cpu7/online"}
				s.Files = map[string]string{"/sys/devices/system/cpu/cpu5/online": "0\n"}
			})
		}, []int{0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := tt.f(t)
			if got := onlineCPUs(f); !slices.Equal(got, tt.want) {
				t.Errorf("online CPUs (-want +got):\n- %v\n+ %v", tt.want, got)
			}
		})
	}
}
