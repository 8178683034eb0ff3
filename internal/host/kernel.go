package host

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
)

// QdiscKinds are the qdisc kinds Kernel.Qdiscs always reports on.
var QdiscKinds = []string{
	"bfifo", "cake", "clsact", "codel", "fq", "fq_codel", "hfsc", "htb", "ingress",
	"mq", "mqprio", "netem", "pfifo", "pfifo_fast", "prio", "sfq", "tbf",
}

// qdiscConfig maps a qdisc kind to its kernel config option and module name,
// and the first kernel version that has it (used only when nothing else
// says: distribution kernels backport).
var qdiscConfig = map[string]struct {
	option, module string
	since          [2]int
}{
	"cake":     {"CONFIG_NET_SCH_CAKE", "sch_cake", [2]int{4, 19}},
	"clsact":   {"CONFIG_NET_SCH_INGRESS", "sch_ingress", [2]int{4, 5}},
	"codel":    {"CONFIG_NET_SCH_CODEL", "sch_codel", [2]int{3, 5}},
	"fq":       {"CONFIG_NET_SCH_FQ", "sch_fq", [2]int{3, 12}},
	"fq_codel": {"CONFIG_NET_SCH_FQ_CODEL", "sch_fq_codel", [2]int{3, 5}},
	"hfsc":     {"CONFIG_NET_SCH_HFSC", "sch_hfsc", [2]int{}},
	"htb":      {"CONFIG_NET_SCH_HTB", "sch_htb", [2]int{}},
	"ingress":  {"CONFIG_NET_SCH_INGRESS", "sch_ingress", [2]int{}},
	"mqprio":   {"CONFIG_NET_SCH_MQPRIO", "sch_mqprio", [2]int{2, 6}},
	"netem":    {"CONFIG_NET_SCH_NETEM", "sch_netem", [2]int{}},
	"prio":     {"CONFIG_NET_SCH_PRIO", "sch_prio", [2]int{}},
	"sfq":      {"CONFIG_NET_SCH_SFQ", "sch_sfq", [2]int{}},
	"tbf":      {"CONFIG_NET_SCH_TBF", "sch_tbf", [2]int{}},
}

// keptConfig says which kernel config options Facts keeps: the ones that
// decide what lowlat can do, not the whole 10,000-line file.
func keptConfig(name string) bool {
	for _, p := range []string{
		"CONFIG_NET_SCH", "CONFIG_NET_CLS", "CONFIG_NET_ACT", "CONFIG_TCP_CONG_",
		"CONFIG_DEFAULT_TCP_CONG", "CONFIG_DEFAULT_NET_SCH", "CONFIG_NO_HZ",
		"CONFIG_PREEMPT", "CONFIG_TRANSPARENT_HUGEPAGE",
	} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "CONFIG_NET_SCHED", "CONFIG_IFB", "CONFIG_VETH", "CONFIG_NUMA", "CONFIG_RPS",
		"CONFIG_XPS", "CONFIG_RFS_ACCEL", "CONFIG_HZ", "CONFIG_MODULES", "CONFIG_BPF_SYSCALL",
		"CONFIG_NET_RX_BUSY_POLL", "CONFIG_IKCONFIG_PROC", "CONFIG_NETDEVSIM",
		"CONFIG_CPU_FREQ", "CONFIG_CPU_ISOLATION", "CONFIG_IRQ_TIME_ACCOUNTING":
		return true
	}
	return false
}

// moduleIndex is what /lib/modules/<release> and /proc/modules say.
type moduleIndex struct {
	// present is true when /lib/modules/<release> exists: then a missing .ko
	// means the module is not installed.
	present bool
	files   map[string]bool // module names with a .ko file (sch_fq_codel)
	builtin map[string]bool // names listed in modules.builtin
	loaded  map[string]bool // names in /proc/modules
}

func (m moduleIndex) has(name string) bool { return m.files[name] || m.loaded[name] }

func (rd *fileReader) kernelBasics() {
	k := &rd.f.Kernel
	// kernel.osrelease was read with the sysctls, its failure recorded there.
	rel, read := rd.f.Sysctls["kernel.osrelease"]
	k.Release = rel
	switch {
	case read && rel == "":
		rd.fail("/proc/sys/kernel/osrelease", errors.New("empty"))
	case read:
		maj, min, patch, err := ParseKernelRelease(rel)
		if err != nil {
			rd.fail("/proc/sys/kernel/osrelease", err)
			break
		}
		k.Major, k.Minor, k.Patch = maj, min, patch
	}
	if b, ok := rd.read("/proc/version"); ok {
		k.Version = strings.TrimSpace(string(b))
	}
	if b, ok := rd.readOpt("/proc/sys/kernel/random/boot_id"); ok {
		k.BootID = trimValue(b)
	}
	if rd.f.Hostname == "" {
		if b, ok := rd.readOpt("/proc/sys/kernel/hostname"); ok {
			rd.f.Hostname = trimValue(b)
		}
	}
}

