package cli

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/canaryprom"
	"github.com/lowlat/lowlat/internal/monitor"
)

// fakeProm is an httptest fake of Prometheus's query API
// (/api/v1/query and /api/v1/query_range) for the canary judge's tests. It
// evaluates the few shapes of PromQL the judge sends (and main's before
// it) over a fleet the test describes, from the raw probes each host's
// parts draw every grain: a quantile is the exact quantile of the probes
// pooled as the query's "by" pools them (native), or interpolated in the
// monitor's doubling buckets as histogram_quantile does (classic).
type fakeProm struct {
	srv   *httptest.Server
	fleet []fakeNode
	// grain is the time each draw covers: queries' steps and ranges are
	// multiples of it.
	grain time.Duration
	// change is when the canary hosts changed: grains after it draw their
	// parts' after values.
	change time.Time
	// classic: the server has only classic _bucket series (else only the
	// native ones, as a server run with native histograms).
	classic bool
	// warnings are sent with every answer, as Thanos does with a store
	// down; status makes every answer fail with it (0: 200).
	warnings []string
	status   int
	// auth is the basic auth every request must carry ("": none).
	auth string
	// onRequest runs before each answer (nil: nothing).
	onRequest func()

	requests atomic.Int64
	mu       sync.Mutex
	queries  []fakeQuery
}

// fakeQuery is one request the fake answered.
type fakeQuery struct {
	Path, Query string
	End         time.Time // the range query's end, or the instant's time
}

// fakeNode is one host: its labels (instance is its name) and its parts.
type fakeNode struct {
	name   string
	labels map[string]string
	parts  []fakePart
	// canary hosts draw their parts' after values once changed.
	canary bool
	// silentAfter stops its series at that time (zero: never).
	silentAfter time.Time
}

// fakePart is one probe target of a host: its RTT's median, a factor on it
// once changed, and its loss.
type fakePart struct {
	target string
	rtt    float64
	factor float64 // after the change (0: 1)
	// lost says how many of the grain's sent probes were lost (nil: none).
	lost func(g int64, changed bool) int
}

const fakeProbes = 200 // a part's probes a grain

func newFakeProm(t *testing.T, f *fakeProm) *fakeProm {
	if f.grain == 0 {
		f.grain = time.Minute
	}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// url is the fake's base URL.
func (f *fakeProm) url() string { return f.srv.URL }

func (f *fakeProm) answered() []fakeQuery {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeQuery(nil), f.queries...)
}

func (f *fakeProm) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	if f.onRequest != nil {
		f.onRequest()
	}
	if f.auth != "" {
		if u, p, ok := r.BasicAuth(); !ok || u+":"+p != f.auth {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
	}
	fail := func(code int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(map[string]any{"status": "error", "errorType": "bad_data", "error": msg})
	}
	if f.status != 0 {
		fail(f.status, "the fake was told to fail")
		return
	}
	q := r.FormValue("query")
	var times []time.Time
	switch r.URL.Path {
	case "/api/v1/query_range":
		start, err1 := fakeTime(r.FormValue("start"))
		end, err2 := fakeTime(r.FormValue("end"))
		step, err3 := strconv.ParseFloat(r.FormValue("step"), 64)
		if err1 != nil || err2 != nil || err3 != nil || step <= 0 {
			fail(400, "bad range")
			return
		}
		for t := start; !t.After(end); t = t.Add(time.Duration(step * 1e9)) {
			times = append(times, t)
		}
		f.note(fakeQuery{Path: r.URL.Path, Query: q, End: end})
	case "/api/v1/query":
		at, err := fakeTime(r.FormValue("time"))
		if err != nil {
			fail(400, "bad time")
			return
		}
		times = []time.Time{at}
		f.note(fakeQuery{Path: r.URL.Path, Query: q, End: at})
	default:
		fail(404, "not a query")
		return
	}
	series, err := f.eval(q, times)
	if err != nil {
		fail(400, err.Error())
		return
	}
	var result []map[string]any
	for _, s := range series {
		var pts [][2]any
		for i, v := range s.values {
			if !math.IsNaN(v) {
				pts = append(pts, [2]any{float64(times[i].UnixMilli()) / 1e3, strconv.FormatFloat(v, 'g', -1, 64)})
			}
		}
		if len(pts) == 0 {
			continue
		}
		if r.URL.Path == "/api/v1/query" {
			result = append(result, map[string]any{"metric": s.labels, "value": pts[0]})
		} else {
			result = append(result, map[string]any{"metric": s.labels, "values": pts})
		}
	}
	kind := "matrix"
	if r.URL.Path == "/api/v1/query" {
		kind = "vector"
	}
	if result == nil {
		result = []map[string]any{}
	}
	body := map[string]any{"status": "success", "data": map[string]any{"resultType": kind, "result": result}}
	if len(f.warnings) > 0 {
		body["warnings"] = f.warnings
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(body)
}

func (f *fakeProm) note(q fakeQuery) {
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.mu.Unlock()
}

func fakeTime(s string) (time.Time, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return time.Time{}, err
	}
	return time.UnixMilli(int64(math.Round(v * 1e3))), nil
}

