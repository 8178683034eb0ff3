package lab

import (
	"encoding/json"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// The scenarios are data: check they are consistent, so a typo in a setting
// key or a metric path fails here instead of silently never applying.
func TestScenariosWellFormed(t *testing.T) {
	want := []string{"bufferbloat-uplink", "capped-uplink-varying", "cross-border-jitter", "first-frame", "game-egress", "nagle-small-messages", "path-hops"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("scenarios %v, want %v", got, want)
	}
	ops := map[string]bool{"<": true, "<=": true, ">": true, ">=": true, "between": true}
	for _, sc := range Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			if sc.Runbook == "" || sc.Title == "" || sc.Summary == "" || sc.Problem == "" || sc.Estimate == 0 {
				t.Errorf("missing metadata: %+v", sc)
			}
			if len(sc.Variants) < 2 || sc.Variants[0].Name != "baseline" || sc.Variants[0].Fix != nil {
				t.Errorf("first variant must be a baseline without a fix")
			}
			seen := map[string]bool{}
			nexp := 0
			for _, v := range sc.Variants {
				if seen[v.Name] {
					t.Errorf("duplicate variant %s", v.Name)
				}
				seen[v.Name] = true
				for _, e := range v.Expect {
					nexp++
					if !ops[e.Op] || e.Desc == "" || !strings.HasPrefix(e.Metric, "derived.") {
						t.Errorf("%s: bad expectation %+v", v.Name, e)
					}
					if !cited.MatchString(e.Desc) {
						t.Errorf("%s: expectation %q does not say where its figure comes from (\"runbook NNN…\" or \"lowlat: …\")", v.Name, e.Desc)
					}
					if e.Op == "between" && e.Max <= e.Value {
						t.Errorf("%s: between %g..%g", v.Name, e.Value, e.Max)
					}
					if e.Versus != "" && !seen[e.Versus] {
						t.Errorf("%s: versus %q must be an earlier variant", v.Name, e.Versus)
					}
				}
				if v.Fix == nil {
					continue
				}
				if v.Fix.Side != "client" && v.Fix.Side != "server" {
					t.Errorf("%s: side %q", v.Name, v.Fix.Side)
				}
				f := v.Fix
				if v.App.OwnProcess {
					f = f.bind("/lowlat-lab-test-client")
				} else if strings.Contains(f.Inline, ClientCgroup) {
					t.Errorf("%s: the fix names the client application's cgroup, and the application is not a process of its own", v.Name)
				}
				r, err := resolveFix(f)
				if err != nil {
					t.Errorf("%s: %v", v.Name, err)
					continue
				}
				var keys []string
				for _, s := range r.Settings {
					keys = append(keys, s.Key)
				}
				for _, k := range append(append([]string{}, f.Only...), f.Require...) {
					if !slices.Contains(keys, k) {
						t.Errorf("%s: setting %s is not in the resolved profile (%v)", v.Name, k, keys)
					}
				}
				if len(v.Fix.Only) > 0 && len(keys) != len(v.Fix.Only) {
					t.Errorf("%s: only %v kept %v", v.Name, v.Fix.Only, keys)
				}
			}
			if nexp == 0 {
				t.Error("no expectations")
			}
			for _, k := range sc.Key {
				if !strings.HasPrefix(k.Metric, "derived.") || k.Desc == "" {
					t.Errorf("bad key metric %+v", k)
				}
			}
		})
	}
}

// cited is how an expectation's description starts: the runbook whose
// figure it holds the lab to, or "lowlat:" for lowlat's own prediction.
var cited = regexp.MustCompile(`^(runbook [0-9]{3}\b|lowlat: )`)

