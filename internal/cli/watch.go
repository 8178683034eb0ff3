package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/passive"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/sockops"
	"github.com/lowlat/lowlat/internal/version"
)

// watchOptions are watch's flags.
type watchOptions struct {
	ifaces        listFlag
	ports         listFlag
	firstBytes    listFlag
	dscp          listFlag
	duration      time.Duration
	window        time.Duration
	json          bool
	allNamespaces bool
	hookStats     bool
	cgroup        string
	service       string
}

func newWatchCmd(env *Env) *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "measure what this host adds to its real traffic, in the kernel (eBPF): egress queueing, receive path, TCP RTT, first bytes",
		Long: `watch measures what this host adds to the packets of its real traffic, with
no probe traffic: the egress queueing of each device and TX queue (a
shaper's queue and fq's pacing included), the receive path of the ports
named (from the kernel's receive timestamp to the protocol stack, TCP's
socket and the application's read), the kernel's RTT samples of real TCP
ACKs, retransmits and connections per port, and the time to deliver the
first N bytes of each connection a TCP port accepts.

The table is refreshed each second with the last --window of values; the
end (Ctrl-C, --duration) prints the whole run's summary, as JSON with
--json. Nothing stays attached when watch ends, however it ends: the
kernel detaches its programs with its last file descriptor.`,
		Example: `  lowlat watch --iface eth0
  lowlat watch --iface eth0 --dscp EF,AF41
  lowlat watch --port udp/7777 --port tcp/443 --first-bytes 300KB,1MB --duration 60s --json`,
		Args: noArgs,
		RunE: runWith(env, &o, runWatch),
	}
	f := cmd.Flags()
	f.Var(&o.ifaces, "iface", "measure the egress queueing of `IF` (repeatable; default: every device that is up but loopback)")
	f.Var(&o.ports, "port", "measure the receive path, and for TCP the RTT, retransmits and connections, of `PORT` (tcp/N, udp/N, or N for both; repeatable)")
	f.Var(&o.firstBytes, "first-bytes", "time the delivery of the first `N` bytes of each connection the TCP ports accept (e.g. 300KB,1MB; at most 4)")
	f.Var(&o.dscp, "dscp", "split egress by DSCP: a histogram per queue for each `CLASS` named (EF, AF41, CS1, VA or 0-63; at most 8), one for the others (costs a header read per packet sent)")
	f.StringVar(&o.cgroup, "cgroup", "", "also measure TCP (RTT, retransmits, connections) of every socket of the cgroup v2 `PATH` (below the hierarchy's root), whatever its ports")
	f.StringVar(&o.service, "service", "", "as --cgroup, for the systemd service `NAME`'s cgroup")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until Ctrl-C)")
	f.DurationVar(&o.window, "window", 10*time.Second, "the live table's window")
	f.BoolVar(&o.json, "json", false, "print the run's summary as JSON at the end (no live table)")
	f.BoolVar(&o.allNamespaces, "all-namespaces", false, "measure the sockets of every network namespace, not only this one's")
	f.BoolVar(&o.hookStats, "hook-stats", false, "report each hook's runs and CPU time (turns on the kernel's BPF statistics for the run, which cost every BPF program two clock reads a run)")
	return cmd
}

