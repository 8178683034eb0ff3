package plan

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/sockops"
)

// socketRows plans one [[sockets]] option: the sock_ops entry that new
// connections get and, for an option an open connection can take, the
// connections that exist now (set through pidfd_getfd).
func socketRows(f *host.Facts, s profile.Setting) []Change {
	sel, opt, err := sockops.SplitSetting(s.Name)
	if err != nil {
		c := row(s, "sockopt/"+s.Name)
		c.Current, c.Desired = "-", s.Value
		c.unsupported(err.Error())
		return []Change{c}
	}
	ids := knob.SockoptIDs(sel, opt)
	value := opt.Canon(s.Value)
	entry := row(s, ids[0])
	entry.Desired = value
	so := f.SockOps
	why := ""
	switch {
	case so == nil:
		entry.Current = Unknown
		entry.decide(false)
		entry.Note = "sock_ops support is probed on the host itself, not from captured facts"
	case so.Unsupported != "":
		why = so.Unsupported
	case so.Refused[opt.String()] != "":
		why = fmt.Sprintf("bpf_setsockopt in sock_ops refuses %s on this kernel (%s)", opt, so.Refused[opt.String()])
	case opt == sockops.Congestion && congestionMissing(f, value) != "":
		why = congestionMissing(f, value)
	case sel.Outbound() && so.Unresolved[sel.String()] != "":
		why = so.Unresolved[sel.String()]
	default:
		entry.Current = knob.Absent
		if v, ok := so.Entries[sel.String()][opt.String()]; ok {
			entry.Current = v
		}
		var notes []string
		if entry.Current != knob.Absent && slices.Contains(so.Detached, sel.String()) {
			entry.Current = knob.Detached
			notes = append(notes, "its entry is pinned but the program is no longer attached (its cgroup was re-created): apply attaches it again")
		}
		entry.decide(entry.Current == value)
		if sel.Outbound() {
			notes = append(notes, "the connections its processes open, by a program attached at its cgroup "+so.Cgroups[sel.String()])
		} else if !listening(f, sel.Port) {
			notes = append(notes, fmt.Sprintf("nothing listens on port %d now: applies to the connections of a future listener", sel.Port))
		}
		if !so.NetnsCookie {
			notes = append(notes, fmt.Sprintf("this kernel's sock_ops cannot tell network namespaces apart (5.15): applies to port %d in every namespace", sel.Port))
		}
		if !opt.Live() {
			notes = append(notes, "new connections only: an open connection cannot take it")
		}
		entry.Note = strings.Join(notes, "; ")
	}
	if why != "" {
		entry.Current = "-"
		entry.unsupported(why)
	}
	if len(ids) == 1 {
		return []Change{entry}
	}

	open := row(s, ids[1])
	open.Desired = "*=" + value
	est, known, have := portConns(f, sel.Port, opt)
	switch {
	case why != "":
		open.Current = "-"
		open.unsupported(why)
	case !f.Kernel.Pidfd:
		open.Current = "-"
		open.unsupported("open connections: this kernel has no pidfd_getfd (5.6); new connections get the option")
	case sel.Outbound():
		open.Current = Unknown
		open.decide(false)
		open.Note = "its processes' open connections are found, read, journaled and set at apply"
	case est == 0:
		open.Current = knob.NoConnections
		open.decide(true)
		open.Note = "no open connection on the port now"
	case opt == sockops.NoDelay && known == est:
		open.Current = fmt.Sprintf("%d open, %d with nodelay", est, have)
		open.decide(have == est)
	default:
		open.Current = fmt.Sprintf("%d open", est)
		open.decide(false)
		open.Note = "each connection's value is read, journaled and set at apply"
	}
	return []Change{entry, open}
}

// listening reports whether a process listens on port, by the socket audit.
func listening(f *host.Facts, port uint16) bool {
	if f.Sockets == nil {
		return true // not known: say nothing
	}
	for _, p := range f.Sockets.Processes {
		for _, l := range p.Listeners {
			if l.Port == port {
				return true
			}
		}
	}
	return false
}

// portConns counts the established connections on local port, how many
// have known options, and how many have TCP_NODELAY.
func portConns(f *host.Facts, port uint16, opt sockops.Option) (est, known, nodelay int) {
	if f.Sockets == nil {
		return 0, 0, 0
	}
	for _, p := range f.Sockets.Processes {
		for _, b := range p.ByPort {
			if b.Port == port {
				est += b.Established
				known += b.OptionsKnown
				nodelay += b.NoDelay
			}
		}
	}
	return est, known, nodelay
}

// withBPFFS puts, before the first sockopt row to apply, the mount of bpffs
// where nothing has mounted one: lowlat's pins need it, and as a knob of
// its own it is journaled, so a rollback unmounts it after the pins are
// gone (rollback runs in reverse).
func withBPFFS(f *host.Facts, rows []Change) []Change {
	if f.SockOps == nil || f.SockOps.MountBPFFS == "" {
		return rows
	}
	for i, c := range rows {
		if c.Action != Set || knob.Kind(c.Knob) != "sockopt" {
			continue
		}
		m := Change{Knob: "bpffs" + f.SockOps.MountBPFFS, Current: knob.Absent, Desired: knob.BPFFSMounted,
			Supported: true, Action: Set, Setting: c.Setting, Source: c.Source,
			Reason: "sock_ops pins live in bpffs, and nothing has mounted it here",
			Note:   "a rollback unmounts it once nothing is pinned there"}
		return slices.Insert(rows, i, m)
	}
	return rows
}
