package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/lowlat/lowlat/internal/version"
)

// PinDropin is the drop-in file name lowlat pin writes.
const PinDropin = "50-lowlat-cpus.conf"

// NUMA policy options came with systemd 243.
const systemdNUMA = 243

// systemd before 239 documents CPUAffinity= as CPU indices only; ranges are
// written out for them.
const systemdCPURanges = 239

// pinSpec is what the drop-in says.
type pinSpec struct {
	Service string `json:"service"`
	CPUs    []int  `json:"cpus"`
	// Node is the NUMA node all CPUs are on (-1: several, or no NUMA).
	Node    int    `json:"node"`
	Policy  string `json:"numa_policy,omitempty"`
	Systemd int    `json:"systemd_version,omitempty"`
	Why     string `json:"why"`
}

// pinDropin renders the drop-in.
func pinDropin(s pinSpec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by 'lowlat pin' (lowlat %s). 'lowlat rollback' removes it.\n", version.String())
	fmt.Fprintf(&b, "# %s\n", s.Why)
	b.WriteString("[Service]\n")
	cpus := host.FormatCPUList(s.CPUs)
	if s.Systemd > 0 && s.Systemd < systemdCPURanges {
		var parts []string
		for _, c := range s.CPUs {
			parts = append(parts, strconv.Itoa(c))
		}
		cpus = strings.Join(parts, " ")
	}
	fmt.Fprintf(&b, "CPUAffinity=%s\n", cpus)
	switch {
	case s.Policy == "" || s.Node < 0:
	case s.Systemd >= systemdNUMA:
		fmt.Fprintf(&b, "NUMAPolicy=%s\nNUMAMask=%d\n", s.Policy, s.Node)
	default:
		ver := "an unknown version"
		if s.Systemd > 0 {
			ver = strconv.Itoa(s.Systemd)
		}
		fmt.Fprintf(&b, "# NUMAPolicy=%s NUMAMask=%d need systemd %d (this is %s): start the service under 'numactl --membind=%d' for the memory side\n",
			s.Policy, s.Node, systemdNUMA, ver, s.Node)
	}
	return b.String()
}

// pinOptions are pin's flags.
type pinOptions struct {
	service  string
	cpus     cpuListFlag
	numa     string
	plan     planFlags
	src      factsSource
	dryRun   bool
	yes      bool
	json     bool
	journal  string
	unitRoot string
}

func newPinCmd(env *Env) *cobra.Command {
	var o pinOptions
	cmd := &cobra.Command{
		Use:   "pin --service NAME",
		Short: "pin a systemd service to the application CPUs of the IRQ plan (CPUAffinity=, NUMAPolicy=; journaled)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runPin),
	}
	f := cmd.Flags()
	f.StringVar(&o.service, "service", "", "the systemd `unit` to pin (NAME or NAME.service)")
	f.Var(&o.cpus, "cpus", "pin to these CPUs (`LIST`) instead of the plan's application CPUs")
	f.StringVar(&o.numa, "numa", "auto", "NUMA memory policy: auto (bind when all CPUs are on one node of a multi-node host), bind, preferred, off")
	o.plan.register(f)
	o.src.register(f)
	f.BoolVar(&o.dryRun, "dry-run", false, "show the drop-in and change nothing")
	f.BoolVar(&o.yes, "yes", false, "do not ask")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.journal, "journal", "", "journal `file` (default $LOWLAT_JOURNAL or "+journal.DefaultPath+")")
	f.StringVar(&o.unitRoot, "unit-root", "/", "write the drop-in below `DIR` instead of / (an image or chroot; no systemd reload)")
	return cmd
}

func runPin(ctx context.Context, env *Env, o *pinOptions, args []string) error {
	unit := strings.TrimSpace(o.service)
	if unit == "" {
		return &ExitError{Code: 2, Err: errors.New("pin: --service is required")}
	}
	if !strings.Contains(unit, ".") {
		unit += ".service"
	}
	dropinID := knob.DropinID(unit, PinDropin)
	if _, err := knob.New(knob.Live, dropinID); err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("pin: bad --service %q: %w", o.service, err)}
	}
	switch o.numa {
	case "auto", "bind", "preferred", "off":
	default:
		return &ExitError{Code: 2, Err: fmt.Errorf("pin: --numa %q: want auto, bind, preferred or off", o.numa)}
	}
	if !o.src.live() && !o.dryRun {
		return &ExitError{Code: 2, Err: errors.New("pin: --from/--root plan for another host: add --dry-run")}
	}
	if !o.dryRun {
		if err := requireRoot("pin"); err != nil {
			return err
		}
	}
	f, err := o.src.load(ctx)
	if err != nil {
		return err
	}
	spec, err := pinPlan(ctx, f, &o.plan, o.cpus.cpus, o.numa)
	if err != nil {
		return err
	}
	spec.Service = unit
	if o.src.live() {
		if v, err := knob.ServicesOf(knob.Live).Version(); err == nil {
			spec.Systemd = v
		}
	}
	content := pinDropin(spec)
	change := txn.Change{Knob: dropinID, Value: knob.FileContent(content, 0o644)}
	path := knob.DropinPath(unit, PinDropin)
	if o.unitRoot != "" && o.unitRoot != "/" {
		path = filepath.Join(o.unitRoot, path)
		change.Knob = "file" + path
	}
	if o.dryRun {
		if o.json {
			return report.JSON(env.Stdout, map[string]any{"dry_run": true, "pin": spec, "path": path, "dropin": content})
		}
		fmt.Fprintf(env.Stdout, "Would write %s:\n\n%s\nDry run: nothing was changed.\n", path, content)
		return nil
	}
	if !o.yes {
		if !env.TTY {
			return &ExitError{Code: 2, Err: fmt.Errorf("pin: would write %s; pass --yes (nothing was changed)", path)}
		}
		fmt.Fprintf(env.Stdout, "Write %s:\n\n%s\n[y/N] ", path, content)
		var line string
		fmt.Fscanln(env.Stdin, &line)
		if a := strings.ToLower(line); a != "y" && a != "yes" {
			return &ExitError{Code: 1, Err: errors.New("pin: cancelled; nothing was changed")}
		}
	}
	meta := journal.Meta{Profile: "pin " + unit, Host: f.Hostname, Tool: version.String(), Args: os.Args}
	res, err := engine(env, o.journal).Apply(ctx, []txn.Change{change}, meta)
	if err != nil {
		return fmt.Errorf("pin: %w", err)
	}
	restart := "systemctl restart " + unit
	if o.json {
		return report.JSON(env.Stdout, map[string]any{"txn": res.Txn, "pin": spec, "path": path, "dropin": content, "changed": len(res.Changed) > 0, "changes": res.Changed, "next": restart})
	}
	if !knob.SystemdRuns(knob.Live) {
		fmt.Fprintln(env.Stdout, "note: systemd does not run here; the drop-in takes effect where it does")
	}
	if len(res.Changed) == 0 {
		fmt.Fprintf(env.Stdout, "%s already pins %s to CPUs %s; nothing changed.\n", path, unit, host.FormatCPUList(spec.CPUs))
		return nil
	}
	fmt.Fprintf(env.Stdout, "Wrote %s (transaction %s): %s on CPUs %s.\n%s\nThe running service keeps its old CPUs until '%s'.\n",
		path, res.Txn, unit, host.FormatCPUList(spec.CPUs), spec.Why, restart)
	return nil
}

