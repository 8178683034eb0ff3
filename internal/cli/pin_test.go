package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
)

const fixtureRoot = "../host/testdata/hosts/"

func TestPinDryRun(t *testing.T) {
	ctx := context.Background()
	env, out, _ := testEnv()
	// Runbook 002: the gateway on node 0, next to eth0, without the cores
	// taking its interrupts.
	if err := Main(ctx, []string{"pin", "--service", "gateway", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run", "--json"}, env); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Pin    pinSpec `json:"pin"`
		Path   string  `json:"path"`
		Dropin string  `json:"dropin"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Path != "/etc/systemd/system/gateway.service.d/50-lowlat-cpus.conf" || res.Pin.Node != 0 || res.Pin.Policy != "bind" ||
		!strings.Contains(res.Dropin, "[Service]\nCPUAffinity=21-29\n") {
		t.Errorf("pin: %+v\n%s", res, res.Dropin)
	}

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pin", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run"}, "--service is required"},
		{[]string{"pin", "--service", "../x", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run"}, "bad --service"},
		{[]string{"pin", "--service", "gw", "--root", fixtureRoot + "dual-i40e-nvme"}, "add --dry-run"},
		{[]string{"pin", "--service", "gw", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run", "--cpus", "99"}, "CPU 99 is not online"},
		{[]string{"pin", "--service", "gw", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run", "--reserve-cpus", "0-9"}, "no CPU left for interrupts"},
		{[]string{"pin", "--service", "gw", "--root", fixtureRoot + "epyc-25g", "--dry-run", "--numa", "bind"}, "needs all CPUs on one node of a multi-node host"},
		{[]string{"pin", "--service", "gw", "--root", fixtureRoot + "dual-i40e-nvme", "--dry-run", "--iface", "eth9"}, `unknown interface "eth9"`},
	} {
		env, _, _ := testEnv()
		err := Main(ctx, tt.args, env)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

func TestPinDropinVersions(t *testing.T) {
	s := pinSpec{Service: "gw.service", CPUs: []int{2, 3, 4, 9}, Node: 1, Policy: "bind", Why: "w"}
	for _, tt := range []struct {
		systemd   int
		want, not string
	}{
		{252, "CPUAffinity=2-4,9\nNUMAPolicy=bind\nNUMAMask=1\n", "numactl"},
		{239, "CPUAffinity=2-4,9\n# NUMAPolicy=bind NUMAMask=1 need systemd 243 (this is 239)", "\nNUMAPolicy"},
		{219, "CPUAffinity=2 3 4 9\n", "\nNUMAPolicy"},
	} {
		s.Systemd = tt.systemd
		d := pinDropin(s)
		if !strings.Contains(d, tt.want) || strings.Contains(d, tt.not) {
			t.Errorf("systemd %d:\n%s", tt.systemd, d)
		}
	}
}

// TestPlanReserveFlag: --reserve-cpus reaches the plan; a list that leaves no
// CPU for the NIC's interrupts is a clear error.
func TestPlanReserveFlag(t *testing.T) {
	ctx := context.Background()
	env, out, _ := testEnv()
	if err := Main(ctx, []string{"plan", "--profile", "game-udp", "--root", fixtureRoot + "dual-i40e-nvme", "--reserve-cpus", "5-6", "--json"}, env); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"desired": "7"`) || strings.Contains(out.String(), `"desired": "5 (i40e`) {
		t.Errorf("plan with CPUs 5-6 reserved:\n%.2000s", out)
	}
	env, _, _ = testEnv()
	err := Main(ctx, []string{"plan", "--profile", "game-udp", "--root", fixtureRoot + "dual-i40e-nvme", "--reserve-cpus", "0-9"}, env)
	if err == nil || !strings.Contains(err.Error(), "no CPU left for interrupts: for eth0 on node 0") {
		t.Errorf("reserving node 0: %v", err)
	}
	env, _, _ = testEnv()
	if err := Main(ctx, []string{"plan", "--profile", "game-udp", "--reserve-cpus", "x"}, env); err == nil {
		t.Error("bad CPU list accepted")
	}
}