// fakeSeries is one answered series: its labels and a value a time (NaN:
// none).
type fakeSeries struct {
	labels map[string]string
	values []float64
}

func (s fakeSeries) key() string {
	names := make([]string, 0, len(s.labels))
	for n := range s.labels {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%q,", n, s.labels[n])
	}
	return b.String()
}

var (
	fakeLabelReplace = regexp.MustCompile(`^label_replace\((.*), "(\w+)", "(\w+)", "", ""\)$`)
	fakeQuantile     = regexp.MustCompile(`^histogram_quantile\(([0-9.]+), (.*)\)$`)
	// AGG [by (L)] (FUNC(NAME{SEL}[R])).
	fakeAgg = regexp.MustCompile(`^(sum|avg|group)(?: by \(([^)]*)\))? \((rate|increase|avg_over_time|count_over_time|last_over_time)\((\w+)\{(.*)\}\[(\w+)\]\)\)$`)
)

// eval evaluates q at each of times.
func (f *fakeProm) eval(q string, times []time.Time) ([]fakeSeries, error) {
	q = strings.TrimSpace(q)
	if q == "" {
		return nil, fmt.Errorf("no query")
	}
	if sides := splitTop(q, " or "); len(sides) > 1 {
		var out []fakeSeries
		seen := map[string]bool{}
		for _, side := range sides {
			ss, err := f.eval(side, times)
			if err != nil {
				return nil, err
			}
			for _, s := range ss { // the left side's series win
				if k := s.key(); !seen[k] {
					seen[k] = true
					out = append(out, s)
				}
			}
		}
		return out, nil
	}
	if sides := splitTop(q, " / "); len(sides) == 2 {
		num, err := f.eval(sides[0], times)
		if err != nil {
			return nil, err
		}
		den, err := f.eval(sides[1], times)
		if err != nil {
			return nil, err
		}
		byKey := map[string]fakeSeries{}
		for _, d := range den {
			byKey[d.key()] = d
		}
		var out []fakeSeries
		for _, n := range num {
			d, ok := byKey[n.key()]
			if !ok {
				continue
			}
			v := make([]float64, len(times))
			for i := range v {
				v[i] = n.values[i] / d.values[i]
				if d.values[i] == 0 {
					v[i] = math.NaN()
				}
			}
			out = append(out, fakeSeries{labels: n.labels, values: v})
		}
		return out, nil
	}
	if m := fakeLabelReplace.FindStringSubmatch(q); m != nil {
		ss, err := f.eval(m[1], times)
		for i := range ss {
			ss[i].labels[m[2]] = m[3]
		}
		return ss, err
	}
	if m := fakeQuantile.FindStringSubmatch(q); m != nil {
		qv, _ := strconv.ParseFloat(m[1], 64)
		return f.aggregate(m[2], times, qv)
	}
	return f.aggregate(q, times, 0)
}

