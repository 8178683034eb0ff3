package gate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Term is one SLO term, "p99<=8ms": Metric Op Value, Value in the metric's
// own unit (ms, %, Mbit/s, or a bare number).
type Term struct {
	Metric string  `json:"metric"`
	Op     string  `json:"op"`
	Value  float64 `json:"value"`
	// Text is the term as written, for reports.
	Text string `json:"text"`
}

// SLO is a list of terms, all of which must hold.
type SLO []Term

// ops, longest first so "<=" is not read as "<".
var ops = []string{"<=", ">=", "<", ">"}

// units converts an SLO value's unit to the metric's own, per class.
var units = map[unitClass]map[string]float64{
	classTime:  {"us": 1e-3, "µs": 1e-3, "ms": 1, "s": 1e3},
	classPct:   {"%": 1},
	classRate:  {"kbit": 1e-3, "mbit": 1, "gbit": 1e3},
	classCount: {"": 1},
}

// unitNames lists the units a class takes, for error messages.
var unitNames = map[unitClass]string{
	classTime:  "us, ms or s",
	classPct:   "%",
	classRate:  "kbit, mbit or gbit",
	classCount: "no unit",
}

// ParseSLO parses "p99<=8ms,loss<=1%": comma-separated terms of metric,
// operator (<=, <, >=, >) and value with the metric's unit. An empty string
// is no SLO. Each error names the term.
func ParseSLO(s string) (SLO, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var slo SLO
	for _, raw := range strings.Split(s, ",") {
		t, err := parseTerm(strings.TrimSpace(raw))
		if err != nil {
			return nil, err
		}
		slo = append(slo, t)
	}
	return slo, nil
}

func parseTerm(s string) (Term, error) {
	if s == "" {
		return Term{}, errors.New("empty term (want metric OP value, e.g. p99<=8ms)")
	}
	i, op := -1, ""
	for _, o := range ops {
		if j := strings.Index(s, o); j >= 0 && (i < 0 || j < i) {
			i, op = j, o
		}
	}
	if i < 0 {
		if strings.Contains(s, "=") {
			return Term{}, fmt.Errorf("term %q: operator must be <=, <, >= or >", s)
		}
		return Term{}, fmt.Errorf("term %q: want metric OP value, e.g. p99<=8ms", s)
	}
	name := strings.ToLower(strings.TrimSpace(s[:i]))
	val := strings.TrimSpace(s[i+len(op):])
	if strings.ContainsAny(name, "=<>!") || strings.ContainsAny(val, "=<>") {
		return Term{}, fmt.Errorf("term %q: operator must be <=, <, >= or >", s)
	}
	d, ok := metrics[name]
	if !ok {
		return Term{}, fmt.Errorf("term %q: unknown metric %q (known: %s)", s, name, strings.Join(known(), ", "))
	}
	if val == "" {
		return Term{}, fmt.Errorf("term %q: no value after %s", s, op)
	}
	// The number is the longest prefix that parses; the rest is the unit.
	j := strings.IndexFunc(val, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r == '.' || r == '-' || r == '+' || r == 'e' || r == 'E')
	})
	num, unit := val, ""
	if j >= 0 {
		num, unit = val[:j], strings.ToLower(strings.TrimSpace(val[j:]))
	}
	x, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
		return Term{}, fmt.Errorf("term %q: %q is not a number", s, num)
	}
	if x < 0 {
		return Term{}, fmt.Errorf("term %q: value must not be negative", s)
	}
	if d.class == classRate {
		unit = strings.TrimSuffix(strings.TrimSuffix(unit, "/s"), "ps")
	}
	f, ok := units[d.class][unit]
	if !ok {
		if unit == "" {
			return Term{}, fmt.Errorf("term %q: %s needs a unit (%s)", s, name, unitNames[d.class])
		}
		return Term{}, fmt.Errorf("term %q: unit %q does not fit %s (want %s)", s, unit, name, unitNames[d.class])
	}
	if d.class == classPct && x > 100 {
		return Term{}, fmt.Errorf("term %q: a percentage is at most 100", s)
	}
	return Term{Metric: name, Op: op, Value: x * f, Text: s}, nil
}

func known() []string {
	var out []string
	for name := range metrics {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// Check reports a term whose metric the probe kind does not produce: the
// SLO could never be judged.
func (s SLO) Check(kind string) error {
	for _, t := range s {
		if !slices.Contains(metrics[t.Metric].kinds, kind) {
			return fmt.Errorf("term %q: a %s probe does not report %s (it reports %s)", t.Text, kind, t.Metric, strings.Join(Metrics(kind), ", "))
		}
	}
	return nil
}

// String is the SLO as comma-separated terms.
func (s SLO) String() string {
	var parts []string
	for _, t := range s {
		parts = append(parts, t.Text)
	}
	return strings.Join(parts, ",")
}

// holds says whether value x meets the term.
func (t Term) holds(x float64) bool {
	switch t.Op {
	case "<=":
		return x <= t.Value
	case "<":
		return x < t.Value
	case ">=":
		return x >= t.Value
	case ">":
		return x > t.Value
	}
	return false
}
