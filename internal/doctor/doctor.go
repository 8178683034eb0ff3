// Package doctor inspects host facts for what makes network latency worse:
// FIFO qdiscs in front of long queues, congestion control that fills buffers,
// settings the runbooks found (and settings they got wrong), interrupts piled
// on one CPU, drop counters. It is read-only and runs on captured facts as well
// as on the live host.
//
// Each check reports findings with a kebab-case id, a severity, the evidence it
// saw, the fix (a knob change or an action) and the runbook it comes from. A
// check that cannot read its data says so in its own row; the others go on, and
// a check that panics is reported, never fatal.
package doctor

import (
	"fmt"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/plan"
)

// Severities, in increasing order.
const (
	Info = "info"
	Warn = "warn"
	Crit = "crit"
)

// Finding is one thing worth knowing about the host.
type Finding struct {
	ID       string            `json:"id"`
	Severity string            `json:"severity"`
	Summary  string            `json:"summary"`
	Evidence map[string]string `json:"evidence"`
	Fix      string            `json:"fix"`
	Source   string            `json:"source"`
	// NotChecked marks a row that says a check could not run (its data was
	// unreadable), as opposed to a finding about the host.
	NotChecked bool `json:"not_checked,omitempty"`
}

// Check is one inspection.
type Check struct {
	ID string
	// Needs are fact sources (as in host.Facts.Errors) without which the
	// check cannot say anything.
	Needs []string
	Run   func(f *host.Facts, o Options) []Finding
}

// Options tune a doctor run.
type Options struct {
	// Traffic, with doctor --sample on a live host, ends the real-traffic
	// measurement begun before Run and returns it; nil: none (nothing is
	// attached to the kernel without --sample).
	Traffic func() *TrafficSample
	// Plan, when a profile was given, adds a finding per knob the profile
	// would still change.
	Plan *plan.Plan
	// Sampler watches the live host for SampleWindow (NIC drop counters,
	// ksoftirqd, the busiest threads); nil or a zero window turns it off.
	// Facts from a capture are never sampled.
	Sampler      Sampler
	SampleWindow time.Duration
	// Path, when doctor --path measured one, adds the path finding.
	Path *pathprobe.Result

	// Filled by Run: what the sampler saw, once for all checks.
	sample       *Sample
	sampleErr    string
	sampleFailed bool
}

// Report is the result of a run.
type Report struct {
	Findings []Finding `json:"findings"`
	// Checks counts the checks run, passed (no finding) and not checked.
	Checks struct {
		Run        int `json:"run"`
		Passed     int `json:"passed"`
		NotChecked int `json:"not_checked"`
	} `json:"checks"`
}

