package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/lab"
	"github.com/lowlat/lowlat/internal/report"
)

func init() {
	register(&command{name: "lab", summary: "reproduce a runbook's problem in network namespaces, apply the fix, prove it (list, run, vm, clean)", order: 70, run: runLab})
}

const labUsage = `Usage: lowlat lab <command> [flags]

Commands:
  list               the scenarios, the runbook each reproduces, and roughly how long it takes
  run NAME           build the scenario's network in namespaces on this host, measure the
                     baseline and every fix, print before/after with a verdict (root)
  vm NAME            the same inside a stock Debian kernel under qemu (every qdisc exists there)
  report FILE...     render saved results (-o FILE of run or vm) as text, JSON or HTML
  clean              remove every namespace, process and file an earlier run left behind (root)

Run 'lowlat lab <command> --help' for flags. See docs/lab.md.
`

func runLab(ctx context.Context, env *Env, args []string) error {
	return dispatch(ctx, env, "lab", labUsage, "command", []sub{
		{"list", withoutCtx(labList)}, {"run", labRun}, {"vm", labVM}, {"report", withoutCtx(labReport)}, {"clean", withoutCtx(labClean)},
	}, args)
}

func labList(env *Env, args []string) error {
	fs := flagSet(env, "lab list", "lab list [--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	type variant struct {
		Name string `json:"name"`
		Desc string `json:"desc"`
	}
	type item struct {
		Name     string    `json:"name"`
		Runbook  string    `json:"runbook"`
		Summary  string    `json:"summary"`
		Needs    string    `json:"needs,omitempty"`
		Seconds  float64   `json:"seconds"`
		Variants []variant `json:"variants"`
	}
	var items []item
	for _, s := range lab.Scenarios() {
		it := item{Name: s.Name, Runbook: s.Runbook, Summary: s.Summary, Seconds: s.Estimate.Seconds()}
		if s.NeedsNetem != "" {
			it.Needs = "netem"
		}
		for _, v := range s.Variants {
			it.Variants = append(it.Variants, variant{v.Name, v.Desc})
		}
		items = append(items, it)
	}
	if *asJSON {
		return report.JSON(env.Stdout, items)
	}
	t := report.Table{Header: []string{"scenario", "runbook", "time", "variants", "what"}}
	for _, it := range items {
		var vs []string
		for _, v := range it.Variants {
			vs = append(vs, v.Name)
		}
		what := it.Summary
		if it.Needs != "" {
			what += " [needs netem]"
		}
		t.AddStrings(it.Name, it.Runbook, fmt.Sprintf("~%.0fs", it.Seconds), strings.Join(vs, ", "), what)
	}
	return t.Render(env.Stdout, env.TTY)
}

// labOut are the output flags of run and vm.
type labOut struct {
	json *bool
	out  *string
	html *string
}

func addLabOut(fs *flag.FlagSet) *labOut {
	o := &labOut{json: new(bool), out: new(string), html: new(string)}
	fs.BoolVar(o.json, "json", false, "print the result as JSON")
	fs.StringVar(o.out, "o", "", "also write the JSON result to `FILE` (written whole or not at all)")
	fs.StringVar(o.html, "html", "", "write a self-contained HTML report (RTT CDF and RTT over time per variant) to `FILE`")
	return o
}

// emitLab writes a finished result: -o, --html, then JSON or the table.
func emitLab(env *Env, o *labOut, r *lab.Result) error {
	if *o.out != "" {
		if err := writeFileAtomic(*o.out, r); err != nil {
			return err
		}
	}
	if *o.html != "" {
		if err := writeHTMLAtomic(*o.html, r); err != nil {
			return err
		}
	}
	if *o.json {
		if err := report.JSON(env.Stdout, r); err != nil {
			return err
		}
	} else if err := lab.WriteText(env.Stdout, r, env.TTY); err != nil {
		return err
	}
	if !r.Pass {
		// The table says which expectations missed.
		return &ExitError{Code: 1}
	}
	return nil
}

func labReport(env *Env, args []string) error {
	fs := flagSet(env, "lab report", "lab report FILE.json... [--html FILE] [--json]")
	asJSON := fs.Bool("json", false, "print the results as JSON (one array)")
	htmlOut := fs.String("html", "", "write one self-contained HTML page for all results to `FILE`")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 1, -1, "result FILE (written by 'lowlat lab run -o FILE')"); err != nil {
		return err
	}
	var rs []*lab.Result
	for _, p := range pos {
		r, err := lab.ReadResult(p)
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	if *htmlOut != "" {
		if err := writeHTMLAtomic(*htmlOut, rs...); err != nil {
			return err
		}
	}
	if *asJSON {
		return report.JSON(env.Stdout, rs)
	}
	pass := true
	for i, r := range rs {
		if i > 0 {
			fmt.Fprintln(env.Stdout)
		}
		if err := lab.WriteText(env.Stdout, r, env.TTY); err != nil {
			return err
		}
		pass = pass && r.Pass
	}
	if !pass {
		return &ExitError{Code: 1}
	}
	return nil
}