// pinPlan decides the CPUs and NUMA policy: --cpus, else the reserved CPUs,
// else the plan's application CPUs (the NIC's node without the cores taking
// its interrupts, runbook 002 §7).
func pinPlan(ctx context.Context, f *host.Facts, pf *planFlags, cpus []int, numa string) (pinSpec, error) {
	s := pinSpec{Node: -1}
	switch {
	case len(cpus) > 0:
		s.CPUs = cpus
		s.Why = "CPUs chosen with --cpus"
	default:
		var pl *plan.Plan
		var err error
		if pf.profile != "" {
			pl, _, err = makePlan(ctx, f, pf, "pin")
		} else {
			r := &profile.Resolved{Name: "pin", Settings: []profile.Setting{{Key: "irq.placement", Section: "irq", Name: "placement", Value: "numa-local"}}}
			pl, err = plan.Make(f, r, plan.Options{Ifaces: pf.ifaces, ReserveCPUs: pf.reserve.cpus})
		}
		var ee *ExitError
		switch {
		case errors.As(err, &ee):
			return s, err // bad input, already named
		case errors.Is(err, plan.ErrUnknownInterface):
			return s, &ExitError{Code: ExitUsage, Err: fmt.Errorf("pin: %w", err)}
		case err != nil:
			return s, fmt.Errorf("pin: %w", err)
		}
		ip := pl.Placement
		if ip == nil {
			return s, fmt.Errorf("pin: profile %s places no interrupts; give --cpus", pf.profile)
		}
		if len(ip.AppCPUs) == 0 {
			return s, errors.New("pin: the plan leaves no application CPUs (no physical NIC with known local CPUs?); give --cpus")
		}
		s.CPUs = ip.AppCPUs
		if len(pf.reserve.cpus) > 0 {
			s.Why = "the CPUs reserved with --reserve-cpus: no interrupts go there"
			for _, n := range ip.NICs {
				if n.Skip == "" && n.Node >= 0 && ip.AppNode >= 0 && n.Node != ip.AppNode {
					s.Why += fmt.Sprintf("; warning: they are on NUMA node %d, %s is on node %d, so every packet crosses the interconnect", ip.AppNode, n.Iface, n.Node)
				}
			}
		} else {
			var irqs []string
			for _, n := range ip.NICs {
				if n.Skip == "" {
					irqs = append(irqs, fmt.Sprintf("%s's interrupts on %s", n.Iface, host.FormatCPUList(n.CPUs)))
				}
			}
			s.Why = fmt.Sprintf("NUMA node %d, the NIC's, without the cores taking hard interrupts (%s); their SMT siblings are the application's", ip.AppNode, strings.Join(irqs, ", "))
		}
	}
	online := map[int]bool{}
	for _, c := range f.CPUs {
		if c.Online {
			online[c.ID] = true
		}
	}
	for _, c := range s.CPUs {
		if len(online) > 0 && !online[c] {
			return s, fmt.Errorf("pin: CPU %d is not online on %s", c, orDash(f.Hostname))
		}
	}
	nodes := map[int]bool{}
	for _, c := range f.CPUs {
		if slices.Contains(s.CPUs, c.ID) {
			nodes[c.Node] = true
		}
	}
	if len(nodes) == 1 && len(f.NUMA) > 1 {
		for n := range nodes {
			s.Node = n
		}
	}
	switch numa {
	case "auto":
		if s.Node >= 0 {
			s.Policy = "bind"
		}
	case "bind", "preferred":
		if s.Node < 0 {
			return s, fmt.Errorf("pin: --numa %s needs all CPUs on one node of a multi-node host; CPUs %s are not", numa, host.FormatCPUList(s.CPUs))
		}
		s.Policy = numa
	}
	return s, nil
}
