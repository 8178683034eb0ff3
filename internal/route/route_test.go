package route

import (
	"net/netip"
	"testing"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		in       string
		dst      string
		priority int
		ok       bool
	}{
		{"default", "0.0.0.0/0", -1, true},
		{"::/0", "::/0", -1, true},
		{"10.0.0.0/24", "10.0.0.0/24", -1, true},
		{"10.0.0.7/24", "10.0.0.0/24", -1, true}, // masked
		{"192.0.2.2", "192.0.2.2/32", -1, true},
		{"fd00::/64@256", "fd00::/64", 256, true},
		{"default@100", "0.0.0.0/0", 100, true},
		{"default@x", "", 0, false},
		{"300.1.1.1/8", "", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		k, err := ParseKey(tt.in, 254)
		if (err == nil) != tt.ok {
			t.Errorf("ParseKey(%q) err = %v", tt.in, err)
			continue
		}
		if tt.ok && (k.Dst.String() != tt.dst || k.Priority != tt.priority || k.Table != 254) {
			t.Errorf("ParseKey(%q) = %+v", tt.in, k)
		}
	}
}

func TestKeyMatchesAndTunable(t *testing.T) {
	r := Route{Family: afInet, Dst: netip.MustParsePrefix("0.0.0.0/0"), Table: 254, Type: 1, Priority: 100}
	k, _ := ParseKey("default", 254)
	if !k.Matches(r) || r.DstString() != "default" {
		t.Error("default route")
	}
	k, _ = ParseKey("default@600", 254)
	if k.Matches(r) {
		t.Error("a different metric must not match")
	}
	if ok, _ := r.Tunable(); !ok {
		t.Error("unicast main-table route is tunable")
	}
	ra := Route{Family: afInet6, Dst: netip.MustParsePrefix("::/0"), Table: 254, Type: 1, Protocol: 9}
	if ok, why := ra.Tunable(); ok || why == "" || ra.DstString() != "::/0" {
		t.Errorf("RA route: %v %q %q", ok, why, ra.DstString())
	}
	local := Route{Family: afInet, Dst: netip.MustParsePrefix("127.0.0.0/8"), Table: 255, Type: 2}
	if ok, _ := local.Tunable(); ok {
		t.Error("local routes are not tunable")
	}
	for _, s := range []string{"main", "local", "default", "100"} {
		n, err := ParseTable(s)
		if err != nil || TableName(n) != s {
			t.Errorf("table %q -> %d %v -> %q", s, n, err, TableName(n))
		}
	}
	if _, err := ParseTable("nosuch"); err == nil {
		t.Error("bad table accepted")
	}
}
