package hostgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
)

// WriteTree writes the host's tree and its lowlat-netlink.json into dir,
// which must not exist or be empty.
func (s *Spec) WriteTree(dir string) error {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("hostgen %s: %s is not empty", s.Name, dir)
	}
	g, err := s.build()
	if err != nil {
		return err
	}
	if err := g.t.write(dir); err != nil {
		return fmt.Errorf("hostgen %s: %w", s.Name, err)
	}
	b, err := json.MarshalIndent(&g.nl, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, host.NetlinkFile), append(b, '\n'), 0o644)
}

// Facts generates the host and gathers it, the way lowlat would read the same
// host captured with --root. The tree stays in memory (host.MemTree), so a
// 256-CPU host costs no disk writes.
func (s *Spec) Facts() (*host.Facts, error) { return s.facts(nil) }

// facts is Facts with the gather source changed by rewire (when not nil).
func (s *Spec) facts(rewire func(*host.Source)) (*host.Facts, error) {
	src, err := s.Source()
	if err != nil {
		return nil, err
	}
	if rewire != nil {
		rewire(&src)
	}
	f, err := host.Gather(context.Background(), src)
	if err != nil {
		return nil, err
	}
	f.Source = "hostgen:" + s.Name
	return f, nil
}

// Edited gathers the host after edit (when not nil) changed its spec, and
// fails the test when it cannot: for tests that take one thing away from a
// generated host and look at what lowlat then says.
func (s *Spec) Edited(t testing.TB, edit func(*Spec)) *host.Facts {
	t.Helper()
	if edit != nil {
		edit(s)
	}
	return s.Rewired(t, nil)
}

