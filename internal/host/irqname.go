package host

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// IRQOwner is what an interrupt's name says about the device and queue it
// serves.
type IRQOwner struct {
	// Device is the name the driver put in the IRQ name: an interface ("eth0"),
	// a PCI address ("0000:3b:00.0", mlx5 and other "@pci:" names), a virtio
	// device ("virtio2") or an NVMe controller ("nvme0").
	Device string
	// Driver is the prefix some drivers add ("i40e", "ice", "mlx5"), if any.
	Driver string
	// Role is the vector's job: "txrx", "rx", "tx" (NIC queue pairs or halves),
	// "comp" (mlx5 completion), "input"/"output" (virtio-net), "req" (virtio-blk),
	// "io" and "admin" (NVMe), or a non-queue role ("misc", "config", "async").
	Role string
	// Queue is the queue index, -1 for vectors that serve no data queue.
	Queue int
}

// IsQueue reports whether the vector serves a data queue (the ones IRQ
// placement spreads over CPUs).
func (o IRQOwner) IsQueue() bool { return o.Queue >= 0 }

var irqNamePatterns = []struct {
	re *regexp.Regexp
	fn func(m []string) IRQOwner
}{
	// NVMe: nvme0q0 is the admin queue, nvme0q1.. the I/O queues (Queue keeps
	// the number in the name).
	{regexp.MustCompile(`^(nvme\d+)q(\d+)$`), func(m []string) IRQOwner {
		q, _ := strconv.Atoi(m[2])
		if q == 0 {
			return IRQOwner{Device: m[1], Driver: "nvme", Role: "admin", Queue: -1}
		}
		return IRQOwner{Device: m[1], Driver: "nvme", Role: "io", Queue: q}
	}},
	// mlx5_comp3@pci:0000:3b:00.0, mlx5_async0@pci:..., mlx4-1@0000:04:00.0,
	// gve-ntfy-blk0@pci:..., ena-mgmnt@pci:...: a prefix naming driver and role,
	// an optional index, and the PCI address.
	{regexp.MustCompile(`^([a-z][a-z0-9]*)[_-]([a-z_-]*?)-?(\d*)@(?:pci:)?([0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f])$`), func(m []string) IRQOwner {
		o := IRQOwner{Driver: m[1], Device: m[4], Role: m[2], Queue: -1}
		if o.Role == "" {
			o.Role = "comp" // mlx4-N: completion vectors carry no role word
		}
		if n, err := strconv.Atoi(m[3]); err == nil && (o.Role == "comp" || o.Role == "ntfy-blk") {
			o.Queue = n
		}
		return o
	}},
	// virtio2-input.0, virtio2-output.0, virtio1-req.0, virtio2-config.
	{regexp.MustCompile(`^(virtio\d+)-([a-z_]+)(?:\.(\d+))?$`), func(m []string) IRQOwner {
		o := IRQOwner{Device: m[1], Driver: "virtio", Role: m[2], Queue: -1}
		if m[3] != "" {
			o.Queue, _ = strconv.Atoi(m[3])
		}
		return o
	}},
	// i40e-0000:3b:00.0:misc, ice-0000:3b:00.0:misc.
	{regexp.MustCompile(`^([a-z0-9_]+)-([0-9a-f]{4,}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]):([a-z_]+)$`), func(m []string) IRQOwner {
		return IRQOwner{Driver: m[1], Device: m[2], Role: m[3], Queue: -1}
	}},
	// [driver-]iface-TxRx-N (i40e, ice, ixgbe, igb, bnxt), iface-rx-N/-tx-N,
	// ena's iface-Tx-Rx-N, sfc's iface-N.
	{regexp.MustCompile(`^(?:(i40e|iavf|ice|ixgbe|ixgbevf|igb|igc|e1000e|bnxt_en|qede|hinic|ena)-)?([^\s]+?)-(TxRx|Tx-Rx|txrx|rx|tx|fp)-(\d+)$`), func(m []string) IRQOwner {
		q, _ := strconv.Atoi(m[4])
		role := strings.ToLower(strings.ReplaceAll(m[3], "-", ""))
		return IRQOwner{Driver: m[1], Device: m[2], Role: role, Queue: q}
	}},
}

// ParseIRQName classifies an interrupt name from /proc/interrupts across the
// naming schemes drivers use: "i40e-eth0-TxRx-3", "eth0-TxRx-3",
// "mlx5_comp3@pci:0000:3b:00.0", "virtio2-input.0", "nvme0q4". ok is false for
// names that follow none of them (timer, ACPI, ...). Shared lines
// ("a, b") are classified by their first action.
func ParseIRQName(name string) (o IRQOwner, ok bool) {
	name, _, _ = strings.Cut(name, ", ")
	for _, p := range irqNamePatterns {
		if m := p.re.FindStringSubmatch(name); m != nil {
			return p.fn(m), true
		}
	}
	return IRQOwner{Queue: -1}, false
}

// DeviceIRQs returns the IRQs of an interface's device: those listed in its
// device's msi_irqs, plus those whose name names the interface, its PCI address
// or its virtio device (for drivers and kernels without msi_irqs). Sorted by
// number.
func (f *Facts) DeviceIRQs(iface string) []IRQ {
	ifc := f.Interface(iface)
	if ifc == nil {
		return nil
	}
	var out []IRQ
	for _, q := range f.IRQs {
		if q.Num < 0 {
			continue
		}
		if slices.Contains(ifc.MSIIRQs, q.Num) {
			out = append(out, q)
			continue
		}
		o, ok := ParseIRQName(q.Name)
		if !ok {
			continue
		}
		if o.Device == ifc.Name || (o.Device != "" && (o.Device == ifc.BusInfo || o.Device == ifc.Device)) {
			out = append(out, q)
		}
	}
	return out
}
