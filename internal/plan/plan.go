// Package plan turns host facts and a resolved profile into a list of knob
// changes. It is a pure function: it reads nothing from the host and writes
// nothing, so plans are computed the same way on a live host, on a captured
// snapshot sent by someone else, and in golden-file tests.
//
// Every setting becomes one row per knob it touches. Rows the host cannot do
// (no such sysctl, a qdisc kind the kernel lacks, someone else's qdisc tree that
// lowlat could not restore) are kept with supported=false and the reason, and
// rows already at the desired value are kept as "ok", so a plan shows the whole
// picture, never just the diff.
package plan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/irqplan"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// Actions of a change row.
const (
	Set  = "set"  // will be changed
	OK   = "ok"   // already as desired
	Skip = "skip" // cannot be done here (see Reason)
)

// ErrUnknownInterface is Make's error for an interface (Options.Ifaces) the
// host does not have.
var ErrUnknownInterface = errors.New("unknown interface")

// Unknown is a row's Current when the facts could not say it (a source
// was unreadable); "-" is a value the host does not have at all.
const Unknown = "?"

// Change is one knob in a plan.
type Change struct {
	Knob      string `json:"knob"`
	Current   string `json:"current"`
	Desired   string `json:"desired"`
	Supported bool   `json:"supported"`
	// Reason says why: the setting's rationale for supported rows, what is
	// missing for unsupported ones.
	Reason  string `json:"reason"`
	Action  string `json:"action"`
	Setting string `json:"setting"`
	Source  string `json:"source,omitempty"`
	// Note adds a caveat (a fallback was chosen, support is unproven).
	Note string `json:"note,omitempty"`
	// Persist says, for a sysctl, what keeps an apply --persist of it from
	// surviving a reboot: a boot-time file that sets it after lowlat's, or
	// one lowlat could not read (bootOverrides).
	Persist string `json:"persist,omitempty"`
}

// Plan is the result.
type Plan struct {
	Profile string            `json:"profile"`
	Chain   []string          `json:"chain,omitempty"`
	Params  map[string]string `json:"params,omitempty"`
	Ifaces  []string          `json:"ifaces"`
	Host    HostBrief         `json:"host"`
	Changes []Change          `json:"changes"`
	// Placement is the interrupt placement behind the irq rows, when the
	// profile asks for one (lowlat pin uses its application CPUs).
	Placement *irqplan.Plan `json:"-"`
}

// HostBrief identifies the host a plan was made for.
type HostBrief struct {
	Hostname string `json:"hostname,omitempty"`
	Kernel   string `json:"kernel"`
	Source   string `json:"source"`
}

// Options narrows a plan.
type Options struct {
	// Ifaces are the interfaces qdisc, route, autorate and mss settings
	// apply to. Empty: the interfaces carrying a default route.
	Ifaces []string
	// ReserveCPUs are CPUs kept for the application (--reserve-cpus): no
	// interrupt is placed on them or on their SMT siblings.
	ReserveCPUs []int
}

// Counts summarises a plan.
func (p *Plan) Counts() (set, ok, skip int) {
	for _, c := range p.Changes {
		switch c.Action {
		case Set:
			set++
		case OK:
			ok++
		default:
			skip++
		}
	}
	return
}

// ToApply returns the rows that will be written, in apply order.
func (p *Plan) ToApply() []Change {
	var out []Change
	for _, c := range p.Changes {
		if c.Action == Set {
			out = append(out, c)
		}
	}
	return out
}

