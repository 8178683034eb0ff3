package profile

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/autorate"
)

// TestCappedUplinkAutorate: the built-in's autorate policy applies only
// when max is given, and its templated rates expand to what a policy takes.
func TestCappedUplinkAutorate(t *testing.T) {
	p, _ := Builtin("capped-uplink")
	r, err := Resolve(p, map[string]string{"rate": "2mbit"})
	if err != nil {
		t.Fatal(err)
	}
	if r.settingByKey("autorate.policy") != nil {
		t.Error("autorate applies only when max is given")
	}
	r, err = Resolve(p, map[string]string{"rate": "2mbit", "max": "3mbit"})
	if err != nil {
		t.Fatal(err)
	}
	s := r.settingByKey("autorate.policy")
	if s == nil || s.Value != "min=1mbit base=1800kbit max=3mbit passive=on" || s.Section != "autorate" || s.Name != "policy" {
		t.Fatalf("autorate.policy = %+v", s)
	}
	pol, err := autorate.ParsePolicyFor("eth0", s.Value)
	if err != nil {
		t.Fatal(err)
	}
	if want := "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"; pol.String() != want {
		t.Errorf("policy = %q, want %q", pol, want)
	}
	// base follows the shaper's rate: autorate starts where the profile's
	// qdisc.root is.
	if root := r.settingByKey("qdisc.root"); !strings.Contains(root.Value, "bandwidth 1800kbit") {
		t.Errorf("root = %q", root.Value)
	}
	// A max under the shaper's rate is an error at resolve time, at the
	// setting's position.
	if _, err := Resolve(p, map[string]string{"rate": "2mbit", "max": "1500kbit"}); err == nil || !strings.Contains(err.Error(), "capped-uplink.toml:") || !strings.Contains(err.Error(), "--base 1800kbit is outside") {
		t.Errorf("max below base: %v", err)
	}
}

func TestAutorateSetting(t *testing.T) {
	good := "[autorate.policy]\nvalue = \"min=1mbit base=1800kbit max=3000000 reflectors=192.0.2.1:7431 passive=off threshold=10ms\"\n"
	p, err := Parse("f.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Has("autorate") {
		t.Error("no autorate setting")
	}
	// Templates: the policy is checked once the parameters are bound.
	tmpl := "[params.up]\ntype = \"rate\"\n[params.refl]\ntype = \"string\"\n" +
		"[autorate.policy]\nvalue = \"min=${up*0.4} base=${up*0.9} max=${up} reflectors=${refl}\"\nwhen = \"up\"\n"
	p, err = Parse("f.toml", []byte(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	r, err = Resolve(p, map[string]string{"up": "10mbit", "refl": "192.0.2.1:7431,192.0.2.2:7431"})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.settingByKey("autorate.policy"); s == nil || s.Value != "min=4mbit base=9mbit max=10mbit reflectors=192.0.2.1:7431,192.0.2.2:7431" {
		t.Errorf("templated policy = %+v", s)
	}
	if _, err := Resolve(p, map[string]string{"up": "10mbit", "refl": "192.0.2.1"}); err == nil || !strings.Contains(err.Error(), "want host:port") {
		t.Errorf("bad reflector from a parameter: %v", err)
	}
	// --set autorate.policy works like any setting.
	g, _ := Builtin("game-udp")
	if r, err := Resolve(g, map[string]string{"autorate.policy": "min=1mbit base=2mbit max=3mbit passive=on"}); err != nil || r.settingByKey("autorate.policy") == nil {
		t.Errorf("--set autorate.policy: %v", err)
	}
	if _, err := Resolve(g, map[string]string{"autorate.policy": "min=1mbit base=4mbit max=3mbit passive=on"}); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("--set autorate.policy with base above max: %v", err)
	}

	tests := []struct{ name, doc, want string }{
		{"unknown name", "[autorate.rate]\nvalue = \"x\"\n", "f.toml:1:11: unknown autorate setting \"rate\" (known: policy)"},
		{"iface given", "[autorate.policy]\nvalue = \"iface=eth0 min=1mbit base=2mbit max=3mbit\"\n", "f.toml:2:9: autorate.policy: leave iface= out"},
		{"iface given with templates", "[params.r]\ntype = \"rate\"\n[autorate.policy]\nvalue = \"iface=eth0 min=${r} base=${r} max=${r}\"\n", "leave iface= out"},
		{"not key=value", "[autorate.policy]\nvalue = \"min=1mbit fast\"\n", "f.toml:2:9: autorate.policy: \"fast\" is not key=value"},
		{"bad rate", "[autorate.policy]\nvalue = \"min=1mbps2 base=2mbit max=3mbit\"\n", "autorate.policy: autorate policy: min=\"1mbps2\""},
		{"unknown key", "[autorate.policy]\nvalue = \"min=1mbit base=2mbit max=3mbit speed=3\"\n", "unknown key \"speed\""},
		{"no signal", "[autorate.policy]\nvalue = \"min=1mbit base=2mbit max=3mbit passive=off\"\n", "autorate IFACE: no signal"},
		{"too low", "[autorate.policy]\nvalue = \"min=64kbit base=2mbit max=3mbit passive=on\"\n", "below 128kbit"},
		{"bad template", "[autorate.policy]\nvalue = \"min=${r/2} base=2mbit max=3mbit\"\n", "bad template"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("f.toml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}
