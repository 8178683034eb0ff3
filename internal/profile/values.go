package profile

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/mssclamp"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/sockops"
)

// Values may use parameters: ${rate}, ${rate*0.9}, and helpers for shapers:
// ${codel_target(rate*0.9)} (CoDel's target raised to 1.5 MTU serialization
// time at low rates, as sqm-scripts does; 5 ms otherwise),
// ${tbf_burst(rate*0.9)} (2 MTU, or 1 ms of traffic at high rates, so the
// shaper neither bursts at low rates nor starves its timer at high ones) and
// ${tbf_latency(rate*0.9)} (tbf's latency such that its whole queue, bucket
// included, drains in MaxTbfQueue).
var templateRE = regexp.MustCompile(`\$\{([^}]*)\}`)

var exprRE = regexp.MustCompile(`^\s*(?:([a-z_]+)\(\s*)?([A-Za-z_][A-Za-z0-9_-]*)\s*(?:\*\s*([0-9]*\.?[0-9]+)\s*)?(\))?\s*$`)

const mtu = 1514

type expr struct {
	fn     string
	param  string
	factor float64
}

func parseExpr(s string) (expr, error) {
	m := exprRE.FindStringSubmatch(s)
	if m == nil || (m[1] != "") != (m[4] != "") {
		return expr{}, fmt.Errorf("bad template ${%s} (want ${name}, ${name*0.9} or ${codel_target(name*0.9)})", s)
	}
	e := expr{fn: m[1], param: m[2], factor: 1}
	if m[3] != "" {
		f, err := strconv.ParseFloat(m[3], 64)
		if err != nil || f <= 0 || f > 100 {
			return expr{}, fmt.Errorf("bad factor in ${%s}", s)
		}
		e.factor = f
	}
	switch e.fn {
	case "", "codel_target", "tbf_burst", "tbf_latency":
	default:
		return expr{}, fmt.Errorf("unknown function %s() in ${%s} (known: codel_target, tbf_burst, tbf_latency)", e.fn, s)
	}
	return e, nil
}

// placeholder returns a syntactically valid stand-in for a template, so values
// can be checked before parameters are known.
func placeholder(section string, e expr) string {
	switch e.fn {
	case "codel_target", "tbf_latency":
		return "5ms"
	case "tbf_burst":
		return "3028"
	}
	switch section {
	case "qdisc":
		return "1mbit"
	case "mss":
		return "auto"
	}
	return "1"
}

// checkValue validates a value's syntax for its section.
func checkValue(section, name, val string) error {
	var terr error
	v := templateRE.ReplaceAllStringFunc(val, func(m string) string {
		e, err := parseExpr(m[2 : len(m)-1])
		if err != nil {
			terr = err
			return m
		}
		return placeholder(section, e)
	})
	if terr != nil {
		return terr
	}
	if section == "autorate" && v != val {
		// Rates and lists may come from parameters: the policy as a whole
		// is checked once they are bound (Resolve).
		return checkAutorate(v, false)
	}
	return checkResolved(section, name, v)
}

func checkResolved(section, name, v string) error {
	if strings.TrimSpace(v) == "" {
		return fmt.Errorf("empty value")
	}
	if strings.ContainsAny(v, "\n\r") {
		return fmt.Errorf("value has a line break")
	}
	switch section {
	case "qdisc":
		if name == "ingress" && v == "none" {
			return nil
		}
		s, err := qdisc.Parse(v)
		if err != nil {
			return err
		}
		if s.Default || s.Unmanaged {
			return fmt.Errorf("@default and @unmanaged describe live state, not something to set")
		}
		if !qdisc.Creatable(s.Kind) {
			return fmt.Errorf("qdisc %s cannot be created explicitly", s.Kind)
		}
	case "route":
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n > 1024 {
			return fmt.Errorf("bad %s %q (want 0 for the kernel default, or 1..1024)", name, v)
		}
	case "ethtool", "irq", "nvme", "cpu":
		return checkNICValue(section, name, v)
	case "autorate":
		return checkAutorate(v, true)
	case "mss":
		_, err := mssclamp.ParseSetting(v)
		return err
	case "sockets":
		_, opt, err := sockops.SplitSetting(name)
		if err != nil {
			return err
		}
		return opt.CheckValue(v)
	}
	return nil
}

// policyIface stands for each interface an [autorate.policy] is planned
// for, in the errors of checking it.
const policyIface = "IFACE"