// kernelSupport reads the kernel config and module tree and works out which
// qdiscs and congestion controls this kernel can use. It runs last so the
// qdiscs in use on interfaces count as evidence.
func (rd *fileReader) kernelSupport() {
	k := &rd.f.Kernel
	if s := rd.f.Sysctls["net.ipv4.tcp_available_congestion_control"]; s != "" {
		k.CongestionAvailable = strings.Fields(s)
	}
	rd.kernelConfig()
	if k.Config["CONFIG_NUMA"] == "y" && rd.noNodes != nil {
		// A NUMA kernel always lists its nodes: a tree without them lost
		// them, and which CPUs share a node is unknown.
		rd.fail(sysNode, rd.noNodes)
	}
	rd.modules()
	k.CongestionModules = rd.congestionModules()
	inUse := map[string]bool{}
	for _, ifc := range rd.f.Interfaces {
		for _, q := range ifc.qdiscs() {
			inUse[q.Kind] = true
		}
	}
	k.Qdiscs = qdiscSupport(k, rd.mods, inUse)
	if rd.r.Live() && rd.r.rec == nil {
		k.Pidfd = pidfdWorks()
	} else {
		k.Pidfd = k.AtLeast(5, 6)
	}
}

// qdiscs returns the interface's qdiscs: root, children and ingress.
func (i *Interface) qdiscs() []Qdisc {
	var out []Qdisc
	if i.Root != nil {
		out = append(out, *i.Root)
	}
	out = append(out, i.Children...)
	if i.Ingress != nil {
		out = append(out, *i.Ingress)
	}
	return out
}

func (rd *fileReader) kernelConfig() {
	k := &rd.f.Kernel
	var tried []string
	if b, err := rd.r.ReadFile("/proc/config.gz"); err == nil {
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err == nil {
			cfg, err := parseKernelConfig(zr, keptConfig)
			if err == nil {
				k.Config, k.ConfigSource = cfg, "/proc/config.gz"
				return
			}
		}
		rd.fail("/proc/config.gz", fmt.Errorf("gzip: %w", err))
	} else if !isNotExist(err) {
		rd.fail("/proc/config.gz", err)
	}
	tried = append(tried, "/proc/config.gz")
	if k.Release != "" {
		p := "/boot/config-" + k.Release
		tried = append(tried, p)
		if b, err := rd.r.ReadFile(p); err == nil {
			cfg, err := parseKernelConfig(bytes.NewReader(b), keptConfig)
			if err == nil {
				k.Config, k.ConfigSource = cfg, p
				return
			}
			rd.fail(p, err)
		} else if !isNotExist(err) {
			rd.fail(p, err)
		}
	}
	rd.f.Errors = append(rd.f.Errors, FactError{
		Source: "kernel-config",
		Err:    "not found (" + strings.Join(tried, ", ") + "); qdisc support inferred from modules",
	})
}

func (rd *fileReader) modules() {
	m := moduleIndex{files: map[string]bool{}, builtin: map[string]bool{}, loaded: map[string]bool{}}
	if b, ok := rd.readOpt("/proc/modules"); ok {
		for line := range bytes.Lines(b) {
			if name, _, ok := bytes.Cut(line, []byte(" ")); ok {
				m.loaded[string(name)] = true
			}
		}
	}
	rel := rd.f.Kernel.Release
	if rel != "" {
		base := "/lib/modules/" + rel
		if fi, err := rd.r.Stat(base); err == nil && fi.IsDir() {
			m.present = true
			rd.f.Kernel.ModulesDir = base
			for _, dir := range []string{"kernel/net/sched", "kernel/net/ipv4"} {
				ents, err := rd.r.ReadDir(path.Join(base, dir))
				if err != nil {
					if !isNotExist(err) {
						rd.fail(path.Join(base, dir), err)
					}
					continue
				}
				for _, e := range ents {
					if name, ok := moduleName(e.Name()); ok {
						m.files[name] = true
					}
				}
			}
			if b, ok := rd.readOpt(base + "/modules.builtin"); ok {
				for line := range bytes.Lines(b) {
					if name, ok := moduleName(path.Base(strings.TrimSpace(string(line)))); ok {
						m.builtin[name] = true
					}
				}
			}
		}
	}
	rd.mods = m
}