// The expectations that hold the lab to the runbooks' own figures (issue 9):
// runbook 000's server queueing p99, 21 ms before and 4.3 ms after its fix;
// runbook 003's BBR, measured with one upload flow (about 100 ms instead of
// seconds), and lowlat's finding that it does not hold with four.
func TestExpectationsFromRunbooks(t *testing.T) {
	tests := []struct {
		scenario, variant, metric, op string
		value                         float64
		flows                         int
	}{
		{"game-egress", "baseline", "derived.server_queueing_p99_ms", ">=", 10, 0},
		{"game-egress", "game-udp", "derived.server_queueing_p99_ms", "<", 4.3, 0},
		{"game-egress", "baseline", "derived.passive_egress_ef_p99_ms", ">=", 10, 0},
		{"game-egress", "game-udp", "derived.passive_egress_ef_p99_ms", "<", 4.3, 0},
		{"cross-border-jitter", "baseline", "derived.server_queueing_p99_ms", ">=", 10, 0},
		{"cross-border-jitter", "game-udp", "derived.server_queueing_p99_ms", "<", 4.3, 0},
		{"bufferbloat-uplink", "bbr-1-flow", "derived.loaded_p50_ms", "<", 200, 1},
		{"bufferbloat-uplink", "bbr-4-flows", "derived.loaded_p50_ms", ">", 200, 0},
	}
	for _, tt := range tests {
		t.Run(tt.scenario+"/"+tt.variant, func(t *testing.T) {
			sc, err := Lookup(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(sc.Variants, func(v Variant) bool { return v.Name == tt.variant })
			if i < 0 {
				t.Fatalf("no variant %s", tt.variant)
			}
			v := sc.Variants[i]
			if v.App.Flows != tt.flows {
				t.Errorf("flows %d, want %d", v.App.Flows, tt.flows)
			}
			j := slices.IndexFunc(v.Expect, func(e Expect) bool { return e.Metric == tt.metric })
			if j < 0 {
				t.Fatalf("no expectation on %s", tt.metric)
			}
			if e := v.Expect[j]; e.Op != tt.op || e.Value != tt.value {
				t.Errorf("expects %s %s %g, want %s %g", tt.metric, e.Op, e.Value, tt.op, tt.value)
			}
		})
	}
}

func TestRunbookTBFProfile(t *testing.T) {
	p, err := profile.Parse("lab:runbook-003-tbf.toml", []byte(runbook003TBF))
	if err != nil {
		t.Fatal(err)
	}
	r, err := profile.Resolve(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Settings) != 1 || r.Settings[0].Key != "qdisc.root" {
		t.Fatalf("settings %+v", r.Settings)
	}
	s, err := qdisc.Parse(r.Settings[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	// The runbook's command: tbf latency 300ms burst 4096 rate 1.95mbit.
	if s.Kind != "tbf" || s.Opts["rate"] != "1950kbit" || s.Opts["latency"] != "300ms" || s.Opts["burst"] != "4096" {
		t.Errorf("spec %v", s)
	}
}

func TestPathSpec(t *testing.T) {
	ms := func(n int) Duration { return Duration(time.Duration(n) * time.Millisecond) }
	tests := []struct {
		name    string
		p       Path
		noNetem bool
		want    string
	}{
		{"nothing", Path{}, false, ""},
		{"rate", Path{Rate: "2mbit", Buffer: Duration(5 * time.Second)}, false, "tbf rate 2mbit burst 12500 latency 5s"},
		{"delay", Path{Delay: ms(40)}, false, "netem delay 40ms limit 100000"},
		{"delay without netem", Path{Delay: ms(40)}, true, ""},
		{"jitter and loss", Path{Delay: ms(15), Jitter: ms(5), Loss: 1}, false, "netem delay 15ms jitter 5ms loss 1% limit 100000"},
		{"rate and delay", Path{Rate: "2mbit", Buffer: ms(500), Delay: ms(20)}, false, "tbf rate 2mbit burst 12500 latency 500ms leaf { netem delay 20ms limit 82 }"},
		{"rate, no netem", Path{Rate: "2mbit", Buffer: ms(500), Delay: ms(20)}, true, "tbf rate 2mbit burst 12500 latency 500ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.p.spec(tt.noNetem)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("spec %q, want %q", got, tt.want)
			}
			if got != "" {
				if _, err := qdisc.Parse(got); err != nil {
					t.Errorf("qdisc.Parse(%q): %v", got, err)
				}
			}
		})
	}
	if _, err := (Path{Rate: "fast"}).spec(false); err == nil {
		t.Error("bad rate accepted")
	}
}

func TestNICSpec(t *testing.T) {
	n := NIC{Rate: "20mbit"}
	got, err := n.spec("")
	if err != nil {
		t.Fatal(err)
	}
	if want := "tbf rate 20mbit burst 3000 latency 1s leaf { pfifo limit 1000 }"; got != want {
		t.Errorf("spec %q, want %q", got, want)
	}
	got, _ = n.spec("fq_codel limit 1000 target 5ms")
	s, err := qdisc.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != "tbf" || s.Leaf == nil || s.Leaf.Kind != "fq_codel" {
		t.Errorf("wrapped %v", s)
	}
}

func TestEvaluate(t *testing.T) {
	mk := func(name string, d map[string]float64) VariantResult {
		return VariantResult{Name: name, Status: StatusRan, Metrics: map[string]any{"derived": d}}
	}
	r := &Result{Variants: []VariantResult{
		mk("baseline", map[string]float64{"p99": 5000, "rtts": 8}),
		mk("fix", map[string]float64{"p99": 20, "rtts": 6}),
		mk("more", map[string]float64{"p99": 30, "rtts": 5}),
		{Name: "absent", Status: StatusNotRun, Why: "kernel lacks fq_codel"},
	}}
	ex := map[string][]Expect{
		"baseline": {{Metric: "derived.p99", Op: ">", Value: 1000}},
		"fix":      {{Metric: "derived.p99", Op: "<=", Value: 25}, {Metric: "derived.rtts", Op: "between", Value: 5, Max: 7}},
		"more":     {{Metric: "derived.rtts", Versus: "fix", Op: "between", Value: 0.5, Max: 1.5}, {Metric: "derived.nope", Op: "<", Value: 1}},
		"absent":   {{Metric: "derived.p99", Op: "<", Value: 5}},
	}
	evaluate(r, ex)
	type row struct {
		pass     bool
		observed float64
		before   float64
	}
	got := map[string][]row{}
	for _, v := range r.Variants {
		for _, e := range v.Expectations {
			x := row{pass: e.Pass, observed: math.NaN(), before: math.NaN()}
			if e.Observed != nil {
				x.observed = *e.Observed
			}
			if e.Before != nil {
				x.before = *e.Before
			}
			got[v.Name] = append(got[v.Name], x)
		}
	}
	check := func(v string, i int, pass bool, obs, before float64) {
		t.Helper()
		g := got[v][i]
		same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
		if g.pass != pass || !same(g.observed, obs) || !same(g.before, before) {
			t.Errorf("%s[%d] = %+v, want pass %v observed %g before %g", v, i, g, pass, obs, before)
		}
	}
	nan := math.NaN()
	check("baseline", 0, true, 5000, nan)
	check("fix", 0, true, 20, 5000)
	check("fix", 1, true, 6, 8)
	check("more", 0, true, 1, 6) // saved vs fix: 6 - 5
	check("more", 1, false, nan, nan)
	check("absent", 0, false, nan, 5000)
	if r.Pass {
		t.Error("pass with a missing metric and a variant that did not run")
	}
	r.Variants = r.Variants[:3]
	ex["more"] = ex["more"][:1]
	evaluate(r, ex)
	if !r.Pass {
		t.Error("all expectations held but pass is false")
	}
}

// The JSON layout is a contract (issue 4): scenario, kernel {version,
// missing}, variants [{name, fix, metrics, expectations [{metric, op, value,
// observed, pass}]}], pass.
func TestResultJSONFields(t *testing.T) {
	r := &Result{Scenario: "x", Kernel: KernelInfo{Version: "6.1", Missing: []string{}},
		Variants: []VariantResult{{Name: "baseline", Fix: "none", Status: StatusRan, Metrics: map[string]any{"derived": map[string]float64{"a": 1}}}}}
	evaluate(r, map[string][]Expect{"baseline": {{Metric: "derived.a", Op: "between", Value: 0, Max: 2}}})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "kernel", "variants", "pass"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %q", k)
		}
	}
	k := m["kernel"].(map[string]any)
	if _, ok := k["version"]; !ok {
		t.Error("no kernel.version")
	}
	if _, ok := k["missing"].([]any); !ok {
		t.Error("kernel.missing is not a list")
	}
	v := m["variants"].([]any)[0].(map[string]any)
	for _, f := range []string{"name", "fix", "metrics", "expectations"} {
		if _, ok := v[f]; !ok {
			t.Errorf("no variants[].%s", f)
		}
	}
	e := v["expectations"].([]any)[0].(map[string]any)
	for _, f := range []string{"metric", "op", "value", "observed", "pass"} {
		if _, ok := e[f]; !ok {
			t.Errorf("no expectations[].%s", f)
		}
	}
	if val, ok := e["value"].([]any); !ok || len(val) != 2 {
		t.Errorf("between value %v, want [low, high]", e["value"])
	}
	if e["pass"] != true || m["pass"] != true {
		t.Errorf("pass %v / %v", e["pass"], m["pass"])
	}
}

