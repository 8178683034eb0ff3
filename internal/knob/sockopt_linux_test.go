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

// TestSockoptDetached: an entry whose program is not attached is not in
// force (status drift, reassert writes it), a rollback from it removes the
// stale pins, and a rollback to it (recorded so at apply) is done once the
// entry is gone.
func TestSockoptDetached(t *testing.T) {
	k, err := New(Live, "sockopt/service:gw.service/nodelay")
	if err != nil {
		t.Fatal(err)
	}
	if err := k.(Validator).Validate(Detached); err != nil {
		t.Errorf("Validate(%s): %v", Detached, err)
	}
	for _, c := range []struct {
		live, want string
		satisfied  bool // status: no drift; reassert: nothing to do
		same       bool // rollback to want: nothing (more) to write
	}{
		{Detached, "1", false, false},
		{Detached, Absent, false, false}, // the stale pins must go
		{Absent, Detached, true, true},
		{Detached, Detached, true, true},
		{"1", Detached, false, false},
		{"1", "1", true, true},
	} {
		if got := k.Satisfied(c.live, c.want); got != c.satisfied {
			t.Errorf("Satisfied(%q, %q) = %v, want %v", c.live, c.want, got, c.satisfied)
		}
		if got := Same(k, c.live, c.want); got != c.same {
			t.Errorf("Same(%q, %q) = %v, want %v", c.live, c.want, got, c.same)
		}
	}
	if !Contested("sockopt/service:gw.service/nodelay") {
		t.Error("sockopt knobs are not contested: reassert would not attach a detached program again")
	}
	w := Describe("sockopt/service:gw.service/nodelay", "1", Detached)
	if !strings.Contains(w, "service:gw.service nodelay: applied 1") || !strings.Contains(w, "no longer attached") {
		t.Errorf("Describe: %q", w)
	}
	if w := Describe("sockopt/port:7000/nodelay", "1", "0"); w != "" {
		t.Errorf("Describe of a value that is not detached: %q", w)
	}
}