// Make computes the plan.
func Make(f *host.Facts, r *profile.Resolved, opts Options) (*Plan, error) {
	ifaces, err := targetIfaces(f, opts.Ifaces)
	if err != nil {
		return nil, err
	}
	p := &Plan{Profile: r.Name, Chain: r.Chain, Params: r.Params, Ifaces: names(ifaces), Changes: []Change{},
		Host: HostBrief{Hostname: f.Hostname, Kernel: f.Kernel.Release, Source: f.Source}}
	// Device knobs first and sysctls last: a rollback runs in reverse, so
	// net.core.default_qdisc is restored before the qdiscs, and the kernel
	// re-attaches the original default kind when a root is deleted.
	var devs, sysctls []Change
	var policies, clamps []profile.Setting
	nic := nicSettings{}
	for _, s := range r.Settings {
		switch s.Section {
		case "autorate":
			policies = append(policies, s)
		case "mss":
			clamps = append(clamps, s)
		case "ethtool", "irq", "nvme", "cpu":
			nic[s.Key] = s
		case "sysctl":
			sysctls = append(sysctls, sysctlRow(f, s))
		case "qdisc":
			for _, ifc := range ifaces {
				if s.Name == "root" {
					devs = append(devs, rootRow(f, ifc, s))
				} else {
					devs = append(devs, ingressRow(f, ifc, s))
				}
			}
		case "route":
			devs = append(devs, routeRows(f, ifaces, s)...)
		case "sysfs":
			devs = append(devs, sysfsRow(f, s))
		case "sockets":
			devs = append(devs, socketRows(f, s)...)
		}
	}
	devs = withBPFFS(f, devs)
	// An autorate policy comes after the qdiscs: a rollback removes it,
	// stopping the daemon that moves the shaper's rate, before the qdisc
	// is restored.
	for _, s := range policies {
		devs = append(devs, autorateRows(f, ifaces, s, devs)...)
	}
	// The MSS clamp takes auto's rate from the shaper and policy rows.
	for _, s := range clamps {
		devs = append(devs, mssRows(f, ifaces, s, devs, policies)...)
	}
	// NIC, interrupt and storage knobs go first: a rollback restores them
	// last, after the qdiscs of the queues they created.
	nicDevs, nicSysctls, placement, err := nicRows(f, ifaces, nic, opts)
	if err != nil {
		return nil, err
	}
	p.Placement = placement
	devs = append(nicDevs, devs...)
	sysctls = append(sysctls, nicSysctls...)
	p.Changes = append(append(p.Changes, devs...), sysctls...)
	bootOverrides(f, p.Changes)
	return p, nil
}

func names(ifs []*host.Interface) []string {
	out := []string{}
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	return out
}

// targetIfaces picks the interfaces device settings apply to.
func targetIfaces(f *host.Facts, want []string) ([]*host.Interface, error) {
	var out []*host.Interface
	if len(want) > 0 {
		for _, n := range want {
			ifc := f.Interface(n)
			if ifc == nil {
				var have []string
				for _, i := range f.Interfaces {
					have = append(have, i.Name)
				}
				return nil, fmt.Errorf("%w %q (this host has: %s)", ErrUnknownInterface, n, strings.Join(have, ", "))
			}
			out = append(out, ifc)
		}
		return out, nil
	}
	seen := map[string]bool{}
	for _, r := range f.Routes {
		if r.Dst == "default" && r.Table == 254 && r.Dev != "" && !seen[r.Dev] {
			if ifc := f.Interface(r.Dev); ifc != nil && !ifc.Loopback {
				seen[r.Dev] = true
				out = append(out, ifc)
			}
		}
	}
	if len(out) == 0 {
		for i := range f.Interfaces {
			ifc := &f.Interfaces[i]
			if ifc.Physical() && ifc.Up {
				out = append(out, ifc)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Index < out[j].Index })
	return out, nil
}

func row(s profile.Setting, id string) Change {
	return Change{Knob: id, Setting: s.Key, Reason: s.Why, Source: s.Source}
}

func (c *Change) unsupported(reason string) {
	c.Supported, c.Action, c.Reason = false, Skip, reason
}

// decide fills Action from current vs desired with the knob's own comparison.
func (c *Change) decide(satisfied bool) {
	c.Supported = true
	if satisfied {
		c.Action = OK
	} else {
		c.Action = Set
	}
}

func sysctlRow(f *host.Facts, s profile.Setting) Change {
	c := row(s, "sysctl/"+s.Name)
	c.Desired = knob.NormalizeSysctl(s.Value)
	cur, present := f.Sysctls[s.Name]
	if !present {
		c.Current = "-"
		if host.SysctlError(f, s.Name) != "" {
			c.Current = Unknown
		}
		c.unsupported(missingSysctl(f, s.Name))
		return c
	}
	c.Current = knob.NormalizeSysctl(cur)
	readOnly := slices.Contains(f.ReadOnlySysctls, s.Name)
	switch s.Name {
	case "net.ipv4.tcp_congestion_control":
		if why := congestionMissing(f, s.Value); why != "" {
			c.unsupported(why)
			return c
		}
		allowed := strings.Fields(f.Sysctls["net.ipv4.tcp_allowed_congestion_control"])
		if f.Netns == "other" && len(allowed) > 0 && !slices.Contains(allowed, s.Value) && c.Current != s.Value {
			c.unsupported(fmt.Sprintf("only the initial network namespace may select %s; this one may use %s (net.ipv4.tcp_allowed_congestion_control)", s.Value, strings.Join(allowed, ", ")))
			return c
		}
	case "net.core.default_qdisc":
		v, note, ok := firstSupportedKind(f, append([]string{s.Value}, s.Fallbacks...))
		if !ok {
			c.unsupported(note)
			return c
		}
		c.Desired, c.Note = v, note
	}
	if readOnly && c.Current != c.Desired {
		c.unsupported(s.Name + " is read-only in this network namespace: the kernel sets it for the whole host from the initial namespace")
		return c
	}
	c.decide(c.Current == c.Desired)
	return c
}

// removedSysctls are names runbooks still carry that newer kernels dropped.
var removedSysctls = map[string]string{
	"net.ipv4.tcp_tw_recycle":  "removed in Linux 4.12 (it broke clients behind NAT)",
	"net.ipv4.tcp_low_latency": "a no-op since Linux 4.14 and removed later",
}

// missingSysctl says why a sysctl is not in the facts: the read error on
// its path or a directory above it, or else the kernel does not have it.
func missingSysctl(f *host.Facts, name string) string {
	if e := host.SysctlError(f, name); e != "" {
		return fmt.Sprintf("%s could not be read (%s)", name, e)
	}
	if why, ok := removedSysctls[name]; ok {
		return name + " is " + why
	}
	if strings.HasPrefix(name, "net.netfilter.") {
		return name + " is absent: the conntrack module is not loaded"
	}
	return fmt.Sprintf("%s does not exist on kernel %s", name, orUnknown(f.Kernel.Release))
}

// orUnknown is s, or "unknown" for a fact that could not be read.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func congestionMissing(f *host.Facts, cc string) string {
	for _, a := range append(append([]string{}, f.Kernel.CongestionAvailable...), f.Kernel.CongestionModules...) {
		if a == cc {
			return ""
		}
	}
	have := strings.Join(f.Kernel.CongestionAvailable, " ")
	if cc == "bbr" && !f.Kernel.AtLeast(4, 9) {
		return fmt.Sprintf("BBR needs kernel 4.9 or newer; this is %s (available: %s)", f.Kernel.Release, have)
	}
	return fmt.Sprintf("kernel %s has no %s congestion control (available: %s; no tcp_%s module found)", f.Kernel.Release, cc, have, cc)
}

