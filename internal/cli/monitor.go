package cli

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/monitor"
	"github.com/lowlat/lowlat/internal/resident"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/lowlat/lowlat/internal/version"
)

// DefaultMonitorConfig is where lowlat-monitor.service reads its config.
const DefaultMonitorConfig = "/etc/lowlat/monitor.toml"

type monitorOptions struct {
	config string
	check  bool
}

func newMonitorCmd(env *Env) *cobra.Command {
	var o monitorOptions
	cmd := &cobra.Command{
		Use:   "monitor",
		Short: "probe targets without end and serve Prometheus metrics and a status page (lowlat-monitor.service)",
		Long: `monitor probes each [[target]] of its config on a fixed schedule (udp, tcp
and crr against lowlat reflectors, icmp against any host), runs the doctor
and reads the journal on a schedule, and serves /metrics (Prometheus) and a
status page at / on the config's listen address (loopback by default).

SIGHUP reloads the config; a config that does not load is logged with its
file:line:col and the running one is kept. See docs/monitor.md.`,
		Args:        noArgs,
		RunE:        runWith(env, &o, runMonitor),
		Annotations: map[string]string{annotReloads: "config"},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", DefaultMonitorConfig, "monitor config `file` (TOML)")
	f.BoolVar(&o.check, "check", false, "check the config and exit (0: loads; 2: the error, with its position)")
	return cmd
}

func runMonitor(ctx context.Context, env *Env, o *monitorOptions, args []string) error {
	cfg, err := monitor.LoadConfig(o.config)
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("monitor: %w", err)}
	}
	if o.check {
		fmt.Fprintf(env.Stdout, "%s: ok, %d target(s), listen %s\n", o.config, len(cfg.Targets), cfg.Listen)
		return nil
	}
	// One P: the monitor's work is a few hundred small packets a second,
	// and a second P costs more in wake-ups than it saves (its idle
	// threads spin and sleep around every probe): 20 targets at 10 Hz
	// take 0.9 % of a core here with one, 3.5 % with two
	// (bench/monitor/run.sh). $GOMAXPROCS overrides.
	if env.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(env.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, args...)...)
	}
	m := monitor.New(cfg, monitor.Options{
		Doctor: liveDoctor,
		Status: func(ctx context.Context, path string) (*txn.StatusReport, error) {
			return engine(env, path).Status(ctx, txn.StatusOptions{Peek: true})
		},
		Logf:     logf,
		Version:  version.String(),
		Hostname: monitor.Hostname(),
	})
	l, err := m.Listen()
	if err != nil {
		return err
	}
	// The monitor runs for months and uses a few MB of this binary's 16
	// MB of code and read-only data; give the rest back before probing
	// starts (RSS 19 MB -> 11 MB with 20 ICMP targets, see
	// bench/monitor/run.sh). A kernel without MADV_PAGEOUT (< 5.4) keeps
	// them: that costs memory, not correctness.
	if _, err := resident.Release(); err != nil {
		logf("monitor: executable pages stay resident: %v", err)
	}
	// SIGHUP is caught from the process's start (Env.Hangup): one that
	// came while the monitor was starting waits there and reloads now.
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-env.Hangup:
				if nc, err := monitor.LoadConfig(o.config); err != nil {
					m.Rejected(err)
				} else {
					m.Reload(nc)
				}
			}
		}
	}()
	logf("monitor: %d target(s), serving http://%s/metrics and the status page at /", len(cfg.Targets), l.Addr())
	return m.Run(ctx, l)
}

// liveDoctor runs the doctor on this host as 'lowlat doctor' does.
func liveDoctor(ctx context.Context) (*doctor.Report, error) {
	src, err := host.OpenRoot("")
	if err != nil {
		return nil, err
	}
	src.Sockets = true
	f, err := host.Gather(ctx, src)
	if err != nil {
		return nil, err
	}
	nics, nicErr := knob.EthtoolOf(knob.Live)
	return doctor.Run(f, doctor.Options{Sampler: doctor.LiveSampler{Proc: "/proc", NICs: nics, NICErr: nicErr}, SampleWindow: doctor.DefaultSampleWindow}), nil
}
