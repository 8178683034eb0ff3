package sockops

import (
	"strings"
	"testing"
)

func TestEntryRoundTrip(t *testing.T) {
	e := Entry{NoDelay: "true", InitCwnd: "40", DelackMax: "5000", RTOMin: "10000", NotSentLowat: "16384", Congestion: "bbr"}
	b, err := e.marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := unmarshalEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := "congestion=bbr delack_max=5000 initcwnd=40 nodelay=1 notsent_lowat=16384 rto_min=10000"; got.String() != want {
		t.Errorf("round trip: %q, want %q", got, want)
	}
	if got := getU32(b[entryMaskOffset:]); got != 1<<numOptions-1 {
		t.Errorf("mask %b", got)
	}
	empty, _ := Entry{}.marshal()
	if e, _ := unmarshalEntry(empty); len(e) != 0 {
		t.Errorf("empty entry reads back as %v", e)
	}
}

func TestBadValues(t *testing.T) {
	for _, c := range []struct {
		o    Option
		v    string
		want string
	}{
		{NoDelay, "2", "want true or false"},
		{InitCwnd, "0", "positive integer"},
		{InitCwnd, "5000", "at most 1000"},
		{RTOMin, "-1", "positive integer"},
		{Congestion, "", "not a congestion control name"},
		{Congestion, "a-very-long-name-indeed", "not a congestion control name"},
	} {
		err := c.o.CheckValue(c.v)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%q: %v, want %q", c.o, c.v, err, c.want)
		}
		if _, err := (Entry{c.o: c.v}).marshal(); err == nil {
			t.Errorf("%s=%q marshalled", c.o, c.v)
		}
	}
}

func TestSelectorsAndOptions(t *testing.T) {
	if s, err := ParseSelector("port:7000"); err != nil || s.Port != 7000 || s.String() != "port:7000" {
		t.Errorf("port:7000: %v %v", s, err)
	}
	for in, want := range map[string]Selector{
		"cgroup:/system.slice/gw.service": {Cgroup: "/system.slice/gw.service"},
		"service:gw.service":              {Service: "gw.service"},
	} {
		if s, err := ParseSelector(in); err != nil || s != want || s.String() != in || !s.Outbound() {
			t.Errorf("%s: %+v %v", in, s, err)
		}
	}
	if s, o, err := SplitSetting("cgroup:/a/b/nodelay"); err != nil || s.Cgroup != "/a/b" || o != NoDelay {
		t.Errorf("SplitSetting: %v %v %v", s, o, err)
	}
	for in, want := range map[string]string{
		"port:0":              "not a port",
		"port:70000":          "not a port",
		"7000":                "want port:N",
		"pid:1":               `unknown kind "pid"`,
		"cgroup:/":            "the root cgroup holds every process",
		"cgroup:relative":     "want an absolute cgroup path",
		"cgroup:/a/../b":      "want an absolute cgroup path",
		"service:gw":          "want a systemd service name",
		"service:a/b.service": "want a systemd service name",
	} {
		if _, err := ParseSelector(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	for _, o := range Options() {
		if p, err := ParseOption(o.String()); err != nil || p != o {
			t.Errorf("%s: %v %v", o, p, err)
		}
	}
	if _, err := ParseOption("cork"); err == nil || !strings.Contains(err.Error(), "known: nodelay, initcwnd") {
		t.Errorf("cork: %v", err)
	}
}
