//go:build linux

package cli_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/testnet"
)

type doctorJSON struct {
	Findings []doctor.Finding `json:"findings"`
	Checks   struct {
		Run int `json:"run"`
	} `json:"checks"`
}

func findingsOf(t *testing.T, r result) doctorJSON {
	t.Helper()
	var d doctorJSON
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("doctor --json: %v\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return d
}

// doctor --sample measures the real traffic over its window: a standing
// queue on up0 (a 400 kbit/s tbf under 1.6 Mbit/s) is a finding with its
// evidence and the fix. Without --sample the check does not run, and
// nothing is attached.
func TestIntegrationDoctorSampleTraffic(t *testing.T) {
	testnet.HostOnly(t, "doctor's judgement; the egress measurement it reads is tested on the stock kernel in internal/passive")
	w := newGateWorld(t, false)
	if out, err := w.ns.Command("tc", "qdisc", "add", "dev", "up0", "root", "tbf", "rate", "400kbit", "burst", "4kb", "latency", "100ms").CombinedOutput(); err != nil {
		t.Fatalf("tc: %v\n%s", err, out)
	}
	w.flood(t, 1000, 5*time.Millisecond, time.Minute)
	time.Sleep(time.Second) // the queue fills

	r := w.run(nil, "doctor", "--sample", "3s", "--json")
	if r.code != 0 {
		t.Fatalf("doctor --sample: exit %d\n%s", r.code, r.stderr)
	}
	d := findingsOf(t, r)
	var got *doctor.Finding
	for i, f := range d.Findings {
		if f.ID == "traffic-egress-queueing" && f.Evidence["device"] == "up0" {
			got = &d.Findings[i]
		}
	}
	if got == nil {
		t.Fatalf("no traffic-egress-queueing finding for up0 in:\n%s", r.stdout)
	}
	t.Logf("%s: %s (evidence %v)", got.ID, got.Summary, got.Evidence)
	if !strings.Contains(got.Summary, "up0 egress adds p99") || got.Evidence["root_qdisc"] != "tbf" || !strings.Contains(got.Fix, "lowlat apply --profile") {
		t.Errorf("finding %+v: want the device, its tbf and the fix", got)
	}

	plain := findingsOf(t, w.run(nil, "doctor", "--json"))
	if plain.Checks.Run != d.Checks.Run-1 {
		t.Errorf("doctor without --sample ran %d checks, with it %d: want the traffic check only with --sample", plain.Checks.Run, d.Checks.Run)
	}
	for _, f := range plain.Findings {
		if strings.HasPrefix(f.ID, "traffic") {
			t.Errorf("doctor without --sample reports %s", f.ID)
		}
	}
	// Without BPF, the check says so in one not-checked row.
	nb := findingsOf(t, w.run([]string{"LOWLAT_TEST_NO_BPF=1"}, "doctor", "--sample", "1s", "--json"))
	var row *doctor.Finding
	for i, f := range nb.Findings {
		if f.ID == doctor.TrafficCheck {
			row = &nb.Findings[i]
		}
	}
	if row == nil || !row.NotChecked || !strings.Contains(row.Summary, "no BPF") {
		t.Errorf("doctor --sample without BPF: traffic row %+v, want a not-checked row naming what is missing", row)
	}
}
