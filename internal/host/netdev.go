package host

import (
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

const sysNet = "/sys/class/net"

// interfaces adds sysfs details to f's interfaces. When f has none (no netlink
// source), every interface in /sys/class/net is listed and its basic link
// facts come from sysfs too. Only directories there are interfaces (links
// to them in /sys/devices): the bonding driver keeps a file,
// bonding_masters, beside them.
func (rd *fileReader) interfaces() {
	f := rd.f
	discover := len(f.Interfaces) == 0
	if discover {
		ents, err := rd.r.ReadDir(sysNet)
		if err != nil {
			rd.fail(sysNet, err)
			return
		}
		for _, e := range ents {
			if !e.IsDir() {
				fi, err := rd.r.Stat(path.Join(sysNet, e.Name()))
				if err != nil || !fi.IsDir() {
					continue
				}
			}
			f.Interfaces = append(f.Interfaces, Interface{Name: e.Name(), NUMANode: -1})
		}
	}
	for i := range f.Interfaces {
		rd.iface(&f.Interfaces[i], discover)
	}
	if discover {
		sortInterfaces(f.Interfaces)
	}
}

func sortInterfaces(ifs []Interface) {
	sort.SliceStable(ifs, func(i, j int) bool {
		if ifs[i].Index != ifs[j].Index {
			return ifs[i].Index < ifs[j].Index
		}
		return ifs[i].Name < ifs[j].Name
	})
}

func (rd *fileReader) iface(ifc *Interface, discover bool) {
	ifc.NUMANode = -1
	base, err := rd.r.EvalSymlinks(path.Join(sysNet, ifc.Name))
	if err != nil {
		rd.fail(path.Join(sysNet, ifc.Name), err)
		return
	}
	pat := sysNet + "/*/"
	if discover {
		rd.linkBasics(ifc, base)
	}
	dev, err := rd.r.EvalSymlinks(base + "/device")
	if err != nil && strings.HasPrefix(base, "/sys/devices/") && !strings.HasPrefix(base, "/sys/devices/virtual/") &&
		path.Base(path.Dir(base)) == "net" {
		// The kernel puts an interface's directory in its device's net/
		// (virtual ones in /sys/devices/virtual/net): where a tree lost
		// the device link, the place still says which device it is.
		dev, err = path.Dir(path.Dir(base)), nil
	}
	if err == nil {
		rd.device(ifc, dev)
		if n, ok := rd.intAt(base, "speed", pat+"speed", syscall.EINVAL); ok && n > 0 {
			ifc.SpeedMbps = n
		}
	}
	rd.queues(ifc, base, discover)
	if dir, ents, err := rd.r.readDirResolved(base + "/statistics"); err == nil {
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			b, ok := rd.readItemAt(dir, e.Name(), pat+"statistics/*")
			if !ok {
				continue
			}
			if v, err := strconv.ParseUint(trimValue(b), 10, 64); err == nil {
				if ifc.Stats == nil {
					ifc.Stats = map[string]uint64{}
				}
				ifc.Stats[e.Name()] = v
			}
		}
	} else {
		// Every interface has statistics/: without it the counters are
		// unknown, not zero.
		rd.failGroup(pat+"statistics", err)
	}
}

// linkBasics fills what netlink would say, from sysfs.
func (rd *fileReader) linkBasics(ifc *Interface, base string) {
	pat := sysNet + "/*/"
	if n, ok := rd.intAt(base, "ifindex", pat+"ifindex"); ok {
		ifc.Index = n
	}
	if n, ok := rd.intAt(base, "mtu", pat+"mtu"); ok {
		ifc.MTU = n
	}
	if n, ok := rd.intAt(base, "tx_queue_len", pat+"tx_queue_len"); ok {
		ifc.TxQueueLen = n
	}
	if b, ok := rd.readItemAt(base, "operstate", pat+"operstate"); ok {
		ifc.OperState = trimValue(b)
	}
	if b, ok := rd.readItemAt(base, "address", pat+"address", syscall.EINVAL); ok {
		ifc.MAC = trimValue(b)
	}
	if b, ok := rd.readItemAt(base, "flags", pat+"flags"); ok {
		if v, err := strconv.ParseUint(strings.TrimPrefix(trimValue(b), "0x"), 16, 32); err == nil {
			ifc.Up = v&syscall.IFF_UP != 0
			ifc.Loopback = v&syscall.IFF_LOOPBACK != 0
		}
	}
}

