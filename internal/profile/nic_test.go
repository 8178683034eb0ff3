package profile

import (
	"strings"
	"testing"
)

func TestNICSettings(t *testing.T) {
	doc := `
[ethtool]
"ring.rx" = 2048
ring.tx = "max"
feature.lro = "off"
"feature.rx-udp-gro-forwarding" = "on"
coalesce.rx-usecs = 3

[ethtool."coalesce.adaptive-rx"]
value = "off"
why = "w"

[irq]
placement = "numa-local"
irqbalance = "ban"
rps = "auto"
rfs = 32768
queues = 16

[nvme]
scheduler = "none"
nr_requests = 256

[cpu]
governor = "performance"
`
	p, err := Parse("n.toml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"ethtool.ring.rx": "2048", "ethtool.ring.tx": "max", "ethtool.feature.lro": "off", "ethtool.feature.rx-udp-gro-forwarding": "on",
		"ethtool.coalesce.rx-usecs": "3", "ethtool.coalesce.adaptive-rx": "off", "irq.placement": "numa-local", "irq.irqbalance": "ban",
		"irq.rfs": "32768", "irq.queues": "16", "nvme.scheduler": "none", "nvme.nr_requests": "256", "cpu.governor": "performance",
	} {
		s := setting(p, key)
		if s == nil || s.Value != want {
			t.Errorf("%s = %+v, want %q", key, s, want)
		}
	}
	// --set reaches them too.
	r, err := Resolve(p, map[string]string{"irq.irqbalance": "stop", "ethtool.ring.rx": "512"})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.settingByKey("irq.irqbalance"); s == nil || s.Value != "stop" {
		t.Errorf("--set irq.irqbalance: %+v", s)
	}
}

func TestNICSettingErrors(t *testing.T) {
	for _, tt := range []struct{ name, doc, want string }{
		{"unknown irq key", "[irq]\nbalance = \"stop\"\n", "n.toml:2:1: unknown irq setting \"balance\" (known: placement, irqbalance, rps, rfs, queues, nvme)"},
		{"bad irqbalance", "[irq]\nirqbalance = \"halt\"\n", "n.toml:2:14: irq.irqbalance: \"halt\" (want stop, ban, keep)"},
		{"bad ring", "[ethtool]\nring.rx = \"lots\"\n", "ethtool.ring.rx: \"lots\" (want 1..65536)"},
		{"unknown ethtool group", "[ethtool]\npause.rx = \"off\"\n", "unknown ethtool setting \"pause.rx\""},
		{"unknown coalesce", "[ethtool]\ncoalesce.rx-usec = 5\n", "unknown ethtool setting \"coalesce.rx-usec\" (known coalesce: rx-usecs"},
		{"feature value", "[ethtool]\nfeature.gro = \"yes\"\n", "ethtool.feature.gro: \"yes\" (want on, off)"},
		{"rq_affinity", "[nvme]\nrq_affinity = 3\n", "nvme.rq_affinity: \"3\" (want 0, 1, 2)"},
		{"unknown cpu key", "[cpu.idle]\nvalue = \"poll\"\n", "n.toml:1:6: unknown cpu setting \"idle\" (known: governor)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("n.toml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := Resolve(&Profile{Name: "x", Params: map[string]Param{}}, map[string]string{"irq.placement": "everywhere"}); err == nil || !strings.Contains(err.Error(), "want numa-local, off") {
		t.Errorf("--set with a bad value: %v", err)
	}
}

// setting returns the profile's setting for key, or nil.
func setting(p *Profile, key string) *Setting {
	for i := range p.Settings {
		if p.Settings[i].Key == key {
			return &p.Settings[i]
		}
	}
	return nil
}
