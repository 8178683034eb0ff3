package lab

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"
)

// Scenario is one runbook's problem, reproduced: a network, a baseline, one
// or more fixes, what to measure and what to expect.
type Scenario struct {
	Name    string
	Runbook string // "003"
	Title   string
	// Summary is one line for "lab list".
	Summary string
	// Problem and Method say, for the report, what is reproduced and how.
	Problem string
	Topo    TopoSpec
	// NeedsNetem, when set, says why the scenario means nothing without
	// netem's delay; on a kernel without netem it does not run.
	NeedsNetem string
	Variants   []Variant
	// Key are the metrics shown for every variant in the text table, also
	// those without an expectation.
	Key []Expect
	// Estimate is the rough wall time of a run on a host kernel.
	Estimate time.Duration
	// Passive is what the scenario measures of its real traffic in the
	// kernel beside the active probes (lowlat watch's view); nil: nothing.
	Passive *PassiveLook
}

// Variant is the baseline (Fix nil, App zero) or one fix.
type Variant struct {
	Name string
	Desc string
	Fix  *Fix
	App  App
	// Autorate runs lowlat autorate during the measurement, on the shaper
	// Fix installed.
	Autorate *AutorateRun
	// FollowCap, in a scenario whose cap steps, moves the shaper Fix
	// installed to this share of each new cap in the instant the provider
	// steps: a shaper that knows the cap, the reference for one that must
	// find it (0: the lab leaves the shaper alone).
	FollowCap float64
	// Named runs the variant only when it is named (--variant): an
	// experiment beside the scenario's own variants, whose figures are for
	// comparison, not a default run's.
	Named bool
	// Expect are checked against this variant's metrics.
	Expect []Expect
}

// App is what the application side does in a variant; the knob engine
// cannot set these (TCP_NODELAY is per socket).
type App struct {
	// Nagle leaves Nagle's algorithm on for both ends (no TCP_NODELAY).
	Nagle bool
	// FastOpen makes the client use TCP Fast Open (TCP_FASTOPEN_CONNECT).
	FastOpen bool
	// Flows is the number of bulk TCP flows the application runs (an upload
	// of one scp is one flow); 0 takes the scenario's own number.
	Flows int
	// Change describes the application-side change, for reports.
	Change string
	// OwnProcess runs the client application as a process of its own
	// ("lowlat probe tcp", started with the run's lowlat binary) in a cgroup
	// of its own, as a service is: a fix can then select its connections
	// with match = "cgroup:{client-cgroup}", from outside the application.
	OwnProcess bool
}

// AutorateRun is "lowlat autorate" run in the client namespace for the
// whole measurement, on the client's uplink, as a process of its own (the
// run's lowlat binary), its policy journaled with the variant's fix.
type AutorateRun struct {
	// Reflector gives autorate a reflector of its own in the server
	// namespace (AutorateReflectorPort), apart from the one the load
	// flows use, so it can be killed mid-run.
	Reflector bool
	// Passive uses the client's own connections' tcp_info.
	Passive bool
	// Min and Max bound the rate (tc units).
	Min, Max string
	// KillReflectorAt kills autorate's reflector this far into the loaded
	// phase (scaled with the run; 0: never).
	KillReflectorAt time.Duration
	// Peer runs another tool in lowlat autorate's place on the same shaper,
	// for a figure side by side: PeerCakeAutorate. Such a variant runs only
	// when named (--variant): the tool is not lowlat's to ship.
	Peer string
	// PeerConfig are settings of the peer's configuration, beyond those the
	// lab gives it (interfaces, rates, reflector, probe rate).
	PeerConfig map[string]string
}

// PeerCakeAutorate is cake-autorate (github.com/lynxthecat/cake-autorate),
// run from a checkout (Options.CakeAutorate) with bash and fping, pinging
// the server with ICMP echo at lowlat's probe budget (20 Hz).
const PeerCakeAutorate = "cake-autorate"

// args is the autorate command line.
func (a *AutorateRun) args() []string {
	args := []string{"autorate", "--iface", ClientIf, "--min", a.Min, "--max", a.Max, "--passive=" + fmt.Sprint(a.Passive)}
	if a.Reflector {
		args = append(args, "--reflector", fmt.Sprintf("%s:%d", ServerAddr, AutorateReflectorPort))
	}
	return args
}

// String is the command for reports.
func (a *AutorateRun) String() string {
	if a.Peer == "" {
		return "lowlat " + strings.Join(a.args(), " ")
	}
	var sets []string
	for _, k := range slices.Sorted(maps.Keys(a.PeerConfig)) {
		sets = append(sets, k+"="+a.PeerConfig[k])
	}
	s := fmt.Sprintf("%s on %s, %s..%s, fping to %s every 50 ms", a.Peer, ClientIf, a.Min, a.Max, ServerAddr)
	if len(sets) > 0 {
		s += ", " + strings.Join(sets, " ")
	}
	return s
}

