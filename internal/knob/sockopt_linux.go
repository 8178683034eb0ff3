package knob

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/sockops"
)

// sockopt/<selector>/<option> is one option of the sock_ops program's entry
// for a selector ("sockopt/port:7000/nodelay" = "1"): what new connections
// get. Absent means no entry for it; writing Absent removes it, and removing
// the last one detaches the program and its pins.
//
// An entry whose program is not attached reads Detached: the kernel
// detached it (its cgroup was re-created by a service restart) while the
// pins stayed, and new connections do not get the option. Writing a value
// attaches the pinned program again; a rollback to Detached (recorded when
// the apply found it so) removes the entry, which enforces as little.
//
// socket/<selector>/<option> is the same option on the connections that
// exist (pidfd_getfd + setsockopt). Its value lists them by socket inode,
// "INODE=VALUE ...", or "-" when there are none; the desired value "*=V"
// means every one. A restore writes back the listed values on those still
// open; connections opened since are left alone.

type sockoptKnob struct {
	id  string
	sel sockops.Selector
	opt sockops.Option
}

func parseSockoptTarget(kind, rest string) (sockops.Selector, sockops.Option, error) {
	sel, opt, err := sockops.SplitSetting(rest)
	if err != nil {
		return sockops.Selector{}, 0, fmt.Errorf("%s knob: %w", kind, err)
	}
	return sel, opt, nil
}

func newSockopt(sys *System, rest string) (Knob, error) {
	if sys != nil && sys.Root != "" {
		return nil, fmt.Errorf("sockopt knobs act on the running kernel, not on a file tree: %w", ErrNotSupported)
	}
	sel, opt, err := parseSockoptTarget("sockopt", rest)
	if err != nil {
		return nil, err
	}
	return &sockoptKnob{id: "sockopt/" + rest, sel: sel, opt: opt}, nil
}

func (k *sockoptKnob) ID() string { return k.id }

func (k *sockoptKnob) Validate(v string) error {
	if v == Absent || v == Detached {
		return nil
	}
	return k.opt.CheckValue(v)
}

func (k *sockoptKnob) Read(ctx context.Context) (string, error) {
	h, err := sockops.Locate()
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.id, err)
	}
	e, err := h.Read(k.sel)
	if err != nil {
		return "", err
	}
	v, ok := e[k.opt]
	if !ok {
		return Absent, nil
	}
	// The pins say what was attached, the kernel what is.
	on, err := h.Attached(k.sel)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.id, err)
	}
	if !on {
		return Detached, nil
	}
	return v, nil
}

func (k *sockoptKnob) Write(ctx context.Context, v string) error {
	h, err := sockops.Open()
	if err != nil {
		return fmt.Errorf("%s: %w", k.id, err)
	}
	e, err := h.Read(k.sel)
	if err != nil {
		return err
	}
	if v == Absent || v == Detached {
		delete(e, k.opt)
	} else {
		e[k.opt] = k.opt.Canon(v)
	}
	return h.Set(k.sel, e)
}

func (k *sockoptKnob) Satisfied(live, desired string) bool {
	switch {
	case desired == Detached:
		return live == Detached || live == Absent // enforcing nothing either way
	case live == Absent || desired == Absent || live == Detached:
		return live == desired
	}
	return k.opt.Canon(live) == k.opt.Canon(desired)
}

// Same is for restores. A recorded Detached is given back as no entry (the
// stale pins are not made again), and a live Detached is not a recorded
// Absent: its pins must go.
func (k *sockoptKnob) Same(live, recorded string) bool {
	if recorded == Detached {
		return live == Detached || live == Absent
	}
	return k.Satisfied(live, recorded) && k.Satisfied(recorded, live)
}

type socketKnob struct {
	id  string
	sel sockops.Selector
	opt sockops.Option
}

