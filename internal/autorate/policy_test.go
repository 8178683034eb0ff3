package autorate

import (
	"strings"
	"testing"
)

// active=N is written only when some reflectors stand by, so a policy
// journaled before it existed keeps its exact text (the knob's value), and
// is read back as written.
func TestPolicyActiveReflectors(t *testing.T) {
	const pool = "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors=192.0.2.1:7431,192.0.2.2:7431,192.0.2.3:7431 active=2 icmp= passive=on threshold=15ms"
	p, err := ParsePolicy(pool)
	if err != nil {
		t.Fatal(err)
	}
	if p.Active != 2 || p.String() != pool {
		t.Errorf("ParsePolicy(%q): active %d, String %q", pool, p.Active, p)
	}
	if d := p.Describe(); !strings.Contains(d, "2 probed at a time") {
		t.Errorf("Describe: %q, want the number probed at a time", d)
	}
	// All of them active: the text without active=.
	for _, n := range []string{"0", "3"} {
		all, err := ParsePolicy(strings.Replace(pool, "active=2", "active="+n, 1))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.Replace(pool, " active=2", "", 1); all.String() != want {
			t.Errorf("active=%s: %q, want %q", n, all, want)
		}
	}
	for _, bad := range []string{"active=4", "active=-1", "active=two"} {
		if _, err := ParsePolicy(strings.Replace(pool, "active=2", bad, 1)); err == nil {
			t.Errorf("%s with 3 reflectors: no error", bad)
		}
	}
}
