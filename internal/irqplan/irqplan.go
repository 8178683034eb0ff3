// Package irqplan decides where a host's NIC and NVMe interrupts should go, as
// a pure function of host facts and options (the CPUs reserved for the
// application). It implements runbook 002's rules:
//
//   - a NIC's queue interrupts go to CPUs of the NIC's own NUMA node (its PCI
//     function's local_cpulist), one queue interrupt per CPU;
//   - only one SMT sibling of a core takes hard interrupts: the other is left
//     for the application or for softirq work;
//   - the NIC's channel count becomes the number of CPUs chosen ("queues ≈
//     IRQ CPUs"): more queues than CPUs would share CPUs and jitter;
//   - NVMe interrupts go to CPUs of their own, apart from the NIC's, where the
//     kernel lets anyone move them (since 4.8 it binds NVMe I/O queue vectors
//     to the CPUs that submit to them, and refuses writes);
//   - isolated CPUs (isolcpus) and reserved CPUs are never used, nor are the
//     other threads of their cores; CPU 0's core keeps the housekeeping
//     (timers, legacy interrupts, everything nobody placed) unless the node
//     has too few cores to spare it;
//   - RPS/XPS spread packet work in software only where the hardware has fewer
//     queues than the CPUs meant to process packets (a single-queue virtio
//     NIC), and RFS steers flows to the CPU of the thread reading them.
//
// The result says, for each interrupt, the CPU it goes to and why, which CPUs
// the application should run on (for lowlat pin), and what it left alone.
// Interrupt names are classified with host.ParseIRQName across driver naming
// schemes (i40e-eth0-TxRx-3, eth0-TxRx-3, mlx5_comp3@pci:..., virtio2-input.0,
// nvme0q4).
package irqplan

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
)

// Options are the inputs besides the facts.
type Options struct {
	// Ifaces are the NICs to place; empty means none.
	Ifaces []string
	// Reserve are CPUs the application keeps for itself (--reserve-cpus):
	// no hard interrupt goes to them or to their SMT siblings.
	Reserve []int
	// MaxQueues caps the CPUs (and so queues) per NIC; 0 is every eligible
	// core of the node.
	MaxQueues int
	// Queues is an explicit channel count (0: as many as IRQ CPUs).
	Queues int
	// NVMe places NVMe interrupts too.
	NVMe bool
	// NVMeCPUs is how many CPUs an NVMe controller whose interrupts can be
	// moved gets (runbook 002 gave two); 0 means 2.
	NVMeCPUs int
	// RPS allows software steering where the NIC has fewer queues than CPUs.
	RPS bool
	// RFSEntries is rps_sock_flow_entries when RPS is planned (0: no RFS).
	RFSEntries int
}

// Placement is one interrupt and where it goes.
type Placement struct {
	IRQ int `json:"irq"`
	// Name is the interrupt's action name(s), sorted, ", " between them.
	Name  string `json:"name"`
	Queue int    `json:"queue"`
	CPUs  []int  `json:"cpus"`
	// Current is the affinity now (smp_affinity_list).
	Current []int `json:"current"`
}

// QueueCPUs is a software steering map for one queue (rx-N or tx-N).
type QueueCPUs struct {
	Queue string `json:"queue"`
	CPUs  []int  `json:"cpus"`
}

