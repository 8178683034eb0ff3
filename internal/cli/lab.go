package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/lab"
	"github.com/lowlat/lowlat/internal/report"
)

func newLabCmd(env *Env) *cobra.Command {
	return newGroupCmd("lab <command>",
		"reproduce a runbook's problem in network namespaces, apply the fix, prove it (list, run, vm, clean)",
		"Reproduce a runbook's problem in network namespaces, apply the fix, and prove it. See docs/lab.md.",
		"command",
		newLabListCmd(env), newLabRunCmd(env), newLabVMCmd(env), newLabReportCmd(env), newLabCleanCmd(env))
}

// labListOptions are lab list's flags.
type labListOptions struct{ json bool }

func newLabListCmd(env *Env) *cobra.Command {
	var o labListOptions
	cmd := &cobra.Command{
		Use:   "list",
		Short: "the scenarios, the runbook each reproduces, and roughly how long it takes",
		Args:  noArgs,
		RunE:  runWith(env, &o, runLabList),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runLabList(ctx context.Context, env *Env, o *labListOptions, args []string) error {
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
	if o.json {
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
	json bool
	out  string
	html string
}

func (o *labOut) register(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	fs.StringVarP(&o.out, "output", "o", "", "also write the JSON result to `FILE` (written whole or not at all)")
	fs.StringVar(&o.html, "html", "", "write a self-contained HTML report (RTT CDF and RTT over time per variant) to `FILE`")
}

// emitLab writes a finished result: -o, --html, then JSON or the table.
func emitLab(env *Env, o *labOut, r *lab.Result) error {
	if o.out != "" {
		if err := writeFileAtomic(o.out, r); err != nil {
			return err
		}
	}
	if o.html != "" {
		if err := writeHTMLAtomic(o.html, r); err != nil {
			return err
		}
	}
	if o.json {
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

// labReportOptions are lab report's flags.
type labReportOptions struct {
	json bool
	html string
}

func newLabReportCmd(env *Env) *cobra.Command {
	var o labReportOptions
	cmd := &cobra.Command{
		Use:   "report FILE.json...",
		Short: "render saved results (-o FILE of run or vm) as text, JSON or HTML",
		Args:  minArgs(1, "result FILE (written by 'lowlat lab run -o FILE')"),
		RunE:  runWith(env, &o, runLabReport),
	}
	f := cmd.Flags()
	f.BoolVar(&o.json, "json", false, "print the results as JSON (one array)")
	f.StringVar(&o.html, "html", "", "write one self-contained HTML page for all results to `FILE`")
	return cmd
}

func runLabReport(ctx context.Context, env *Env, o *labReportOptions, args []string) error {
	var rs []*lab.Result
	for _, p := range args {
		r, err := lab.ReadResult(p)
		if err != nil {
			return &ExitError{Code: ExitUsage, Err: err} // a file named on the command line
		}
		rs = append(rs, r)
	}
	if o.html != "" {
		if err := writeHTMLAtomic(o.html, rs...); err != nil {
			return err
		}
	}
	if o.json {
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

// labRunOptions are lab run's flags.
type labRunOptions struct {
	out      labOut
	id       string
	variants listFlag
	quiet    bool
	scale    float64
	// cakeAutorate is a cake-autorate checkout, for its peer variants.
	cakeAutorate string
}

func newLabRunCmd(env *Env) *cobra.Command {
	var o labRunOptions
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "build the scenario's network in namespaces on this host, measure the baseline and every fix, print before/after with a verdict (root)",
		Args:  exactArgs(1, "scenario NAME (see 'lowlat lab list')"),
		RunE:  runWith(env, &o, runLabRun),
	}
	f := cmd.Flags()
	o.out.register(f)
	f.StringVar(&o.id, "id", "", "name the run: namespaces are lowlat-lab-`ID`-client, -provider, -server (default: random)")
	f.Var(&o.variants, "variant", "run only this `variant` (repeatable; the baseline always runs)")
	f.BoolVar(&o.quiet, "quiet", false, "no progress lines on stderr")
	f.Float64Var(&o.scale, "scale", 1, "multiply every measurement's duration by `X` (0.3..3)")
	f.StringVar(&o.cakeAutorate, "cake-autorate", "", "a cake-autorate checkout `DIR`, for the variants that run it beside lowlat autorate (named with --variant)")
	return cmd
}

func runLabRun(ctx context.Context, env *Env, o *labRunOptions, args []string) error {
	if err := checkScenario("lab run", args[0], o.variants); err != nil {
		return err
	}
	if o.id != "" {
		if err := lab.ValidID(o.id); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("lab run: %w", err)}
		}
	}
	if o.scale < 0.3 || o.scale > 3 {
		return &ExitError{Code: 2, Err: fmt.Errorf("lab run: --scale %g: want 0.3..3", o.scale)}
	}
	envName := "host"
	if env.Getenv != nil && env.Getenv("LOWLAT_LAB_ENV") != "" {
		envName = env.Getenv("LOWLAT_LAB_ENV")
	}
	pr := newLabProgress(env, o.quiet)
	res, err := lab.Run(ctx, args[0], lab.Options{ID: o.id, Variants: o.variants, Progress: pr.step, Environment: envName, Scale: o.scale, CakeAutorate: o.cakeAutorate})
	pr.stop()
	if err != nil {
		return labErr(err)
	}
	return emitLab(env, &o.out, res)
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

// labCleanOptions are lab clean's flags.
type labCleanOptions struct {
	force bool
	json  bool
}

func newLabCleanCmd(env *Env) *cobra.Command {
	var o labCleanOptions
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "remove every namespace, process and file an earlier run left behind (root)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runLabClean),
	}
	f := cmd.Flags()
	f.BoolVar(&o.force, "force", false, "also stop runs whose process is still alive")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

func runLabClean(ctx context.Context, env *Env, o *labCleanOptions, args []string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("lab clean: must run as root: it deletes network namespaces")
	}
	rep, err := lab.Clean(o.force)
	if o.json {
		if jerr := report.JSON(env.Stdout, rep); jerr != nil {
			return jerr
		}
	} else if rep != nil {
		n := len(rep.Namespaces) + len(rep.Processes) + len(rep.TempDirs) + len(rep.States) + len(rep.Cgroups) + len(rep.Sockops) + len(rep.Files)
		for _, s := range rep.Sockops {
			fmt.Fprintln(env.Stdout, "removed sock_ops entry", s)
		}
		for _, ns := range rep.Namespaces {
			fmt.Fprintln(env.Stdout, "removed namespace", ns)
		}
		for _, c := range rep.Cgroups {
			fmt.Fprintln(env.Stdout, "removed cgroup", c)
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
		for _, f := range rep.Files {
			fmt.Fprintln(env.Stdout, "removed", f)
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
