package plan

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/internal/profile"
)

var update = flag.Bool("update", false, "rewrite golden files")

var fixtureHosts = hosttest.Names

func loadFixture(t testing.TB, name string) *host.Facts { return hosttest.Fixture(t, name) }

func resolve(t testing.TB, name string, sets map[string]string) *profile.Resolved {
	t.Helper()
	p, err := profile.Builtin(name)
	if err != nil {
		t.Fatal(err)
	}
	r, err := profile.Resolve(p, sets)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestGoldenPlans renders the plan of every built-in profile on every fixture
// host. The golden files were reviewed by hand; regenerate with -update and
// review the diff.
func TestGoldenPlans(t *testing.T) {
	for _, h := range fixtureHosts {
		f := loadFixture(t, h)
		for _, name := range profile.BuiltinNames() {
			t.Run(h+"/"+name, func(t *testing.T) { checkGoldenPlan(t, f, name, filepath.Join("testdata", h, name+".json")) })
		}
	}
}

// checkGoldenPlan plans builtin profile name on f (capped-uplink at 2/20
// Mbit/s) and compares the JSON with the golden file, or rewrites it with
// -update.
func checkGoldenPlan(t *testing.T, f *host.Facts, name, path string) {
	t.Helper()
	sets := map[string]string{}
	if name == "capped-uplink" {
		sets["rate"] = "2mbit"
		sets["down"] = "20mbit"
	}
	p, err := Make(f, resolve(t, name, sets), Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Host.Source = "" // fixture path differs per checkout
	got, _ := json.MarshalIndent(p, "", "  ")
	got = append(got, '\n')
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		os.WriteFile(path, got, 0o644)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("plan differs from %s (-want +got):\n%s", path, lineDiff(string(want), string(got)))
	}
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out strings.Builder
	n := max(len(al), len(bl))
	for i := 0; i < n; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out.WriteString("- " + x + "\n+ " + y + "\n")
		}
	}
	return out.String()
}

func find(p *Plan, knob string) *Change {
	for i := range p.Changes {
		if p.Changes[i].Knob == knob {
			return &p.Changes[i]
		}
	}
	return nil
}

// TestPlanRules checks the decisions the golden files encode, so a regenerated
// golden file cannot quietly change them.
func TestPlanRules(t *testing.T) {
	vm := loadFixture(t, "virtio-vm")
	p, err := Make(vm, resolve(t, "game-udp", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Ifaces, ",") != "eth0" {
		t.Errorf("default interfaces = %v, want the default-route device eth0", p.Ifaces)
	}
	if c := find(p, "qdisc/eth0/root"); c == nil || c.Supported || !strings.Contains(c.Reason, "lacks the fq_codel qdisc") {
		t.Errorf("fq_codel on a kernel without it: %+v", c)
	}
	if c := find(p, "sysctl/net.ipv4.tcp_congestion_control"); c == nil || c.Action != OK {
		t.Errorf("bbr is already the congestion control here: %+v", c)
	}
	// A sysctl newer kernels removed says so.
	if p2, err := Make(vm, resolve(t, "game-udp", map[string]string{"sysctl.net.ipv4.tcp_tw_recycle": "0"}), Options{}); err != nil {
		t.Fatal(err)
	} else if c := find(p2, "sysctl/net.ipv4.tcp_tw_recycle"); c == nil || c.Supported || !strings.Contains(c.Reason, "removed in Linux 4.12") {
		t.Errorf("removed sysctl: %+v", c)
	}
	// Sysctls come after device knobs (rollback restores default_qdisc first).
	lastDev, firstSysctl := -1, len(p.Changes)
	for i, c := range p.Changes {
		if strings.HasPrefix(c.Knob, "sysctl/") {
			firstSysctl = min(firstSysctl, i)
		} else {
			lastDev = i
		}
	}
	if lastDev > firstSysctl {
		t.Error("device knobs must come before sysctls")
	}

	// capped-uplink on this kernel: no cake, no fq_codel, so the last fallback
	// (a tbf whose whole queue drains in 20 ms) is chosen and says why.
	p, _ = Make(vm, resolve(t, "capped-uplink", map[string]string{"rate": "2mbit"}), Options{})
	c := find(p, "qdisc/eth0/root")
	if c == nil || !c.Supported || c.Desired != "tbf rate 1800kbit burst 3028 latency 6500us" || !strings.Contains(c.Note, "fallback") {
		t.Errorf("capped-uplink root on virtio-vm: %+v", c)
	}

	// A 64-queue NIC keeps mq and gets one AQM per queue.
	epyc := loadFixture(t, "epyc-25g")
	p, _ = Make(epyc, resolve(t, "game-udp", nil), Options{})
	if c := find(p, "qdisc/ens1f0np0/root"); c == nil || !strings.HasPrefix(c.Desired, "mq children { fq_codel") || c.Action != Set {
		t.Errorf("multi-queue root: %+v", c)
	}
	// BBR available as a module counts as supported.
	if c := find(p, "sysctl/net.ipv4.tcp_congestion_control"); c == nil || !c.Supported || c.Action != Set {
		t.Errorf("bbr as a module: %+v", c)
	}

	// CentOS 7's 3.10: no BBR; the reason says what is needed.
	old := loadFixture(t, "centos7-3.10")
	p, _ = Make(old, resolve(t, "live-edge", nil), Options{})
	if c := find(p, "sysctl/net.ipv4.tcp_congestion_control"); c == nil || c.Supported || !strings.Contains(c.Reason, "4.9") {
		t.Errorf("bbr on 3.10: %+v", c)
	}
	if c := find(p, "route/default/main/initcwnd"); c == nil || c.Desired != "40" {
		t.Errorf("initcwnd row: %+v", c)
	}

	if _, err := Make(vm, resolve(t, "game-udp", nil), Options{Ifaces: []string{"wlan9"}}); err == nil || !strings.Contains(err.Error(), `unknown interface "wlan9"`) {
		t.Errorf("unknown interface: %v", err)
	}
}

// TestHostWideSysfsSkippedInNamespace: a plan made inside another network
// namespace (a container, the lab) leaves host-wide THP alone.
func TestHostWideSysfsSkippedInNamespace(t *testing.T) {
	f := loadFixture(t, "dual-i40e-nvme")
	f.Netns = "other"
	p, err := Make(f, resolve(t, "game-udp", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sysfs/kernel/mm/transparent_hugepage/enabled", "sysfs/kernel/mm/transparent_hugepage/defrag"} {
		if c := find(p, id); c == nil || c.Supported || !strings.Contains(c.Reason, "host-wide") {
			t.Errorf("%s: %+v", id, c)
		}
	}
}