func TestMissingFeature(t *testing.T) {
	tests := map[string]string{
		"kernel 6.18.44-fc-v669 lacks the fq_codel qdisc (sch_fq_codel)":                                                            "fq_codel",
		"only the initial network namespace may select bbr; this one may use reno, cubic (net.ipv4.tcp_allowed_congestion_control)": "bbr (for network namespaces: net.ipv4.tcp_allowed_congestion_control)",
		"kernel 5.4 has no bbr congestion control (available: reno cubic; no tcp_bbr module found)":                                 "bbr",
		"host-wide setting: the lab never changes the host":                                                                         "",
	}
	for in, want := range tests {
		if got := missingFeature(in); got != want {
			t.Errorf("missingFeature(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestGuestScript(t *testing.T) {
	s := guestScript("/bin/lowlat", "first-frame", VMOptions{Variants: []string{"it's"}, Scale: 0.5})
	if !strings.Contains(s, `exec '/bin/lowlat' 'lab' 'run' 'first-frame' '-o' '/out/result.json' '--variant' 'it'\''s' '--scale' '0.5'`) {
		t.Errorf("script:\n%s", s)
	}
	if !strings.Contains(s, "tcp_allowed_congestion_control") {
		t.Error("the guest must let namespaces pick cubic and bbr")
	}
}

func TestFixString(t *testing.T) {
	f := &Fix{Profile: "capped-uplink", Sets: map[string]string{"rate": "2mbit"}, Only: []string{"qdisc.root"}, Side: "client"}
	want := "lowlat apply --profile capped-uplink --set rate=2mbit (only qdisc.root) --iface lab-up, in the client namespace"
	if got := f.String(); got != want {
		t.Errorf("%q, want %q", got, want)
	}
	var nf *Fix
	if nf.String() != "none" {
		t.Error("nil fix")
	}
}

// The sock_ops variant's profile names the run's client cgroup once bound,
// and its required setting with it.
func TestClientNoDelayBind(t *testing.T) {
	sc, err := Lookup("nagle-small-messages")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(sc.Variants, func(v Variant) bool { return v.Name == "sockops-nodelay" })
	if i < 0 {
		t.Fatal("no sockops-nodelay variant")
	}
	v := sc.Variants[i]
	if !v.App.OwnProcess || !v.App.Nagle {
		t.Errorf("app %+v: the application runs as a process of its own, Nagle on", v.App)
	}
	f := v.Fix.bind("/lowlat-lab-x-client")
	p, err := profile.Parse("lab:"+f.Profile+".toml", []byte(f.Inline))
	if err != nil {
		t.Fatal(err)
	}
	r, err := profile.Resolve(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "sockets.cgroup:/lowlat-lab-x-client/nodelay"
	if len(r.Settings) != 1 || r.Settings[0].Key != want || r.Settings[0].Value != "1" && r.Settings[0].Value != "true" {
		t.Fatalf("settings %+v, want %s on", r.Settings, want)
	}
	if len(f.Require) != 1 || f.Require[0] != want {
		t.Errorf("require %v, want [%s]", f.Require, want)
	}
	if strings.Contains(v.Fix.Inline, "/lowlat-lab-x-client") || v.Fix.cgroup != "" {
		t.Error("bind changed the registered variant")
	}
}

// The oracle of capped-uplink-varying follows the cap at the share the
// capped-uplink profile shapes at, so it differs from the static shaper only
// in knowing the cap. Both of the profile's shapers, cake and its tbf
// fallback, are checked: the VM runs one, this host the other.
func TestOracleFollowsAtTheProfilesShare(t *testing.T) {
	sc, err := Lookup("capped-uplink-varying")
	if err != nil {
		t.Fatal(err)
	}
	var oracle *Variant
	for i, v := range sc.Variants {
		if v.FollowCap > 0 {
			oracle = &sc.Variants[i]
		}
	}
	if oracle == nil || oracle.Fix == nil || oracle.Autorate != nil {
		t.Fatalf("no oracle on the static shaper without autorate: %+v", oracle)
	}
	p, err := profile.Builtin(oracle.Fix.Profile)
	if err != nil {
		t.Fatal(err)
	}
	r, err := profile.Resolve(p, oracle.Fix.Sets)
	if err != nil {
		t.Fatal(err)
	}
	capBits, _ := qdisc.ParseRate(oracle.Fix.Sets["rate"])
	want := uint64(oracle.FollowCap * float64(capBits))
	n := 0
	for _, s := range r.Settings {
		if s.Key != "qdisc.root" {
			continue
		}
		for _, v := range append([]string{s.Value}, s.Fallbacks...) {
			spec, err := qdisc.Parse(v)
			if err != nil {
				t.Fatalf("%q: %v", v, err)
			}
			o := qdisc.Normalized(spec).Opts
			rate := o["bandwidth"]
			if rate == "" {
				rate = o["rate"]
			}
			got, err := qdisc.ParseRate(rate)
			if err != nil {
				t.Fatalf("%q: rate %q: %v", v, rate, err)
			}
			if got != want {
				t.Errorf("%s shapes %s at %d bit/s, the oracle at %d (%.2f of it)", oracle.Fix.Profile, spec.Kind, got, want, oracle.FollowCap)
			}
			n++
		}
	}
	if n < 2 {
		t.Errorf("%d shapers in %s, want cake and its tbf fallback", n, oracle.Fix.Profile)
	}
}
