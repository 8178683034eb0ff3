package persist

import (
	"strings"
	"testing"
)

func TestChanges(t *testing.T) {
	settings := []Setting{
		{Knob: "sysctl/net.ipv4.tcp_congestion_control", Value: "bbr"},
		{Knob: "sysctl/net.core.default_qdisc", Value: "fq_codel"},
		{Knob: "qdisc/eth0/root", Value: "fq_codel"},
	}
	ch, notes := Changes(settings, Options{Profile: "game-udp", Exe: "/usr/local/bin/lowlat", Journal: "/var/lib/lowlat/journal", Systemd: true})
	if len(ch) != 3 || len(notes) != 0 {
		t.Fatalf("changes %+v notes %v", ch, notes)
	}
	if ch[0].Knob != "file/etc/sysctl.d/99-lowlat.conf" || !strings.Contains(ch[0].Value, "net.core.default_qdisc = fq_codel\nnet.ipv4.tcp_congestion_control = bbr\n") {
		t.Errorf("sysctl file: %+v", ch[0])
	}
	if !strings.Contains(ch[1].Value, "ExecStart=/usr/local/bin/lowlat boot --journal /var/lib/lowlat/journal") || ch[2].Value != UnitFile {
		t.Errorf("unit: %+v %+v", ch[1], ch[2])
	}
	ch, notes = Changes(settings, Options{Profile: "x", Systemd: false})
	if len(ch) != 1 || len(notes) != 1 || !strings.Contains(notes[0], "systemd does not run") {
		t.Errorf("without systemd: %+v %v", ch, notes)
	}
}

// TestNICPersistence: NIC and interrupt knobs make the boot unit wait for
// their interfaces, and add the timer that re-asserts them.
func TestNICPersistence(t *testing.T) {
	settings := []Setting{
		{Knob: "ethtool/eth0/channels/combined", Value: "9"},
		{Knob: "irq/27/affinity", Value: "1 (i40e-eth0-TxRx-0)"},
		{Knob: "queue/enp1s0-1/rx-0/rps_cpus", Value: "3"},
		{Knob: "service/irqbalance.service", Value: "inactive,disabled"},
	}
	ch, notes := Changes(settings, Options{Profile: "game-udp", Exe: "/usr/bin/lowlat", Journal: "/j", Systemd: true})
	if len(ch) != 5 {
		t.Fatalf("changes %+v", ch)
	}
	unit := ch[0].Value
	for _, want := range []string{"Wants=sys-subsystem-net-devices-eth0.device\nAfter=sys-subsystem-net-devices-eth0.device\n",
		`After=sys-subsystem-net-devices-enp1s0\x2d1.device`, "ExecStart=/usr/bin/lowlat boot --journal /j"} {
		if !strings.Contains(unit, want) {
			t.Errorf("boot unit lacks %q:\n%s", want, unit)
		}
	}
	if ch[2].Knob != "file"+ReassertService || !strings.Contains(ch[2].Value, "ExecStart=/usr/bin/lowlat reassert --journal /j") {
		t.Errorf("reassert service: %+v", ch[2])
	}
	if ch[3].Knob != "file"+ReassertTimer || !strings.Contains(ch[3].Value, "OnUnitActiveSec=5min") || ch[4].Value != ReassertTimer {
		t.Errorf("timer: %+v %+v", ch[3], ch[4])
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "systemctl start lowlat-reassert.timer") {
		t.Errorf("notes %v", notes)
	}
	// Only a governor: re-applied at boot, nothing to re-assert.
	ch, _ = Changes([]Setting{{Knob: "cpufreq/governor", Value: "performance"}}, Options{Systemd: true})
	if len(ch) != 2 {
		t.Errorf("governor only: %+v", ch)
	}
}
