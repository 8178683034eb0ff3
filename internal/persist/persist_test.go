package persist

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/knob"
)

// content is the file content a change writes.
func content(c Change) string { return knob.ParseFileValue(c.Value).Content }

func TestChanges(t *testing.T) {
	settings := []Setting{
		{Knob: "sysctl/net.ipv4.tcp_congestion_control", Value: "bbr"},
		{Knob: "sysctl/net.core.default_qdisc", Value: "fq_codel"},
		{Knob: "qdisc/eth0/root", Value: "fq_codel"},
	}
	ch, notes := Changes(settings, Options{ID: "20261123T101010Z-abc123", Profile: "game-udp", Exe: "/usr/local/bin/lowlat", Journal: "/var/lib/lowlat/journal", Systemd: true})
	if len(ch) != 3 || len(notes) != 0 {
		t.Fatalf("changes %+v notes %v", ch, notes)
	}
	if ch[0].Knob != "file/etc/sysctl.d/zz-lowlat-20261123T101010Z-abc123.conf" || !strings.Contains(content(ch[0]), "net.core.default_qdisc = fq_codel\nnet.ipv4.tcp_congestion_control = bbr\n") {
		t.Errorf("sysctl file: %+v", ch[0])
	}
	if knob.ParseFileValue(ch[0].Value).Mode != 0o644 {
		t.Errorf("sysctl file mode: %q", ch[0].Value)
	}
	if !strings.Contains(content(ch[1]), "ExecStart=/usr/local/bin/lowlat boot --journal /var/lib/lowlat/journal\n") || ch[2].Value != knob.LinkTo(UnitFile) {
		t.Errorf("unit: %+v %+v", ch[1], ch[2])
	}
	ch, notes = Changes(settings, Options{ID: "x", Profile: "x", Systemd: false})
	if len(ch) != 1 || len(notes) != 1 || !strings.Contains(notes[0], "systemd does not run") {
		t.Errorf("without systemd: %+v %v", ch, notes)
	}
}

// TestSysctlFilePerTransaction: two persisted transactions write two files,
// each only its own sysctls, and sort in the order they were applied; the
// boot unit is the same bytes for both, so the second changes nothing.
func TestSysctlFilePerTransaction(t *testing.T) {
	o1 := Options{ID: "20261123T101010Z-aaaaaa", Profile: "game-udp", Exe: "/usr/bin/lowlat", Journal: "/j", Systemd: true}
	o2 := o1
	o2.ID, o2.Profile = "20261123T111111Z-bbbbbb", "live-edge"
	c1, _ := Changes([]Setting{{Knob: "sysctl/net.core.somaxconn", Value: "4096"}, {Knob: "qdisc/eth0/root", Value: "fq"}}, o1)
	c2, _ := Changes([]Setting{{Knob: "sysctl/net.ipv4.tcp_fastopen", Value: "3"}, {Knob: "qdisc/eth0/root", Value: "fq"}}, o2)
	if c1[0].Knob == c2[0].Knob {
		t.Fatalf("both transactions write %s", c1[0].Knob)
	}
	if strings.Contains(content(c2[0]), "somaxconn") || !strings.Contains(content(c2[0]), "tcp_fastopen = 3") {
		t.Errorf("second file: %q", content(c2[0]))
	}
	if !(c1[0].Knob < c2[0].Knob) {
		t.Errorf("files sort %s before %s: the later transaction must win", c2[0].Knob, c1[0].Knob)
	}
	if c1[1] != c2[1] || c1[2] != c2[2] {
		t.Errorf("boot unit differs between transactions:\n%+v\n%+v", c1[1], c2[1])
	}
}