// aggregate evaluates AGG by (L) (FUNC(NAME{SEL}[R])), the argument of
// histogram_quantile(q, ...) where q > 0.
func (f *fakeProm) aggregate(q string, times []time.Time, quantile float64) ([]fakeSeries, error) {
	m := fakeAgg.FindStringSubmatch(q)
	if m == nil {
		return nil, fmt.Errorf("the fake cannot evaluate %q", q)
	}
	agg, by, fn, name, selText := m[1], splitLabels(m[2]), m[3], m[4], m[5]
	rng, err := time.ParseDuration(m[6])
	if err != nil {
		return nil, fmt.Errorf("range %q: %v", m[6], err)
	}
	names := []string{name}
	sel, err := canaryprom.ParseSelector(selText)
	if err != nil {
		return nil, fmt.Errorf("selector %q: %v", selText, err)
	}
	type group struct {
		labels  map[string]string
		samples [][]float64 // per time: RTTs
		counts  []float64   // per time: a sum of counts or gauges
		n       []int       // per time: how many were summed
	}
	groups := map[string]*group{}
	var order []string
	for _, node := range f.fleet {
		for _, p := range node.parts {
			labels := map[string]string{"instance": node.name, "target": p.target, "kind": "udp"}
			for k, v := range node.labels {
				labels[k] = v
			}
			if !fakeMatches(sel, labels) {
				continue
			}
			for _, series := range names {
				switch series {
				case "lowlat_probe_rtt_seconds":
					if f.classic {
						continue // a classic server has only the _bucket series
					}
				case "lowlat_probe_rtt_seconds_bucket", "lowlat_probe_rtt_seconds_count":
					if !f.classic {
						continue // a native one only the histogram
					}
				case "lowlat_probe_jitter_seconds", "lowlat_probe_sent_total", "lowlat_probe_lost_total":
				default:
					continue // a series this fleet does not have
				}
				isBucket := strings.HasSuffix(series, "_bucket")
				bounds := []string{""}
				if isBucket && fn == "last_over_time" {
					bounds = nil
					for _, b := range monitor.RTTBuckets {
						bounds = append(bounds, strconv.FormatFloat(b, 'g', -1, 64))
					}
					bounds = append(bounds, "+Inf")
				}
				for _, le := range bounds {
					key := map[string]string{}
					for _, l := range by {
						switch v, ok := labels[l]; {
						case l == "le" && le != "":
							key[l] = le // histogram_quantile drops it
						case ok && v != "":
							key[l] = v
						}
					}
					k := fakeSeries{labels: key}.key()
					g := groups[k]
					if g == nil {
						g = &group{labels: key, samples: make([][]float64, len(times)), counts: make([]float64, len(times)), n: make([]int, len(times))}
						groups[k] = g
						order = append(order, k)
					}
					for i, at := range times {
						for gi := range f.grains(at, rng) {
							if !node.silentAfter.IsZero() && f.grainEnd(gi).After(node.silentAfter) {
								continue
							}
							changed := node.canary && !f.grainEnd(gi).Add(-f.grain).Before(f.change)
							switch {
							case strings.HasPrefix(series, "lowlat_probe_rtt_seconds"):
								g.samples[i] = append(g.samples[i], f.draw(node.name, p, gi, changed)...)
								g.n[i]++
							case series == "lowlat_probe_jitter_seconds":
								rtts := f.draw(node.name, p, gi, changed)
								g.counts[i] += rtts[len(rtts)/2] / 10
								g.n[i]++
							case series == "lowlat_probe_sent_total":
								g.counts[i] += fakeProbes
								g.n[i]++
							case series == "lowlat_probe_lost_total":
								if p.lost != nil {
									g.counts[i] += float64(p.lost(gi, changed))
								}
								g.n[i]++
							default:
								g.n[i]++
							}
						}
					}
				}
			}
		}
	}
	var out []fakeSeries
	for _, k := range order {
		g := groups[k]
		v := make([]float64, len(times))
		for i := range v {
			switch {
			case g.n[i] == 0:
				v[i] = math.NaN()
			case quantile > 0 && f.classic:
				v[i] = bucketQuantile(quantile, g.samples[i])
			case quantile > 0:
				v[i] = exactQuantile(quantile, g.samples[i])
			case agg == "group":
				v[i] = 1
			case agg == "avg":
				v[i] = g.counts[i] / float64(g.n[i])
			default:
				v[i] = g.counts[i]
			}
		}
		out = append(out, fakeSeries{labels: g.labels, values: v})
	}
	return out, nil
}

