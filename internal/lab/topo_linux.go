//go:build linux

package lab

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/vishvananda/netlink"
)

// Topology is a built lab network: three namespaces joined by two veth pairs.
type Topology struct {
	ID                       string
	Client, Provider, Server *NS
	Spec                     TopoSpec
	// Missing lists kernel features the spec asked for that this kernel
	// lacks; the network was built without them (Notes say how).
	Missing []string
	Notes   []string
	// Congestion is the congestion control the namespaces actually use.
	Congestion string
	// Routers are the chain's routers after the provider (path-hops).
	Routers []*NS
	// Netem says the chain's queue and ECMP delay are netem's (path-hops).
	Netem bool

	st *state
}

// roles in namespace-name order.
var roles = []string{"client", "provider", "server"}

// nsName is the name of a run's namespace for a role.
func nsName(id, role string) string { return NSPrefix + id + "-" + role }

// build creates the namespaces and links of spec for a registered run. On
// error everything it made is removed again.
func build(ctx context.Context, st *state, spec TopoSpec) (t *Topology, err error) {
	t = &Topology{ID: st.ID, Spec: spec, st: st}
	if err := namesFree(st, roles); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			t.close()
			t = nil
		}
	}()
	for _, r := range roles {
		ns, err := makeNS(st, r)
		if err != nil {
			return t, err
		}
		switch r {
		case "client":
			t.Client = ns
		case "provider":
			t.Provider = ns
		case "server":
			t.Server = ns
		}
		if err := ctx.Err(); err != nil {
			return t, err
		}
	}
	for _, ns := range t.all() {
		if err := ns.Do(baseSysctls); err != nil {
			return t, fmt.Errorf("lab: %s: %w", ns.Name, err)
		}
	}
	if err := t.Provider.Do(func() error { return writeSysctl("net.ipv4.ip_forward", "1") }); err != nil {
		return t, fmt.Errorf("lab: %s: %w", t.Provider.Name, err)
	}
	if err := veth(t.Client, ClientIf, t.Provider, ProviderCIf); err != nil {
		return t, err
	}
	if err := veth(t.Provider, ProviderSIf, t.Server, ServerIf); err != nil {
		return t, err
	}
	if err := t.Client.Do(func() error { return addrRoute(ClientIf, ClientAddr+"/24", ProviderCAddr) }); err != nil {
		return t, fmt.Errorf("lab: %s: %w", t.Client.Name, err)
	}
	if err := t.Server.Do(func() error { return addrRoute(ServerIf, ServerAddr+"/24", ProviderSAddr) }); err != nil {
		return t, fmt.Errorf("lab: %s: %w", t.Server.Name, err)
	}
	if err := t.Provider.Do(func() error {
		if err := addrRoute(ProviderCIf, ProviderCAddr+"/24", ""); err != nil {
			return err
		}
		return addrRoute(ProviderSIf, ProviderSAddr+"/24", "")
	}); err != nil {
		return t, fmt.Errorf("lab: %s: %w", t.Provider.Name, err)
	}
	if err := t.emulate(); err != nil {
		return t, err
	}
	if err := t.setCongestion(spec.Congestion); err != nil {
		return t, err
	}
	return t, nil
}

// namesFree fails when one of the run's namespace names for roles exists.
func namesFree(st *state, roles []string) error {
	for _, r := range roles {
		if _, err := os.Lstat(filepath.Join(NetnsDir, nsName(st.ID, r))); err == nil {
			return fmt.Errorf("lab: netns %s: %w (a previous run? 'lowlat lab clean' removes lab leftovers)", nsName(st.ID, r), ErrNameTaken)
		}
	}
	return nil
}

// makeNS creates the run's namespace for role, registered in the state
// before it exists, so a crash right after creation still leaves a record
// for Clean.
func makeNS(st *state, role string) (*NS, error) {
	name := nsName(st.ID, role)
	if !contains(st.Namespaces, name) {
		st.Namespaces = append(st.Namespaces, name)
		if err := st.save(); err != nil {
			return nil, err
		}
	}
	ns, err := createNS(name)
	if err != nil {
		if errors.Is(err, ErrNameTaken) {
			// Someone else's: forget it so nobody deletes it on our behalf.
			st.Namespaces = slices.DeleteFunc(st.Namespaces, func(n string) bool { return n == name })
			_ = st.save()
		}
		return nil, fmt.Errorf("lab: %w", err)
	}
	return ns, nil
}

