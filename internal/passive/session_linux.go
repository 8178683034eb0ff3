package passive

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/lowlat/lowlat/internal/bpfload"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// The kinds of slot keys; enum kind in bpf/passive.c.
const (
	kindRXStack  = 2
	kindRXRead   = 3
	kindTCP      = 4
	kindRXSocket = 5
)

const noSlot = 0xffffffff

// hookOf names each program's kernel hook, for errors and docs.
var hookOf = map[string]string{
	"egress_enqueue": "tracepoint net:net_dev_queue",
	"egress_xmit":    "tracepoint net:net_dev_start_xmit",
	"rx_stack":       "tracepoint net:netif_receive_skb",
	"rx_read_tcp":    "tracepoint skb:skb_copy_datagram_iovec",
	"rx_read_udp":    "fentry skb_consume_udp",
	"tcp_segment":    "tracepoint tcp:tcp_probe",
	"tcp_retrans":    "tracepoint tcp:tcp_retransmit_skb",
	"tcp_state":      "tracepoint sock:inet_sock_set_state",
}

// optional programs may fail to load: their series are then reported
// unavailable, with the kernel's reason, and the rest is measured.
var optional = map[string]func(*Series) bool{
	"rx_read_udp": func(s *Series) bool { return s.Measure == Receive && s.Proto == "udp" && s.Stage == StageRead },
}

// Session is a set of attached measurements. Close detaches them.
type Session struct {
	cfg    Config
	stack  bpfload.Stack
	hists  *ebpf.Map
	offset *ebpf.Variable
	slack  *ebpf.Variable
	layout []Series // per slot index: what the slot's histogram is
	// offsetNow is the offset the hooks use, offsetBound the most it can
	// be wrong by (0: none set yet); only keepOffset's goroutine writes
	// them after Open.
	offsetNow, offsetBound int64
	// Hooks lists the kernel hooks attached, in order.
	Hooks []string
	// Unavailable says, per hook this kernel refused that the session could
	// do without, why (naming the hook); its series carry the reason too.
	Unavailable map[string]string
	// MapBytes is the kernel memory the session's maps hold, all CPUs'
	// copies of the histograms included.
	MapBytes int

	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	progs map[string]*ebpf.Program // attached, by program name

	egress []egressEntry // the devices whose egress is measured

	// The sampled fallback (OpenSampled): its series, and the index of
	// each port's, kept under mu.
	mu         sync.Mutex
	sampled    []Series
	sampledIdx map[uint16]int
}

type slotEntry struct {
	key passiveSlotKey
	val passiveSlot
}

// dscpClasses is the kernel's dscp_class: each DSCP value's class, 0 for
// the values not named.
func dscpClasses(dscp []int) [64]uint8 {
	var out [64]uint8
	for i, d := range dscp {
		out[d] = uint8(i + 1)
	}
	return out
}

// slotCacheBits is CACHE_BITS: the slot cache has 1<<slotCacheBits entries.
const slotCacheBits = 10

// slotCacheIndex is passive.c's slot_cache_index.
func slotCacheIndex(k passiveSlotKey) uint32 {
	h := (uint32(k.Port)*8 + uint32(k.Kind)) ^ uint32(k.Proto)<<19 ^ k.Id<<24
	return (h * 2654435761) >> (32 - slotCacheBits)
}

// slotCache lays the slots out in the kernel's direct-mapped cache: the
// first key at an index holds it; a later one marks it overflowing, so the
// programs look such keys up in the slots hash map.
func slotCache(entries []slotEntry) map[uint32]passiveSlotCache {
	const present, overflow = 1, 2
	out := map[uint32]passiveSlotCache{}
	for _, e := range entries {
		i := slotCacheIndex(e.key)
		c, taken := out[i]
		if taken {
			c.Flags |= overflow
		} else {
			c = passiveSlotCache{Key: e.key, Val: e.val, Flags: present}
		}
		out[i] = c
	}
	return out
}

type egressEntry struct {
	ifindex uint32
	dev     passiveEgressDev
}

// maxIfindex is the size of the egress devices' array (MAX_IFINDEX).
const maxIfindex = 4096

// Open loads and attaches the measurements cfg names, in the calling OS
// thread's network namespace (lock the thread first to measure another).
// An error leaves nothing attached.
func Open(cfg Config) (*Session, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, stop: make(chan struct{})}
	entries, err := s.plan()
	if err != nil {
		return nil, err
	}
	if len(s.layout) == 0 {
		return nil, fmt.Errorf("passive: no device to measure (none is up in this network namespace but loopback)%.0w", ErrBadConfig)
	}
	if err := s.load(entries); err != nil {
		s.stack.Close()
		return nil, err
	}
	return s, nil
}

