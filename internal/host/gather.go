package host

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/version"
)

// Source says where Gather reads a host from: files through Root, links,
// qdiscs and routes through Netlink, NIC settings through Ethtool. Netlink and
// Ethtool may be nil: then interfaces come from sysfs alone and the missing
// facts are recorded as errors.
type Source struct {
	Root    Root
	Netlink Netlink
	Ethtool Ethtooler
	// Live marks the running host (Facts.Source "live"). Root.Dir is normally
	// "" then; live-only checks such as pidfd run only when Root is the live
	// root.
	Live bool
	// Sockets asks for the live socket audit (Facts.Sockets: TCP_NODELAY and
	// tcp_info per process). Doctor and capture want it; plan, apply and
	// status do not, and skip its cost (0.2 s with 10,000 sockets).
	Sockets bool
}

// OpenRoot returns the Source for a captured or fixture tree at dir: its files,
// and, when dir holds a lowlat-netlink.json, that file standing in for netlink
// and ethtool. For "" or "/" it returns the running host with the live
// rtnetlink and ethtool readers.
func OpenRoot(dir string) (Source, error) {
	r := NewRoot(dir)
	if r.Live() {
		nl, et := liveReaders()
		return Source{Root: Root{}, Netlink: nl, Ethtool: et, Live: true}, nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return Source{}, fmt.Errorf("root %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return Source{}, fmt.Errorf("root %s: not a directory", dir)
	}
	src := Source{Root: r}
	nl, err := LoadStaticNetlink(filepath.Join(dir, NetlinkFile))
	switch {
	case err == nil:
		src.Netlink, src.Ethtool = nl, nl
	case errors.Is(err, os.ErrNotExist):
	default:
		return Source{}, err
	}
	return src, nil
}

// Gather reads everything lowlat knows about a host. It does not fail because
// one source is unreadable: that source is recorded in Facts.Errors and the
// rest is gathered. The error is only for a cancelled context.
func Gather(ctx context.Context, src Source) (*Facts, error) {
	f := &Facts{
		Schema:     SchemaVersion,
		Tool:       version.String(),
		CapturedAt: time.Now().UTC(),
		Sysctls:    map[string]string{},
		Sysfs:      Sysfs{},
	}
	switch {
	case src.Live || src.Root.Live():
		f.Source = "live"
		f.Netns = netnsKind()
	default:
		f.Source = "root:" + src.Root.Dir
	}
	// Links are read first so the file readers know the interface set and the
	// qdiscs in use count as kernel-support evidence.
	gatherNetlink(f, src.Netlink)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rd := &fileReader{r: src.Root, f: f}
	rd.readAll()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	gatherEthtool(ctx, f, src.Ethtool)
	rd.flush()
	if src.Sockets || !(src.Live || src.Root.Live()) {
		gatherSockets(ctx, f, src)
	}
	if f.Netns == "" {
		f.Netns = netnsFromSysctls(f.Sysctls)
	}
	return f, ctx.Err()
}

func gatherNetlink(f *Facts, nl Netlink) {
	if nl == nil {
		for _, s := range []string{"netlink:links", "netlink:qdiscs", "netlink:routes"} {
			f.Errors = append(f.Errors, FactError{Source: s, Err: "no netlink reader"})
		}
		return
	}
	links, err := nl.Links()
	if err != nil {
		f.Errors = append(f.Errors, FactError{Source: "netlink:links", Err: err.Error()})
	}
	for _, l := range links {
		f.Interfaces = append(f.Interfaces, Interface{
			Name: l.Name, Index: l.Index, Kind: l.Kind, MTU: l.MTU, TxQueueLen: l.TxQueueLen,
			NumTxQueues: l.NumTxQueues, NumRxQueues: l.NumRxQueues, OperState: l.OperState,
			Up: l.Up, Loopback: l.Loopback, MAC: l.MAC, NUMANode: -1,
		})
	}
	sortInterfaces(f.Interfaces)
	qds, err := nl.Qdiscs()
	if err != nil {
		f.Errors = append(f.Errors, FactError{Source: "netlink:qdiscs", Err: err.Error()})
	}
	attachQdiscs(f, qds)
	routes, err := nl.Routes()
	if err != nil {
		f.Errors = append(f.Errors, FactError{Source: "netlink:routes", Err: err.Error()})
	}
	f.Routes = append([]Route(nil), routes...)
	SortRoutes(f.Routes)
}

// attachQdiscs hangs each qdisc on its interface: the root, the ingress or
// clsact qdisc, and everything else as a child of the root (mq's per-queue
// qdiscs, a shaper's leaves), children ordered by parent then handle.
func attachQdiscs(f *Facts, qds []LinkQdisc) {
	byIndex := map[int]*Interface{}
	for i := range f.Interfaces {
		byIndex[f.Interfaces[i].Index] = &f.Interfaces[i]
	}
	for _, lq := range qds {
		ifc := byIndex[lq.Ifindex]
		if ifc == nil {
			continue
		}
		q := lq.Qdisc
		switch {
		case q.Parent == "root":
			ifc.Root = &q
		case q.Kind == "ingress" || q.Kind == "clsact" || q.Parent == "ffff:fff1":
			ifc.Ingress = &q
		default:
			ifc.Children = append(ifc.Children, q)
		}
	}
	for i := range f.Interfaces {
		slices.SortStableFunc(f.Interfaces[i].Children, func(a, b Qdisc) int {
			if c := cmpHandle(a.Parent, b.Parent); c != 0 {
				return c
			}
			return cmpHandle(a.Handle, b.Handle)
		})
	}
}

// cmpHandle orders tc handles "major:minor" numerically (":2" before ":10").
func cmpHandle(a, b string) int {
	amaj, amin := splitHandle(a)
	bmaj, bmin := splitHandle(b)
	if c := cmp.Compare(amaj, bmaj); c != 0 {
		return c
	}
	if c := cmp.Compare(amin, bmin); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func splitHandle(h string) (uint64, uint64) {
	maj, min, _ := strings.Cut(h, ":")
	a, _ := strconv.ParseUint(maj, 16, 32)
	b, _ := strconv.ParseUint(min, 16, 32)
	return a, b
}

// SortRoutes orders routes by table, family (inet first), destination
// (default first, then by address and prefix length), priority and device, so
// facts and their golden files are stable.
func SortRoutes(rs []Route) {
	sort.SliceStable(rs, func(i, j int) bool {
		a, b := rs[i], rs[j]
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if c := cmpDst(a.Dst, b.Dst); c != 0 {
			return c < 0
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		return a.Dev < b.Dev
	})
}

func cmpDst(a, b string) int {
	if a == b {
		return 0
	}
	if a == "default" {
		return -1
	}
	if b == "default" {
		return 1
	}
	pa, erra := parsePrefix(a)
	pb, errb := parsePrefix(b)
	if erra != nil || errb != nil {
		return strings.Compare(a, b)
	}
	if c := pa.Addr().Compare(pb.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(pa.Bits(), pb.Bits())
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// gatherEthtool asks ethtool about each non-loopback interface. A driver that
// answers nothing (nil) is normal; an error, or having no ethtool reader at
// all, is recorded per interface.
func gatherEthtool(ctx context.Context, f *Facts, et Ethtooler) {
	for i := range f.Interfaces {
		ifc := &f.Interfaces[i]
		if ifc.Loopback || ctx.Err() != nil {
			continue
		}
		if et == nil {
			// A tree without a netlink record: its NIC settings are
			// unknown, which is not the same as a driver that has none.
			f.Errors = append(f.Errors, FactError{Source: "ethtool:" + ifc.Name, Err: "no ethtool reader"})
			continue
		}
		e, err := et.Ethtool(ifc.Name)
		if err != nil {
			f.Errors = append(f.Errors, FactError{Source: "ethtool:" + ifc.Name, Err: err.Error()})
			continue
		}
		ifc.Ethtool = e
		if e != nil && ifc.BusInfo == "" {
			ifc.BusInfo = e.BusInfo
		}
	}
}

// netnsFromSysctls tells the initial network namespace from others by a sysctl
// the kernel registers only in the initial one (net.core.netdev_max_backlog,
// global since namespaces exist). It works on captures too, and where reading
// pid 1's namespace link is not allowed.
func netnsFromSysctls(s map[string]string) string {
	if len(s) == 0 {
		return ""
	}
	if _, ok := s["net.core.netdev_max_backlog"]; ok {
		return "init"
	}
	if _, ok := s["net.core.somaxconn"]; ok {
		return "other"
	}
	return ""
}
