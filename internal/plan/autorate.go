package plan

import (
	"fmt"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// autorateRows plans an [autorate.policy] for each target interface: the
// knob autorate/<iface> with the policy for that interface. roots are the
// plan's qdisc rows so far: autorate needs a shaper at the root, the one
// this plan installs or the one in place.
func autorateRows(f *host.Facts, ifaces []*host.Interface, s profile.Setting, roots []Change) []Change {
	var out []Change
	for _, ifc := range ifaces {
		c := row(s, knob.AutorateID(ifc.Name))
		c.Current = knob.Absent
		if v, ok := f.Autorate[ifc.Name]; ok {
			c.Current = v
		}
		p, err := autorate.ParsePolicyFor(ifc.Name, s.Value)
		if err != nil {
			c.Desired = s.Value
			c.unsupported(err.Error())
			out = append(out, c)
			continue
		}
		c.Desired = p.String()
		if why := qdiscsUnknown(f, ifc); why != "" && !plansShaper(roots, ifc.Name) {
			c.unsupported(why + ": autorate needs a shaper at the root, and whether there is one is unknown")
			out = append(out, c)
			continue
		}
		if !plansShaper(roots, ifc.Name) && !isShaper(RootSpec(ifc)) {
			c.unsupported("no shaper: autorate needs the capped-uplink qdisc.root on " + ifc.Name)
			out = append(out, c)
			continue
		}
		c.decide(knob.AutorateSatisfied(c.Current, c.Desired))
		out = append(out, c)
	}
	return out
}

// plansShaper reports whether rows put a shaper at the root of iface.
func plansShaper(rows []Change, iface string) bool {
	for _, c := range rows {
		if c.Knob != "qdisc/"+iface+"/root" || c.Action == Skip {
			continue
		}
		if s, err := qdisc.Parse(c.Desired); err == nil && isShaper(s) {
			return true
		}
	}
	return false
}

// isShaper reports whether s is a root whose rate autorate can move: tbf,
// or cake with a bandwidth.
func isShaper(s qdisc.Spec) bool {
	if s.Unmanaged {
		return false
	}
	switch s.Kind {
	case "tbf":
		return true
	case "cake":
		bw, ok := s.Opt("bandwidth")
		return ok && bw != "0bit"
	}
	return false
}

// autorateMoved says why a live root that does not satisfy desired is still
// no change to make: it differs only in a rate that the interface's autorate
// policy allows (as status sees it: knob.QdiscRootSatisfied).
func autorateMoved(f *host.Facts, iface, live, desired string) (string, bool) {
	v, ok := f.Autorate[iface]
	if !ok {
		return "", false
	}
	p, err := autorate.ParsePolicy(v)
	if err != nil || p.Iface != iface {
		return "", false
	}
	rate, ok := knob.AutorateShaper(live, desired, p)
	if !ok {
		return "", false
	}
	return fmt.Sprintf("lowlat autorate has the rate at %s, within its policy's %s..%s", qdisc.FormatRate(rate), qdisc.FormatRate(p.Min), qdisc.FormatRate(p.Max)), true
}
