package knob

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// IFBName is the IFB device lowlat creates for ingress shaping of iface, named as
// sqm-scripts does ("ifb4eth0") and kept within IFNAMSIZ.
func IFBName(iface string) string {
	name := "ifb4" + iface
	if len(name) <= 15 {
		return name
	}
	var h uint32 = 2166136261
	for i := 0; i < len(iface); i++ {
		h = (h ^ uint32(iface[i])) * 16777619
	}
	return fmt.Sprintf("ifb4%s%04x", iface[:7], h&0xffff)
}

// parseQdiscID splits "eth0/root" or "eth0/ingress".
func parseQdiscID(rest string) (iface, where string, err error) {
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", fmt.Errorf("qdisc knob %q: want qdisc/<iface>/root or qdisc/<iface>/ingress", rest)
	}
	iface, where = rest[:i], rest[i+1:]
	if where != "root" && where != "ingress" {
		return "", "", fmt.Errorf("qdisc knob %q: want root or ingress, not %q", rest, where)
	}
	if len(iface) > 15 || strings.ContainsAny(iface, "/ ") {
		return "", "", fmt.Errorf("qdisc knob %q: bad interface name %q", rest, iface)
	}
	return iface, where, nil
}

// QdiscSatisfied compares qdisc values: qdisc specs by qdisc.Satisfies, and the
// ingress knob's Absent marker literally.
func QdiscSatisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	l, err1 := qdisc.Parse(live)
	d, err2 := qdisc.Parse(desired)
	if err1 != nil || err2 != nil {
		return false
	}
	return qdisc.Satisfies(l, d)
}

// QdiscRootSatisfied is QdiscSatisfied for the root qdisc of iface on sys,
// knowing lowlat autorate: a live shaper that differs from desired only in
// its rate (see AutorateShaper) satisfies it while iface has an autorate policy
// whose range holds that rate. The rate autorate moves is not journaled;
// its policy is, and a rate outside the policy is still drift.
func QdiscRootSatisfied(sys *System, iface, live, desired string) bool {
	if QdiscSatisfied(live, desired) {
		return true
	}
	p, ok := readAutoratePolicy(sys, iface)
	if !ok {
		return false
	}
	_, ok = AutorateShaper(live, desired, p)
	return ok
}

// AutorateShaper reports whether the live root qdisc is the desired one as
// lowlat autorate, under policy p, may have left it, and returns its rate
// in bit/s: it differs only in the rate (see shaperRate), which p allows,
// and in what follows the rate. A tbf at the desired rate may differ in its
// bucket alone, within the largest autorate gives a rate up to p's maximum:
// autorate keeps whole the packets a bucket let into the queue, and the
// one it sets when it stops can be over the profile's (see
// qdisc.ShaperBucketMax).
func AutorateShaper(live, desired string, p autorate.Policy) (uint64, bool) {
	if live == Absent || desired == Absent {
		return 0, false
	}
	l, err1 := qdisc.Parse(live)
	d, err2 := qdisc.Parse(desired)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	rate, same, ok := shaperRate(l, d)
	if !ok || !p.Contains(rate) {
		return 0, false
	}
	if same {
		b, err := qdisc.ParseSize(l.Opts["burst"])
		if err != nil || b > qdisc.ShaperBucketMax(p.Max) {
			return 0, false
		}
	}
	return rate, true
}

// shaperRate reports whether the live root qdisc l differs from the desired
// one d only in the shaper's rate, and returns the live rate in bit/s: both
// are cake, differing in bandwidth, or tbf, differing in rate and in the
// burst and limit that follow from it (the kernel keeps tbf's burst in
// timer ticks of the rate, and a latency becomes a limit at the rate).
// Everything else, the leaf included, must satisfy desired as it is. same
// is a tbf at the desired rate that differs only in what follows it (cake
// at the desired rate that does not satisfy d differs in something else).
func shaperRate(l, d qdisc.Spec) (rate uint64, same, ok bool) {
	if l.Kind != d.Kind {
		return 0, false, false
	}
	var key string
	var follow []string
	switch l.Kind {
	case "cake":
		key = "bandwidth"
	case "tbf":
		key, follow = "rate", []string{"burst", "limit", "latency"}
	default:
		return 0, false, false
	}
	lv, ok1 := l.Opt(key)
	dv, ok2 := d.Opt(key)
	if !ok1 || !ok2 {
		return 0, false, false
	}
	lr, err1 := qdisc.ParseRate(lv)
	dr, err2 := qdisc.ParseRate(dv)
	if err1 != nil || err2 != nil || lr == dr && l.Kind != "tbf" {
		return 0, false, false
	}
	// desired at the live rate, with the options that follow the rate as
	// they are live.
	moved := d
	moved.Opts = map[string]string{}
	for k, v := range d.Opts {
		if !slices.Contains(follow, k) {
			moved.Opts[k] = v
		}
	}
	moved.Opts[key] = lv
	for _, k := range follow {
		if v, ok := l.Opt(k); ok {
			moved.Opts[k] = v
		}
	}
	if !qdisc.Satisfies(l, moved) {
		return 0, false, false
	}
	return lr, lr == dr, true
}

// QdiscSame is exact equality (qdisc.Equal): for two values read by this
// lowlat, every option, preserved attribute, size table and handle must match;
// a value journaled by an older lowlat is compared on what it recorded.
func QdiscSame(a, b string) bool {
	if a == Absent || b == Absent {
		return a == b
	}
	x, err1 := qdisc.Parse(a)
	y, err2 := qdisc.Parse(b)
	return err1 == nil && err2 == nil && qdisc.Equal(x, y)
}

// ValidateQdisc rejects a value that is not a qdisc spec lowlat can write.
func ValidateQdisc(v string, ingress bool) error {
	if v == Absent && ingress {
		return nil
	}
	s, err := qdisc.Parse(v)
	if err != nil {
		return err
	}
	if !s.Managed() {
		return fmt.Errorf("%q is marked @unmanaged: lowlat cannot recreate it exactly", v)
	}
	return nil
}