// TestNICPersistence: NIC and interrupt knobs make the boot unit wait for
// their interfaces (through the transaction's own drop-in), and add the
// timer that re-asserts them.
func TestNICPersistence(t *testing.T) {
	settings := []Setting{
		{Knob: "ethtool/eth0/channels/combined", Value: "9"},
		{Knob: "irq/27/affinity", Value: "1 (i40e-eth0-TxRx-0)"},
		{Knob: "queue/enp1s0-1/rx-0/rps_cpus", Value: "3"},
		{Knob: "service/irqbalance.service", Value: "inactive,disabled"},
	}
	ch, notes := Changes(settings, Options{ID: "t1", Profile: "game-udp", Exe: "/usr/bin/lowlat", Journal: "/j", Systemd: true})
	if len(ch) != 6 {
		t.Fatalf("changes %+v", ch)
	}
	if !strings.Contains(content(ch[0]), "ExecStart=/usr/bin/lowlat boot --journal /j\n") {
		t.Errorf("boot unit: %s", content(ch[0]))
	}
	if ch[2].Knob != "file"+UnitDropins+"/lowlat-t1.conf" {
		t.Fatalf("NIC drop-in: %+v", ch[2])
	}
	for _, want := range []string{"Wants=sys-subsystem-net-devices-eth0.device\nAfter=sys-subsystem-net-devices-eth0.device\n",
		`After=sys-subsystem-net-devices-enp1s0\x2d1.device`} {
		if !strings.Contains(content(ch[2]), want) {
			t.Errorf("drop-in lacks %q:\n%s", want, content(ch[2]))
		}
	}
	if ch[3].Knob != "file"+ReassertService || !strings.Contains(content(ch[3]), "ExecStart=/usr/bin/lowlat reassert --journal /j") {
		t.Errorf("reassert service: %+v", ch[3])
	}
	if ch[4].Knob != "file"+ReassertTimer || !strings.Contains(content(ch[4]), "OnUnitActiveSec=5min") || ch[5].Value != knob.LinkTo(ReassertTimer) {
		t.Errorf("timer: %+v %+v", ch[4], ch[5])
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "systemctl start lowlat-reassert.timer") {
		t.Errorf("notes %v", notes)
	}
	// Only a governor: re-applied at boot, nothing to re-assert.
	ch, _ = Changes([]Setting{{Knob: "cpufreq/governor", Value: "performance"}}, Options{ID: "t2", Systemd: true})
	if len(ch) != 2 {
		t.Errorf("governor only: %+v", ch)
	}
}

// TestGuard: an unconfirmed apply with knobs that survive a reboot gets the
// boot unit, which rolls it back at boot; one with volatile knobs only needs
// none, the reboot puts them back.
func TestGuard(t *testing.T) {
	o := Options{ID: "t1", Exe: "/usr/bin/lowlat", Journal: "/j", Systemd: true}
	if ch, notes := Guard([]Setting{{Knob: "sysctl/net.core.somaxconn", Value: "1"}, {Knob: "irq/27/affinity", Value: "1"}}, o); len(ch) != 0 || len(notes) != 0 {
		t.Errorf("volatile knobs only: %+v %v", ch, notes)
	}
	ch, _ := Guard([]Setting{{Knob: "service/irqbalance.service", Value: "inactive,disabled"}}, o)
	if len(ch) != 2 || ch[0].Knob != "file"+UnitFile {
		t.Errorf("durable knob: %+v", ch)
	}
	o.Systemd = false
	if ch, notes := Guard([]Setting{{Knob: "dropin/gw.service/50-lowlat-cpus.conf", Value: "x"}}, o); len(ch) != 0 || len(notes) != 1 {
		t.Errorf("without systemd: %+v %v", ch, notes)
	}
}

func TestExecArg(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"/usr/bin/lowlat", "/usr/bin/lowlat"},
		{"/var/lib/low lat/journal", `"/var/lib/low lat/journal"`},
		{"/srv/100%/j", "/srv/100%%/j"},
		{"/srv/$HOME/j", "/srv/$$HOME/j"},
		{`/a"b\c`, `"/a\"b\\c"`},
		{"", `""`},
		{"/a;b", `"/a;b"`},
		{"/a\nb", `"/a\nb"`},
	} {
		if got := execArg(tt.in); got != tt.want {
			t.Errorf("execArg(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