// plan lays out the slots: one histogram per key the configuration names.
func (s *Session) plan() ([]slotEntry, error) {
	var entries []slotEntry
	add := func(ser Series, keys ...passiveSlotKey) uint32 {
		idx := uint32(len(s.layout))
		s.layout = append(s.layout, ser)
		for _, k := range keys {
			entries = append(entries, slotEntry{k, passiveSlot{Index: idx, First: noSlot}})
		}
		return idx
	}
	if s.cfg.Egress {
		links, err := s.devices()
		if err != nil {
			return nil, err
		}
		for _, l := range links {
			a := l.Attrs()
			if a.Index >= maxIfindex {
				return nil, fmt.Errorf("device %s: ifindex %d, lowlat measures egress on ifindex below %d%.0w", a.Name, a.Index, maxIfindex, ErrBadConfig)
			}
			n := max(a.NumTxQueues, 1)
			dev := passiveEgressDev{Base: uint32(len(s.layout)) + 1, Queues: uint32(min(n, MaxQueues))}
			// Each queue's classes in a row: the kernel's slot is
			// base-1 + queue*classes + class.
			addQueue := func(q int) {
				if len(s.cfg.DSCP) == 0 {
					add(Series{Measure: Egress, Device: a.Name, Queue: q})
					return
				}
				for c := 0; c <= len(s.cfg.DSCP); c++ {
					add(Series{Measure: Egress, Device: a.Name, Queue: q, DSCP: DSCPClass(s.cfg.DSCP, c)})
				}
			}
			for q := 0; q < min(n, MaxQueues); q++ {
				addQueue(q)
			}
			if n > MaxQueues {
				addQueue(-1)
			} else {
				dev.Queues-- // the last queue is the highest; none beyond
			}
			s.egress = append(s.egress, egressEntry{uint32(a.Index), dev})
		}
	}
	for _, p := range s.cfg.Ports {
		proto := uint8(unix.IPPROTO_UDP)
		if p.Proto == "tcp" {
			proto = unix.IPPROTO_TCP
		}
		if s.cfg.RX {
			add(Series{Measure: Receive, Proto: p.Proto, Port: p.Port, Stage: StageStack, Queue: -1},
				passiveSlotKey{Kind: kindRXStack, Proto: proto, Port: p.Port})
			if p.Proto == "tcp" {
				add(Series{Measure: Receive, Proto: p.Proto, Port: p.Port, Stage: StageSocket, Queue: -1},
					passiveSlotKey{Kind: kindRXSocket, Proto: proto, Port: p.Port})
			}
			add(Series{Measure: Receive, Proto: p.Proto, Port: p.Port, Stage: StageRead, Queue: -1},
				passiveSlotKey{Kind: kindRXRead, Proto: proto, Port: p.Port})
		}
		if s.cfg.TCP && p.Proto == "tcp" {
			local := passiveSlotKey{Kind: kindTCP, Proto: proto, Port: p.Port}
			remote := local
			remote.Id = 1
			add(Series{Measure: RTT, Proto: p.Proto, Port: p.Port, Queue: -1}, local, remote)
			if len(s.cfg.FirstBytes) > 0 {
				// The local key's entry starts the first-bytes clock.
				entries[len(entries)-2].val.First = uint32(len(s.layout))
				for _, n := range s.cfg.FirstBytes {
					add(Series{Measure: FirstBytes, Proto: p.Proto, Port: p.Port, Bytes: n, Queue: -1})
				}
			}
		}
	}
	if s.cfg.TCP && s.cfg.Cgroup != "" {
		name := s.cfg.CgroupName
		if name == "" {
			name = s.cfg.Cgroup
		}
		add(Series{Measure: RTT, Proto: "tcp", Cgroup: name, Queue: -1}, passiveSlotKey{Kind: kindTCP, Proto: unix.IPPROTO_TCP, Id: 2})
	}
	return entries, nil
}

// devices are the configured devices, or every device that is up but
// loopback.
func (s *Session) devices() ([]netlink.Link, error) {
	if len(s.cfg.Devices) > 0 {
		var out []netlink.Link
		for _, name := range s.cfg.Devices {
			l, err := netlink.LinkByName(name)
			if err != nil {
				return nil, fmt.Errorf("device %s: %v%.0w", name, err, ErrBadConfig)
			}
			out = append(out, l)
		}
		return out, nil
	}
	all, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list devices: %w", err)
	}
	var out []netlink.Link
	for _, l := range all {
		a := l.Attrs()
		if a.Flags&(1<<0) != 0 && a.Flags&(1<<2) == 0 { // up, not loopback
			out = append(out, l)
		}
	}
	return out, nil
}

