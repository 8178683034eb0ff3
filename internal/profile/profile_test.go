package profile

import (
	"github.com/lowlat/lowlat/internal/runbooks"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBuiltinsResolve(t *testing.T) {
	names := BuiltinNames()
	want := []string{"capped-uplink", "game-udp", "live-edge", "realtime-tcp"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Fatalf("built-ins = %v, want %v", names, want)
	}
	anchors := runbookSections(t)
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			p, err := Builtin(n)
			if err != nil {
				t.Fatal(err)
			}
			sets := map[string]string{}
			if n == "capped-uplink" {
				sets["rate"] = "2mbit"
			}
			r, err := Resolve(p, sets)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Settings) == 0 {
				t.Fatal("no settings")
			}
			if !anchors[r.Source] {
				t.Errorf("profile source %q is not a section of docs/runbooks.md", r.Source)
			}
			for _, s := range r.Settings {
				if s.Why == "" || s.Source == "" {
					t.Errorf("%s: every built-in setting needs a rationale and a runbook (why=%q source=%q)", s.Key, s.Why, s.Source)
				}
				if !anchors[s.Source] {
					t.Errorf("%s: source %q is not a section of docs/runbooks.md (want docs/runbooks.md#NNN-...)", s.Key, s.Source)
				}
				if strings.Contains(s.Value, "${") {
					t.Errorf("%s: unexpanded template %q", s.Key, s.Value)
				}
			}
		})
	}
}

// runbookSections lists the sections of docs/runbooks.md a source may name.
func runbookSections(t *testing.T) map[string]bool {
	t.Helper()
	out, err := runbooks.Sections("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 5 {
		t.Fatalf("docs/runbooks.md has %d sections, want one per runbook", len(out))
	}
	return out
}

func TestCappedUplinkTemplates(t *testing.T) {
	p, _ := Builtin("capped-uplink")
	r, err := Resolve(p, map[string]string{"rate": "2mbit"})
	if err != nil {
		t.Fatal(err)
	}
	root := r.settingByKey("qdisc.root")
	if root.Value != "cake bandwidth 1800kbit besteffort" {
		t.Errorf("root = %q", root.Value)
	}
	if want := "tbf rate 1800kbit burst 3028 latency 50ms leaf { fq_codel target 10100us interval 100ms }"; root.Fallbacks[0] != want {
		t.Errorf("fallback = %q, want %q", root.Fallbacks[0], want)
	}
	if r.settingByKey("qdisc.ingress") != nil {
		t.Error("ingress shaping applies only when down is given")
	}
	r, err = Resolve(p, map[string]string{"rate": "20mbit", "down": "100mbit"})
	if err != nil {
		t.Fatal(err)
	}
	if in := r.settingByKey("qdisc.ingress"); in == nil || in.Value != "cake bandwidth 90mbit besteffort ingress" {
		t.Errorf("ingress = %+v", in)
	}
	if _, err := Resolve(p, nil); err == nil || !strings.Contains(err.Error(), "needs parameter rate") {
		t.Errorf("missing rate: %v", err)
	}
	if _, err := Resolve(p, map[string]string{"rate": "fast"}); err == nil || !strings.Contains(err.Error(), "--set rate=fast") {
		t.Errorf("bad rate: %v", err)
	}
}

func (r *Resolved) settingByKey(k string) *Setting {
	for i := range r.Settings {
		if r.Settings[i].Key == k {
			return &r.Settings[i]
		}
	}
	return nil
}

func TestParseErrorsHavePositions(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown top key", "name = \"x\"\nfoo = 1\n", "f.toml:2:1: unknown key \"foo\""},
		{"unknown section", "[netdev]\nx = 1\n", "f.toml:1:2: unknown section [netdev]"},
		{"unknown setting field", "[sysctl.\"net.core.somaxconn\"]\nvalue = \"1\"\nwhy = \"a\"\nvalu = \"2\"\n", "f.toml:4:1: "},
		{"bad qdisc value", "[qdisc.root]\nvalue = \"fq_codl\"\n", "f.toml:2:9: qdisc.root: unknown qdisc kind \"fq_codl\""},
		{"bad qdisc option", "[qdisc.root]\nvalue = \"fq_codel targte 5ms\"\n", "f.toml:2:9: qdisc.root: fq_codel: unknown option \"targte\""},
		{"bad route value", "[route.initcwnd]\nvalue = \"forty\"\n", "f.toml:2:9: route.initcwnd: bad initcwnd"},
		{"unknown route metric", "[route.initcwd]\nvalue = 40\n", "f.toml:1:8: unknown route setting \"initcwd\""},
		{"type error", "[sysctl.\"net.core.somaxconn\"]\nvalue = true\n", "f.toml:2:9: sysctl.net.core.somaxconn: value must be a string or an integer, not bool"},
		{"duplicate", "[sysctl]\n\"net.core.somaxconn\" = 1\n\"net.core.somaxconn\" = 2\n", "f.toml:3:1: duplicate key"},
		{"non-net sysctl", "[sysctl]\n\"dev.raid.speed_limit_max\" = 1\n", "f.toml:2:1: sysctl \"dev.raid.speed_limit_max\": lowlat manages"},
		{"toml syntax", "name = \n", "f.toml:1:8: TOML syntax"},
		{"bad template", "[qdisc.root]\nvalue = \"tbf rate ${rate/2} burst 3k latency 1ms\"\n", "f.toml:2:9: qdisc.root: bad template"},
		{"unknown function", "[qdisc.root]\nvalue = \"tbf rate ${half(rate)} burst 3k latency 1ms\"\n", "unknown function half()"},
		{"param type", "[params.rate]\ntype = \"speed\"\n", "f.toml:2:8: parameter rate: type \"speed\""},
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