// grains are the grains inside (at−rng, at].
func (f *fakeProm) grains(at time.Time, rng time.Duration) func(func(int64) bool) {
	return func(yield func(int64) bool) {
		g := f.grain.Nanoseconds()
		first := (at.Add(-rng).UnixNano() + g - 1) / g
		for gi := first; (gi+1)*g <= at.UnixNano(); gi++ {
			if !yield(gi) {
				return
			}
		}
	}
}

func (f *fakeProm) grainEnd(gi int64) time.Time { return time.Unix(0, (gi+1)*f.grain.Nanoseconds()) }

// draw is a part's probes of one grain: lognormal around its RTT (σ 10 %
// a probe), with the grain's own level (σ 5 %), the same for every query,
// and for every run (seeded by the grain's place from the change).
func (f *fakeProm) draw(host string, p fakePart, gi int64, changed bool) []float64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%s/%d", host, p.target, gi-f.change.UnixNano()/f.grain.Nanoseconds())
	rng := rand.New(rand.NewPCG(h.Sum64(), 3))
	level := p.rtt * math.Exp(0.05*rng.NormFloat64())
	if changed && p.factor != 0 {
		level *= p.factor
	}
	out := make([]float64, fakeProbes)
	for i := range out {
		out[i] = level * math.Exp(0.1*rng.NormFloat64())
	}
	return out
}

func exactQuantile(q float64, vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

// bucketQuantile is histogram_quantile over the monitor's classic buckets:
// linear inside the bucket the rank falls in, from 0 for the first.
func bucketQuantile(q float64, vs []float64) float64 {
	counts := make([]float64, len(monitor.RTTBuckets))
	for _, v := range vs {
		i := sort.SearchFloat64s(monitor.RTTBuckets, v)
		if i < len(counts) {
			counts[i]++
		}
	}
	rank := q * float64(len(vs))
	var below float64
	for i, c := range counts {
		if below+c >= rank && c > 0 {
			lo := 0.0
			if i > 0 {
				lo = monitor.RTTBuckets[i-1]
			}
			return lo + (monitor.RTTBuckets[i]-lo)*(rank-below)/c
		}
		below += c
	}
	return monitor.RTTBuckets[len(monitor.RTTBuckets)-1]
}

func fakeMatches(sel canaryprom.Selector, labels map[string]string) bool {
	for _, m := range sel {
		v := labels[m.Name]
		var ok bool
		switch m.Op {
		case "=":
			ok = v == m.Value
		case "!=":
			ok = v != m.Value
		default:
			ok = regexp.MustCompile("^(?:"+m.Value+")$").MatchString(v) == (m.Op == "=~")
		}
		if !ok {
			return false
		}
	}
	return true
}

// splitTop splits s at sep outside parentheses, braces and quotes.
func splitTop(s, sep string) []string {
	var out []string
	depth, last := 0, 0
	quoted := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && (i == 0 || s[i-1] != '\\'):
			quoted = !quoted
		case quoted:
		case c == '(' || c == '{' || c == '[':
			depth++
		case c == ')' || c == '}' || c == ']':
			depth--
		case depth == 0 && strings.HasPrefix(s[i:], sep):
			out = append(out, s[last:i])
			last = i + len(sep)
			i += len(sep) - 1
		}
	}
	return append(out, s[last:])
}

func splitLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// fakeFleet is a fleet of canary and control hosts (instance cN and kN,
// group="canary" and "control"), each with the parts part(i) gives it.
func fakeFleet(canary, control int, part func(canary bool, i int) []fakePart) []fakeNode {
	var out []fakeNode
	for i := range canary + control {
		c := i < canary
		name, group := fmt.Sprintf("c%d:9431", i), "canary"
		if !c {
			name, group = fmt.Sprintf("k%d:9431", i-canary), "control"
		}
		out = append(out, fakeNode{name: name, labels: map[string]string{"group": group}, canary: c, parts: part(c, i)})
	}
	return out
}