// programs are the programs the configuration needs.
func (s *Session) programs() []string {
	var p []string
	if s.cfg.Egress {
		p = append(p, "egress_enqueue", "egress_xmit")
	}
	tcp, udp := s.cfg.Cgroup != "", false
	for _, port := range s.cfg.Ports {
		tcp = tcp || port.Proto == "tcp"
		udp = udp || port.Proto == "udp"
	}
	if s.cfg.RX {
		p = append(p, "rx_stack")
		if tcp {
			p = append(p, "rx_read_tcp")
		}
		if udp {
			p = append(p, "rx_read_udp")
		}
	}
	// tcp_probe serves TCP's receive "socket" stage and its RTT samples.
	if tcp && (s.cfg.RX || s.cfg.TCP) {
		p = append(p, "tcp_segment")
	}
	if s.cfg.TCP && tcp {
		p = append(p, "tcp_retrans", "tcp_state")
	}
	return p
}

const privilege = "passive measurement needs root: CAP_BPF and CAP_PERFMON"

// Test builds replace these (testhooks.go): a kernel without BTF, a hook
// the kernel lacks.
var (
	kernelBTF   = btf.LoadKernelSpec
	adjustSpecs = func(*ebpf.CollectionSpec) {}
)

// load loads the programs the configuration needs, fills the slots and
// attaches them; on error the caller closes the stack.

func (s *Session) load(entries []slotEntry) error {
	if _, err := kernelBTF(); err != nil {
		return fmt.Errorf("passive: the kernel's BTF (/sys/kernel/btf/vmlinux) cannot be read (%v): CO-RE needs a kernel built with CONFIG_DEBUG_INFO_BTF: %w", err, ErrUnsupported)
	}
	// Kernels before 5.11 charge BPF maps to RLIMIT_MEMLOCK.
	_ = rlimit.RemoveMemlock()
	spec, err := loadPassive()
	if err != nil {
		return fmt.Errorf("passive: read the embedded BPF object: %w", err)
	}
	adjustSpecs(spec)
	want := s.programs()
	keep := map[string]bool{}
	for _, p := range want {
		keep[p] = true
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	spec.Maps["slots"].MaxEntries = uint32(max(len(entries), 1))
	spec.Maps["hists"].MaxEntries = uint32(len(s.layout))
	if !s.cfg.Egress {
		spec.Maps["queued"].MaxEntries = 1
	}
	if !s.cfg.TCP {
		spec.Maps["conns"].MaxEntries = 1
	}
	var inum uint32
	if !s.cfg.AllNamespaces {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return fmt.Errorf("passive: which network namespace this is: %w", err)
		}
		inum = uint32(st.Ino)
	}
	var firstN [MaxFirstBytes]uint64
	copy(firstN[:], s.cfg.FirstBytes)
	var cgroupID uint64
	if s.cfg.Cgroup != "" {
		var st unix.Stat_t
		if err := unix.Stat(s.cfg.Cgroup, &st); err != nil {
			return fmt.Errorf("passive: cgroup %s: %v%.0w", s.cfg.Cgroup, err, ErrBadConfig)
		}
		cgroupID = st.Ino // a cgroup v2 id is its directory's inode
	}
	for name, v := range map[string]any{
		"netns_inum":   inum,
		"first_n":      firstN,
		"first_count":  uint32(len(s.cfg.FirstBytes)),
		"cgroup_id":    cgroupID,
		"rx_on":        s.cfg.RX,
		"dscp_classes": uint32(len(s.cfg.DSCP) + 1),
		"dscp_class":   dscpClasses(s.cfg.DSCP),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("passive: set %s: %w", name, err)
		}
	}
	coll, err := s.loadCollection(spec, want)
	if err != nil {
		return err
	}
	want = s.attachable(want)
	s.stack.PushFunc(coll.Close)
	s.hists = coll.Maps["hists"]
	s.offset = coll.Variables["realtime_offset"]
	s.slack = coll.Variables["realtime_offset_slack"]
	for name, m := range coll.Maps {
		s.MapBytes += mapBytes(name, m)
	}
	for _, e := range s.egress {
		if err := coll.Maps["egress_devs"].Put(e.ifindex, e.dev); err != nil {
			return bpfload.Error("passive: fill the egress devices map", privilege, ErrUnsupported, err)
		}
	}
	slots := coll.Maps["slots"]
	for _, e := range entries {
		if err := slots.Put(e.key, e.val); err != nil {
			return bpfload.Error("passive: fill the slots map", privilege, ErrUnsupported, err)
		}
	}
	for i, c := range slotCache(entries) {
		if err := coll.Maps["slot_cache_map"].Put(i, c); err != nil {
			return bpfload.Error("passive: fill the slot cache", privilege, ErrUnsupported, err)
		}
	}
	if s.cfg.RX {
		if err := s.enableRXTimestamps(); err != nil {
			return err
		}
		if err := s.setOffset(); err != nil {
			return err
		}
	}
	for _, name := range want {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
		if errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("passive: attach %s to %s: this kernel has no such hook (%v): %w", name, hookOf[name], firstLine(err), ErrUnsupported)
		}
		if err != nil {
			return bpfload.Error(fmt.Sprintf("passive: attach %s to %s", name, hookOf[name]), privilege, ErrUnsupported, err)
		}
		s.stack.Push(l)
		s.Hooks = append(s.Hooks, hookOf[name])
		if s.progs == nil {
			s.progs = map[string]*ebpf.Program{}
		}
		s.progs[name] = coll.Programs[name]
	}
	if s.cfg.RX {
		// Only once nothing can fail: a failed Open closes its stack
		// but has no goroutine to stop.
		s.wg.Add(1)
		go s.keepOffset()
	}
	return nil
}

