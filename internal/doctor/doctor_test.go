package doctor

import (
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
)

func fixture(t *testing.T, name string) *host.Facts { return hosttest.Fixture(t, name) }

func ids(r *Report) map[string]Finding {
	m := map[string]Finding{}
	for _, f := range r.Findings {
		if _, dup := m[f.ID]; !dup {
			m[f.ID] = f
		}
	}
	return m
}

// TestFixtureFindings checks each fixture host gets the findings its runbook
// describes, and not the ones it does not have.
func TestFixtureFindings(t *testing.T) {
	tests := []struct {
		host    string
		want    map[string]string // id -> severity
		notWant []string
	}{
		{"dual-i40e-nvme", map[string]string{
			"nic-irq-concentrated":    Warn, // runbook 002: everything on CPU0
			"irqbalance-running":      Info,
			"thp-always":              Warn,
			"qdisc-fifo-bufferbloat":  Warn,
			"congestion-control":      Warn,
			"tcp-fastopen-server-off": Info,
			"slow-start-after-idle":   Info,
			"listen-overflows":        Warn,
		}, []string{"kernel-too-old-for-bbr", "obsolete-sysctl"}},
		{"centos7-3.10", map[string]string{
			"kernel-too-old-for-bbr": Warn,
			"obsolete-sysctl":        Crit, // tcp_tw_recycle=1
		}, []string{"congestion-control"}},
		{"epyc-25g", map[string]string{
			"obsolete-sysctl":        Info, // tcp_low_latency on 5.4
			"qdisc-fifo-bufferbloat": Warn,
		}, []string{"kernel-too-old-for-bbr"}},
		{"virtio-vm", map[string]string{
			"qdisc-fifo-bufferbloat": Warn,
		}, []string{"nic-irq-concentrated", "kernel-too-old-for-bbr", "congestion-control", "obsolete-sysctl"}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			rep := Run(fixture(t, tt.host), Options{})
			got := ids(rep)
			for id, sev := range tt.want {
				f, ok := got[id]
				if !ok {
					t.Errorf("missing finding %s", id)
					continue
				}
				if f.Severity != sev {
					t.Errorf("%s: severity %s, want %s (%s)", id, f.Severity, sev, f.Summary)
				}
				if f.Summary == "" || f.Fix == "" || len(f.Evidence) == 0 {
					t.Errorf("%s: incomplete finding %+v", id, f)
				}
			}
			for _, id := range tt.notWant {
				if f, ok := got[id]; ok {
					t.Errorf("unexpected finding %s: %s", id, f.Summary)
				}
			}
			for _, f := range rep.Findings {
				// A tree has no live sockets for nagle-risk to judge.
				if f.NotChecked && f.ID != "nagle-risk" {
					t.Errorf("fixture has all data, yet %s was not checked: %s", f.ID, f.Summary)
				}
			}
		})
	}
}

func TestConcentrationEvidence(t *testing.T) {
	rep := Run(fixture(t, "dual-i40e-nvme"), Options{})
	f := ids(rep)["nic-irq-concentrated"]
	if f.Evidence["interface"] != "eth0" || f.Evidence["cpu"] != "0" {
		t.Errorf("evidence = %v", f.Evidence)
	}
}

// TestUnreadableDataIsItsOwnRow: a check whose source could not be read says
// so, and every other check still runs.
func TestUnreadableDataIsItsOwnRow(t *testing.T) {
	f := fixture(t, "dual-i40e-nvme")
	f.Errors = append(f.Errors, host.FactError{Source: "/proc/interrupts", Err: "permission denied"})
	rep := Run(f, Options{})
	var row *Finding
	for i := range rep.Findings {
		if rep.Findings[i].ID == "nic-irq-concentrated" {
			row = &rep.Findings[i]
		}
	}
	if row == nil || !row.NotChecked || !strings.Contains(row.Summary, "permission denied") {
		t.Fatalf("row = %+v", row)
	}
	if _, ok := ids(rep)["thp-always"]; !ok {
		t.Error("other checks must still run")
	}
	// Every check that reads interrupts, and only those, is not checked
	// (and nagle-risk, which has no sockets to judge on a tree).
	var notChecked []string
	for _, f := range rep.Findings {
		if f.NotChecked {
			notChecked = append(notChecked, f.ID)
		}
	}
	want := []string{"irq-smt-siblings", "nagle-risk", "nic-irq-concentrated", "nic-numa-remote", "nvme-irq-concentrated"}
	slices.Sort(notChecked)
	if !slices.Equal(notChecked, want) || rep.Checks.NotChecked != len(want) || rep.Checks.Run != len(Checks) {
		t.Errorf("not checked %v, counts %+v; want %v", notChecked, rep.Checks, want)
	}
}

func TestPanickingCheckIsContained(t *testing.T) {
	saved := Checks
	defer func() { Checks = saved }()
	Checks = append([]Check{{ID: "boom", Run: func(*host.Facts, Options) []Finding { panic("nil map") }}}, saved...)
	rep := Run(fixture(t, "virtio-vm"), Options{})
	got := ids(rep)
	if b, ok := got["boom"]; !ok || !b.NotChecked || !strings.Contains(b.Summary, "nil map") {
		t.Errorf("panic row = %+v", b)
	}
	if _, ok := got["qdisc-fifo-bufferbloat"]; !ok {
		t.Error("checks after the panicking one must still run")
	}
}

func TestEmptyFactsDoNotCrash(t *testing.T) {
	rep := Run(&host.Facts{}, Options{})
	if rep.Checks.Run != len(Checks) {
		t.Errorf("run = %d", rep.Checks.Run)
	}
}
