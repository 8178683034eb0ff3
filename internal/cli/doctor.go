package cli

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/passive"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/version"
)

// doctorHost is the host summary doctor --json embeds.
type doctorHost struct {
	Hostname string `json:"hostname,omitempty"`
	Kernel   string `json:"kernel"`
	// CPUs is how many CPUs the facts list; null when they list none
	// (the tree or capture lacks /sys/devices/system/cpu).
	CPUs       *int     `json:"cpus"`
	NUMANodes  int      `json:"numa_nodes"`
	Interfaces []string `json:"interfaces"`
	Congestion string   `json:"congestion_control,omitempty"`
	Source     string   `json:"source"`
	Netns      string   `json:"netns,omitempty"`
	Tool       string   `json:"tool"`
	Elapsed    string   `json:"elapsed"`
	Unreadable []string `json:"unreadable,omitempty"`
}

// doctorOptions are doctor's flags.
type doctorOptions struct {
	src    factsSource
	plan   planFlags
	json   bool
	window time.Duration
	path   string
	ports  listFlag
	// sampled: --sample was given, so the real traffic is measured too.
	sampled bool
}

func newDoctorCmd(env *Env) *cobra.Command {
	o := doctorOptions{src: factsSource{sockets: true}}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "diagnose what on this host (or a capture) adds network latency",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sampled = cmd.Flags().Changed("sample")
			return runDoctor(cmd.Context(), env, &o, args)
		},
	}
	f := cmd.Flags()
	o.src.register(f)
	o.plan.register(f)
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.DurationVar(&o.window, "sample", doctor.DefaultSampleWindow, "watch NIC drop counters and softirq load on this host for `duration` (0: off; a longer look catches rarer drops); given explicitly, also measure the real traffic in the kernel (eBPF) over it: egress queueing, and the receive path and TCP of the listening ports or --port")
	f.Var(&o.ports, "port", "with --sample, the ports whose receive path and TCP to measure (tcp/N, udp/N, N; default: the TCP ports listening)")
	f.StringVar(&o.path, "path", "", "also probe the path to `HOST[:PORT]` hop by hop (UDP, 10 probes per hop) and say where delay or loss starts")
	return cmd
}

func runDoctor(ctx context.Context, env *Env, o *doctorOptions, args []string) error {
	if o.window < 0 || o.window > time.Minute {
		return &ExitError{Code: 2, Err: fmt.Errorf("doctor: --sample %v: want 0..1m", o.window)}
	}
	if o.path != "" && (o.src.from != "" || o.src.root != "") {
		return &ExitError{Code: ExitUsage, Err: errors.New("doctor: --path measures from this host, not from a capture (--from, --root)")}
	}
	start := time.Now()
	f, err := o.src.load(ctx)
	if err != nil {
		return err
	}
	nics, nicErr := knob.EthtoolOf(knob.Live)
	opts := doctor.Options{Sampler: doctor.LiveSampler{Proc: "/proc", NICs: nics, NICErr: nicErr}, SampleWindow: o.window}
	if o.path != "" {
		stop := progress(env, "doctor --path", 3*time.Second)
		res, err := pathprobe.Run(ctx, pathprobe.Config{Target: o.path, Count: 10, Interval: 200 * time.Millisecond, Timeout: time.Second})
		stop()
		switch {
		case errors.Is(err, pathprobe.ErrConfig):
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("doctor --path: %w", err)}
		case err != nil:
			return fmt.Errorf("doctor --path %s: %w", o.path, err)
		}
		opts.Path = res
	}
	if o.plan.profile != "" {
		pl, _, err := makePlan(ctx, f, &o.plan, "doctor")
		if err != nil {
			return err
		}
		opts.Plan = pl
	}
	if o.sampled && o.window > 0 && o.src.from == "" && o.src.root == "" {
		traffic, err := startTraffic(f, o.ports, o.window)
		if err != nil {
			return err
		}
		opts.Traffic = traffic
	} else if len(o.ports) > 0 {
		return &ExitError{Code: ExitUsage, Err: errors.New("doctor: --port goes with --sample on this host (the ports whose real traffic to measure)")}
	}
	rep := doctor.Run(f, opts)
	h := summarizeHost(f)
	h.Elapsed = time.Since(start).Round(time.Millisecond).String()
	if o.json {
		return report.JSON(env.Stdout, struct {
			Findings []doctor.Finding `json:"findings"`
			Host     doctorHost       `json:"host"`
			Checks   any              `json:"checks"`
		}{rep.Findings, h, rep.Checks})
	}
	renderDoctor(env, rep, h, opts.Plan)
	return nil
}

