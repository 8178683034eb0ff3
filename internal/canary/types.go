package canary

import "math"

// Scale says how a metric's values compare.
type Scale int

const (
	// Ratio: positive values (latency, jitter), compared on the log scale;
	// the effect is canary/control − 1.
	Ratio Scale = iota
	// Points: fractions that may be 0 (loss), compared as they are; the
	// effect is canary − control.
	Points
)

// Metric is one metric to judge. Higher is worse for every lowlat metric
// (latency, jitter, loss).
type Metric struct {
	Name  string
	Scale Scale
	// Tolerance is the effect below which a canary that is surely worse
	// is still only marginal: 0.05 for Ratio is +5 %, 0.005 for Points is
	// half a percentage point.
	Tolerance float64
	// Weight in the score (0: 1).
	Weight float64
}

// Part is one like-with-like series of one host: one probe target and
// kind, one stage and port, one device and queue. Its values are one per
// step of the judged window (After) and of the window before it (Before,
// nil where it was not read), NaN where the step has none.
type Part struct {
	// Key names the part by its labels (target="edge", kind="udp").
	Key           string
	After, Before []float64
	// AfterNum, AfterDen (and BeforeNum, BeforeDen) are each step's
	// counts for a Points metric read as a ratio of counters: lost and
	// sent probes. A window's value is then ΣNum/ΣDen, and After and
	// Before only show the steps (they may be nil). Without counts a
	// Points part's window value is the mean of its steps.
	AfterNum, AfterDen   []float64
	BeforeNum, BeforeDen []float64
	// Buckets are the upper bounds, ascending, of the classic histogram
	// buckets the values were interpolated from (nil: exact values, or a
	// native histogram). A quantile that stays inside one bucket in both
	// windows cannot show a move inside it.
	Buckets []float64
}

// Host is one host's values of one metric.
type Host struct {
	Name  string
	Parts []Part
	// BeforeVoid, for a canary host, says why its window before is not
	// its baseline ("": it is): another change was in force there (an
	// earlier canary, since rolled back). The host is then compared as a
	// canary host without a window before.
	BeforeVoid string
	// Touched, for a control host, says why it was not left alone ("": it
	// was): a change came or went during the windows. It is left out.
	Touched string
}

// Single is a host with one part.
func Single(name string, after, before []float64) Host {
	return Host{Name: name, Parts: []Part{{After: after, Before: before}}}
}

// Rules say when data is enough and a difference counts.
type Rules struct {
	// Alpha is the one-sided significance level of the whole verdict
	// (0.05): each of Family metrics is tested at Alpha/Family.
	Alpha float64
	// Family is how many metrics are judged together (0 or 1: one).
	Family int
	// MinHosts is the fewest hosts a group may have (2): one host is not
	// a population.
	MinHosts int
	// MinCoverage is the least share of a part's steps that must have a
	// value (0.8): a host whose series stopped may be the one that broke.
	MinCoverage float64
	// MinSteps is the fewest steps with a value a part needs (6).
	MinSteps int
	// LastShare is the share of the window's last steps (at least one)
	// where every part of a canary host must have a value: a canary host
	// silent for the window's last hours would be judged on old data.
	LastShare float64
	// Bound is how far above the tolerance, as a multiple of it, the
	// effect's upper bound may reach for a pass (3: +15 % for times, +1.5
	// points for loss). A canary not surely worse whose upper bound
	// reaches past it is inconclusive: the data cannot rule out that much
	// harm, and "not worse" would be a guess.
	Bound float64
}

// DefaultRules are the judge's defaults.
var DefaultRules = Rules{Alpha: 0.05, Family: 1, MinHosts: 2, MinCoverage: 0.8, MinSteps: 6, LastShare: 1.0 / 12, Bound: 3}

// alpha is the level each metric is tested at.
func (r Rules) alpha() float64 { return r.Alpha / float64(max(r.Family, 1)) }

// lastSteps is how many of a window's last steps a canary host must have.
func (r Rules) lastSteps(steps int) int {
	return min(steps, max(1, int(math.Ceil(r.LastShare*float64(steps)))))
}

// Class is a metric's or a whole judgement's classification.
type Class string

