package host

import (
	"context"
	"os"
	"slices"

	"github.com/lowlat/lowlat/internal/sockets"
	"github.com/lowlat/lowlat/internal/sockops"
)

// GatherSockOps fills Facts.SockOps on the live host, and the socket audit
// (Facts.Sockets) if it was not gathered: a plan with [[sockets]] settings
// needs both, to say what the kernel accepts and which connections exist.
// It probes by attaching a throwaway program to lowlat's own cgroup for one
// loopback connection, which needs root; facts from a capture are left
// alone. selectors are the plan's; each cgroup or service one is resolved
// to its cgroup.
func GatherSockOps(ctx context.Context, f *Facts, selectors ...string) {
	if f.Source != "live" || f.SockOps != nil {
		return
	}
	if f.Sockets == nil {
		f.Sockets = sockets.Collect(ctx, NewRoot(""))
	}
	so := &SockOps{}
	f.SockOps = so
	if os.Geteuid() != 0 {
		so.Unsupported = "sock_ops needs root (CAP_BPF and CAP_NET_ADMIN)"
		return
	}
	sup, err := sockops.Probe()
	if err != nil {
		so.Unsupported = err.Error()
		return
	}
	so.NetnsCookie = sup.NetnsCookie
	if so.MountBPFFS, err = sockops.BPFFSToMount(); err != nil {
		so.Unsupported = err.Error()
		return
	}
	for _, s := range selectors {
		sel, err := sockops.ParseSelector(s)
		if err != nil || !sel.Outbound() {
			continue
		}
		if dir, err := sockops.CgroupOf(sel); err != nil {
			if so.Unresolved == nil {
				so.Unresolved = map[string]string{}
			}
			so.Unresolved[sel.String()] = err.Error()
		} else {
			if so.Cgroups == nil {
				so.Cgroups = map[string]string{}
			}
			so.Cgroups[sel.String()] = dir
		}
	}
	for o, err := range sup.Refused {
		if so.Refused == nil {
			so.Refused = map[string]string{}
		}
		so.Refused[o.String()] = err.Error()
	}
	h, err := sockops.Locate()
	if err == nil {
		var es map[sockops.Selector]sockops.Entry
		if es, err = h.Entries(); err == nil {
			for sel, e := range es {
				if so.Entries == nil {
					so.Entries = map[string]map[string]string{}
				}
				if on, aerr := h.Attached(sel); aerr != nil {
					f.Errors = append(f.Errors, FactError{Source: "sock_ops:" + sel.String(), Err: aerr.Error()})
				} else if !on {
					so.Detached = append(so.Detached, sel.String())
				}
				m := map[string]string{}
				for o, v := range e {
					m[o.String()] = v
				}
				so.Entries[sel.String()] = m
			}
		}
	}
	if err != nil {
		f.Errors = append(f.Errors, FactError{Source: "sock_ops:entries", Err: err.Error()})
	}
	slices.Sort(so.Detached)
}