// Run runs every check on f.
func Run(f *host.Facts, o Options) *Report {
	rep := &Report{Findings: []Finding{}}
	o.sample, o.sampleErr, o.sampleFailed = takeSample(f, o)
	for _, c := range Checks {
		rep.Checks.Run++
		if missing := missingSource(f, c.Needs); missing != "" {
			rep.Checks.NotChecked++
			rep.Findings = append(rep.Findings, unreadRow(c.ID, missing, missing))
			continue
		}
		fs := runCheck(c, f, o)
		switch {
		case len(fs) == 0:
			rep.Checks.Passed++
		case allNotChecked(fs):
			rep.Checks.NotChecked++
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	if o.Plan != nil {
		rep.Findings = append(rep.Findings, planFindings(o.Plan)...)
	}
	if o.Path != nil {
		rep.Findings = append(rep.Findings, PathFinding(o.Path))
	}
	if o.Traffic != nil {
		// After the sampler's window, over which the traffic was measured.
		rep.Checks.Run++
		fs := TrafficFindings(f, o.Traffic())
		switch {
		case len(fs) == 0:
			rep.Checks.Passed++
		case allNotChecked(fs):
			rep.Checks.NotChecked++
		}
		rep.Findings = append(rep.Findings, fs...)
	}
	sort.SliceStable(rep.Findings, func(i, j int) bool {
		return rank(rep.Findings[i].Severity) > rank(rep.Findings[j].Severity)
	})
	return rep
}

func allNotChecked(fs []Finding) bool {
	for _, f := range fs {
		if !f.NotChecked {
			return false
		}
	}
	return true
}

func rank(s string) int {
	switch s {
	case Crit:
		return 2
	case Warn:
		return 1
	}
	return 0
}

// runCheck isolates one check: a panic becomes a row, not a crash.
func runCheck(c Check, f *host.Facts, o Options) (out []Finding) {
	defer func() {
		if r := recover(); r != nil {
			out = []Finding{{ID: c.ID, Severity: Info, NotChecked: true,
				Summary:  fmt.Sprintf("check failed: %v", r),
				Evidence: map[string]string{"panic": fmt.Sprint(r), "stack": firstLines(string(debug.Stack()), 6)},
				Fix:      "report this as a lowlat bug with 'lowlat capture -o host.json' attached"}}
		}
	}()
	return c.Run(f, o)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// missingSource returns why a needed source is unreadable, or "". A need
// "sysctl:NAME" is missing only when that sysctl is absent and a read error
// on its path, or a directory above it, explains why; a sysctl the kernel
// simply lacks is for the check itself to judge. Other needs name a source
// as recorded in Facts.Errors; one ending in "/" or ":" covers every source
// below it ("ethtool:" every interface's).
func missingSource(f *host.Facts, needs []string) string {
	for _, n := range needs {
		if name, ok := strings.CutPrefix(n, "sysctl:"); ok {
			if _, present := f.Sysctls[name]; present {
				continue
			}
			if e := host.SysctlError(f, name); e != "" {
				return fmt.Sprintf("cannot read %s (%s)", name, e)
			}
			continue
		}
		for _, e := range f.Errors {
			prefix := strings.HasSuffix(n, "/") || strings.HasSuffix(n, ":")
			if e.Source == n || (prefix && strings.HasPrefix(e.Source, n)) {
				return fmt.Sprintf("cannot read %s (%s)", e.Source, e.Err)
			}
		}
	}
	return ""
}

// notCheckedRow is the row of a check that could not read what it needs to
// judge: what it cannot tell, and why.
func notCheckedRow(id, what, why string) Finding {
	return unreadRow(id, "cannot tell "+what+": "+why, why)
}

// unreadRow is the not-checked row of a check whose data could not be
// read: summary says what, why is the read error.
func unreadRow(id, summary, why string) Finding {
	return Finding{ID: id, Severity: Info, NotChecked: true,
		Summary:  "not checked: " + summary,
		Evidence: map[string]string{"error": why},
		Fix:      "run lowlat doctor as root, or capture on the host itself",
	}
}

// planFindings reports what a profile would still change.
func planFindings(p *plan.Plan) []Finding {
	var out []Finding
	for _, c := range p.Changes {
		switch c.Action {
		case plan.Set:
			out = append(out, Finding{
				ID: "profile-" + p.Profile, Severity: Info,
				Summary:  fmt.Sprintf("%s is %s; profile %s wants %s", c.Knob, c.Current, p.Profile, c.Desired),
				Evidence: map[string]string{"knob": c.Knob, "current": c.Current, "desired": c.Desired},
				Fix:      fmt.Sprintf("lowlat apply --profile %s (%s)", p.Profile, c.Reason),
				Source:   c.Source,
			})
		case plan.Skip:
			out = append(out, Finding{
				ID: "profile-" + p.Profile + "-unsupported", Severity: Info,
				Summary:  fmt.Sprintf("%s cannot be set here: %s", c.Knob, c.Reason),
				Evidence: map[string]string{"knob": c.Knob, "current": c.Current, "desired": c.Desired},
				Fix:      "none on this host; see the reason",
				Source:   c.Source,
			})
		}
	}
	return out
}