func newSocket(sys *System, rest string) (Knob, error) {
	if sys != nil && sys.Root != "" {
		return nil, fmt.Errorf("socket knobs act on live connections, not on a file tree: %w", ErrNotSupported)
	}
	sel, opt, err := parseSockoptTarget("socket", rest)
	if err != nil {
		return nil, err
	}
	if !opt.Live() {
		return nil, fmt.Errorf("socket knob %q: %s can be set on new connections only (sockopt/%s)", rest, opt, rest)
	}
	return &socketKnob{id: "socket/" + rest, sel: sel, opt: opt}, nil
}

// NoConnections is a socket knob's value when no connection matches.
const NoConnections = "-"

// parseConnValues parses "INODE=V ..." or "*=V" (inode 0) or "-".
func parseConnValues(v string) (map[uint64]string, error) {
	out := map[uint64]string{}
	if v == NoConnections {
		return out, nil
	}
	for _, f := range strings.Fields(v) {
		ino, val, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("bad connection value %q (want INODE=VALUE, *=VALUE or -)", f)
		}
		if ino == "*" {
			out[0] = val
			continue
		}
		n, err := strconv.ParseUint(ino, 10, 64)
		if err != nil || n == 0 {
			return nil, fmt.Errorf("bad socket inode %q in %q", ino, f)
		}
		out[n] = val
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty connection value (want INODE=VALUE, *=VALUE or -)")
	}
	return out, nil
}

func formatConnValues(m map[uint64]string) string {
	if len(m) == 0 {
		return NoConnections
	}
	inos := make([]uint64, 0, len(m))
	for i := range m {
		inos = append(inos, i)
	}
	slices.Sort(inos)
	parts := make([]string, len(inos))
	for i, ino := range inos {
		parts[i] = strconv.FormatUint(ino, 10) + "=" + m[ino]
	}
	return strings.Join(parts, " ")
}

func (k *socketKnob) ID() string { return k.id }

func (k *socketKnob) Validate(v string) error {
	m, err := parseConnValues(v)
	if err != nil {
		return fmt.Errorf("%s: %w", k.id, err)
	}
	for _, val := range m {
		if err := k.opt.CheckValue(val); err != nil {
			return fmt.Errorf("%s: %w", k.id, err)
		}
	}
	return nil
}

func (k *socketKnob) Read(ctx context.Context) (string, error) {
	conns, err := sockops.Conns(ctx, k.sel)
	if err != nil {
		return "", err
	}
	m := map[uint64]string{}
	for _, c := range conns {
		if c.PID == 0 {
			continue // no visible owner: neither read nor set
		}
		v, err := sockops.ReadConn(c, k.opt)
		if errors.Is(err, sockops.ErrGone) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: read %s: %w", k.id, c, err)
		}
		m[c.Inode] = v
	}
	return formatConnValues(m), nil
}

func (k *socketKnob) Write(ctx context.Context, v string) error {
	want, err := parseConnValues(v)
	if err != nil {
		return fmt.Errorf("%s: %w", k.id, err)
	}
	if len(want) == 0 {
		return nil
	}
	conns, err := sockops.Conns(ctx, k.sel)
	if err != nil {
		return err
	}
	for _, c := range conns {
		val, ok := want[c.Inode]
		if !ok {
			val, ok = want[0]
		}
		if !ok || c.PID == 0 {
			continue
		}
		if _, err := sockops.SetConn(c, k.opt, val); err != nil && !errors.Is(err, sockops.ErrGone) {
			return fmt.Errorf("%s: %w", k.id, err)
		}
	}
	return nil
}

// Satisfied compares the connections both values name; "*=V" in desired
// stands for every connection, "-" for none.
func (k *socketKnob) Satisfied(live, desired string) bool {
	l, err1 := parseConnValues(live)
	d, err2 := parseConnValues(desired)
	if err1 != nil || err2 != nil {
		return live == desired
	}
	for ino, lv := range l {
		dv, ok := d[ino]
		if !ok {
			dv, ok = d[0]
		}
		if ok && k.opt.Canon(lv) != k.opt.Canon(dv) {
			return false
		}
	}
	return true
}