// qdiscSupport says whether the kernel can create kind.
func qdiscSupport(f *host.Facts, kind string) (bool, string) {
	switch kind {
	case "pfifo_fast", "mq", "noqueue":
		return true, ""
	}
	sup, known := f.Kernel.Qdiscs[kind]
	switch {
	case !known || sup == host.Unknown:
		return true, fmt.Sprintf("kernel support for %s is unproven (no kernel config found); apply will find out", kind)
	case sup.Usable():
		return true, ""
	}
	return false, fmt.Sprintf("kernel %s lacks the %s qdisc (sch_%s)", f.Kernel.Release, kind, kind)
}

func specKinds(s qdisc.Spec) []string {
	kinds := []string{s.Kind}
	if s.Leaf != nil {
		kinds = append(kinds, specKinds(*s.Leaf)...)
	}
	for _, c := range s.Children {
		kinds = append(kinds, specKinds(c)...)
	}
	return kinds
}

// firstSupportedKind picks the first value (a qdisc kind for default_qdisc)
// the kernel has.
func firstSupportedKind(f *host.Facts, values []string) (string, string, bool) {
	var missing []string
	for i, v := range values {
		ok, note := qdiscSupport(f, v)
		if ok {
			if i > 0 {
				note = strings.TrimSpace(fmt.Sprintf("fallback: %s; %s", strings.Join(missing, "; "), note))
				note = strings.TrimSuffix(note, "; ")
			}
			return v, note, true
		}
		missing = append(missing, note)
	}
	return "", strings.Join(missing, "; "), false
}

// chooseSpec picks the first of the setting's value and fallbacks whose qdisc
// kinds the kernel has.
func chooseSpec(f *host.Facts, s profile.Setting) (qdisc.Spec, string, bool) {
	var missing []string
	for i, v := range append([]string{s.Value}, s.Fallbacks...) {
		spec, err := qdisc.Parse(v)
		if err != nil {
			missing = append(missing, err.Error())
			continue
		}
		var notes []string
		ok := true
		for _, k := range specKinds(spec) {
			sup, note := qdiscSupport(f, k)
			if !sup {
				ok = false
				missing = append(missing, note)
				break
			}
			if note != "" {
				notes = append(notes, note)
			}
		}
		if !ok {
			continue
		}
		if i > 0 {
			notes = append([]string{"fallback, because " + strings.Join(missing, "; ")}, notes...)
		}
		return spec, strings.Join(notes, "; "), true
	}
	return qdisc.Spec{}, strings.Join(dedupe(missing), "; "), false
}