// device fills driver, bus and the PCI function's NUMA node, local CPUs and
// MSI vectors. virtio-net's device is the virtio device; its vectors and node
// belong to the PCI function above it. A device without a driver link (none
// bound, or a tree that did not keep it) is still hardware; its driver is
// unknown.
func (rd *fileReader) device(ifc *Interface, dev string) {
	ifc.Device = path.Base(dev)
	ifc.Driver = rd.linkBase(dev + "/driver")
	ifc.Bus = rd.linkBase(dev + "/subsystem")
	pci := rd.pciFunction(dev)
	if pci == "" {
		return
	}
	if ifc.Bus == "" && pci == dev {
		ifc.Bus = "pci"
	}
	if ifc.BusInfo == "" {
		ifc.BusInfo = path.Base(pci)
	}
	ifc.NUMANode, ifc.LocalCPUs, ifc.MSIIRQs = rd.pciFacts(pci)
}

// pciFunction returns the PCI device at or above resolved sysfs device path
// dev, or "". A device is a PCI function by its subsystem link or, where
// that link is missing, by its place: named by a PCI address below a PCI
// root (/sys/devices/pci0000:00/...), which is where the kernel puts PCI
// devices and nothing else.
func (rd *fileReader) pciFunction(dev string) string {
	for p, i := dev, 0; i < 6 && strings.HasPrefix(p, "/sys/devices/"); p, i = path.Dir(p), i+1 {
		switch rd.linkBase(p + "/subsystem") {
		case "pci":
			return p
		case "":
			if pciAddr.MatchString(path.Base(p)) && strings.HasPrefix(p, "/sys/devices/pci") {
				return p
			}
		}
	}
	return ""
}

// pciAddr matches a PCI function's name in sysfs: domain:bus:device.function.
var pciAddr = regexp.MustCompile(`^[0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// pciFacts reads a PCI function's numa_node, local_cpulist and msi_irqs.
func (rd *fileReader) pciFacts(pci string) (node int, local []int, msi []int) {
	node = -1
	pat := "/sys/devices/**/"
	if n, ok := rd.intAt(pci, "numa_node", pat+"numa_node"); ok {
		node = n
	}
	if l, ok := rd.cpuListAt(pci, "local_cpulist", pat+"local_cpulist", false); ok {
		local = l
	}
	if ents, err := rd.r.ReadDir(pci + "/msi_irqs"); err == nil {
		msi = numericNames(ents)
	} else if !isNotExist(err) {
		rd.failGroup(pat+"msi_irqs", err)
	}
	return node, local, msi
}

// queues reads RPS, RFS and XPS settings per queue.
func (rd *fileReader) queues(ifc *Interface, base string, discover bool) {
	pat := sysNet + "/*/queues/"
	dir, ents, err := rd.r.readDirResolved(base + "/queues")
	if err != nil {
		// Every interface has a queues directory: without it (a tree that
		// lost it) RPS and XPS are unknown, not unset.
		rd.failGroup(sysNet+"/*/queues", err)
		return
	}
	var nrx, ntx int
	for _, e := range ents {
		q := e.Name()
		if !e.IsDir() {
			continue
		}
		switch {
		case strings.HasPrefix(q, "rx-"):
			nrx++
			// rps_cpus is absent without CONFIG_RPS.
			if b, ok := rd.readItemAt(dir, q+"/rps_cpus", pat+"rx-*/rps_cpus"); ok {
				if ifc.RPS == nil {
					ifc.RPS = map[string]string{}
				}
				ifc.RPS[q] = trimValue(b)
			}
			if n, ok := rd.intAt(dir, q+"/rps_flow_cnt", pat+"rx-*/rps_flow_cnt"); ok {
				if ifc.RPSFlowCnt == nil {
					ifc.RPSFlowCnt = map[string]int{}
				}
				ifc.RPSFlowCnt[q] = n
			}
		case strings.HasPrefix(q, "tx-"):
			ntx++
			// xps_cpus reads as ENOENT on single-queue devices and EINVAL on
			// some multi-TC setups: no setting to report.
			if b, ok := rd.readItemAt(dir, q+"/xps_cpus", pat+"tx-*/xps_cpus", syscall.EINVAL); ok {
				if ifc.XPS == nil {
					ifc.XPS = map[string]string{}
				}
				ifc.XPS[q] = trimValue(b)
			}
		}
	}
	if discover {
		// sysfs shows the queues in use (real_num_*); netlink, when there, says
		// how many the device allocated.
		ifc.NumRxQueues, ifc.NumTxQueues = nrx, ntx
	}
}
