package host

import (
	"errors"
	"os"

	"github.com/lowlat/lowlat/internal/mssclamp"
)

// MSSClamp is TCP MSS clamping in one network namespace (package
// mssclamp).
type MSSClamp struct {
	// Unsupported says why this kernel cannot clamp (no nf_tables, no TCP
	// option rewriting); "" when it can, or when that could not be told
	// (Unreadable).
	Unsupported string `json:"unsupported,omitempty"`
	// Unreadable says why the clamps in force could not be read (nftables
	// needs CAP_NET_ADMIN even to list): Clamps is then unknown, not empty.
	Unreadable string `json:"unreadable,omitempty"`
	// Clamps maps an interface to its clamp table as the knob mss/<iface>
	// reads it ("536", "@unmanaged: ..."); interfaces without one are
	// absent.
	Clamps map[string]string `json:"clamps,omitempty"`
}

// GatherMSSClamp fills Facts.MSSClamp on the live host. It probes by
// trying: one nftables batch that creates a clamp's table under a name of
// its own and deletes it again, which the kernel commits whole or refuses
// whole, so nothing is left (monitors of the ruleset see the table come and
// go). Facts from a capture or a tree are left alone: their clamps are
// unknown.
func GatherMSSClamp(f *Facts) {
	if f.Source != "live" || f.MSSClamp != nil {
		return
	}
	m := &MSSClamp{}
	f.MSSClamp = m
	unreadable := func(err error) {
		m.Unreadable = err.Error()
		f.Errors = append(f.Errors, FactError{Source: "nftables", Err: err.Error()})
	}
	if err := mssclamp.Probe(); err != nil {
		if errors.Is(err, os.ErrPermission) || !errors.Is(err, mssclamp.ErrNotSupported) {
			unreadable(err)
		} else {
			m.Unsupported = err.Error()
		}
		return
	}
	all, err := mssclamp.List()
	if err != nil {
		unreadable(err)
		return
	}
	for iface, st := range all {
		if m.Clamps == nil {
			m.Clamps = map[string]string{}
		}
		m.Clamps[iface] = st.String()
	}
}