func dedupe(in []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range in {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// aqmKinds are queue disciplines without shaping: on a multi-queue device they
// go under mq, one per hardware queue, instead of funnelling every queue
// through one root lock.
var aqmKinds = map[string]bool{"fq_codel": true, "fq": true, "codel": true, "pfifo_fast": true, "sfq": true, "pfifo": true, "bfifo": true}

// RootSpec is the interface's root configuration as the qdisc knob reads it.
func RootSpec(ifc *host.Interface) qdisc.Spec {
	if ifc.Root != nil && ifc.Root.Spec != "" {
		if s, err := qdisc.Parse(ifc.Root.Spec); err == nil {
			return s
		}
	}
	var entries []qdisc.Entry
	add := func(q host.Qdisc) {
		h, _ := qdisc.ParseHandle(q.Handle)
		p, _ := qdisc.ParseHandle(q.Parent)
		opts := map[string]string{}
		// Keep only options the kind defines (captures carry tc's extras such
		// as pfifo_fast's fixed priomap).
		for k, v := range q.Options {
			if qdisc.HasOption(q.Kind, k) {
				opts[k] = v
			}
		}
		if len(opts) == 0 {
			opts = nil
		}
		entries = append(entries, qdisc.Entry{Handle: h, Parent: p, Spec: qdisc.Spec{Kind: q.Kind, Opts: opts, Unmanaged: !qdisc.Known(q.Kind)}})
	}
	if ifc.Root != nil {
		add(*ifc.Root)
	}
	for _, c := range ifc.Children {
		add(c)
	}
	return qdisc.Assemble(entries, nil, ifc.Up).Root
}

// qdiscsUnknown says why the facts do not know an interface's qdiscs (the
// netlink dump failed, or there was no netlink at all), or "".
func qdiscsUnknown(f *host.Facts, ifc *host.Interface) string {
	for _, src := range []string{"netlink:qdiscs", "netlink:links"} {
		if e := f.ErrorFor(src); e != "" {
			return fmt.Sprintf("the qdiscs of %s could not be read (%s: %s)", ifc.Name, src, e)
		}
	}
	return ""
}

func rootRow(f *host.Facts, ifc *host.Interface, s profile.Setting) Change {
	c := row(s, "qdisc/"+ifc.Name+"/root")
	cur := RootSpec(ifc)
	c.Current = cur.String()
	spec, note, ok := chooseSpec(f, s)
	c.Desired = s.Value
	if why := qdiscsUnknown(f, ifc); why != "" {
		// The knob needs the current root: lowlat replaces only a tree it
		// has seen (never another tool's, below).
		c.Current = Unknown
		if ok {
			c.Desired = spec.String()
		}
		c.unsupported(why + ": lowlat replaces a root qdisc only after reading it")
		return c
	}
	if !ok {
		c.unsupported(note)
		return c
	}
	if aqmKinds[spec.Kind] && ifc.NumTxQueues > 1 {
		spec = qdisc.Spec{Kind: "mq", Children: []qdisc.Spec{spec}}
	}
	c.Desired, c.Note = spec.String(), note
	if cur.Unmanaged {
		c.unsupported(fmt.Sprintf("%s has a qdisc tree lowlat did not make and could not restore (%s); remove it or plan another interface", ifc.Name, cur))
		return c
	}
	c.decide(qdisc.Satisfies(cur, spec))
	if c.Action == Set {
		if note, ok := autorateMoved(f, ifc.Name, c.Current, c.Desired); ok {
			c.Action, c.Note = OK, joinNotes(c.Note, note)
		}
	}
	return c
}

func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// IngressValue is the interface's ingress knob value as the knob reads it.
func IngressValue(f *host.Facts, ifc *host.Interface) string {
	if ifc.Ingress == nil {
		return knob.Absent
	}
	if ifb := f.Interface(knob.IFBName(ifc.Name)); ifb != nil {
		return RootSpec(ifb).String()
	}
	return "ingress @unmanaged"
}

func ingressRow(f *host.Facts, ifc *host.Interface, s profile.Setting) Change {
	c := row(s, "qdisc/"+ifc.Name+"/ingress")
	c.Current = IngressValue(f, ifc)
	if why := qdiscsUnknown(f, ifc); why != "" {
		c.Current, c.Desired = Unknown, s.Value
		c.unsupported(why + ": lowlat sets up ingress shaping only after reading the ingress qdisc")
		return c
	}
	if s.Value == "none" {
		c.Desired = knob.Absent
		c.decide(c.Current == knob.Absent)
		return c
	}
	c.Desired = s.Value
	for _, cfg := range []string{"CONFIG_IFB", "CONFIG_NET_CLS_U32", "CONFIG_NET_ACT_MIRRED"} {
		if v, ok := f.Kernel.Config[cfg]; ok && v != "y" && v != "m" {
			c.unsupported(fmt.Sprintf("ingress shaping needs %s, which kernel %s lacks", cfg, f.Kernel.Release))
			return c
		}
	}
	if ok, note := qdiscSupport(f, "ingress"); !ok {
		c.unsupported(note)
		return c
	}
	spec, note, ok := chooseSpec(f, s)
	if !ok {
		c.unsupported(note)
		return c
	}
	c.Desired, c.Note = spec.String(), note
	if c.Current == "ingress @unmanaged" {
		c.unsupported(ifc.Name + " already has an ingress qdisc lowlat did not set up; lowlat will not replace it")
		return c
	}
	c.decide(knob.QdiscSatisfied(c.Current, c.Desired))
	return c
}

// routeDst is the destination part of a route knob ID.
func routeDst(r host.Route) string {
	if r.Dst == "default" && r.Family == "inet6" {
		return "::/0"
	}
	return r.Dst
}

func routeRows(f *host.Facts, ifaces []*host.Interface, s profile.Setting) []Change {
	want := map[string]bool{}
	for _, i := range ifaces {
		want[i.Name] = true
	}
	// Routes sharing a destination in a table are told apart by metric.
	count := map[string]int{}
	for _, r := range f.Routes {
		count[fmt.Sprint(r.Table, routeDst(r))]++
	}
	var out []Change
	if e := f.ErrorFor("netlink:routes"); e != "" {
		c := row(s, "route/*/"+s.Name)
		c.Current, c.Desired = Unknown, s.Value
		c.unsupported("the routes could not be read (netlink:routes: " + e + ")")
		return []Change{c}
	}
	for _, r := range f.Routes {
		if !want[r.Dev] || !tunable(r) {
			continue
		}
		dst := routeDst(r)
		if count[fmt.Sprint(r.Table, dst)] > 1 {
			dst += "@" + strconv.Itoa(r.Priority)
		}
		c := row(s, knob.RouteID(dst, r.Table, s.Name))
		cur := map[string]int{"initcwnd": r.InitCwnd, "initrwnd": r.InitRwnd, "quickack": r.QuickACK}[s.Name]
		c.Current = strconv.Itoa(cur)
		c.Desired = s.Value
		c.decide(c.Current == c.Desired)
		out = append(out, c)
	}
	if len(out) == 0 {
		c := row(s, "route/*/"+s.Name)
		c.Current, c.Desired = "-", s.Value
		c.unsupported("no tunable unicast routes via " + strings.Join(names(ifaces), ", "))
		out = append(out, c)
	}
	return out
}

func tunable(r host.Route) bool {
	if r.Type != "" && r.Type != "unicast" {
		return false
	}
	if r.Table == 255 || r.Protocol == "ra" {
		return false
	}
	return !(r.Family == "inet6" && strings.HasPrefix(r.Dst, "fe80:"))
}

func sysfsRow(f *host.Facts, s profile.Setting) Change {
	c := row(s, "sysfs/"+s.Name)
	c.Desired = s.Value
	cur, ok := f.Sysfs[s.Name]
	if !ok {
		c.Current = "-"
		p := "/sys/" + s.Name
		if e := f.ErrorAt(p); e != "" {
			c.Current = Unknown
			c.unsupported(fmt.Sprintf("%s could not be read (%s)", p, e))
			return c
		}
		c.unsupported(fmt.Sprintf("%s does not exist on this host", p))
		return c
	}
	c.Current = cur
	c.decide(strings.TrimSpace(cur) == strings.TrimSpace(s.Value))
	// sysfs settings (THP, ...) belong to the whole host, not to a network
	// namespace.
	if f.Netns == "other" && c.Action == Set {
		c.hostWide()
	}
	return c
}

// hostWide marks a row the plan must not change because it was made inside a
// network namespace other than the host's (a container, the lab, a test) and
// the knob belongs to the whole host.
func (c *Change) hostWide() {
	c.unsupported(c.Knob + " is host-wide and this plan is for a network namespace other than the host's: run lowlat in the host's namespace to change it")
}