func writeHTMLAtomic(path string, rs ...*lab.Result) error {
	return writeAtomic(path, func(w io.Writer) error { return lab.WriteHTML(w, rs) })
}

func labRun(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "lab run", "lab run NAME [--json] [-o FILE] [--html FILE] [--id ID] [--variant V]... [--quiet]")
	o := addLabOut(fs)
	id := fs.String("id", "", "name the run: namespaces are lowlat-lab-`ID`-client, -provider, -server (default: random)")
	var variants listFlag
	fs.Var(&variants, "variant", "run only this `variant` (repeatable; the baseline always runs)")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	scale := fs.Float64("scale", 1, "multiply every measurement's duration by `X` (0.3..3)")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 1, 1, "scenario NAME (see 'lowlat lab list')"); err != nil {
		return err
	}
	if err := checkScenario("lab run", pos[0], variants); err != nil {
		return err
	}
	if *id != "" {
		if err := lab.ValidID(*id); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("lab run: %w", err)}
		}
	}
	if *scale < 0.3 || *scale > 3 {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab run: --scale %g: want 0.3..3", *scale)}
	}
	envName := "host"
	if env.Getenv != nil && env.Getenv("LOWLAT_LAB_ENV") != "" {
		envName = env.Getenv("LOWLAT_LAB_ENV")
	}
	pr := newLabProgress(env, *quiet)
	res, err := lab.Run(ctx, pos[0], lab.Options{ID: *id, Variants: variants, Progress: pr.step, Environment: envName, Scale: *scale})
	pr.stop()
	if err != nil {
		return labErr(err)
	}
	return emitLab(env, o, res)
}

// checkScenario turns an unknown scenario or variant into a usage error.
func checkScenario(cmd, name string, variants []string) error {
	sc, err := lab.Lookup(name)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: %w", cmd, err)}
	}
	var have []string
	for _, v := range sc.Variants {
		have = append(have, v.Name)
	}
	for _, v := range variants {
		if !slices.Contains(have, v) {
			return &ExitError{Code: 2, Err: fmt.Errorf("%s: scenario %s has no variant %q (it has: %s)", cmd, name, v, strings.Join(have, ", "))}
		}
	}
	return nil
}

func labErr(err error) error {
	switch {
	case errors.Is(err, lab.ErrInterrupted):
		return &ExitError{Code: 130, Err: err}
	case errors.Is(err, lab.ErrNameTaken):
		return &ExitError{Code: 1, Err: err}
	}
	return err
}

// labProgress prints one line per step on stderr and, on a terminal, a bar
// for the long measurement phases.
type labProgress struct {
	w     io.Writer
	tty   bool
	quiet bool
	bar   *report.Progress
}

func newLabProgress(env *Env, quiet bool) *labProgress {
	return &labProgress{w: env.Stderr, tty: stderrTTY(env), quiet: quiet}
}

func (p *labProgress) step(s lab.Step) {
	if p.quiet {
		return
	}
	p.stop()
	where := s.Scenario
	if s.Variant != "" {
		where = fmt.Sprintf("%s [%d/%d] %s", s.Scenario, s.Index, s.Total, s.Variant)
	}
	line := fmt.Sprintf("lab: %s: %s", where, s.Phase)
	if s.Duration > 2*time.Second {
		line += fmt.Sprintf(" (~%s)", s.Duration.Round(time.Second))
	}
	fmt.Fprintln(p.w, line)
	if p.tty && s.Duration > 2*time.Second {
		p.bar = report.NewProgress(p.w, true, "     ", s.Duration)
		p.bar.Start()
	}
}

func (p *labProgress) stop() {
	if p.bar != nil {
		p.bar.Stop()
		p.bar = nil
	}
}

func labClean(env *Env, args []string) error {
	fs := flagSet(env, "lab clean", "lab clean [--force] [--json]")
	force := fs.Bool("force", false, "also stop runs whose process is still alive")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab clean: must run as root: it deletes network namespaces")
	}
	rep, err := lab.Clean(*force)
	if *asJSON {
		if jerr := report.JSON(env.Stdout, rep); jerr != nil {
			return jerr
		}
	} else if rep != nil {
		n := len(rep.Namespaces) + len(rep.Processes) + len(rep.TempDirs) + len(rep.States)
		for _, ns := range rep.Namespaces {
			fmt.Fprintln(env.Stdout, "removed namespace", ns)
		}
		for _, p := range rep.Processes {
			fmt.Fprintln(env.Stdout, "killed process", p)
		}
		for _, d := range rep.TempDirs {
			fmt.Fprintln(env.Stdout, "removed", d)
		}
		for _, s := range rep.States {
			fmt.Fprintln(env.Stdout, "removed", s)
		}
		for _, r := range rep.Running {
			fmt.Fprintln(env.Stdout, "left running:", r, "(--force stops it)")
		}
		if n == 0 && len(rep.Running) == 0 {
			fmt.Fprintln(env.Stdout, "Nothing to clean.")
		}
	}
	return err
}