func TestUserFileExtends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mine.toml")
	os.WriteFile(path, []byte(`extends = "game-udp"
summary = "our game servers"

[sysctl]
"net.core.somaxconn" = 8192

[sysctl."net.netfilter.nf_conntrack_max"]
skip = true

[qdisc.root]
value = "fq_codel target 3ms"
why = "our path is short"
`), 0o644)
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(p, map[string]string{"sysctl.net.core.rmem_max": "8388608"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Name != "mine" || strings.Join(r.Chain, ",") != "mine,game-udp" {
		t.Errorf("name %q chain %v", r.Name, r.Chain)
	}
	checks := map[string]string{
		"sysctl.net.core.somaxconn":              "8192",
		"qdisc.root":                             "fq_codel target 3ms",
		"sysctl.net.core.rmem_max":               "8388608",
		"sysctl.net.ipv4.tcp_congestion_control": "bbr",
	}
	for k, want := range checks {
		s := r.settingByKey(k)
		if s == nil || s.Value != want {
			t.Errorf("%s = %+v, want %q", k, s, want)
		}
	}
	if s := r.settingByKey("sysctl.net.core.somaxconn"); !strings.Contains(s.Why, "mine.toml") {
		t.Errorf("an override without a rationale says where it came from: %q", s.Why)
	}
	if r.settingByKey("sysctl.net.netfilter.nf_conntrack_max") != nil {
		t.Error("skip = true must drop the inherited setting")
	}
	if s := r.settingByKey("qdisc.root"); s.Why != "our path is short" {
		t.Errorf("why = %q", s.Why)
	}
}

func TestBadExtendsAndSets(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "b.toml")
	os.WriteFile(bad, []byte("extends = \"nope\"\n"), 0o644)
	p, err := Load(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Resolve(p, nil); err == nil || !strings.Contains(err.Error(), `unknown profile "nope"`) {
		t.Errorf("bad extends: %v", err)
	}
	g, _ := Builtin("game-udp")
	for set, want := range map[string]string{
		"bogus":              "not a parameter",
		"qdisc.root":         "unknown qdisc kind",
		"sysctl.net.core..x": "bad sysctl name",
		"route.initcwnd":     "bad initcwnd",
	} {
		val := map[string]string{"bogus": "1", "qdisc.root": "fifo", "sysctl.net.core..x": "1", "route.initcwnd": "99999"}[set]
		if _, err := Resolve(g, map[string]string{set: val}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("--set %s=%s: %v, want %q", set, val, err, want)
		}
	}
	if _, err := Load("no-such-profile"); err == nil || !strings.Contains(err.Error(), "built-in: capped-uplink, game-udp, live-edge, realtime-tcp") {
		t.Errorf("unknown profile: %v", err)
	}
}

func TestCodelTarget(t *testing.T) {
	if got := CodelTarget(100e6); got.String() != "5ms" {
		t.Errorf("100 Mbit: %v", got)
	}
	// 1.5 MTU at 2 Mbit/s = 9.08 ms, rounded up to 100 us.
	if got := CodelTarget(2e6); got.String() != "9.1ms" {
		t.Errorf("2 Mbit: %v", got)
	}
	if TbfBurst(1e9) != 125000 || TbfBurst(2e6) != 3028 {
		t.Error("TbfBurst")
	}
	// The plain tbf's whole queue (latency + burst drain time) is 20 ms.
	for _, r := range []uint64{1_800_000, 20e6, 1e9} {
		l := TbfLatency(r)
		drain := time.Duration(float64(TbfBurst(r)) * 8 / float64(r) * float64(time.Second))
		if total := l + drain; total < 19*time.Millisecond || total > 21*time.Millisecond {
			t.Errorf("rate %d: latency %v + burst drain %v = %v, want ~20ms", r, l, drain, total)
		}
	}
}