func (t *Topology) all() []*NS {
	var out []*NS
	for _, ns := range append([]*NS{t.Client, t.Provider, t.Server}, t.Routers...) {
		if ns != nil {
			out = append(out, ns)
		}
	}
	return out
}

// close removes the namespaces; the kernel removes their veths, ifbs and
// qdiscs with them. It keeps going after an error.
func (t *Topology) close() error {
	if t == nil {
		return nil
	}
	var errs []string
	for _, ns := range t.all() {
		if err := ns.close(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	t.Client, t.Provider, t.Server, t.Routers = nil, nil, nil, nil
	if len(errs) > 0 {
		return fmt.Errorf("lab: %s", strings.Join(errs, "; "))
	}
	return nil
}

// baseSysctls makes a fresh namespace quiet and reproducible: IPv4 only (no
// IPv6 addresses appearing asynchronously), lo up, and no TCP metrics cache
// (a later connection must not inherit an earlier one's ssthresh).
func baseSysctls() error {
	for _, kv := range [][2]string{
		{"net.ipv6.conf.all.disable_ipv6", "1"},
		{"net.ipv6.conf.default.disable_ipv6", "1"},
		{"net.ipv4.tcp_no_metrics_save", "1"},
	} {
		if err := writeSysctl(kv[0], kv[1]); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("lo up: %w", err)
	}
	return nil
}

// writeSysctl writes a sysctl of the calling thread's network namespace.
func writeSysctl(name, value string) error {
	p := host.SysctlPath(name)
	if err := os.WriteFile(p, []byte(value), 0); err != nil {
		return fmt.Errorf("sysctl %s: write %q: %w", name, value, err)
	}
	return nil
}

func readSysctl(name string) (string, error) {
	b, err := os.ReadFile(host.SysctlPath(name))
	if err != nil {
		return "", fmt.Errorf("sysctl %s: %w", name, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// veth creates the pair a (in na) and b (in nb) from inside na, so neither
// end ever exists in the host's namespace, and brings both up.
func veth(na *NS, a string, nb *NS, b string) error {
	if err := na.Do(func() error {
		v := &netlink.Veth{
			LinkAttrs:       netlink.LinkAttrs{Name: a, TxQLen: 1000},
			PeerName:        b,
			PeerNamespace:   netlink.NsFd(nb.handle),
			PeerNumTxQueues: 1, PeerNumRxQueues: 1,
		}
		v.NumTxQueues, v.NumRxQueues = 1, 1
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", a, b, err)
		}
		l, err := netlink.LinkByName(a)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		return fmt.Errorf("lab: %s: %w", na.Name, err)
	}
	return nb.Do(func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return fmt.Errorf("lab: %s: veth peer %s: %w", nb.Name, b, err)
		}
		return netlink.LinkSetUp(l)
	})
}

// addrRoute puts cidr on dev and, with gw, a default route through it.
func addrRoute(dev, cidr, gw string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("%s: %w", dev, err)
	}
	a, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(l, a); err != nil {
		return fmt.Errorf("address %s on %s: %w", cidr, dev, err)
	}
	if gw == "" {
		return nil
	}
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Gw: net.ParseIP(gw)}
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("default route via %s on %s: %w", gw, dev, err)
	}
	return nil
}

// probeQdisc reports whether the kernel can create kind, trying it on dev in
// the calling thread's namespace.
func probeQdisc(dev, kind string) error {
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	return qdisc.Probe(l.Attrs().Index, kind)
}

// applyQdisc replaces dev's root with spec (in the calling namespace).
func applyQdisc(dev, spec string) error {
	s, err := qdisc.Parse(spec)
	if err != nil {
		return fmt.Errorf("qdisc %q: %w", spec, err)
	}
	l, err := netlink.LinkByName(dev)
	if err != nil {
		return err
	}
	if err := qdisc.Apply(l.Attrs().Index, s, l.Attrs().NumTxQueues); err != nil {
		return fmt.Errorf("%s root %s: %w", dev, spec, err)
	}
	return nil
}