// moduleName returns "sch_fq" for "sch_fq.ko", "sch_fq.ko.xz", ".ko.zst" or ".ko.gz".
func moduleName(file string) (string, bool) {
	i := strings.Index(file, ".ko")
	if i <= 0 {
		return "", false
	}
	switch file[i:] {
	case ".ko", ".ko.xz", ".ko.zst", ".ko.gz":
		return file[:i], true
	}
	return "", false
}

// congestionModules lists congestion controls with a loadable module that are
// not available yet.
func (rd *fileReader) congestionModules() []string {
	avail := map[string]bool{}
	for _, c := range rd.f.Kernel.CongestionAvailable {
		avail[c] = true
	}
	var out []string
	for name := range rd.mods.files {
		cc, ok := strings.CutPrefix(name, "tcp_")
		if !ok || cc == "diag" || cc == "probe" || avail[cc] {
			continue
		}
		out = append(out, cc)
	}
	sort.Strings(out)
	return out
}

// qdiscSupport decides, per qdisc kind, whether the kernel can create it. The
// evidence, strongest first: the kind is in use on an interface or its module
// is loaded; the kernel config (=y builtin, =m a module, which must also exist
// as a .ko when /lib/modules is there, not set = absent); modules.builtin and
// .ko files without a config; the kernel version as a last resort for kinds
// too new for it. Without any evidence the answer is Unknown.
func qdiscSupport(k *Kernel, mods moduleIndex, inUse map[string]bool) map[string]Support {
	out := make(map[string]Support, len(QdiscKinds))
	cfg := k.Config
	netSched := cfg["CONFIG_NET_SCHED"] == "y"
	for _, kind := range QdiscKinds {
		var s Support
		switch kind {
		case "pfifo_fast", "mq":
			// sch_generic.o and sch_mq.o are obj-y: every kernel has them.
			s = Builtin
		case "pfifo", "bfifo":
			switch {
			case cfg["CONFIG_NET_SCH_FIFO"] == "y" || netSched:
				s = Builtin
			case cfg != nil:
				s = Absent
			case len(mods.files) > 0 || len(inUse) > 0:
				// Any qdisc module means CONFIG_NET_SCHED, which selects FIFO.
				s = Builtin
			default:
				s = Unknown
			}
		default:
			c := qdiscConfig[kind]
			if kind == "clsact" && k.Major > 0 && !k.AtLeast(4, 5) {
				s = Absent // same module as ingress, but the kind came in 4.5
				break
			}
			switch {
			case cfg != nil:
				switch cfg[c.option] {
				case "y":
					s = Builtin
				case "m":
					if !mods.present || mods.has(c.module) {
						s = Module
					} else {
						s = Absent // config says module, but it is not installed
					}
				default:
					s = Absent
				}
			case mods.builtin[c.module]:
				s = Builtin
			case mods.has(c.module):
				s = Module
			case mods.present && len(mods.builtin) > 0:
				s = Absent
			case k.Major > 0 && c.since != [2]int{} && !k.AtLeast(c.since[0], c.since[1]):
				s = Absent
			default:
				s = Unknown
			}
			if !s.Usable() && mods.loaded[c.module] {
				s = Module
			}
		}
		if inUse[kind] && !s.Usable() {
			if mods.has(qdiscConfig[kind].module) {
				s = Module
			} else {
				s = Builtin
			}
		}
		out[kind] = s
	}
	return out
}

// CongestionSupport says whether congestion control name (bbr, cubic, ...)
// can be used: available now, loadable as a module, built in per config,
// absent, or unknown.
func (k Kernel) CongestionSupport(name string) Support {
	for _, c := range k.CongestionAvailable {
		if c == name {
			return Builtin
		}
	}
	for _, c := range k.CongestionModules {
		if c == name {
			return Module
		}
	}
	if name == "reno" {
		return Builtin
	}
	if k.Config != nil {
		switch k.Config["CONFIG_TCP_CONG_"+strings.ToUpper(name)] {
		case "y":
			return Builtin
		case "m":
			// A module per config whose .ko is missing would be in neither
			// list above; only trust the config when no module tree was seen.
			if k.ModulesDir == "" {
				return Module
			}
		}
		return Absent
	}
	if name == "bbr" && k.Major > 0 && !k.AtLeast(4, 9) {
		return Absent
	}
	return Unknown
}
