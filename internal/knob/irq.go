package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/lowlat/lowlat/internal/host"
)

// irqKnob is one interrupt's CPU affinity: "irq/45/affinity", written to
// /proc/irq/45/smp_affinity_list (the list form: the hex smp_affinity is where
// runbooks go wrong on hosts with more than 32 CPUs).
//
// Its value is the CPU list, followed by the interrupt's action names in
// parentheses when it has any: "4 (i40e-eth0-TxRx-3)". The names are a guard:
// interrupt numbers are assigned at probe time and can change across reboots
// or when a driver re-requests its vectors, and a write whose expected name
// does not match the live one fails instead of pinning someone else's
// interrupt. They also let status say what moved in human terms.
//
// The comparison is on smp_affinity_list, the mask the kernel was asked for.
// effective_affinity_list (4.13+) can legitimately differ: x86 delivers a
// multi-CPU mask to one CPU of it, and some interrupt controllers move an
// interrupt only when it next fires. So a single-CPU request is verified
// exactly on the requested mask, and the effective CPU is reported by
// Effective for evidence, never used to fail a write.
type irqKnob struct {
	sys *System
	irq int
}

// IRQID returns the knob ID of an interrupt's affinity.
func IRQID(irq int) string { return "irq/" + strconv.Itoa(irq) + "/affinity" }

func newIRQ(sys *System, rest string) (Knob, error) {
	num, what, ok := strings.Cut(rest, "/")
	n, err := strconv.Atoi(num)
	if !ok || what != "affinity" || err != nil || n < 0 || strconv.Itoa(n) != num {
		return nil, fmt.Errorf("irq knob %q: want irq/<number>/affinity", rest)
	}
	return &irqKnob{sys: sys, irq: n}, nil
}

func (k *irqKnob) ID() string { return IRQID(k.irq) }

func (k *irqKnob) dir() string { return k.sys.path("/proc/irq/" + strconv.Itoa(k.irq)) }

// IRQValue formats an affinity value: the CPU list and, when known, the names.
func IRQValue(cpus []int, names string) string {
	v := host.FormatCPUList(cpus)
	if names != "" {
		v += " (" + names + ")"
	}
	return v
}

// SplitIRQValue splits "4 (eth0-TxRx-3)" into CPUs and names.
func SplitIRQValue(v string) (cpus []int, names string, err error) {
	list, rest, hasNames := strings.Cut(strings.TrimSpace(v), " (")
	if hasNames {
		if !strings.HasSuffix(rest, ")") {
			return nil, "", fmt.Errorf("bad irq affinity %q (want CPU list, optionally followed by \" (names)\")", v)
		}
		names = strings.TrimSuffix(rest, ")")
	}
	cpus, err = host.ParseCPUList(list)
	if err != nil {
		return nil, "", err
	}
	if len(cpus) == 0 {
		return nil, "", fmt.Errorf("irq affinity %q has no CPU", v)
	}
	return cpus, names, nil
}

// actionNames lists the interrupt's handlers: /proc/irq/N has one directory
// per named action.
func (k *irqKnob) actionNames() string {
	ents, err := os.ReadDir(k.dir())
	if err != nil {
		return ""
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func (k *irqKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	_, _, err := SplitIRQValue(v)
	return err
}

// Read returns the affinity, or Absent when the interrupt no longer exists
// (its device went away).
func (k *irqKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.dir() + "/smp_affinity_list")
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(k.dir()); errors.Is(derr, fs.ErrNotExist) {
			return Absent, nil
		}
	}
	if err != nil {
		if errors.Is(err, syscall.EIO) {
			return "", fmt.Errorf("irq %d: read affinity: %w", k.irq, NotWritable(err))
		}
		return "", fmt.Errorf("irq %d: read affinity: %w", k.irq, wrapNotExist(err))
	}
	cpus, err := host.ParseCPUList(string(b))
	if err != nil {
		return "", fmt.Errorf("irq %d: %w", k.irq, err)
	}
	return IRQValue(cpus, k.actionNames()), nil
}

func (k *irqKnob) Write(ctx context.Context, value string) error {
	if value == Absent {
		if _, err := os.Stat(k.dir()); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("irq %d exists again: cannot set %s", k.irq, Absent)
	}
	cpus, names, err := SplitIRQValue(value)
	if err != nil {
		return fmt.Errorf("irq %d: %w", k.irq, err)
	}
	if _, err := os.Stat(k.dir()); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("irq %d: %w: its device is gone", k.irq, ErrNoDevice)
	}
	if live := k.actionNames(); names != "" && live != "" && live != names {
		return fmt.Errorf("irq %d is now %q, not %q: interrupt numbers changed since the plan; plan again", k.irq, live, names)
	}
	list := host.FormatCPUList(cpus)
	if err := writeExisting(k.dir()+"/smp_affinity_list", list+"\n"); err != nil {
		switch {
		case errors.Is(err, syscall.EIO):
			// irq_can_set_affinity_usr: kernel-managed vectors (NVMe I/O
			// queues since 4.8, some NIC drivers) and per-CPU interrupts.
			return fmt.Errorf("irq %d: write affinity %s: %w", k.irq, list, NotWritable(fmt.Errorf("the kernel manages this interrupt's affinity: %w", err)))
		case errors.Is(err, syscall.EINVAL):
			return fmt.Errorf("irq %d: write affinity %s: no online CPU in the list, or the interrupt controller cannot route there: %w", k.irq, list, err)
		}
		return fmt.Errorf("irq %d: write affinity %s: %w", k.irq, list, err)
	}
	return nil
}

// Satisfied compares the requested CPU sets; names are compared when both
// sides know them.
func (k *irqKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	lc, ln, err1 := SplitIRQValue(live)
	dc, dn, err2 := SplitIRQValue(desired)
	if err1 != nil || err2 != nil || !slices.Equal(lc, dc) {
		return false
	}
	return ln == "" || dn == "" || ln == dn
}

// Same is Satisfied both ways. A vanished interrupt is not "restored": see
// Vanished.
func (k *irqKnob) Same(a, b string) bool { return k.Satisfied(a, b) && k.Satisfied(b, a) }

// Effective returns the interrupt's effective affinity (the CPU it is
// delivered to), or nil where the kernel does not report it (before 4.13).
func (k *irqKnob) Effective() []int {
	b, err := os.ReadFile(k.dir() + "/effective_affinity_list")
	if err != nil {
		return nil
	}
	l, _ := host.ParseCPUList(string(b))
	return l
}

// IRQEffective returns the effective affinity of an interrupt on sys.
func IRQEffective(sys *System, irq int) []int {
	return (&irqKnob{sys: sys, irq: irq}).Effective()
}