// emulate installs the provider's link emulation and the server's NIC.
func (t *Topology) emulate() error {
	noNetem := false
	if t.Spec.Up.needsNetem() || t.Spec.Down.needsNetem() {
		if err := t.Provider.Do(func() error { return probeQdisc(ProviderSIf, "netem") }); err != nil {
			noNetem = true
			t.Missing = append(t.Missing, "netem")
			t.Notes = append(t.Notes, fmt.Sprintf("no netem on this kernel (%v): the provider adds no delay, jitter or loss (asked: up %s; down %s)", err, t.Spec.Up, t.Spec.Down))
		}
	}
	if err := t.Provider.Do(func() error {
		for _, d := range []struct {
			dev  string
			path Path
		}{{ProviderSIf, t.Spec.Up}, {ProviderCIf, t.Spec.Down}} {
			spec, err := d.path.spec(noNetem)
			if err != nil {
				return err
			}
			if spec == "" {
				continue
			}
			if err := applyQdisc(d.dev, spec); err != nil {
				return fmt.Errorf("lab: provider: %w", err)
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := t.applyNIC(""); err != nil {
		return fmt.Errorf("lab: server nic: %w", err)
	}
	return nil
}

// applyNIC sets the server NIC's wire with the given leaf ("" = its
// starting queue).
func (t *Topology) applyNIC(leaf string) error {
	if t.Spec.ServerNIC == nil {
		return nil
	}
	spec, err := t.Spec.ServerNIC.spec(leaf)
	if err != nil {
		return err
	}
	return t.Server.Do(func() error { return applyQdisc(ServerIf, spec) })
}

// setCongestion gives every namespace the congestion control the scenario
// starts from. Namespaces other than the first may only pick algorithms in
// the host's net.ipv4.tcp_allowed_congestion_control (and reno); the lab
// never changes that host-wide list, so reno stands in for cubic when needed.
func (t *Topology) setCongestion(want string) error {
	if want == "" {
		want = "cubic"
	}
	got := want
	for _, ns := range t.all() {
		err := ns.Do(func() error { return writeSysctl("net.ipv4.tcp_congestion_control", want) })
		if err != nil && want != "reno" {
			allowed := ""
			_ = ns.Do(func() error { allowed, _ = readSysctl("net.ipv4.tcp_allowed_congestion_control"); return nil })
			got = "reno"
			err = ns.Do(func() error { return writeSysctl("net.ipv4.tcp_congestion_control", "reno") })
			if err == nil && !contains(t.Notes, congestionNote(want, allowed)) {
				t.Notes = append(t.Notes, congestionNote(want, allowed))
			}
		}
		if err != nil {
			return fmt.Errorf("lab: %s: %w", ns.Name, err)
		}
	}
	t.Congestion = got
	return nil
}

func congestionNote(want, allowed string) string {
	return fmt.Sprintf("the senders start with reno instead of %s: this host lets network namespaces choose only %q (net.ipv4.tcp_allowed_congestion_control, set for the whole host; the lab does not change it)", want, allowed)
}

// rxStats is what an interface received over a span.
type rxStats struct {
	// Mbps counts whole frames; PayloadMbps takes 66 bytes of Ethernet, IP
	// and TCP (with timestamps) headers off each frame: the TCP payload when
	// almost every frame is a data segment.
	Mbps, PayloadMbps float64
}

// rxRate reads dev's receive counters in the namespace after from, and
// again after span more, and sends the rates (zero when cancelled or
// unreadable).
func (n *NS) rxRate(ctx context.Context, dev string, from, span time.Duration) <-chan rxStats {
	out := make(chan rxStats, 1)
	read := func() (uint64, uint64, time.Time, bool) {
		var b, p uint64
		err := n.Do(func() error {
			l, err := netlink.LinkByName(dev)
			if err != nil {
				return err
			}
			if st := l.Attrs().Statistics; st != nil {
				b, p = st.RxBytes, st.RxPackets
			}
			return nil
		})
		return b, p, time.Now(), err == nil
	}
	go func() {
		wait := func(d time.Duration) bool {
			select {
			case <-ctx.Done():
				return false
			case <-time.After(d):
				return true
			}
		}
		if span <= 0 || !wait(from) {
			out <- rxStats{}
			return
		}
		b0, p0, t0, ok0 := read()
		if !wait(span) {
			out <- rxStats{}
			return
		}
		b1, p1, t1, ok1 := read()
		if !ok0 || !ok1 || b1 < b0 || p1 < p0 {
			out <- rxStats{}
			return
		}
		secs := t1.Sub(t0).Seconds()
		payload := float64(b1-b0) - 66*float64(p1-p0)
		out <- rxStats{Mbps: round3(float64(b1-b0) * 8 / 1e6 / secs), PayloadMbps: round3(max(payload, 0) * 8 / 1e6 / secs)}
	}()
	return out
}