// Rewired gathers the host after rewire (when not nil) changed its gather
// source, and fails the test when it cannot: for tests whose netlink or
// ethtool fails, or is not there at all.
func (s *Spec) Rewired(t testing.TB, rewire func(*host.Source)) *host.Facts {
	t.Helper()
	f, err := s.facts(rewire)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Source generates the host into memory and returns it as a gather Source:
// the tree as a Root and the netlink/ethtool stand-in.
func (s *Spec) Source() (host.Source, error) {
	g, err := s.build()
	if err != nil {
		return host.Source{}, err
	}
	m := host.NewMemTree()
	for d := range g.t.dirs {
		m.Mkdir(d)
	}
	for p, b := range g.t.files {
		m.WriteFile(p, b)
	}
	for p, target := range g.t.links {
		m.Symlink(target, p)
	}
	nl := g.nl
	return host.Source{Root: m.Root(), Netlink: &nl, Ethtool: &nl}, nil
}

// tree is a filesystem being built in memory.
type tree struct {
	files map[string][]byte
	links map[string]string
	dirs  map[string]bool
}

func (t *tree) file(p string, format string, args ...any) {
	t.files[p] = fmt.Appendf(nil, format, args...)
}

func (t *tree) raw(p string, b []byte) { t.files[p] = b }

// link makes p a symlink to host path target, stored relative like sysfs does.
func (t *tree) link(p, target string) {
	rel, err := filepath.Rel(path.Dir(p), target)
	if err != nil {
		panic(err)
	}
	t.links[p] = rel
}

func (t *tree) dir(p string) { t.dirs[p] = true }

func (t *tree) write(dst string) error {
	osPath := func(p string) string { return filepath.Join(dst, filepath.FromSlash(p)) }
	keys := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	made := map[string]bool{}
	mkdir := func(d string) error {
		if made[d] {
			return nil
		}
		made[d] = true
		return os.MkdirAll(osPath(d), 0o755)
	}
	for _, d := range keys(t.dirs) {
		if err := mkdir(d); err != nil {
			return err
		}
	}
	for p, b := range t.files {
		if err := mkdir(path.Dir(p)); err != nil {
			return err
		}
		if err := os.WriteFile(osPath(p), b, 0o644); err != nil {
			return err
		}
	}
	for p, target := range t.links {
		if err := mkdir(path.Dir(p)); err != nil {
			return err
		}
		if err := os.Symlink(target, osPath(p)); err != nil {
			return err
		}
	}
	return nil
}

// cpu is one logical CPU of the model.
type cpu struct {
	id, socket, core, coreID, thread, node int
}

// irq is one interrupt of the model.
type irq struct {
	num  int
	name string
	chip string
	// hwirq is "N-flow" since 4.x; 3.10 prints no hwirq, only "chip-flow".
	hwirq, flow string
	affinity    []int
	effective   []int
	node        int
	total       uint64
	// shown is false for vectors allocated but never requested (queues of a
	// down i40e port): listed in msi_irqs, absent from /proc/interrupts.
	shown bool
}

type gen struct {
	s          *Spec
	t          *tree
	rng        *rand.Rand
	major      int
	minor      int
	cpus       []cpu
	nodes      [][]int
	irqs       []*irq
	nextIRQ    int
	nl         host.StaticNetlink
	ifindex    int
	nicRx      map[int]uint64 // NET_RX work per CPU
	ioCPU      map[int]uint64 // block completions per CPU
	nrCPUs     int
	sysctls    map[string]string
	ifaceNames []string
}

func (s *Spec) build() (*gen, error) {
	maj, min, _, err := host.ParseKernelRelease(s.Kernel.Release)
	if err != nil {
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(s.Name))
	g := &gen{
		s:     s,
		t:     &tree{files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{}},
		rng:   rand.New(rand.NewPCG(h.Sum64(), 2026)),
		major: maj, minor: min,
		nicRx: map[int]uint64{},
		ioCPU: map[int]uint64{},
	}
	if err := g.topology(); err != nil {
		return nil, err
	}
	g.legacyIRQs()
	g.loopback()
	for i := range s.NICs {
		g.nic(&s.NICs[i])
	}
	for i := range s.NVMe {
		g.nvme(&s.NVMe[i])
	}
	for i := range s.SATA {
		g.sata(&s.SATA[i])
	}
	g.procIRQ()
	g.interrupts()
	g.softirqs()
	g.softnet()
	g.snmp()
	g.sysctl()
	g.kernel()
	g.misc()
	g.nl.RouteList = append([]host.Route(nil), s.Routes...)
	g.t.edit(s.Remove, s.Files)
	return g, nil
}

// edit applies a Spec's Remove and Files to the generated tree.
func (t *tree) edit(remove []string, files map[string]string) {
	for _, top := range remove {
		under := func(p string) bool { return p == top || strings.HasPrefix(p, top+"/") }
		maps.DeleteFunc(t.files, func(p string, _ []byte) bool { return under(p) })
		maps.DeleteFunc(t.links, func(p, _ string) bool { return under(p) })
		maps.DeleteFunc(t.dirs, func(p string, _ bool) bool { return under(p) })
	}
	for p, b := range files {
		t.files[p] = []byte(b)
	}
}

func (g *gen) atLeast(maj, min int) bool {
	return g.major > maj || (g.major == maj && g.minor >= min)
}

// topology lays out CPUs, NUMA nodes and their sysfs files.
func (g *gen) topology() error {
	c := g.s.CPU
	if c.Sockets < 1 || c.CoresPerSocket < 1 || c.ThreadsPerCore < 1 {
		return fmt.Errorf("hostgen %s: bad CPU topology %+v", g.s.Name, c)
	}
	nps := max(c.NodesPerSocket, 1)
	if c.CoresPerSocket%nps != 0 {
		return fmt.Errorf("hostgen %s: %d cores do not split into %d nodes", g.s.Name, c.CoresPerSocket, nps)
	}
	coreIDs := c.CoreIDs
	if coreIDs == nil {
		for i := range c.CoresPerSocket {
			coreIDs = append(coreIDs, i)
		}
	}
	if len(coreIDs) != c.CoresPerSocket {
		return fmt.Errorf("hostgen %s: %d core ids for %d cores", g.s.Name, len(coreIDs), c.CoresPerSocket)
	}
	perThread := c.Sockets * c.CoresPerSocket
	g.nrCPUs = perThread * c.ThreadsPerCore
	g.nodes = make([][]int, c.Sockets*nps)
	for t := range c.ThreadsPerCore {
		for s := range c.Sockets {
			for k := range c.CoresPerSocket {
				id := t*perThread + s*c.CoresPerSocket + k
				node := s*nps + k/(c.CoresPerSocket/nps)
				g.cpus = append(g.cpus, cpu{id: id, socket: s, core: k, coreID: coreIDs[k], thread: t, node: node})
				g.nodes[node] = append(g.nodes[node], id)
			}
		}
	}
	sort.Slice(g.cpus, func(i, j int) bool { return g.cpus[i].id < g.cpus[j].id })
	for _, n := range g.nodes {
		sort.Ints(n)
	}
	all := host.FormatCPUList(g.allCPUs())
	const sc = "/sys/devices/system/cpu"
	g.t.file(sc+"/online", "%s\n", all)
	g.t.file(sc+"/possible", "%s\n", all)
	g.t.file(sc+"/present", "%s\n", all)
	g.t.file(sc+"/offline", "\n")
	if !c.NoIsolatedFile {
		g.t.file(sc+"/isolated", "%s\n", c.Isolated)
	}
	for _, p := range g.cpus {
		d := fmt.Sprintf("%s/cpu%d", sc, p.id)
		if p.id != 0 {
			g.t.file(d+"/online", "1\n")
		}
		sib := g.siblings(p)
		g.t.file(d+"/topology/core_id", "%d\n", p.coreID)
		g.t.file(d+"/topology/physical_package_id", "%d\n", p.socket)
		g.t.file(d+"/topology/thread_siblings_list", "%s\n", host.FormatCPUList(sib))
		g.t.file(d+"/topology/thread_siblings", "%s\n", host.FormatCPUMask(sib, g.nrCPUs))
		g.t.file(d+"/topology/core_siblings_list", "%s\n", host.FormatCPUList(g.socketCPUs(p.socket)))
		g.t.dir(fmt.Sprintf("%s/node%d", d, p.node))
		if c.Governor != "" {
			pol := fmt.Sprintf("%s/cpufreq/policy%d", sc, p.id)
			g.t.file(pol+"/scaling_governor", "%s\n", c.Governor)
			g.t.file(pol+"/affected_cpus", "%d\n", p.id)
			g.t.link(d+"/cpufreq", pol)
		}
	}
	const sn = "/sys/devices/system/node"
	var ids []int
	for i := range g.nodes {
		ids = append(ids, i)
	}
	g.t.file(sn+"/online", "%s\n", host.FormatCPUList(ids))
	g.t.file(sn+"/possible", "%s\n", host.FormatCPUList(ids))
	g.t.file(sn+"/has_cpu", "%s\n", host.FormatCPUList(ids))
	for i, cpus := range g.nodes {
		g.t.file(fmt.Sprintf("%s/node%d/cpulist", sn, i), "%s\n", host.FormatCPUList(cpus))
		g.t.file(fmt.Sprintf("%s/node%d/cpumap", sn, i), "%s\n", host.FormatCPUMask(cpus, g.nrCPUs))
	}
	return nil
}

func (g *gen) allCPUs() []int {
	out := make([]int, len(g.cpus))
	for i, c := range g.cpus {
		out[i] = c.id
	}
	return out
}

func (g *gen) siblings(p cpu) []int {
	var out []int
	for _, c := range g.cpus {
		if c.socket == p.socket && c.core == p.core {
			out = append(out, c.id)
		}
	}
	return out
}

func (g *gen) socketCPUs(s int) []int {
	var out []int
	for _, c := range g.cpus {
		if c.socket == s {
			out = append(out, c.id)
		}
	}
	return out
}

// localSpread returns the order in which drivers hand out CPUs for queue i
// (cpumask_local_spread): the node's CPUs first, then the others.
func (g *gen) localSpread(node int) []int {
	var out []int
	if node >= 0 && node < len(g.nodes) {
		out = append(out, g.nodes[node]...)
	}
	for _, c := range g.allCPUs() {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// --- interrupts -------------------------------------------------------------

// style says how this kernel prints the chip/hwirq columns.
func (g *gen) style() string {
	switch {
	case !g.atLeast(4, 0):
		return "3.10"
	case g.atLeast(6, 2):
		return "6.2"
	default:
		return "4"
	}
}

// ioapicIRQ adds a legacy IO-APIC line.
func (g *gen) ioapicIRQ(num int, flow, name string, total uint64) {
	all := g.allCPUs()
	q := &irq{num: num, name: name, chip: "IR-IO-APIC", flow: flow, affinity: all, node: -1, total: total, shown: true}
	if g.style() != "3.10" {
		q.hwirq = fmt.Sprintf("%d-%s", num, flow)
	}
	// The timer line only fires on CPU 0 during boot; others land anywhere.
	q.effective = []int{0}
	if num != 0 {
		q.effective = []int{all[g.rng.IntN(len(all))]}
	}
	g.irqs = append(g.irqs, q)
}

func (g *gen) legacyIRQs() {
	g.ioapicIRQ(0, "edge", "timer", 37)
	g.ioapicIRQ(4, "edge", "ttyS0", 1284)
	g.ioapicIRQ(8, "edge", "rtc0", 1)
	g.ioapicIRQ(9, "fasteoi", "acpi", 0)
	g.nextIRQ = 24
	all := g.allCPUs()
	// DMAR fault interrupts (Intel) come first among the dynamic ones.
	for i := range 2 {
		q := &irq{num: g.nextIRQ, name: fmt.Sprintf("dmar%d", i), node: -1, shown: true, affinity: []int{0}, effective: []int{0}, flow: "edge"}
		switch g.style() {
		case "3.10":
			q.chip = "DMAR_MSI"
		default:
			q.chip, q.hwirq = "DMAR-MSI", fmt.Sprintf("%d-edge", i)
		}
		g.irqs = append(g.irqs, q)
		g.nextIRQ++
	}
	_ = all
}

// msiIRQ allocates one MSI-X vector of PCI function pci and returns it.
func (g *gen) msiIRQ(pci string, entry int, name string, affinity []int, node int, total uint64, shown bool) *irq {
	q := &irq{num: g.nextIRQ, name: name, affinity: affinity, node: node, total: total, shown: shown, flow: "edge"}
	g.nextIRQ++
	switch g.style() {
	case "3.10":
		q.chip = "IR-PCI-MSI"
	case "6.2":
		q.chip, q.hwirq = "IR-PCI-MSIX-"+pci, fmt.Sprintf("%d-edge", entry)
	default:
		bus, dev, fn := pciBDF(pci)
		q.chip, q.hwirq = "IR-PCI-MSI", fmt.Sprintf("%d-edge", (bus<<8|dev<<3|fn)<<11|entry)
	}
	q.effective = []int{affinity[0]}
	if len(affinity) > 1 {
		// Non-managed vectors with a wide mask land on one CPU of it.
		q.effective = []int{affinity[g.rng.IntN(len(affinity))]}
	}
	g.irqs = append(g.irqs, q)
	return q
}

func pciBDF(pci string) (bus, dev, fn int) {
	parts := strings.Split(pci, ":") // 0000 3b 00.0
	b, _ := strconv.ParseInt(parts[1], 16, 32)
	d, f, _ := strings.Cut(parts[2], ".")
	dv, _ := strconv.ParseInt(d, 16, 32)
	fv, _ := strconv.ParseInt(f, 16, 32)
	return int(b), int(dv), int(fv)
}

// pciDir is the sysfs directory of a PCI function: below its root port unless
// it sits on the root bus.
func pciDir(pci string) string {
	bus, _, _ := pciBDF(pci)
	if bus == 0 {
		return "/sys/devices/pci0000:00/" + pci
	}
	rb := fmt.Sprintf("%02x", bus-1)
	return fmt.Sprintf("/sys/devices/pci0000:%s/0000:%s:00.0/%s", rb, rb, pci)
}

// pciFunction writes the sysfs files common to a PCI function.
func (g *gen) pciFunction(pci, driver string, node int, vectors []*irq) string {
	d := pciDir(pci)
	g.t.link(d+"/subsystem", "/sys/bus/pci")
	g.t.link(d+"/driver", "/sys/bus/pci/drivers/"+driver)
	g.t.file(d+"/numa_node", "%d\n", node)
	local := g.allCPUs()
	if node >= 0 && node < len(g.nodes) {
		local = g.nodes[node]
	}
	g.t.file(d+"/local_cpulist", "%s\n", host.FormatCPUList(local))
	g.t.file(d+"/local_cpus", "%s\n", host.FormatCPUMask(local, g.nrCPUs))
	for _, q := range vectors {
		g.t.file(fmt.Sprintf("%s/msi_irqs/%d", d, q.num), "msix\n")
	}
	return d
}

// --- network ----------------------------------------------------------------

var statNames = []string{
	"collisions", "multicast", "rx_bytes", "rx_compressed", "rx_crc_errors", "rx_dropped",
	"rx_errors", "rx_fifo_errors", "rx_frame_errors", "rx_length_errors", "rx_missed_errors",
	"rx_nohandler", "rx_over_errors", "rx_packets", "tx_aborted_errors", "tx_bytes",
	"tx_carrier_errors", "tx_compressed", "tx_dropped", "tx_errors", "tx_fifo_errors",
	"tx_heartbeat_errors", "tx_packets", "tx_window_errors",
}

// netdev writes /sys/class/net/NAME below devDir (a PCI function or
// /sys/devices/virtual) and returns the interface directory.
func (g *gen) netdev(name, devDir string, index, mtu, txqlen, queues int, up, loopback bool, mac string, speed int, stats map[string]uint64, xps func(q int) []int) string {
	d := devDir + "/net/" + name
	g.t.link("/sys/class/net/"+name, d)
	g.t.link(d+"/subsystem", "/sys/class/net")
	if !strings.HasPrefix(devDir, "/sys/devices/virtual") {
		g.t.link(d+"/device", devDir)
	}
	g.t.file(d+"/ifindex", "%d\n", index)
	g.t.file(d+"/iflink", "%d\n", index)
	g.t.file(d+"/mtu", "%d\n", mtu)
	g.t.file(d+"/tx_queue_len", "%d\n", txqlen)
	g.t.file(d+"/address", "%s\n", mac)
	g.t.file(d+"/broadcast", "%s\n", "ff:ff:ff:ff:ff:ff")
	flags, typ, oper := 0x1002, 1, "down"
	if loopback {
		flags, typ, oper = 0x8, 772, "unknown"
		g.t.file(d+"/broadcast", "00:00:00:00:00:00\n")
	}
	if up {
		flags |= 0x1
		if !loopback {
			oper = "up"
		}
		g.t.file(d+"/carrier", "1\n")
		if speed > 0 {
			g.t.file(d+"/speed", "%d\n", speed)
			g.t.file(d+"/duplex", "full\n")
		}
	}
	g.t.file(d+"/flags", "0x%x\n", flags)
	g.t.file(d+"/type", "%d\n", typ)
	g.t.file(d+"/operstate", "%s\n", oper)
	for q := range queues {
		rx := fmt.Sprintf("%s/queues/rx-%d", d, q)
		g.t.file(rx+"/rps_cpus", "%s\n", host.FormatCPUMask(nil, g.nrCPUs))
		g.t.file(rx+"/rps_flow_cnt", "0\n")
		tx := fmt.Sprintf("%s/queues/tx-%d", d, q)
		g.t.file(tx+"/tx_maxrate", "0\n")
		g.t.file(tx+"/tx_timeout", "0\n")
		// Single-queue devices have no XPS map to read (ENOENT).
		if queues > 1 && xps != nil {
			g.t.file(tx+"/xps_cpus", "%s\n", host.FormatCPUMask(xps(q), g.nrCPUs))
		}
	}
	for _, s := range statNames {
		g.t.file(d+"/statistics/"+s, "%d\n", stats[s])
	}
	return d
}

func (g *gen) loopback() {
	g.ifindex = 1
	pk := uint64(184022)
	g.netdev("lo", "/sys/devices/virtual", 1, 65536, 1000, 1, true, true, "00:00:00:00:00:00", 0,
		map[string]uint64{"rx_packets": pk, "tx_packets": pk, "rx_bytes": pk * 131, "tx_bytes": pk * 131}, nil)
	g.nl.LinkList = append(g.nl.LinkList, host.Link{Name: "lo", Index: 1, MTU: 65536, TxQueueLen: 1000,
		NumTxQueues: 1, NumRxQueues: 1, OperState: "unknown", Up: true, Loopback: true, MAC: "00:00:00:00:00:00"})
	g.nl.QdiscList = append(g.nl.QdiscList, host.LinkQdisc{Ifindex: 1, Qdisc: host.Qdisc{Kind: "noqueue", Handle: "0:", Parent: "root"}})
	g.ifaceNames = append(g.ifaceNames, "lo")
}

func (g *gen) nic(n *NIC) {
	g.ifindex++
	if n.Index == 0 {
		n.Index = g.ifindex
	}
	g.ifaceNames = append(g.ifaceNames, n.Name)
	spread := g.localSpread(n.Node)
	cpuFor := n.IRQCPU
	if cpuFor == nil {
		cpuFor = func(q int) []int { return []int{spread[q%len(spread)]} }
	}
	var vectors []*irq
	rate := n.RxPacketsPerQueue
	queueIRQ := func(q int, name string, shown bool) {
		aff := cpuFor(q)
		total := uint64(0)
		if n.Up {
			total = rate/3 + g.rng.Uint64N(rate/10+1)
		}
		v := g.msiIRQ(n.PCI, len(vectors), name, aff, n.Node, total, shown)
		vectors = append(vectors, v)
		if shown {
			g.nicRx[v.effective[0]] += total
		}
	}
	misc := func(name string) {
		v := g.msiIRQ(n.PCI, len(vectors), name, g.allCPUs(), n.Node, 3+g.rng.Uint64N(20), true)
		vectors = append(vectors, v)
	}
	switch n.Naming {
	case "i40e":
		// i40e requests its queue vectors in ndo_open: a down port shows
		// only the misc vector.
		misc("i40e-" + n.PCI + ":misc")
		for q := range n.Queues {
			queueIRQ(q, fmt.Sprintf("i40e-%s-TxRx-%d", n.Name, q), n.Up)
		}
	case "ixgbe":
		for q := range n.Queues {
			queueIRQ(q, fmt.Sprintf("%s-TxRx-%d", n.Name, q), n.Up)
		}
		misc(n.Name)
	case "mlx5", "mlx5-old":
		if n.Naming == "mlx5" {
			misc("mlx5_async0@pci:" + n.PCI)
		} else {
			misc("mlx5_async@pci:" + n.PCI)
		}
		// mlx5 creates its completion EQs at probe, up or not.
		for q := range n.Queues {
			queueIRQ(q, fmt.Sprintf("mlx5_comp%d@pci:%s", q, n.PCI), true)
		}
	default:
		panic("hostgen: unknown NIC naming " + n.Naming)
	}
	devDir := g.pciFunction(n.PCI, n.Driver, n.Node, vectors)
	var rxPk uint64
	if n.Up {
		rxPk = rate * uint64(n.Queues)
	}
	stats := map[string]uint64{
		"rx_packets": rxPk, "tx_packets": rxPk * 9 / 10, "rx_bytes": rxPk * 412, "tx_bytes": rxPk * 9 / 10 * 690,
		"multicast": rxPk / 5000, "rx_dropped": rxPk / 200000, "rx_missed_errors": rxPk / 500000,
	}
	// i40e spreads XPS over all CPUs in order (cpumask_local_spread(q, -1)),
	// mlx5 over the device's node first.
	xps := func(q int) []int { return []int{spread[q%len(spread)]} }
	if n.Driver == "i40e" || n.Driver == "ixgbe" {
		xps = func(q int) []int { return []int{q % g.nrCPUs} }
	}
	g.netdev(n.Name, devDir, n.Index, n.MTU, n.TxQueueLen, n.Queues, n.Up, false, n.MAC, n.SpeedMbps, stats, xps)

	oper := "down"
	if n.Up {
		oper = "up"
	}
	g.nl.LinkList = append(g.nl.LinkList, host.Link{Name: n.Name, Index: n.Index, MTU: n.MTU, TxQueueLen: n.TxQueueLen,
		NumTxQueues: n.MaxQueues, NumRxQueues: n.MaxQueues, OperState: oper, Up: n.Up, MAC: n.MAC})
	g.qdiscs(n, rxPk)
	if n.Ethtool != nil {
		if g.nl.EthtoolBy == nil {
			g.nl.EthtoolBy = map[string]*host.Ethtool{}
		}
		e := *n.Ethtool
		e.BusInfo = n.PCI
		if e.Driver == "" {
			e.Driver = n.Driver
		}
		g.nl.EthtoolBy[n.Name] = &e
	}
}

// qdiscOptions are each kind's defaults in tc's vocabulary.
func qdiscOptions(kind string) map[string]string {
	switch kind {
	case "pfifo_fast":
		return map[string]string{"bands": "3", "priomap": "1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1"}
	case "fq_codel":
		return map[string]string{"limit": "10240", "target": "5ms", "interval": "100ms", "flows": "1024", "quantum": "1514", "ecn": "on"}
	case "fq":
		return map[string]string{"limit": "10000", "flow_limit": "100", "buckets": "1024", "quantum": "3028", "initial_quantum": "15140"}
	default:
		return map[string]string{}
	}
}

// qdiscs attaches the NIC's qdiscs the way the kernel does: noop until the
// device first comes up, then mq with one default child per TX queue (parents
// ":1", ":2", ... in hex, as tc prints them).
func (g *gen) qdiscs(n *NIC, packets uint64) {
	add := func(q host.Qdisc) {
		g.nl.QdiscList = append(g.nl.QdiscList, host.LinkQdisc{Ifindex: n.Index, Qdisc: q})
	}
	if !n.Up {
		add(host.Qdisc{Kind: "noop", Handle: "0:", Parent: "root", Options: map[string]string{}})
		return
	}
	txPk := packets * 9 / 10
	if n.RootQdisc != "mq" {
		add(host.Qdisc{Kind: n.RootQdisc, Handle: "0:", Parent: "root", Options: qdiscOptions(n.RootQdisc),
			Stats: host.QdiscStats{Packets: txPk, Bytes: txPk * 690, Requeues: txPk / 90000}})
		return
	}
	var sum host.QdiscStats
	var children []host.Qdisc
	for q := range n.Queues {
		pk := txPk / uint64(n.Queues)
		st := host.QdiscStats{Packets: pk, Bytes: pk * 690, Requeues: pk / 90000}
		if q == 0 {
			st.Drops = pk / 400000
		}
		sum.Packets += st.Packets
		sum.Bytes += st.Bytes
		sum.Requeues += st.Requeues
		sum.Drops += st.Drops
		children = append(children, host.Qdisc{Kind: n.ChildQdisc, Handle: "0:", Parent: fmt.Sprintf(":%x", q+1),
			Options: qdiscOptions(n.ChildQdisc), Stats: st})
	}
	add(host.Qdisc{Kind: "mq", Handle: "0:", Parent: "root", Options: map[string]string{}, Stats: sum})
	// tc lists mq children from the last queue down.
	slices.Reverse(children)
	for _, c := range children {
		add(c)
	}
}

// --- storage ----------------------------------------------------------------

// managedSpread assigns n vectors to CPU groups like the kernel's
// irq_create_affinity_masks: nodes get vectors in proportion, and each vector
// of a node takes the node's lowest free CPU and then that CPU's SMT siblings
// while its share of CPUs lasts (irq_spread_init_one). It assumes at least
// one vector per node, as every preset has; with fewer the kernel would also
// fold the remaining nodes' CPUs into the vectors, which this does not model.
func (g *gen) managedSpread(n int) [][]int {
	out := make([][]int, 0, n)
	nodes := len(g.nodes)
	for ni, cpus := range g.nodes {
		share := n / nodes
		if ni < n%nodes {
			share++
		}
		if share == 0 {
			continue
		}
		free := map[int]bool{}
		for _, c := range cpus {
			free[c] = true
		}
		per := len(cpus) / share
		extra := len(cpus) - per*share
		for v := range share {
			k := per
			if v < extra {
				k++
			}
			var grp []int
			for _, c := range cpus {
				if len(grp) >= k {
					break
				}
				if !free[c] {
					continue
				}
				delete(free, c)
				grp = append(grp, c)
				for _, s := range g.siblings(g.cpus[c]) {
					if len(grp) < k && free[s] {
						delete(free, s)
						grp = append(grp, s)
					}
				}
			}
			sort.Ints(grp)
			out = append(out, grp)
		}
	}
	return out
}

func (g *gen) nvme(n *NVMe) {
	var vectors []*irq
	admin := g.msiIRQ(n.PCI, 0, n.Ctrl+"q0", g.allCPUs(), n.Node, 40+g.rng.Uint64N(30), true)
	vectors = append(vectors, admin)
	groups := g.managedSpread(n.IOQueues)
	for q, grp := range groups {
		total := g.s.Load.NVMeCompletionsPerQueue/2 + g.rng.Uint64N(g.s.Load.NVMeCompletionsPerQueue/2+1)
		v := g.msiIRQ(n.PCI, q+1, fmt.Sprintf("%sq%d", n.Ctrl, q+1), grp, n.Node, total, true)
		// Managed vectors are pinned to their group; the first CPU services it.
		v.effective = []int{grp[0]}
		vectors = append(vectors, v)
		g.ioCPU[grp[0]] += total
	}
	devDir := g.pciFunction(n.PCI, "nvme", n.Node, vectors)
	ctrl := devDir + "/nvme/" + n.Ctrl
	g.t.link(ctrl+"/device", devDir)
	g.t.file(ctrl+"/model", "%s\n", "INTEL SSDPE2KX020T8")
	ns := ctrl + "/" + n.Ctrl + "n1"
	g.t.link("/sys/block/"+n.Ctrl+"n1", ns)
	g.t.link(ns+"/device", ctrl)
	g.t.file(ns+"/queue/scheduler", "%s\n", n.Scheduler)
	g.t.file(ns+"/queue/rq_affinity", "1\n")
	g.t.file(ns+"/queue/nr_requests", "%d\n", n.NrRequests)
	g.t.file(ns+"/queue/rotational", "0\n")
}

func (g *gen) sata(s *SATA) {
	v := g.msiIRQ(s.PCI, 0, "ahci["+s.PCI+"]", g.allCPUs(), s.Node, 52000+g.rng.Uint64N(9000), true)
	if g.style() == "6.2" {
		v.chip = "IR-PCI-MSI-" + s.PCI // AHCI uses plain MSI, not MSI-X
	}
	devDir := g.pciFunction(s.PCI, "ahci", s.Node, []*irq{v})
	g.t.file(devDir+"/msi_irqs/"+strconv.Itoa(v.num), "msi\n")
	scsi := devDir + "/ata1/host0/target0:0:0/0:0:0:0"
	blk := scsi + "/block/" + s.Name
	g.t.link("/sys/block/"+s.Name, blk)
	g.t.link(blk+"/device", scsi)
	g.t.file(blk+"/queue/scheduler", "%s\n", s.Scheduler)
	g.t.file(blk+"/queue/rq_affinity", "1\n")
	g.t.file(blk+"/queue/nr_requests", "%d\n", s.NrRequests)
	rot := 0
	if s.Rotational {
		rot = 1
	}
	g.t.file(blk+"/queue/rotational", "%d\n", rot)
}

// --- /proc ------------------------------------------------------------------

func (g *gen) procIRQ() {
	g.t.file("/proc/irq/default_smp_affinity", "%s\n", host.FormatCPUMask(g.allCPUs(), g.nrCPUs))
	for _, q := range g.irqs {
		d := fmt.Sprintf("/proc/irq/%d", q.num)
		g.t.file(d+"/smp_affinity", "%s\n", host.FormatCPUMask(q.affinity, g.nrCPUs))
		g.t.file(d+"/smp_affinity_list", "%s\n", host.FormatCPUList(q.affinity))
		g.t.file(d+"/affinity_hint", "%s\n", host.FormatCPUMask(nil, g.nrCPUs))
		if g.atLeast(4, 13) {
			g.t.file(d+"/effective_affinity", "%s\n", host.FormatCPUMask(q.effective, g.nrCPUs))
			g.t.file(d+"/effective_affinity_list", "%s\n", host.FormatCPUList(q.effective))
		}
		g.t.file(d+"/node", "%d\n", q.node)
	}
}

// namedRows are x86's per-CPU counters after the numbered IRQs.
var namedRows = []struct{ name, desc string }{
	{"NMI", "Non-maskable interrupts"},
	{"LOC", "Local timer interrupts"},
	{"SPU", "Spurious interrupts"},
	{"PMI", "Performance monitoring interrupts"},
	{"IWI", "IRQ work interrupts"},
	{"RTR", "APIC ICR read retries"},
	{"RES", "Rescheduling interrupts"},
	{"CAL", "Function call interrupts"},
	{"TLB", "TLB shootdowns"},
	{"TRM", "Thermal event interrupts"},
	{"THR", "Threshold APIC interrupts"},
	{"DFR", "Deferred Error APIC interrupts"},
	{"MCE", "Machine check exceptions"},
	{"MCP", "Machine check polls"},
	{"ERR", ""},
	{"MIS", ""},
	{"PIN", "Posted-interrupt notification event"},
	{"NPI", "Nested posted-interrupt event"},
	{"PIW", "Posted-interrupt wakeup event"},
}

// interrupts renders /proc/interrupts with the kernel's widths: the IRQ number
// right-aligned to the digits of nr_irqs, counts "%10u ", the chip " %8s",
// hwirq " %*d", the flow "-%-8s" and the actions after two spaces.
func (g *gen) interrupts() {
	nrIRQs := 24 + 16 + 8*g.nrCPUs + 24*16
	prec := 3
	for j := 1000; prec < 10 && j <= nrIRQs; j *= 10 {
		prec++
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%*s", prec+8, "")
	for _, c := range g.allCPUs() {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteByte('\n')
	sorted := slices.Clone(g.irqs)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].num < sorted[j].num })
	counts := make([]uint64, g.nrCPUs)
	for _, q := range sorted {
		if !q.shown {
			continue
		}
		clear(counts)
		if len(q.effective) > 0 {
			counts[q.effective[0]] = q.total
		}
		fmt.Fprintf(&b, "%*d: ", prec, q.num)
		for _, c := range counts {
			fmt.Fprintf(&b, "%10d ", c)
		}
		if g.style() == "3.10" {
			// 3.10 prints the flow right after the chip and no hwirq.
			fmt.Fprintf(&b, " %8s-%-8s", q.chip, q.flow)
		} else {
			num, flow, _ := strings.Cut(q.hwirq, "-")
			n, _ := strconv.Atoi(num)
			fmt.Fprintf(&b, " %8s %*d-%-8s", q.chip, prec, n, flow)
		}
		if q.name != "" {
			fmt.Fprintf(&b, "  %s", q.name)
		}
		b.WriteByte('\n')
	}
	ticks := max(g.s.Load.UptimeTicks, 1000)
	for _, r := range namedRows {
		if r.name == "ERR" || r.name == "MIS" {
			fmt.Fprintf(&b, "%*s: %10d\n", prec, r.name, 0)
			continue
		}
		if !g.atLeast(4, 0) && (r.name == "NPI" || r.name == "PIW") {
			continue
		}
		fmt.Fprintf(&b, "%*s: ", prec, r.name)
		for _, c := range g.allCPUs() {
			var v uint64
			switch r.name {
			case "LOC":
				v = ticks + g.rng.Uint64N(ticks/20+1)
			case "RES":
				v = ticks/40 + g.rng.Uint64N(ticks/80+1)
			case "CAL":
				v = ticks/100 + g.rng.Uint64N(ticks/200+1)
			case "TLB":
				v = ticks/300 + g.rng.Uint64N(ticks/600+1)
			case "NMI", "PMI":
				v = ticks / 5000
			case "MCP":
				v = ticks / 30000
			case "IWI":
				v = uint64(c % 3)
			}
			fmt.Fprintf(&b, "%10d ", v)
		}
		fmt.Fprintf(&b, "  %s\n", r.desc)
	}
	g.t.raw("/proc/interrupts", b.Bytes())
}

func (g *gen) softirqs() {
	names := []string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}
	if !g.atLeast(4, 5) {
		names[5] = "BLOCK_IOPOLL"
	}
	ticks := max(g.s.Load.UptimeTicks, 1000)
	var b bytes.Buffer
	b.WriteString("                    ")
	for _, c := range g.allCPUs() {
		fmt.Fprintf(&b, "CPU%-8d", c)
	}
	b.WriteByte('\n')
	for _, n := range names {
		fmt.Fprintf(&b, "%12s:", n)
		for _, c := range g.allCPUs() {
			var v uint64
			switch n {
			case "HI":
				v = g.rng.Uint64N(3)
			case "TIMER":
				v = ticks/3 + g.rng.Uint64N(ticks/30+1)
			case "NET_TX":
				v = g.nicRx[c]/50 + g.rng.Uint64N(40)
			case "NET_RX":
				// NAPI polls about once per interrupt, more under load.
				v = g.nicRx[c]*11/10 + g.rng.Uint64N(500)
			case "BLOCK":
				v = g.ioCPU[c] + g.rng.Uint64N(100)
			case "TASKLET":
				v = g.rng.Uint64N(200)
			case "SCHED":
				v = ticks/4 + g.rng.Uint64N(ticks/40+1)
			case "RCU":
				v = ticks/5 + g.rng.Uint64N(ticks/50+1)
			}
			fmt.Fprintf(&b, " %10d", v)
		}
		b.WriteByte('\n')
	}
	g.t.raw("/proc/softirqs", b.Bytes())
}

// softnet renders /proc/net/softnet_stat with this kernel's column count.
func (g *gen) softnet() {
	cols := g.s.Kernel.SoftnetColumns
	if cols == 0 {
		switch {
		case !g.atLeast(3, 11):
			cols = 10
		case !g.atLeast(5, 10):
			cols = 11
		case !g.atLeast(6, 10):
			cols = 13
		default:
			cols = 15
		}
	}
	var b bytes.Buffer
	for _, c := range g.allCPUs() {
		v := make([]uint64, cols)
		v[0] = g.nicRx[c]*30 + g.rng.Uint64N(5000) // packets per interrupt batch
		if c == g.s.Load.HotCPU {
			v[1] = g.s.Load.RxDropped
			v[2] = g.s.Load.TimeSqueeze
		} else if g.nicRx[c] > 0 {
			v[2] = g.rng.Uint64N(3)
		}
		if cols >= 13 {
			v[12] = uint64(c)
		}
		for i, x := range v {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%08x", uint32(x))
		}
		b.WriteByte('\n')
	}
	g.t.raw("/proc/net/softnet_stat", b.Bytes())
}