// AutorateReflectorPort is the port of autorate's own reflector.
const AutorateReflectorPort = 7432

// ClientCgroup stands for the client application's cgroup (App.OwnProcess)
// in a Fix's Inline profile and Require keys; each run has its own.
const ClientCgroup = "{client-cgroup}"

// Fix is a change applied with lowlat's engine, exactly as "lowlat apply"
// would: a profile (built in, or a lab-defined one for a runbook's own
// commands), its --set parameters, and the settings kept.
type Fix struct {
	// Profile is a built-in profile name, or the name of Inline.
	Profile string
	// Inline is the TOML of a lab-defined profile (a runbook's fix taken
	// verbatim, which lowlat itself would not recommend).
	Inline string
	Sets   map[string]string
	// Only keeps these setting keys and skips the rest (--skip for each).
	Only []string
	// Side is the namespace the fix is applied in: "client" or "server".
	Side string
	// Require are setting keys without which the variant measures nothing
	// new; when the plan cannot apply one, the variant does not run.
	Require []string
	// cgroup is the run's ClientCgroup, once bound.
	cgroup string
}

// bind returns the fix with ClientCgroup replaced by cgroup, the client
// application's cgroup (relative to the cgroup v2 root).
func (f *Fix) bind(cgroup string) *Fix {
	if cgroup == "" {
		return f
	}
	b := *f
	b.cgroup = cgroup
	b.Inline = strings.ReplaceAll(f.Inline, ClientCgroup, cgroup)
	b.Require = nil
	for _, r := range f.Require {
		b.Require = append(b.Require, strings.ReplaceAll(r, ClientCgroup, cgroup))
	}
	return &b
}

// Iface is the interface the fix targets.
func (f *Fix) Iface() string {
	if f.Side == "server" {
		return ServerIf
	}
	return ClientIf
}

// String is the equivalent command line, for reports.
func (f *Fix) String() string {
	if f == nil {
		return "none"
	}
	var b strings.Builder
	b.WriteString("lowlat apply --profile " + f.Profile)
	keys := make([]string, 0, len(f.Sets))
	for k := range f.Sets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " --set %s=%s", k, f.Sets[k])
	}
	if len(f.Only) > 0 {
		fmt.Fprintf(&b, " (only %s)", strings.Join(f.Only, ", "))
	}
	fmt.Fprintf(&b, " --iface %s, in the %s namespace", f.Iface(), f.Side)
	return b.String()
}

// selected are the variants a run with these names runs: the baseline, and
// the named ones, or with no names every one not OnlyNamed.
func (sc *Scenario) selected(names []string) []*Variant {
	var vs []*Variant
	for i := range sc.Variants {
		v := &sc.Variants[i]
		if i == 0 || (len(names) == 0 && !v.OnlyNamed()) || slices.Contains(names, v.Name) {
			vs = append(vs, v)
		}
	}
	return vs
}

// OnlyNamed reports whether the variant runs only when named: it is marked
// Named, or it runs a peer tool that lowlat does not ship.
func (v *Variant) OnlyNamed() bool { return v.Named || v.Peer() != nil }

// Peer is the variant's run of a peer tool in lowlat autorate's place, nil
// when it runs none.
func (v *Variant) Peer() *AutorateRun {
	if v.Autorate == nil || v.Autorate.Peer == "" {
		return nil
	}
	return v.Autorate
}

// fixString describes a variant's change.
func (v *Variant) fixString() string {
	parts := []string{}
	if v.Fix != nil {
		parts = append(parts, v.Fix.String())
	}
	if v.Autorate != nil {
		parts = append(parts, v.Autorate.String())
	}
	if v.App.Change != "" {
		parts = append(parts, v.App.Change)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

var registry = map[string]*Scenario{}

func register(s *Scenario) {
	if _, dup := registry[s.Name]; dup {
		panic("lab: duplicate scenario " + s.Name)
	}
	registry[s.Name] = s
}

// Scenarios lists every scenario by runbook, then name.
func Scenarios() []*Scenario {
	out := make([]*Scenario, 0, len(registry))
	for _, s := range registry {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Runbook != out[j].Runbook {
			return out[i].Runbook > out[j].Runbook
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Names lists the scenario names.
func Names() []string {
	var n []string
	for _, s := range Scenarios() {
		n = append(n, s.Name)
	}
	sort.Strings(n)
	return n
}

// Lookup returns a scenario by name, or an error listing the known ones.
func Lookup(name string) (*Scenario, error) {
	if s, ok := registry[name]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Names(), ", "))
}

// Step is a progress event: what the run is doing now and for how long.
type Step struct {
	Scenario string
	Variant  string
	Index    int // 1-based variant number
	Total    int
	// Phase is a short text ("apply capped-uplink", "measure").
	Phase string
	// Duration is how long the phase is expected to take (0: short).
	Duration time.Duration
}
