package plan

import (
	"fmt"
	"strconv"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/mssclamp"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// mssRows plans an [mss.clamp] for each target interface: the knob
// mss/<iface>. "off" plans nothing (the profile leaves clamping alone);
// auto takes the clamp from the lowest rate the interface's shaper is
// expected to run at: the minimum of an autorate policy the profile
// journals (policies), else the rate of the shaper this plan installs
// (rows), else of the one in place. A clamp that auto finds unneeded (a
// full frame already fits the target) is no table.
func mssRows(f *host.Facts, ifaces []*host.Interface, s profile.Setting, rows []Change, policies []profile.Setting) []Change {
	set, err := mssclamp.ParseSetting(s.Value)
	if err == nil && set.Off() {
		return nil
	}
	var out []Change
	for _, ifc := range ifaces {
		c := row(s, knob.MSSID(ifc.Name))
		c.Current, c.Desired = knob.Absent, s.Value
		m := f.MSSClamp
		switch {
		case m == nil || m.Unreadable != "":
			c.Current = Unknown
		case m.Clamps[ifc.Name] != "":
			c.Current = m.Clamps[ifc.Name]
		}
		if err != nil {
			c.unsupported(err.Error())
			out = append(out, c)
			continue
		}
		if m != nil && m.Unsupported != "" {
			c.unsupported(m.Unsupported)
			out = append(out, c)
			continue
		}
		rate, from := lowestRate(ifc, rows, policies)
		if set.Auto {
			if rate == 0 {
				c.unsupported(fmt.Sprintf("clamp auto needs the rate %s is shaped at, and it has no shaper (tbf, or cake with a bandwidth) here or in this plan", ifc.Name))
				out = append(out, c)
				continue
			}
			n, clamp := mssclamp.Auto(rate, set.Target)
			if !clamp {
				c.Desired = knob.Absent
				c.Note = fmt.Sprintf("auto: no clamp: a full %d-byte frame takes %s at %s (%s), within the %s target", mssclamp.FullFrame, ms(mssclamp.FrameTime(mssclamp.FullFrame, rate)), qdisc.FormatRate(rate), from, set.Target)
			} else {
				c.Desired = strconv.Itoa(n)
				c.Note = "auto: " + mssCost(n, rate, from)
			}
		} else {
			c.Desired = strconv.Itoa(set.MSS)
			if rate > 0 {
				c.Note = mssCost(set.MSS, rate, from)
			}
		}
		switch {
		case c.Current == Unknown:
			// The clamps in force could not be read here; the apply reads
			// the live table before it writes.
			c.Supported, c.Action = true, Set
			c.Note = joinNotes(c.Note, "the clamp in force is unknown here ("+unknownWhy(m)+")")
		default:
			c.decide(knob.MSSSatisfied(c.Current, c.Desired))
		}
		out = append(out, c)
	}
	return out
}

func unknownWhy(m *host.MSSClamp) string {
	if m == nil {
		return "not read: facts from a capture or a tree, or not gathered"
	}
	return m.Unreadable
}

// mssCost says what a clamp of n bytes gains and costs at rate: the frame
// time against a full frame's, and the share of headers.
func mssCost(n int, rate uint64, from string) string {
	frame := n + mssclamp.FrameOverhead
	return fmt.Sprintf("%d-byte frames take %s at %s (%s) instead of %s for %d bytes; headers are %.1f %% of the rate instead of %.1f %%",
		frame, ms(mssclamp.FrameTime(frame, rate)), qdisc.FormatRate(rate), from,
		ms(mssclamp.FrameTime(mssclamp.FullFrame, rate)), mssclamp.FullFrame,
		100*mssclamp.HeaderShare(n), 100*mssclamp.HeaderShare(mssclamp.FullFrame-mssclamp.FrameOverhead))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", d.Seconds()*1000) }

// lowestRate is the lowest rate iface's shaper is expected to run at, in
// bit/s, and where it comes from; 0 when there is no shaper to tell.
func lowestRate(ifc *host.Interface, rows []Change, policies []profile.Setting) (uint64, string) {
	for _, s := range policies {
		if p, err := autorate.ParsePolicyFor(ifc.Name, s.Value); err == nil && p.Min > 0 {
			return p.Min, "autorate's min"
		}
	}
	for _, c := range rows {
		if c.Knob != "qdisc/"+ifc.Name+"/root" || c.Action == Skip {
			continue
		}
		if s, err := qdisc.Parse(c.Desired); err == nil {
			if r, ok := shaperRateOf(s); ok {
				return r, "the shaper's rate"
			}
		}
	}
	if r, ok := shaperRateOf(RootSpec(ifc)); ok {
		return r, "the rate of the shaper in place"
	}
	return 0, ""
}

// shaperRateOf is the rate of a shaper at the root: tbf's rate, or cake's
// bandwidth.
func shaperRateOf(s qdisc.Spec) (uint64, bool) {
	if !isShaper(s) {
		return 0, false
	}
	key := "rate"
	if s.Kind == "cake" {
		key = "bandwidth"
	}
	v, ok := s.Opt(key)
	if !ok {
		return 0, false
	}
	r, err := qdisc.ParseRate(v)
	return r, err == nil && r > 0
}
