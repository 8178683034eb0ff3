package knob

import (
	"strings"
	"testing"
)

func TestSocketKnobValues(t *testing.T) {
	k, err := New(Live, "socket/port:7000/nodelay")
	if err != nil {
		t.Fatal(err)
	}
	v := k.(Validator)
	for _, good := range []string{"-", "*=1", "12=0 13=1", "12=true"} {
		if err := v.Validate(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for bad, want := range map[string]string{"": "empty", "12": "INODE=VALUE", "x=1": "bad socket inode", "12=2": "want true or false", "0=1": "bad socket inode"} {
		if err := v.Validate(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", bad, err, want)
		}
	}
	for _, c := range []struct {
		live, desired string
		ok            bool
	}{
		{"12=1 13=1", "*=1", true},
		{"12=1 13=0", "*=1", false},
		{"-", "*=1", true},
		{"12=0 13=1", "12=0", true},         // a restore: 13 opened since, left alone
		{"13=1", "12=0", true},              // 12 closed since: nothing to compare
		{"12=1", "12=0 14=0", false},        // 12 not restored
		{"12=1 13=1", "12=true 13=1", true}, // canonical values
	} {
		if got := k.Satisfied(c.live, c.desired); got != c.ok {
			t.Errorf("Satisfied(%q, %q) = %v", c.live, c.desired, got)
		}
	}
	if got := formatConnValues(map[uint64]string{13: "1", 12: "0"}); got != "12=0 13=1" {
		t.Errorf("format: %q", got)
	}
	if _, err := New(Live, "socket/port:7000/initcwnd"); err == nil || !strings.Contains(err.Error(), "new connections only") {
		t.Errorf("socket knob for initcwnd: %v", err)
	}
	if _, err := New(&System{Root: t.TempDir()}, "sockopt/port:7000/nodelay"); err == nil {
		t.Error("sockopt knob on a file tree")
	}
	e, err := New(Live, "sockopt/port:7000/nodelay")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Satisfied("1", "true") || e.Satisfied(Absent, "1") || !e.Satisfied(Absent, Absent) {
		t.Error("sockopt Satisfied")
	}
	if err := e.(Validator).Validate("2"); err == nil {
		t.Error("sockopt nodelay=2 validated")
	}
}
