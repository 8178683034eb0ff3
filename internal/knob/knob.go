// Package knob is lowlat's vocabulary of settings. A Knob is one setting with a
// stable ID ("sysctl/net.ipv4.tcp_congestion_control", "qdisc/eth0/root",
// "route/default/main/initcwnd", "sysfs/kernel/mm/transparent_hugepage/enabled",
// "file/etc/sysctl.d/99-lowlat.conf", "sockopt/port:7000/nodelay",
// "autorate/eth0", "mss/eth0"), a Read of its live value, a Write, and a
// comparison that knows the setting's semantics (a qdisc asked for with two
// options is satisfied by one that has them plus kernel defaults). Values are
// strings in each kind's canonical text form so the journal can record them and
// a person can read them.
//
// Knobs decide nothing: the plan package chooses values, the txn package
// journals and applies them.
package knob

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrNotSupported marks a setting this host cannot have (no such sysctl, a qdisc
// kind the kernel lacks, a driver that refuses). Wrapped by errors of all kinds.
var ErrNotSupported = errors.New("not supported on this host")

// Absent is the value of a knob whose object does not exist (a file not yet
// written, no ingress shaping). Writing Absent removes the object.
const Absent = "<absent>"

// Knob is one setting.
type Knob interface {
	// ID is the stable identifier, "<kind>/<target>".
	ID() string
	// Read returns the live value in canonical form.
	Read(ctx context.Context) (string, error)
	// Write sets the value. It does not verify; callers Read back.
	Write(ctx context.Context, value string) error
	// Satisfied reports whether a live value meets a desired one.
	Satisfied(live, desired string) bool
}

// Exact is for restores: a knob whose values carry more than Satisfied compares
// (a qdisc's "@default" marker) implements it to verify a restore precisely.
type Exact interface {
	Same(a, b string) bool
}

// Same reports whether a and b are the same value for k: Exact when the knob
// has it, otherwise mutual satisfaction.
func Same(k Knob, a, b string) bool {
	if e, ok := k.(Exact); ok {
		return e.Same(a, b)
	}
	return k.Satisfied(a, b) && k.Satisfied(b, a)
}

// Restorer is implemented by knobs some of whose live values lowlat can read
// but not recreate exactly (a qdisc read as @unmanaged: a filter on the root,
// a rate estimator). Restorable says why such a value, recorded as a previous
// value, could not be written back; an apply refuses to replace it unless
// forced. Fallback is what a rollback writes instead after a forced apply: the
// state the kernel gives by itself (its default qdisc, no ingress shaping).
type Restorer interface {
	Restorable(value string) error
	Fallback(value string) string
}

// Validator is implemented by knobs that can reject a value before any write
// (a malformed qdisc spec, a non-numeric initcwnd).
type Validator interface {
	Validate(value string) error
}

// Kind returns the kind part of a knob ID.
func Kind(id string) string {
	k, _, _ := strings.Cut(id, "/")
	return k
}

// New returns the knob for id on sys.
func New(sys *System, id string) (Knob, error) {
	kind, rest, ok := strings.Cut(id, "/")
	if !ok || rest == "" {
		return nil, fmt.Errorf("knob %q: want <kind>/<target>", id)
	}
	switch kind {
	case "sysctl":
		return newSysctl(sys, rest)
	case "sysfs":
		return newSysfs(sys, rest)
	case "file":
		return newFile(sys, "/"+rest)
	case "link":
		return newLink(sys, "/"+rest)
	case "qdisc":
		return newQdisc(sys, rest)
	case "route":
		return newRoute(sys, rest)
	case "ethtool":
		return newEthtool(sys, rest)
	case "irq":
		return newIRQ(sys, rest)
	case "queue":
		return newQueue(sys, rest)
	case "service":
		return newService(sys, rest)
	case "irqbalance":
		return newIRQBalance(sys, rest)
	case "cpufreq":
		return newCpufreq(sys, rest)
	case "block":
		return newBlock(sys, rest)
	case "dropin":
		return newDropin(sys, rest)
	case "sockopt":
		return newSockopt(sys, rest)
	case "socket":
		return newSocket(sys, rest)
	case "bpffs":
		return newBPFFS(sys, rest)
	case "autorate":
		return newAutorate(sys, rest)
	case "mss":
		return newMSS(sys, rest)
	}
	return nil, fmt.Errorf("knob %q: unknown kind %q (known: sysctl, sysfs, file, link, qdisc, route, ethtool, irq, queue, service, irqbalance, cpufreq, block, dropin, sockopt, socket, bpffs, autorate, mss)", id, kind)
}

// Verify reads k back and checks it against want.
func Verify(ctx context.Context, k Knob, want string) error {
	got, err := k.Read(ctx)
	if err != nil {
		return fmt.Errorf("%s: read back: %w", k.ID(), err)
	}
	if !k.Satisfied(got, want) {
		return fmt.Errorf("%s: wrote %q but the kernel reports %q", k.ID(), want, got)
	}
	return nil
}
