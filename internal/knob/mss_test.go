package knob

import (
	"strings"
	"testing"
)

func TestMSSKnobValues(t *testing.T) {
	k, err := New(Live, "mss/eth0")
	if err != nil || k.ID() != "mss/eth0" {
		t.Fatalf("New(mss/eth0) = %v, %v", k, err)
	}
	for _, bad := range []string{"mss/", "mss/a/b", "mss/sixteen-chars-xy"} {
		if _, err := New(Live, bad); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
	v := k.(Validator)
	for _, ok := range []string{Absent, "536", "1400", "65495"} {
		if err := v.Validate(ok); err != nil {
			t.Errorf("Validate(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", "auto", "535", "65496", "@unmanaged: 1 chains, lowlat writes 2"} {
		if err := v.Validate(bad); err == nil {
			t.Errorf("Validate(%q) accepted", bad)
		}
	}
	const unmanaged = "@unmanaged: chain prerouting: 3 rules, lowlat writes 2"
	for _, tt := range []struct {
		live, desired string
		want          bool
	}{
		{"536", "536", true},
		{"600", "536", false},
		{Absent, Absent, true},
		{Absent, "536", false},
		{unmanaged, "536", false},
		{unmanaged, unmanaged, false},
	} {
		if got := k.Satisfied(tt.live, tt.desired); got != tt.want {
			t.Errorf("Satisfied(%q, %q) = %v", tt.live, tt.desired, got)
		}
	}
	r := k.(Restorer)
	if err := r.Restorable(unmanaged); err == nil || !strings.Contains(err.Error(), "lowlat_mss_eth0") || !strings.Contains(err.Error(), "3 rules") {
		t.Errorf("Restorable(unmanaged) = %v", err)
	}
	if err := r.Restorable("536"); err != nil {
		t.Errorf("Restorable(536) = %v", err)
	}
	if err := r.Restorable(Absent); err != nil {
		t.Errorf("Restorable(Absent) = %v", err)
	}
	if r.Fallback(unmanaged) != Absent {
		t.Errorf("Fallback = %q", r.Fallback(unmanaged))
	}
	if SurvivesReboot("mss/eth0", "536") || !Contested("mss/eth0") {
		t.Errorf("an nftables table is lost at reboot and contested by firewall reloads")
	}
	for _, tt := range []struct{ applied, live, want string }{
		{"536", Absent, "mss clamp eth0: applied 536 bytes, now off"},
		{"536", unmanaged, "mss clamp eth0: applied 536 bytes, now changed outside lowlat (chain prerouting: 3 rules, lowlat writes 2)"},
		{"536", "900", "mss clamp eth0: applied 536 bytes, now 900 bytes"},
	} {
		if got := Describe("mss/eth0", tt.applied, tt.live); got != tt.want {
			t.Errorf("Describe(%q, %q) = %q, want %q", tt.applied, tt.live, got, tt.want)
		}
	}
}
