package autorate

import (
	"strings"
	"testing"
)

func TestParsePolicyFor(t *testing.T) {
	const want = "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors=192.0.2.1:7431 icmp= passive=on threshold=15ms"
	for _, in := range []string{
		"min=1mbit base=1800kbit max=3mbit reflectors=192.0.2.1:7431 passive=on",
		"min=1000000 base=1.8mbit max=3000kbit reflectors=192.0.2.1:7431 passive=on",
		"iface=eth0 " + strings.TrimPrefix(want, "iface=eth0 "),
		want,
	} {
		p, err := ParsePolicyFor("eth0", in)
		if err != nil {
			t.Errorf("ParsePolicyFor(%q): %v", in, err)
			continue
		}
		if p.String() != want {
			t.Errorf("ParsePolicyFor(%q) = %q, want %q", in, p, want)
		}
	}
	for in, msg := range map[string]string{
		"iface=eth1 min=1mbit base=2mbit max=3mbit":            "iface=eth1, but the policy is for eth0",
		"min=fast base=2mbit max=3mbit":                        `min="fast"`,
		"min=1mbit base=4mbit max=3mbit":                       "--base 4mbit is outside",
		"min=1mbit base=2mbit max=3mbit passive=off":           "no signal",
		"min=1mbit base=2mbit max=3mbit base=2mbit":            "base given twice",
		"iface=eth0 iface=eth0 min=1mbit base=2mbit max=3mbit": "iface given twice",
	} {
		if _, err := ParsePolicyFor("eth0", in); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("ParsePolicyFor(%q) = %v, want %q", in, err, msg)
		}
	}
}