const (
	Pass         Class = "pass"
	Marginal     Class = "marginal"
	Fail         Class = "fail"
	Inconclusive Class = "inconclusive"
)

// Severity orders the classes by what they say against the canary: pass,
// inconclusive (harm not ruled out), marginal (surely worse, maybe within
// the tolerance), fail (surely worse beyond it). The verdict is its
// metrics' most severe class, and worse data never lowers a metric's.
func (c Class) Severity() int {
	switch c {
	case Pass:
		return 0
	case Inconclusive:
		return 1
	case Marginal:
		return 2
	case Fail:
		return 3
	}
	return 1
}

// HostNumber is one host's number as the judge compared it.
type HostNumber struct {
	Host  string `json:"host"`
	Group string `json:"group"` // "canary" or "control"
	// Effect is the host's number against the control group's mean (a
	// ratio − 1, or points), NaN for a host left out.
	Effect float64 `json:"effect"`
	// Baseline: the host was compared with its own window before.
	Baseline bool `json:"baseline"`
	// Parts is how many of its parts were judged.
	Parts int `json:"parts"`
	// Left says why the judge left the host out ("": judged).
	Left string `json:"left_out,omitempty"`
}

// MetricResult is one metric's judgement.
type MetricResult struct {
	Metric string `json:"metric"`
	Class  Class  `json:"class"`
	// Why says what decided the class, in a line.
	Why string `json:"why"`
	// Canary and Control are the hosts judged.
	Canary  int `json:"canary_hosts"`
	Control int `json:"control_hosts"`
	// Baseline: hosts were compared with their own window before.
	Baseline bool `json:"baseline"`
	// Effect is canary against control (a ratio − 1, or a difference of
	// fractions). Lo is its lower bound at Alpha/Family one-sided (a fail
	// when above the tolerance, marginal when above 0), Hi its upper
	// bound at the same level, with the canary's own spread in its error
	// (a pass needs it under Bound times the tolerance).
	Effect float64 `json:"effect"`
	Lo     float64 `json:"effect_lo"`
	Hi     float64 `json:"effect_hi"`
	// Level is the one-sided level each bound holds at (Alpha/Family).
	Level float64 `json:"level"`
	// P is the one-sided p-value of "the canary is worse", PBeyond that of
	// "the canary is worse by more than the tolerance".
	P       float64 `json:"p"`
	PBeyond float64 `json:"p_beyond_tolerance"`
	// CanaryMedian and ControlMedian are the medians of the groups' host
	// levels over the window, in the metric's units (for the table).
	CanaryMedian  float64 `json:"canary_median"`
	ControlMedian float64 `json:"control_median"`
	// Resolution says, where the metric's quantiles came from classic
	// buckets, what that does to the bounds ("": exact values or native
	// histograms).
	Resolution string `json:"resolution,omitempty"`
	// Notes say what was left out and why (a thin control host, a part
	// thin in both windows, a canary host without a window before).
	Notes []string `json:"notes,omitempty"`
	// Hosts are every host's number.
	Hosts []HostNumber `json:"hosts"`

	controlMean float64 // the control's mean number, for Hosts
	cmp         compare
}

func nanResult(m Metric, canary, control int) MetricResult {
	return MetricResult{Metric: m.Name, Canary: canary, Control: control, Effect: math.NaN(), Lo: math.NaN(), Hi: math.NaN(), P: math.NaN(), PBeyond: math.NaN(), CanaryMedian: math.NaN(), ControlMedian: math.NaN()}
}

// SLOResult is one SLO term checked on the canary group, for Combine.
type SLOResult struct {
	Term string
	// Known: the group had a value; OK: the value met the term.
	Known, OK bool
	// Value is the group's value, said in the why line of a broken term.
	Value string
}

// Verdict is the whole judgement.
type Verdict struct {
	Class Class `json:"verdict"`
	// Score is 100 times the weighted share of the metrics that passed,
	// a marginal one counting half (Kayenta's score): a figure to read.
	// The class is the most severe metric's, not a threshold of it.
	Score float64 `json:"score"`
	// Why is the verdict's line; Decided names the metric, SLO term or
	// reading that decided it ("" when every metric passed).
	Why     string         `json:"why"`
	Decided string         `json:"decided,omitempty"`
	Metrics []MetricResult `json:"metrics"`
}