// checkAutorate checks an [autorate.policy] value: an autorate policy
// without iface= (the plan gives it each target interface), its rates in
// bit/s or tc's units ("min=1mbit base=1800kbit max=3mbit passive=on"). whole
// checks the policy itself too, not only its shape.
func checkAutorate(v string, whole bool) error {
	for _, f := range strings.Fields(v) {
		k, _, ok := strings.Cut(f, "=")
		if !ok {
			return fmt.Errorf("%q is not key=value", f)
		}
		if k == "iface" {
			return fmt.Errorf("leave iface= out: the policy is planned for each target interface")
		}
	}
	if !whole {
		return nil
	}
	_, err := autorate.ParsePolicyFor(policyIface, v)
	return err
}

// parseParam checks and canonicalises a parameter value by type.
func parseParam(p Param, v string) (string, error) {
	switch p.Type {
	case "rate":
		r, err := qdisc.ParseRate(v)
		if err != nil {
			return "", err
		}
		if r < 64_000 {
			return "", fmt.Errorf("rate %s is below 64kbit; lowlat will not shape that low", v)
		}
		return qdisc.FormatRate(r), nil
	case "int":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("bad integer %q", v)
		}
		return strconv.FormatInt(n, 10), nil
	case "mss":
		// One word: auto, off or bytes (a target belongs to the setting).
		c, err := mssclamp.ParseSetting(v)
		if err != nil {
			return "", err
		}
		if strings.ContainsAny(v, " \t") {
			return "", fmt.Errorf("want auto, off or a byte count, one word")
		}
		w, _, _ := strings.Cut(c.String(), " ")
		return w, nil
	}
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("empty value")
	}
	return v, nil
}

// expand substitutes parameter templates in v.
func expand(v string, params map[string]string, types map[string]string) (string, error) {
	var err error
	out := templateRE.ReplaceAllStringFunc(v, func(m string) string {
		if err != nil {
			return m
		}
		e, perr := parseExpr(m[2 : len(m)-1])
		if perr != nil {
			err = perr
			return m
		}
		val, ok := params[e.param]
		if !ok {
			err = fmt.Errorf("${%s}: parameter %s is not set", m[2:len(m)-1], e.param)
			return m
		}
		if e.fn == "" && e.factor == 1 {
			return val
		}
		if types[e.param] != "rate" {
			err = fmt.Errorf("${%s}: %s is a %s parameter; only rates can be scaled", m[2:len(m)-1], e.param, types[e.param])
			return m
		}
		r, _ := qdisc.ParseRate(val)
		// Round scaled rates to whole kbit so plans read well.
		rate := uint64(math.Round(float64(r)*e.factor/1000)) * 1000
		switch e.fn {
		case "codel_target":
			return qdisc.FormatTime(CodelTarget(rate))
		case "tbf_burst":
			return qdisc.FormatSize(TbfBurst(rate))
		case "tbf_latency":
			return qdisc.FormatTime(TbfLatency(rate))
		}
		return qdisc.FormatRate(rate)
	})
	return out, err
}

// CodelTarget is CoDel's target for a link of the given rate: 5 ms, raised to
// 1.5 MTU serialization times when that is longer (7-9 ms at 2 Mbit/s), rounded
// up to 100 us.
func CodelTarget(rateBits uint64) time.Duration {
	t := 5 * time.Millisecond
	if rateBits > 0 {
		ser := time.Duration(1.5 * mtu * 8 / float64(rateBits) * float64(time.Second))
		t = max(t, ser)
	}
	return (t + 99*time.Microsecond) / (100 * time.Microsecond) * (100 * time.Microsecond)
}

// MaxTbfQueue is the longest a packet waits in a plain tbf shaper sized by
// TbfLatency: its whole queue (limit) drains in this time.
const MaxTbfQueue = 20 * time.Millisecond

// TbfLatency is tbf's latency parameter for a shaper without an AQM leaf,
// chosen so that latency plus the bucket's own drain time (burst/rate) is
// MaxTbfQueue: tbf's byte limit is rate*latency + burst, so a tail packet can
// wait that long. At least 2 ms, so the queue holds a packet or two.
func TbfLatency(rateBits uint64) time.Duration {
	if rateBits == 0 {
		return MaxTbfQueue
	}
	burst := time.Duration(float64(TbfBurst(rateBits)) * 8 / float64(rateBits) * float64(time.Second))
	l := max(MaxTbfQueue-burst, 2*time.Millisecond)
	return l.Round(100 * time.Microsecond)
}

// TbfBurst is a token bucket size for the rate: two MTUs, or 1 ms of traffic.
func TbfBurst(rateBits uint64) uint64 {
	return max(2*mtu, rateBits/8/1000)
}
