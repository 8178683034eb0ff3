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