// config turns the flags into a passive configuration.
func (o *watchOptions) config() (passive.Config, error) {
	cfg := passive.Config{Egress: true, Devices: o.ifaces, AllNamespaces: o.allNamespaces}
	for _, p := range o.ports {
		ps, err := passive.ParsePorts(p)
		if err != nil {
			return cfg, err
		}
		cfg.Ports = append(cfg.Ports, ps...)
	}
	if len(cfg.Ports) > 0 {
		cfg.RX, cfg.TCP = true, true
	}
	if o.cgroup != "" || o.service != "" {
		if o.cgroup != "" && o.service != "" {
			return cfg, errors.New("--cgroup and --service are alternatives: give one")
		}
		if o.cgroup == "/" {
			return cfg, errors.New("--cgroup /: the root cgroup holds every process; name the cgroup of a service")
		}
		dir, err := sockops.CgroupOf(sockops.Selector{Cgroup: o.cgroup, Service: o.service})
		if err != nil {
			return cfg, err
		}
		cfg.TCP, cfg.Cgroup, cfg.CgroupName = true, dir, o.cgroup+o.service
	}
	for _, s := range o.firstBytes {
		n, err := passive.ParseBytes(s)
		if err != nil {
			return cfg, fmt.Errorf("--first-bytes: %w", err)
		}
		cfg.FirstBytes = append(cfg.FirstBytes, n)
	}
	sort.Slice(cfg.FirstBytes, func(i, j int) bool { return cfg.FirstBytes[i] < cfg.FirstBytes[j] })
	dscp, err := passive.ParseDSCP(o.dscp)
	if err != nil {
		return cfg, fmt.Errorf("--dscp: %w", err)
	}
	cfg.DSCP = dscp
	if len(cfg.FirstBytes) > 0 && !hasTCP(cfg.Ports) {
		return cfg, errors.New("--first-bytes needs a TCP --port to time")
	}
	switch {
	case o.duration < 0:
		return cfg, fmt.Errorf("--duration %s: must not be negative", o.duration)
	case o.window < time.Second:
		return cfg, fmt.Errorf("--window %s: must be at least 1s", o.window)
	}
	return cfg, cfg.Check()
}

func hasTCP(ports []passive.Port) bool {
	for _, p := range ports {
		if p.Proto == "tcp" {
			return true
		}
	}
	return false
}

// WatchResult is watch's summary of a run, the JSON of --json.
type WatchResult struct {
	probe.Meta
	Config      passive.Config    `json:"config"`
	Hooks       []string          `json:"hooks"`
	Unavailable map[string]string `json:"unavailable,omitempty"`
	// MapBytes is the kernel memory the measurement held.
	MapBytes int `json:"map_bytes"`
	// HookStats (--hook-stats) is each hook's runs and CPU time.
	HookStats []passive.HookStat `json:"hook_stats,omitempty"`
	Seconds   float64            `json:"seconds"`
	Rows      []passive.Row      `json:"series"`
}