// loadCollection loads spec; when the kernel refuses an optional program,
// it records why, drops the program and tries again.
func (s *Session) loadCollection(spec *ebpf.CollectionSpec, want []string) (*ebpf.Collection, error) {
	for {
		coll, err := ebpf.NewCollection(spec)
		if err == nil {
			return coll, nil
		}
		name := refused(err)
		serves := optional[name]
		if serves == nil || spec.Programs[name] == nil {
			return nil, loadError(err)
		}
		if s.Unavailable == nil {
			s.Unavailable = map[string]string{}
		}
		cause := firstLine(err)
		if _, after, ok := strings.Cut(cause, "load program: "); ok {
			cause = after
		}
		reason := fmt.Sprintf("%s: refused by this kernel (%s)", hookOf[name], cause)
		s.Unavailable[hookOf[name]] = reason
		for i := range s.layout {
			if serves(&s.layout[i]) {
				s.layout[i].Unavailable = reason
			}
		}
		delete(spec.Programs, name)
	}
}

// attachable is want without the programs the kernel refused.
func (s *Session) attachable(want []string) []string {
	var out []string
	for _, name := range want {
		if _, gone := s.Unavailable[hookOf[name]]; !gone {
			out = append(out, name)
		}
	}
	return out
}

// refused names the program a load error is about, or "".
func refused(err error) string {
	msg := err.Error()
	for n := range hookOf {
		if strings.Contains(msg, "program "+n+":") {
			return n
		}
	}
	return ""
}

// loadError names the program the kernel refused and its hook.
func loadError(err error) error {
	name := refused(err)
	what := "passive: load the BPF programs"
	if name != "" {
		what = fmt.Sprintf("passive: load %s (%s)", name, hookOf[name])
		missing := errors.Is(err, os.ErrNotExist) || errors.Is(err, btf.ErrNotFound) || errors.Is(err, ebpf.ErrNotSupported)
		if missing && !errors.Is(err, unix.ENOSYS) {
			return fmt.Errorf("%s: this kernel has no such hook (%v): %w", what, firstLine(err), ErrUnsupported)
		}
	}
	return bpfload.Error(what, privilege, ErrUnsupported, wrapFirstLine{err})
}

// wrapFirstLine keeps the cause for errors.Is but prints only its first
// line: a verifier log is pages long.
type wrapFirstLine struct{ err error }

func (w wrapFirstLine) Error() string { return firstLine(w.err) }
func (w wrapFirstLine) Unwrap() error { return w.err }

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	// cilium/ebpf's guess for any EPERM; the session lifted the limit.
	return strings.TrimSuffix(s, " (MEMLOCK may be too low, consider rlimit.RemoveMemlock)")
}

func mapBytes(name string, m *ebpf.Map) int {
	info, err := m.Info()
	if err != nil {
		return 0
	}
	per := int(info.KeySize + info.ValueSize)
	if info.Type == ebpf.PerCPUArray || info.Type == ebpf.PerCPUHash {
		cpus, err := ebpf.PossibleCPU()
		if err != nil {
			cpus = 1
		}
		per = int(info.KeySize) + int(info.ValueSize)*cpus
	}
	return per * int(info.MaxEntries)
}

