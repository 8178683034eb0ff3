package plan

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
)

// TestMSSRows: clamp-mss=auto takes the shaper's rate, or autorate's min
// when the profile journals a policy; off plans nothing; what is in force
// decides the action; a kernel that cannot clamp skips with its reason.
func TestMSSRows(t *testing.T) {
	f := loadFixture(t, "epyc-25g")
	f.MSSClamp = &host.MSSClamp{}
	const iface = "ens1f0np0"
	tests := []struct {
		name    string
		sets    map[string]string
		clamps  map[string]string
		desired string
		action  string
		note    string
	}{
		// The shaper at 90 % of 2 Mbit/s: 900-byte frames take 4 ms.
		{name: "auto at the shaper's rate", sets: map[string]string{"rate": "2mbit", "clamp-mss": "auto"},
			desired: "846", action: Set, note: "auto: 900-byte frames take 4.0 ms at 1800kbit (the shaper's rate) instead of 6.7 ms for 1514 bytes; headers are 7.3 % of the rate instead of 4.4 %"},
		// autorate's min is half the rate: 1 Mbit/s wants 500-byte frames, floored at 536.
		{name: "auto at autorate's min", sets: map[string]string{"rate": "2mbit", "max": "3mbit", "clamp-mss": "auto"},
			desired: "536", action: Set, note: "auto: 590-byte frames take 4.7 ms at 1mbit (autorate's min) instead of 12.1 ms for 1514 bytes; headers are 11.2 % of the rate instead of 4.4 %"},
		{name: "a target of its own", sets: map[string]string{"rate": "2mbit", "mss.clamp": "auto target=3ms"},
			desired: "621", action: Set, note: "auto: 675-byte frames take 3.0 ms"},
		{name: "fast enough for full frames", sets: map[string]string{"rate": "20mbit", "clamp-mss": "auto"},
			desired: "<absent>", action: OK, note: "auto: no clamp: a full 1514-byte frame takes 0.7 ms at 18mbit (the shaper's rate), within the 4ms target"},
		{name: "bytes", sets: map[string]string{"rate": "2mbit", "clamp-mss": "1200"},
			desired: "1200", action: Set, note: "1254-byte frames take 5.6 ms at 1800kbit"},
		{name: "in force", sets: map[string]string{"rate": "2mbit", "clamp-mss": "auto"}, clamps: map[string]string{iface: "846"},
			desired: "846", action: OK},
		{name: "another in force", sets: map[string]string{"rate": "2mbit", "clamp-mss": "auto"}, clamps: map[string]string{iface: "1200"},
			desired: "846", action: Set},
		{name: "unmanaged in force", sets: map[string]string{"rate": "2mbit", "clamp-mss": "846"}, clamps: map[string]string{iface: "@unmanaged: 1 chains, lowlat writes 2"},
			desired: "846", action: Set},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.MSSClamp.Clamps = tt.clamps
			p, err := Make(f, resolve(t, "capped-uplink", tt.sets), Options{})
			if err != nil {
				t.Fatal(err)
			}
			c := find(p, "mss/"+iface)
			if c == nil || c.Desired != tt.desired || c.Action != tt.action || !c.Supported || c.Setting != "mss.clamp" || !strings.Contains(c.Note, tt.note) {
				t.Fatalf("mss row: %+v\nwant desired %q, action %s, note with %q", c, tt.desired, tt.action, tt.note)
			}
			if want := tt.clamps[iface]; want != "" && c.Current != want || want == "" && c.Current != "<absent>" {
				t.Errorf("current = %q", c.Current)
			}
			// After the qdisc rows, before the sysctls.
			if m, root, sys := index(p, "mss/"), index(p, "qdisc/"+iface+"/root"), index(p, "sysctl/"); !(root < m && m < sys) {
				t.Errorf("row order: root %d mss %d sysctl %d", root, m, sys)
			}
		})
	}
	// off, the default, plans nothing.
	for _, sets := range []map[string]string{{"rate": "2mbit"}, {"rate": "2mbit", "clamp-mss": "off"}} {
		p, _ := Make(f, resolve(t, "capped-uplink", sets), Options{})
		if c := find(p, "mss/"+iface); c != nil {
			t.Errorf("%v: %+v", sets, c)
		}
	}
	sets := map[string]string{"rate": "2mbit", "clamp-mss": "auto"}
	// A kernel that cannot clamp.
	f.MSSClamp = &host.MSSClamp{Unsupported: "mss clamp: this kernel cannot rewrite TCP options with nf_tables (the exthdr set, Linux 4.14): not supported by this kernel"}
	p, _ := Make(f, resolve(t, "capped-uplink", sets), Options{})
	if c := find(p, "mss/"+iface); c == nil || c.Supported || c.Action != Skip || c.Reason != f.MSSClamp.Unsupported {
		t.Errorf("unsupported: %+v", c)
	}
	// Clamps that could not be read (not root), or facts from a capture:
	// unknown, and set; the apply reads the table itself.
	for _, m := range []*host.MSSClamp{{Unreadable: "permission denied (nftables needs CAP_NET_ADMIN)"}, nil} {
		f.MSSClamp = m
		p, _ = Make(f, resolve(t, "capped-uplink", sets), Options{})
		if c := find(p, "mss/"+iface); c == nil || c.Current != Unknown || c.Action != Set || !c.Supported || !strings.Contains(c.Note, "the clamp in force is unknown here") {
			t.Errorf("unreadable %+v: %+v", m, c)
		}
	}
}

// TestMSSAutoNeedsShaper: auto without a shaper to take the rate from is
// skipped; a byte count needs none.
func TestMSSAutoNeedsShaper(t *testing.T) {
	f := loadFixture(t, "virtio-vm")
	f.MSSClamp = &host.MSSClamp{}
	p, err := Make(f, resolve(t, "game-udp", map[string]string{"mss.clamp": "auto"}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := find(p, "mss/eth0"); c == nil || c.Supported || c.Action != Skip || !strings.Contains(c.Reason, "clamp auto needs the rate eth0 is shaped at") {
		t.Errorf("auto without a shaper: %+v", c)
	}
	// The shaper in place gives the rate.
	f.Interface("eth0").Root = &host.Qdisc{Kind: "tbf", Handle: "8001:", Parent: "root", Spec: "tbf rate 1mbit burst 3028 limit 8028 handle 8001:"}
	p, _ = Make(f, resolve(t, "game-udp", map[string]string{"mss.clamp": "auto"}), Options{})
	if c := find(p, "mss/eth0"); c == nil || c.Desired != "536" || c.Action != Set || !strings.Contains(c.Note, "the rate of the shaper in place") {
		t.Errorf("auto with a live shaper: %+v", c)
	}
	f.Interface("eth0").Root = nil
	p, _ = Make(f, resolve(t, "game-udp", map[string]string{"mss.clamp": "1400"}), Options{})
	if c := find(p, "mss/eth0"); c == nil || c.Desired != "1400" || c.Action != Set || c.Note != "" {
		t.Errorf("bytes without a shaper: %+v", c)
	}
}