func runWatch(ctx context.Context, env *Env, o *watchOptions, args []string) error {
	cfg, err := o.config()
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("watch: %w", err)}
	}
	if o.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.duration)
		defer cancel()
	}
	start := time.Now()
	s, err := passive.Open(cfg)
	switch {
	case errors.Is(err, passive.ErrBadConfig):
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("watch: %w", err)}
	case err != nil && hasTCP(cfg.Ports) && (errors.Is(err, passive.ErrUnsupported) || errors.Is(err, os.ErrPermission)):
		// Without BPF, TCP RTT can still be sampled from tcp_info.
		fmt.Fprintf(env.Stderr, "watch: %v; TCP RTT is sampled from tcp_info instead (egress, the receive path and first bytes need BPF)\n", err)
		s, err = passive.OpenSampled(cfg)
	}
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	defer s.Close()
	if o.hookStats {
		if err := s.EnableHookStats(); err != nil {
			return fmt.Errorf("watch: --hook-stats: %w", err)
		}
	}
	first, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	live := env.TTY && !o.json
	if !live {
		// Also with --json (on stderr): a script knows when the
		// measurement has begun.
		fmt.Fprintf(env.Stderr, "lowlat watch: measuring (%s); the summary comes at the end (Ctrl-C)\n", strings.Join(s.Hooks, ", "))
	}
	hist := []passive.Snapshot{first}
	// Only the live table reads the maps each second; the summary needs
	// the first and the last snapshots alone.
	var tickC <-chan time.Time
	if live {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		tickC = tick.C
	}
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-tickC:
			snap, err := s.Snapshot()
			if err != nil {
				return fmt.Errorf("watch: %w", err)
			}
			hist = append(hist, snap)
			// The window: from the snapshot o.window ago (or the first).
			from := hist[0]
			for _, h := range hist {
				if snap.At.Sub(h.At) <= o.window {
					from = h
					break
				}
			}
			if n := int(o.window/time.Second) + 2; len(hist) > n {
				hist = append(hist[:1], hist[len(hist)-n+1:]...)
			}
			fmt.Fprint(env.Stdout, "\x1b[H\x1b[2J")
			fmt.Fprintf(env.Stdout, "lowlat watch: last %s, %s since start (Ctrl-C ends)\n\n", snap.At.Sub(from.At).Round(time.Second), time.Since(start).Round(time.Second))
			writeWatchTable(env.Stdout, passive.Summarize(snap.Sub(from), snap.At.Sub(from.At)))
		}
	}
	last, err := s.Snapshot()
	if err != nil {
		return fmt.Errorf("watch: %w", err)
	}
	res := WatchResult{
		Meta:   probe.Meta{Type: "passive", Version: version.String(), Target: "this host", Start: start.UTC(), End: last.At.UTC(), Host: probe.ReadHostInfo()},
		Config: cfg, Hooks: s.Hooks, Unavailable: s.Unavailable, MapBytes: s.MapBytes,
		Seconds: last.At.Sub(first.At).Seconds(),
		Rows:    passive.Summarize(last.Sub(first), last.At.Sub(first.At)),
	}
	if o.hookStats {
		if res.HookStats, err = s.HookStats(); err != nil {
			return fmt.Errorf("watch: %w", err)
		}
	}
	if err := s.Close(); err != nil {
		return fmt.Errorf("watch: detach: %w", err)
	}
	if o.json {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(env.Stdout, "lowlat watch: %.0f s, hooks: %s; map memory %d KiB\n\n", res.Seconds, strings.Join(res.Hooks, ", "), res.MapBytes/1024)
	writeWatchTable(env.Stdout, res.Rows)
	for _, why := range res.Unavailable {
		fmt.Fprintf(env.Stdout, "\nnot measured: %s\n", why)
	}
	if len(res.HookStats) > 0 {
		fmt.Fprintln(env.Stdout)
		for _, h := range res.HookStats {
			fmt.Fprintf(env.Stdout, "hook %s: %d runs, %.0f ns a run\n", h.Hook, h.Runs, h.NsPerRun())
		}
	}
	return nil
}

// writeWatchTable prints rows as a table; series with no values are left
// out, unavailable ones say so.
func writeWatchTable(w io.Writer, rows []passive.Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "series\tpackets/s\tp50\tp90\tp99\tmax\tconns/s\tretrans\t")
	shown := 0
	for _, r := range rows {
		if r.Unavailable != "" {
			fmt.Fprintf(tw, "%s\tn/a\t\t\t\t\t\t\t\n", r.Key)
			shown++
			continue
		}
		if r.Count == 0 && r.Conns == 0 && r.Retransmits == 0 {
			continue
		}
		rate := fmt.Sprintf("%.1f", r.PerSecond)
		key := r.Key
		if r.Sampled {
			key += " (sampled)"
			rate = fmt.Sprintf("%d samples", r.Count)
		}
		if r.Measure == passive.FirstBytes {
			rate = fmt.Sprintf("%d conns", r.Count)
		}
		conns := ""
		if r.Measure == passive.RTT && !r.Sampled {
			conns = fmt.Sprintf("%.2f", r.ConnsPerSecond)
		}
		retrans := ""
		if r.Measure == passive.RTT {
			retrans = fmt.Sprint(r.Retransmits)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", key, rate, fmtUs(r.P50), fmtUs(r.P90), fmtUs(r.P99), fmtUs(r.Max), conns, retrans)
		shown++
	}
	tw.Flush()
	if shown == 0 {
		fmt.Fprintln(w, "(no traffic seen yet)")
	}
}

// fmtUs writes a duration given in µs at a readable precision.
func fmtUs(v float64) string {
	d := time.Duration(v * 1e3)
	switch {
	case d == 0:
		return "0"
	case d < time.Millisecond:
		return fmt.Sprintf("%.1fµs", v)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", v/1e3)
	}
	return fmt.Sprintf("%.2fs", v/1e6)
}