// NIC is the plan for one interface.
type NIC struct {
	Iface  string `json:"iface"`
	Driver string `json:"driver,omitempty"`
	Node   int    `json:"node"`
	// Pool are the CPUs meant to process this NIC's packets: one thread of
	// each eligible core of the node.
	Pool []int `json:"pool"`
	// CPUs are the CPUs that get its queue interrupts, queue 0 first.
	CPUs []int `json:"cpus"`
	// Channels is the combined channel count to set, 0 when the driver has
	// no combined channels to set; CurrentChannels and MaxChannels as ethtool
	// -l says.
	Channels        int `json:"channels"`
	CurrentChannels int `json:"current_channels"`
	MaxChannels     int `json:"max_channels"`
	// IRQs are the queue interrupts placed.
	IRQs []Placement `json:"irqs"`
	// Idle are queue interrupts of queues beyond Channels (left alone: the
	// driver stops using them) and vectors that serve no queue.
	Idle []Placement `json:"idle,omitempty"`
	// RPS/XPS are planned only where the NIC has fewer queues than Pool.
	RPS     []QueueCPUs `json:"rps,omitempty"`
	XPS     []QueueCPUs `json:"xps,omitempty"`
	FlowCnt int         `json:"flow_cnt,omitempty"`
	// Skip says why nothing is planned for this NIC.
	Skip  string   `json:"skip,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

// NVMe is the plan for one NVMe controller.
type NVMe struct {
	Ctrl    string      `json:"ctrl"`
	Node    int         `json:"node"`
	Managed bool        `json:"managed"`
	CPUs    []int       `json:"cpus,omitempty"`
	IRQs    []Placement `json:"irqs,omitempty"`
	Queues  int         `json:"queues"`
	Skip    string      `json:"skip,omitempty"`
}

// Plan is the placement for a host.
type Plan struct {
	NICs []NIC  `json:"nics"`
	NVMe []NVMe `json:"nvme,omitempty"`
	// IRQCPUs are every CPU given hard interrupts by this plan.
	IRQCPUs []int `json:"irq_cpus"`
	// AppCPUs are where the application should run: the reserved CPUs, or
	// else the first NIC's node without the cores given hard interrupts
	// (their SMT siblings included: runbook 002 leaves those to the
	// application) and without the housekeeping core.
	AppCPUs []int `json:"app_cpus"`
	AppNode int   `json:"app_node"`
	// Housekeeping is the core left to the kernel (CPU 0's), if one was.
	Housekeeping []int    `json:"housekeeping,omitempty"`
	RFSEntries   int      `json:"rfs_entries,omitempty"`
	Notes        []string `json:"notes,omitempty"`
}

// ErrNoCPUs is returned when the exclusions leave no CPU for a device's
// interrupts.
var ErrNoCPUs = errors.New("no CPU left for interrupts")

// topo is the CPU topology the rules work on.
type topo struct {
	online   map[int]bool
	core     map[int][]int // cpu -> its online SMT siblings (itself included), sorted
	node     map[int]int
	nodeCPUs map[int][]int
	all      []int
	nbits    int
	excluded map[int]bool // isolated or reserved, whole cores
	why      map[int]string
}

func newTopo(f *host.Facts, reserve []int) (*topo, error) {
	t := &topo{online: map[int]bool{}, core: map[int][]int{}, node: map[int]int{}, nodeCPUs: map[int][]int{}, excluded: map[int]bool{}, why: map[int]string{}}
	for _, c := range f.CPUs {
		t.nbits = max(t.nbits, c.ID+1)
		if !c.Online {
			continue
		}
		t.online[c.ID] = true
		t.all = append(t.all, c.ID)
		t.node[c.ID] = c.Node
	}
	if len(t.all) == 0 {
		return nil, errors.New("no CPU topology in the facts (/sys/devices/system/cpu unreadable?)")
	}
	sort.Ints(t.all)
	for _, c := range f.CPUs {
		if !c.Online {
			continue
		}
		var sib []int
		for _, s := range c.Siblings {
			if t.online[s] {
				sib = append(sib, s)
			}
		}
		if !slices.Contains(sib, c.ID) {
			sib = append(sib, c.ID)
		}
		sort.Ints(sib)
		t.core[c.ID] = sib
	}
	for _, n := range f.NUMA {
		for _, c := range n.CPUs {
			if t.online[c] {
				t.nodeCPUs[n.ID] = append(t.nodeCPUs[n.ID], c)
			}
		}
	}
	for _, c := range reserve {
		if c < 0 || c >= t.nbits {
			return nil, fmt.Errorf("reserved CPU %d does not exist (this host has CPUs 0-%d)", c, t.nbits-1)
		}
		for _, s := range t.core[c] {
			t.excluded[s] = true
			t.why[s] = "reserved"
		}
		t.excluded[c] = true
		t.why[c] = "reserved"
	}
	for _, c := range f.IsolatedCPUs {
		for _, s := range append([]int{c}, t.core[c]...) {
			if !t.excluded[s] {
				t.excluded[s] = true
				t.why[s] = "isolated"
			}
		}
	}
	return t, nil
}

// eligibleCores returns one CPU (the lowest thread) of each core among cpus
// that has no excluded thread, in CPU order, and the housekeeping core's CPU
// if it was dropped or moved last. With four or more eligible cores CPU 0's
// core (the lowest online CPU's) is left out; with fewer it comes last.
func (t *topo) eligibleCores(cpus []int) (out []int, housekeeping []int) {
	seen := map[int]bool{}
	hk := t.core[t.all[0]]
	var hkCPU = -1
	for _, c := range cpus {
		if !t.online[c] || seen[c] {
			continue
		}
		core := t.core[c]
		for _, s := range core {
			seen[s] = true
		}
		ok := true
		for _, s := range core {
			if t.excluded[s] {
				ok = false
			}
		}
		if !ok {
			continue
		}
		if slices.Equal(core, hk) {
			hkCPU = core[0]
			continue
		}
		out = append(out, core[0])
	}
	sort.Ints(out)
	if hkCPU >= 0 {
		if len(out) >= 3 {
			return out, hk
		}
		out = append(out, hkCPU)
	}
	return out, nil
}

// localCPUs are a device's NUMA-local online CPUs: local_cpulist, else its
// node's CPUs, else all.
func (t *topo) localCPUs(local []int, node int) []int {
	var out []int
	for _, c := range local {
		if t.online[c] {
			out = append(out, c)
		}
	}
	if len(out) == 0 && node >= 0 {
		out = append(out, t.nodeCPUs[node]...)
	}
	if len(out) == 0 {
		out = append(out, t.all...)
	}
	return out
}

// queueIRQs groups a device's queue interrupts by queue index: split rx/tx
// vectors of one queue (virtio input.N/output.N, rx-N/tx-N) share a CPU.
func queueIRQs(irqs []host.IRQ) (queues map[int][]host.IRQ, other []host.IRQ) {
	queues = map[int][]host.IRQ{}
	for _, q := range irqs {
		o, ok := host.ParseIRQName(q.Name)
		if !ok || !o.IsQueue() || o.Driver == "nvme" {
			other = append(other, q)
			continue
		}
		queues[o.Queue] = append(queues[o.Queue], q)
	}
	return queues, other
}

// IRQName returns an interrupt's action names as the irq knob reads them:
// sorted, ", " between them.
func IRQName(name string) string {
	parts := strings.Split(name, ", ")
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

func placement(q host.IRQ, queue int, cpus []int) Placement {
	return Placement{IRQ: q.Num, Name: IRQName(q.Name), Queue: queue, CPUs: cpus, Current: q.Affinity}
}

// NVMeManaged reports whether the kernel manages NVMe I/O queue interrupt
// affinity (pci_alloc_irq_vectors with PCI_IRQ_AFFINITY, Linux 4.8+): then
// /proc/irq/N/smp_affinity_list refuses writes with EIO.
func NVMeManaged(k host.Kernel) bool { return k.Major == 0 || k.AtLeast(4, 8) }

// Make computes the placement.
func Make(f *host.Facts, o Options) (*Plan, error) {
	t, err := newTopo(f, o.Reserve)
	if err != nil {
		return nil, err
	}
	p := &Plan{AppNode: -1}
	taken := map[int]string{} // cpu -> device with hard IRQs there
	nvmeCPUs := o.NVMeCPUs
	if nvmeCPUs <= 0 {
		nvmeCPUs = 2
	}

	// NVMe controllers whose interrupts can move get CPUs first, from the
	// top of their node, so the NIC's queues fill the node from the bottom
	// and the two never share a core.
	var nvmes []NVMe
	if o.NVMe {
		seenCtrl := map[string]bool{}
		for _, b := range f.Block {
			ctrl := NVMeController(b.Name)
			if ctrl == "" || len(b.MSIIRQs) == 0 || seenCtrl[ctrl] {
				continue
			}
			seenCtrl[ctrl] = true
			n := NVMe{Ctrl: ctrl, Node: b.NUMANode, Managed: NVMeManaged(f.Kernel)}
			var ioIRQs []host.IRQ
			for _, q := range f.IRQs {
				if !slices.Contains(b.MSIIRQs, q.Num) {
					continue
				}
				if o, ok := host.ParseIRQName(q.Name); ok && o.Driver == "nvme" && o.Role == "io" {
					ioIRQs = append(ioIRQs, q)
				}
			}
			n.Queues = len(ioIRQs)
			if n.Managed {
				n.Skip = fmt.Sprintf("kernel %s manages the affinity of %s's %d I/O queue interrupts (Linux 4.8+ binds each to the CPUs that submit to its queue and refuses writes with EIO): its completions follow the CPUs doing the I/O, so keep I/O-heavy threads off the NIC's interrupt CPUs", f.Kernel.Release, ctrl, len(ioIRQs))
				nvmes = append(nvmes, n)
				continue
			}
			if len(ioIRQs) == 0 {
				n.Skip = ctrl + " has no I/O queue interrupts in /proc/interrupts"
				if e := f.ErrorFor("/proc/interrupts"); e != "" {
					n.Skip = fmt.Sprintf("%s's I/O queue interrupts are unknown: /proc/interrupts could not be read (%s)", ctrl, e)
				}
				nvmes = append(nvmes, n)
				continue
			}
			cores, _ := t.eligibleCores(t.localCPUs(nil, b.NUMANode))
			var free []int
			for _, c := range cores {
				if taken[c] == "" {
					free = append(free, c)
				}
			}
			if len(free) == 0 {
				return nil, fmt.Errorf("%w: for %s on node %d (reserved or isolated CPUs cover it)", ErrNoCPUs, ctrl, b.NUMANode)
			}
			k := min(nvmeCPUs, max(1, len(free)/4))
			n.CPUs = append([]int(nil), free[len(free)-k:]...)
			for _, c := range n.CPUs {
				taken[c] = ctrl
			}
			sort.Slice(ioIRQs, func(i, j int) bool { return ioIRQs[i].Num < ioIRQs[j].Num })
			for i, q := range ioIRQs {
				on, _ := host.ParseIRQName(q.Name)
				n.IRQs = append(n.IRQs, placement(q, on.Queue, []int{n.CPUs[i%len(n.CPUs)]}))
			}
			nvmes = append(nvmes, n)
		}
	}

	// NICs sharing a node split its cores between them.
	type target struct {
		ifc   *host.Interface
		cores []int
	}
	var targets []target
	byPool := map[string][]int{} // pool key -> indexes into targets
	seenIf := map[string]bool{}
	for _, name := range o.Ifaces {
		if seenIf[name] {
			continue
		}
		seenIf[name] = true
		ifc := f.Interface(name)
		if ifc == nil {
			return nil, fmt.Errorf("unknown interface %q", name)
		}
		tg := target{ifc: ifc}
		if ifc.Physical() {
			cores, hk := t.eligibleCores(t.localCPUs(ifc.LocalCPUs, ifc.NUMANode))
			if hk != nil {
				p.Housekeeping = hk
			}
			var free []int
			for _, c := range cores {
				if taken[c] == "" {
					free = append(free, c)
				}
			}
			tg.cores = free
			key := fmt.Sprint(cores)
			byPool[key] = append(byPool[key], len(targets))
		}
		targets = append(targets, tg)
	}
	for _, idx := range byPool {
		if len(idx) < 2 {
			continue
		}
		cores := targets[idx[0]].cores
		if len(cores) < 2*len(idx) {
			continue // too few to split: they share, noted below
		}
		per := len(cores) / len(idx)
		for i, ti := range idx {
			end := (i + 1) * per
			if i == len(idx)-1 {
				end = len(cores)
			}
			targets[ti].cores = cores[i*per : end]
		}
	}

	for _, tg := range targets {
		n, err := planNIC(f, t, o, tg.ifc, tg.cores)
		if err != nil {
			return nil, err
		}
		for _, c := range n.CPUs {
			if d := taken[c]; d != "" && d != n.Iface && !strings.HasPrefix(d, "nvme") {
				n.Notes = append(n.Notes, fmt.Sprintf("shares CPU %d with %s: too few cores on node %d to give each NIC its own", c, d, n.Node))
			}
			if taken[c] == "" {
				taken[c] = n.Iface
			}
		}
		if p.RFSEntries == 0 && n.FlowCnt > 0 {
			p.RFSEntries = o.RFSEntries
		}
		p.NICs = append(p.NICs, n)
	}
	p.NVMe = nvmes

	for c := range taken {
		p.IRQCPUs = append(p.IRQCPUs, c)
	}
	sort.Ints(p.IRQCPUs)
	p.AppCPUs, p.AppNode = appCPUs(t, f, o, p)
	return p, nil
}

func planNIC(f *host.Facts, t *topo, o Options, ifc *host.Interface, cores []int) (NIC, error) {
	n := NIC{Iface: ifc.Name, Driver: ifc.Driver, Node: ifc.NUMANode}
	if !ifc.Physical() {
		kind := ifc.Kind
		if ifc.Loopback {
			kind = "loopback"
		}
		n.Skip = fmt.Sprintf("%s is a virtual device (%s) with no interrupts of its own", ifc.Name, orWord(kind, "virtual"))
		return n, nil
	}
	if n.Node < 0 && len(ifc.LocalCPUs) > 0 {
		n.Node = t.node[ifc.LocalCPUs[0]]
	}
	if len(cores) == 0 {
		return n, fmt.Errorf("%w: for %s on node %d: reserved and isolated CPUs (with their SMT siblings) cover every core of its node (%s)",
			ErrNoCPUs, ifc.Name, n.Node, host.FormatCPUList(t.localCPUs(ifc.LocalCPUs, ifc.NUMANode)))
	}
	if o.MaxQueues > 0 && len(cores) > o.MaxQueues {
		cores = cores[:o.MaxQueues]
	}
	n.Pool = cores
	irqs := f.DeviceIRQs(ifc.Name)
	queues, other := queueIRQs(irqs)
	var qnums []int
	for q := range queues {
		qnums = append(qnums, q)
	}
	sort.Ints(qnums)
	for _, q := range other {
		n.Idle = append(n.Idle, placement(q, -1, nil))
	}

	// How many queues: as many as CPUs, within what the driver allows.
	want := len(cores)
	if o.Queues > 0 {
		want = o.Queues
	}
	nq := len(qnums)
	if et := ifc.Ethtool; et != nil && et.Channels != nil && et.Channels.MaxCombined > 0 {
		n.CurrentChannels = int(et.Channels.Combined)
		n.MaxChannels = int(et.Channels.MaxCombined)
		nq = min(want, n.MaxChannels)
		n.Channels = nq
	} else {
		why := "the driver reports no combined channels"
		if et := ifc.Ethtool; et == nil {
			why = "no ethtool data"
		} else if e := et.Errors["channels"]; e != "" {
			why = "ethtool -l failed: " + e
		}
		n.Notes = append(n.Notes, fmt.Sprintf("queue count left at %d (%s)", nq, why))
		if nq == 0 {
			nq = min(want, max(ifc.NumRxQueues, 1))
		}
	}
	if len(qnums) == 0 {
		n.Skip = fmt.Sprintf("%s has no queue interrupts in /proc/interrupts (the interface is down, or its driver names them in a way lowlat does not know)", ifc.Name)
		if e := f.ErrorFor("/proc/interrupts"); e != "" {
			n.Skip = fmt.Sprintf("%s's queue interrupts are unknown: /proc/interrupts could not be read (%s)", ifc.Name, e)
		}
		return n, nil
	}
	// One queue interrupt per CPU: queue i on the i-th CPU of the pool.
	irqCPUs := cores[:min(nq, len(cores))]
	if nq > len(cores) {
		n.Notes = append(n.Notes, fmt.Sprintf("%d queues on %d CPUs: some CPUs serve two queues", nq, len(cores)))
	}
	n.CPUs = irqCPUs
	for i, q := range qnums {
		for _, irq := range queues[q] {
			if i >= nq {
				n.Idle = append(n.Idle, placement(irq, q, nil))
				continue
			}
			n.IRQs = append(n.IRQs, placement(irq, q, []int{irqCPUs[i%len(irqCPUs)]}))
		}
	}

	// Software steering only where hardware queues are fewer than the CPUs
	// meant to process packets.
	if o.RPS && nq < len(cores) {
		rxq := min(nq, max(ifc.NumRxQueues, 1))
		for q := range rxq {
			var cpus []int
			for i, c := range cores {
				if i%rxq == q {
					cpus = append(cpus, c)
				}
			}
			n.RPS = append(n.RPS, QueueCPUs{Queue: fmt.Sprintf("rx-%d", q), CPUs: cpus})
			if nq > 1 && ifc.NumTxQueues > 1 {
				n.XPS = append(n.XPS, QueueCPUs{Queue: fmt.Sprintf("tx-%d", q), CPUs: cpus})
			}
		}
		if o.RFSEntries > 0 {
			n.FlowCnt = int(roundPow2(uint64(o.RFSEntries / rxq)))
		}
	}
	return n, nil
}

// NVMeController returns the controller of an NVMe namespace block device
// ("nvme0n1" -> "nvme0"), or "" for other devices.
func NVMeController(dev string) string {
	if !strings.HasPrefix(dev, "nvme") {
		return ""
	}
	i := strings.LastIndexByte(dev, 'n')
	if i <= len("nvme") {
		return ""
	}
	return dev[:i]
}

func roundPow2(n uint64) uint64 {
	p := uint64(1)
	for p < n {
		p <<= 1
	}
	return p
}

func orWord(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// appCPUs picks where the application should run.
func appCPUs(t *topo, f *host.Facts, o Options, p *Plan) ([]int, int) {
	if len(o.Reserve) > 0 {
		r := append([]int(nil), o.Reserve...)
		sort.Ints(r)
		node := -1
		if len(r) > 0 {
			node = t.node[r[0]]
		}
		return r, node
	}
	var nic *NIC
	for i := range p.NICs {
		if p.NICs[i].Skip == "" && len(p.NICs[i].Pool) > 0 {
			nic = &p.NICs[i]
			break
		}
	}
	if nic == nil {
		return nil, -1
	}
	ifc := f.Interface(nic.Iface)
	irq := map[int]bool{}
	for _, c := range p.IRQCPUs {
		irq[c] = true
	}
	hk := map[int]bool{}
	for _, c := range p.Housekeeping {
		hk[c] = true
	}
	var out []int
	for _, c := range t.localCPUs(ifc.LocalCPUs, ifc.NUMANode) {
		if irq[c] || hk[c] || t.excluded[c] {
			continue
		}
		out = append(out, c)
	}
	sort.Ints(out)
	return out, nic.Node
}

// Mask formats CPUs as the hex bitmap rps_cpus/xps_cpus take, as wide as the
// host's CPU count.
func Mask(f *host.Facts, cpus []int) string {
	n := 0
	for _, c := range f.CPUs {
		n = max(n, c.ID+1)
	}
	return host.FormatCPUMask(cpus, n)
}