// enableRXTimestamps turns on the kernel's receive timestamps: skb->tstamp
// is set at receive only while some socket asks for software receive
// timestamps (a global static key). The socket stays open for the session.
func (s *Session) enableRXTimestamps() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("passive: open the timestamping socket: %w", err)
	}
	f := os.NewFile(uintptr(fd), "timestamping socket")
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPING, unix.SOF_TIMESTAMPING_RX_SOFTWARE); err != nil {
		f.Close()
		return fmt.Errorf("passive: enable receive timestamps (SO_TIMESTAMPING): %w", err)
	}
	s.stack.Push(f)
	return nil
}

// setOffset measures CLOCK_REALTIME - CLOCK_MONOTONIC (clock.go says how
// and why eight times) and stores it for the receive hooks when it is
// better than, or disagrees with, the one they use.
func (s *Session) setOffset() error {
	var rs [offsetReadings]clockReading
	for i := range rs {
		var m1, r, m2 unix.Timespec
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m1)
		unix.ClockGettime(unix.CLOCK_REALTIME, &r)
		unix.ClockGettime(unix.CLOCK_MONOTONIC, &m2)
		rs[i] = clockReading{m1.Nano(), r.Nano(), m2.Nano()}
	}
	off, bound := tightestOffset(rs[:])
	if s.offsetBound > 0 {
		off, bound = nextOffset(s.offsetNow, s.offsetBound, off, bound)
	}
	if s.offsetBound == 0 || bound != s.offsetBound {
		if err := s.slack.Set(bound + offsetSlack); err != nil {
			return fmt.Errorf("passive: set the clock offset's slack: %w", err)
		}
	}
	if s.offsetBound == 0 || off != s.offsetNow {
		if err := s.offset.Set(off + offsetBias); err != nil {
			return fmt.Errorf("passive: set the clock offset: %w", err)
		}
	}
	s.offsetNow, s.offsetBound = off, bound
	return nil
}

// offsetBias is added to the offset the hooks get: 0 but in a test that
// makes the offset wrong.
var offsetBias int64

// keepOffset follows steps of the realtime clock (NTP slews both clocks
// alike; a step moves only realtime).
func (s *Session) keepOffset() {
	defer s.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.setOffset()
		}
	}
}

// Snapshot reads every histogram, summed over CPUs.
func (s *Session) Snapshot() (Snapshot, error) {
	if s.hists == nil {
		return s.sampledSnapshot(), nil
	}
	snap := Snapshot{At: time.Now(), Series: make([]Series, len(s.layout))}
	var per []passiveHist
	for i, meta := range s.layout {
		if err := s.hists.Lookup(uint32(i), &per); err != nil {
			return Snapshot{}, fmt.Errorf("passive: read histogram %d (%s): %w", i, meta.Key(), err)
		}
		ser := meta
		for _, h := range per {
			for b := range NumBuckets {
				ser.Hist.Counts[b] += h.V[b]
			}
			ser.Hist.SumNs += h.V[NumBuckets+0]
			ser.Retransmits += h.V[NumBuckets+1]
			ser.Conns += h.V[NumBuckets+2]
			ser.ClockFaults += h.V[NumBuckets+3]
		}
		snap.Series[i] = ser
	}
	return snap, nil
}

// HookStat is one hook's cost: how often its program ran and for how long
// in all, from the kernel's BPF statistics (EnableHookStats).
type HookStat struct {
	Hook string        `json:"hook"`
	Runs uint64        `json:"runs"`
	Time time.Duration `json:"time_ns"`
}

// NsPerRun is the mean cost of one run.
func (h HookStat) NsPerRun() float64 {
	if h.Runs == 0 {
		return 0
	}
	return float64(h.Time) / float64(h.Runs)
}

// EnableHookStats turns on the kernel's BPF run-time statistics for the
// session's life (BPF_ENABLE_STATS, Linux 5.8: every BPF program's runs then
// cost two clock reads more, until the session closes).
func (s *Session) EnableHookStats() error {
	c, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return bpfload.Error("passive: enable BPF statistics", privilege, ErrUnsupported, err)
	}
	s.stack.Push(c)
	return nil
}

// HookStats reads each attached hook's statistics, in attach order.
func (s *Session) HookStats() ([]HookStat, error) {
	var out []HookStat
	for _, name := range s.programs() {
		p := s.progs[name]
		if p == nil {
			continue
		}
		st, err := p.Stats()
		if err != nil {
			return nil, fmt.Errorf("passive: statistics of %s: %w", name, err)
		}
		out = append(out, HookStat{Hook: hookOf[name], Runs: st.RunCount, Time: st.Runtime})
	}
	return out, nil
}

// Close detaches everything and frees the maps.
func (s *Session) Close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		s.wg.Wait()
		err = s.stack.Close()
	})
	return err
}