func summarizeHost(f *host.Facts) doctorHost {
	h := doctorHost{Hostname: f.Hostname, Kernel: f.Kernel.Release, NUMANodes: len(f.NUMA),
		Congestion: f.Sysctls["net.ipv4.tcp_congestion_control"], Source: f.Source, Netns: f.Netns, Tool: version.String(), Interfaces: []string{}}
	// The facts' own CPUs, never this machine's: --root and --from describe
	// another host.
	if n := len(f.CPUs); n > 0 {
		h.CPUs = &n
	}
	for _, i := range f.Interfaces {
		h.Interfaces = append(h.Interfaces, i.Name)
	}
	for _, e := range f.Errors {
		h.Unreadable = append(h.Unreadable, e.Source+": "+e.Err)
	}
	sort.Strings(h.Unreadable)
	return h
}

func renderDoctor(env *Env, rep *doctor.Report, h doctorHost, pl *plan.Plan) {
	cpus := "?"
	if h.CPUs != nil {
		cpus = strconv.Itoa(*h.CPUs)
	}
	fmt.Fprintf(env.Stdout, "lowlat doctor: %s, kernel %s, %s CPUs, %s (%s)\n\n", orDash(h.Hostname), orUnknown(h.Kernel), cpus, strings.Join(h.Interfaces, " "), h.Elapsed)
	counts := map[string]int{}
	t := report.Table{Header: []string{"severity", "id", "finding"}}
	for _, f := range rep.Findings {
		st := report.Dim
		switch f.Severity {
		case doctor.Crit:
			st = report.Bad
		case doctor.Warn:
			st = report.Warn
		}
		if !f.NotChecked {
			counts[f.Severity]++
		}
		sev := f.Severity
		if f.NotChecked {
			sev = "skip"
		}
		t.Add(report.S(sev, st), report.C(f.ID), report.C(f.Summary))
		if f.Fix != "" {
			src := ""
			if f.Source != "" {
				src = " [see " + f.Source + "]"
			}
			t.Add(report.C(""), report.C(""), report.S("fix: "+f.Fix+src, report.Dim))
		}
	}
	if len(rep.Findings) > 0 {
		t.Render(env.Stdout, env.TTY)
		fmt.Fprintln(env.Stdout)
	}
	fmt.Fprintf(env.Stdout, "%d checks: %d passed, %d crit, %d warn, %d info, %d not checked\n",
		rep.Checks.Run, rep.Checks.Passed, counts[doctor.Crit], counts[doctor.Warn], counts[doctor.Info], rep.Checks.NotChecked)
	if pl == nil {
		fmt.Fprintln(env.Stdout, "Next: 'lowlat plan --profile NAME' shows what a profile would change ('lowlat profile list').")
	}
}

// startTraffic attaches the real-traffic measurement for doctor --sample:
// egress of every device that is up, the receive path and TCP of ports (or
// of the TCP ports the socket audit found listening, at most 16). It
// returns the function that ends it after the doctor's window. A bad
// --port is a usage error; a kernel that refuses BPF is a not-checked row.
func startTraffic(f *host.Facts, ports []string, window time.Duration) (func() *doctor.TrafficSample, error) {
	cfg := passive.Config{Egress: true}
	for _, p := range ports {
		ps, err := passive.ParsePorts(p)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("doctor: --port: %w", err)}
		}
		cfg.Ports = append(cfg.Ports, ps...)
	}
	if len(ports) == 0 && f.Sockets != nil {
		seen := map[uint16]bool{}
		for _, p := range f.Sockets.Processes {
			for _, l := range p.Listeners {
				if !seen[l.Port] && len(seen) < 16 {
					seen[l.Port] = true
					cfg.Ports = append(cfg.Ports, passive.Port{Proto: "tcp", Port: l.Port})
				}
			}
		}
	}
	if len(cfg.Ports) > 0 {
		cfg.RX, cfg.TCP = true, true
	}
	s, err := passive.Open(cfg)
	if err != nil {
		msg := err.Error()
		return func() *doctor.TrafficSample { return &doctor.TrafficSample{Window: window, Err: msg} }, nil
	}
	first, err := s.Snapshot()
	if err != nil {
		s.Close()
		msg := err.Error()
		return func() *doctor.TrafficSample { return &doctor.TrafficSample{Window: window, Err: msg} }, nil
	}
	return func() *doctor.TrafficSample {
		defer s.Close()
		last, err := s.Snapshot()
		if err != nil {
			return &doctor.TrafficSample{Window: window, Err: err.Error()}
		}
		d := last.At.Sub(first.At)
		return &doctor.TrafficSample{Window: d.Round(time.Millisecond), Rows: passive.Summarize(last.Sub(first), d), Unavailable: s.Unavailable}
	}, nil
}
