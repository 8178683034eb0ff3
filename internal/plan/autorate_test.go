package plan

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/host"
)

const epycPolicy = "iface=ens1f0np0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"

// TestAutorateRow: capped-uplink with max plans the policy for each target
// interface, after its qdisc rows so a rollback stops the daemon before the
// qdisc is restored.
func TestAutorateRow(t *testing.T) {
	f := loadFixture(t, "epyc-25g")
	sets := map[string]string{"rate": "2mbit", "down": "20mbit", "max": "3mbit"}
	p, err := Make(f, resolve(t, "capped-uplink", sets), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := find(p, "autorate/ens1f0np0")
	if c == nil || c.Action != Set || !c.Supported || c.Current != "<absent>" || c.Desired != epycPolicy || c.Setting != "autorate.policy" || c.Source == "" {
		t.Fatalf("autorate row: %+v", c)
	}
	ar, root, ing, sysctl := index(p, "autorate/"), index(p, "qdisc/ens1f0np0/root"), index(p, "qdisc/ens1f0np0/ingress"), index(p, "sysctl/")
	if !(root < ar && ing < ar && ar < sysctl) {
		t.Errorf("row order: root %d ingress %d autorate %d first sysctl %d; want the policy after the qdiscs, before the sysctls", root, ing, ar, sysctl)
	}
	if p.Params["max"] != "3mbit" {
		t.Errorf("params = %v", p.Params)
	}

	// The policy in place: nothing to do.
	f.Autorate = map[string]string{"ens1f0np0": epycPolicy}
	p, _ = Make(f, resolve(t, "capped-uplink", sets), Options{})
	if c := find(p, "autorate/ens1f0np0"); c == nil || c.Action != OK {
		t.Errorf("policy in place: %+v", c)
	}
	// Another policy in place: it is replaced.
	other := strings.Replace(epycPolicy, "max=3000000", "max=2500000", 1)
	f.Autorate = map[string]string{"ens1f0np0": other}
	p, _ = Make(f, resolve(t, "capped-uplink", sets), Options{})
	if c := find(p, "autorate/ens1f0np0"); c == nil || c.Action != Set || c.Current != other {
		t.Errorf("another policy in place: %+v", c)
	}
	// Without max, no autorate.
	p, _ = Make(f, resolve(t, "capped-uplink", map[string]string{"rate": "2mbit"}), Options{})
	if c := find(p, "autorate/ens1f0np0"); c != nil {
		t.Errorf("autorate without max: %+v", c)
	}
}

// TestAutorateNeedsShaper: a policy without a shaper to move is skipped,
// unless the interface already has one.
func TestAutorateNeedsShaper(t *testing.T) {
	sets := map[string]string{"autorate.policy": "min=1mbit base=2mbit max=3mbit passive=on"}
	f := loadFixture(t, "virtio-vm")
	p, err := Make(f, resolve(t, "game-udp", sets), Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := find(p, "autorate/eth0")
	if c == nil || c.Supported || c.Action != Skip || c.Reason != "no shaper: autorate needs the capped-uplink qdisc.root on eth0" {
		t.Errorf("no shaper: %+v", c)
	}
	if want := "iface=eth0 min=1000000 base=2000000 max=3000000 reflectors= icmp= passive=on threshold=15ms"; c.Desired != want {
		t.Errorf("desired = %q, want %q", c.Desired, want)
	}
	for _, live := range []string{"cake bandwidth 2mbit besteffort handle 8001:", "tbf rate 2mbit burst 3028 limit 8028 handle 8001:"} {
		ifc := f.Interface("eth0")
		ifc.Root = &host.Qdisc{Kind: strings.Fields(live)[0], Handle: "8001:", Parent: "root", Spec: live}
		p, _ = Make(f, resolve(t, "game-udp", sets), Options{})
		if c := find(p, "autorate/eth0"); c == nil || !c.Supported || c.Action != Set {
			t.Errorf("live root %q: %+v", live, c)
		}
	}
	// cake without a bandwidth shapes nothing.
	ifc := f.Interface("eth0")
	ifc.Root = &host.Qdisc{Kind: "cake", Handle: "8001:", Parent: "root", Spec: "cake unlimited besteffort handle 8001:"}
	p, _ = Make(f, resolve(t, "game-udp", sets), Options{})
	if c := find(p, "autorate/eth0"); c == nil || c.Action != Skip {
		t.Errorf("unlimited cake: %+v", c)
	}
	// capped-uplink installs the shaper (here the tbf fallback) itself; a
	// policy given with --set replaces the profile's.
	ifc.Root = nil
	p, _ = Make(f, resolve(t, "capped-uplink", map[string]string{"rate": "2mbit", "max": "3mbit", "autorate.policy": "min=1mbit base=2mbit max=3mbit passive=on"}), Options{})
	if c := find(p, "autorate/eth0"); c == nil || c.Action != Set || !strings.Contains(c.Desired, "base=2000000") {
		t.Errorf("capped-uplink installs the shaper: %+v", c)
	}
}

// TestRootRowAutorateMoved: a root whose rate autorate moved within its
// policy needs no change; outside the policy, or without one, it does.
func TestRootRowAutorateMoved(t *testing.T) {
	f := loadFixture(t, "epyc-25g")
	ifc := f.Interface("ens1f0np0")
	live := "cake bandwidth 2500kbit rtt 100ms besteffort triple-isolate nonat nowash split-gso no-ack-filter egress no-autorate-ingress overhead 0 mpu 0 noatm memlimit 0 fwmark 0 handle 8001:"
	ifc.Root = &host.Qdisc{Kind: "cake", Handle: "8001:", Parent: "root", Spec: live}
	sets := map[string]string{"rate": "2mbit", "max": "3mbit"}
	for _, tt := range []struct {
		name, policy, live string
		action             string
	}{
		{"moved within the policy", epycPolicy, live, OK},
		{"no policy", "", live, Set},
		{"moved beyond the policy", epycPolicy, strings.Replace(live, "2500kbit", "3500kbit", 1), Set},
		{"policy of another interface", strings.Replace(epycPolicy, "ens1f0np0", "eth9", 1), live, Set},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f.Autorate = nil
			if tt.policy != "" {
				f.Autorate = map[string]string{"ens1f0np0": tt.policy}
			}
			ifc.Root.Spec = tt.live
			p, err := Make(f, resolve(t, "capped-uplink", sets), Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := find(p, "qdisc/ens1f0np0/root")
			if c == nil || c.Action != tt.action {
				t.Fatalf("root row: %+v, want %s", c, tt.action)
			}
			if tt.action == OK && !strings.Contains(c.Note, "autorate has the rate at 2500kbit, within its policy's 1mbit..3mbit") {
				t.Errorf("note = %q", c.Note)
			}
		})
	}
}

func TestAutorateDirs(t *testing.T) {
	if host.AutorateDir != autorate.PolicyDir {
		t.Errorf("host.AutorateDir = %q, autorate.PolicyDir = %q", host.AutorateDir, autorate.PolicyDir)
	}
}
