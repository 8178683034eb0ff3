package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/report"
)

func newProbeCmd(env *Env) *cobra.Command {
	return newGroupCmd("probe <kind>",
		"measure latency against a lowlat reflector (udp, tcp, crr, load, compare) or any host (icmp, path)",
		"Measure latency against a lowlat reflector: the other end runs 'lowlat reflector'. 'probe icmp' pings a host that runs none.",
		"kind",
		newProbeUDPCmd(env), newProbeTCPCmd(env), newProbeCRRCmd(env), newProbeICMPCmd(env), newProbePathCmd(env), newProbeLoadCmd(env), newProbeCompareCmd(env))
}

// outFlags are the flags every measuring probe shares.
type outFlags struct {
	json    bool
	out     string
	key     string
	keyFile string
	force   bool
}

func (of *outFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&of.json, "json", false, "print the result as JSON")
	fs.StringVarP(&of.out, "output", "o", "", "also write the JSON result to `FILE` (written whole or not at all)")
	fs.StringVar(&of.key, "key", "", "shared HMAC key (visible in ps: prefer $LOWLAT_KEY or --key-file)")
	fs.StringVar(&of.keyFile, "key-file", "", "read the shared HMAC key from `FILE`")
	fs.BoolVar(&of.force, "force", false, "allow runs longer than 24h")
}

// readKey resolves the shared key: --key, then --key-file, then $LOWLAT_KEY.
func readKey(env *Env, key, keyFile string) ([]byte, error) {
	switch {
	case key != "" && keyFile != "":
		return nil, &ExitError{Code: 2, Err: errors.New("--key and --key-file: give one")}
	case key != "":
		return []byte(key), nil
	case keyFile != "":
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		k := strings.TrimRight(string(b), "\r\n")
		if k == "" {
			return nil, fmt.Errorf("read key: %s is empty", keyFile)
		}
		return []byte(k), nil
	}
	if env.Getenv != nil {
		if k := env.Getenv("LOWLAT_KEY"); k != "" {
			return []byte(k), nil
		}
	}
	return nil, nil
}

// probeErr maps library errors: refused configurations are usage errors.
func probeErr(kind string, err error) error {
	var ce *probe.ConfigError
	if errors.As(err, &ce) {
		return &ExitError{Code: 2, Err: fmt.Errorf("probe %s: %v", kind, ce.Err)}
	}
	if errors.Is(err, context.Canceled) {
		return &ExitError{Code: 130, Err: fmt.Errorf("probe %s: interrupted; no result written", kind)}
	}
	return fmt.Errorf("probe %s: %w", kind, err)
}

// emit writes a finished result: JSON to -o FILE (atomically) and to stdout
// with --json, else the human summary.
func emit(env *Env, of *outFlags, v any, human func(io.Writer) error) error {
	if of.out != "" {
		if err := writeFileAtomic(of.out, v); err != nil {
			return err
		}
	}
	if of.json {
		return report.JSON(env.Stdout, v)
	}
	return human(env.Stdout)
}

// writeFileAtomic writes JSON to FILE whole or not at all.
func writeFileAtomic(path string, v any) error {
	return writeAtomic(path, func(w io.Writer) error { return report.JSON(w, v) })
}

// writeAtomic renders into memory and writes the file through
// atomicfile.Write (temporary file, fsync, rename), so FILE is either
// the whole output or untouched.
func writeAtomic(path string, render func(io.Writer) error) error {
	var b bytes.Buffer
	if err := render(&b); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.Write(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// parseDSCP reads --dscp (EF, CS0..CS7, AF11..AF43, VA or a number 0..63)
// for probe kind, a usage error when it is none of those.
func parseDSCP(kind, s string) (int, error) {
	d, err := probe.ParseDSCP(s)
	if err != nil {
		return 0, usageErr(kind, err)
	}
	return d, nil
}

// parseRate reads "100", "100/s" or "6000/m".
func parseRate(s string) (float64, error) {
	mult := 1.0
	t := strings.TrimSpace(s)
	switch {
	case strings.HasSuffix(t, "/s"):
		t = strings.TrimSuffix(t, "/s")
	case strings.HasSuffix(t, "/m"):
		t, mult = strings.TrimSuffix(t, "/m"), 1.0/60
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("rate %q: want a number per second, e.g. 100 or 100/s", s)
	}
	return v * mult, nil
}

func usageErr(kind string, err error) error {
	return &ExitError{Code: 2, Err: fmt.Errorf("probe %s: %v", kind, err)}
}

// progress draws a bar on stderr for runs over two seconds when stderr is a
// terminal (also when stdout is redirected: --json > result.json).
func progress(env *Env, label string, total time.Duration) func() {
	p := report.NewProgress(env.Stderr, stderrTTY(env), label, total)
	p.Start()
	return p.Stop
}

// stderrTTY reports whether the bar has a terminal to draw on.
func stderrTTY(env *Env) bool {
	if env.Getenv != nil && (env.Getenv("NO_COLOR") != "" || env.Getenv("TERM") == "dumb") {
		return false
	}
	f, ok := env.Stderr.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// probeUDPOptions are probe udp's flags.
type probeUDPOptions struct {
	interval time.Duration
	duration time.Duration
	size     int
	dscp     string
	wait     time.Duration
	out      outFlags
}

func newProbeUDPCmd(env *Env) *cobra.Command {
	var o probeUDPOptions
	cmd := &cobra.Command{
		Use:   "udp HOST:PORT",
		Short: "isochronous UDP probe: RTT, jitter, IPDV, PDV, loss up/down, duplicates, reordering",
		Args:  exactArgs(1, "HOST:PORT"),
		RunE:  runWith(env, &o, runProbeUDP),
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *probeUDPOptions) register(f *pflag.FlagSet) {
	f.DurationVar(&o.interval, "interval", 10*time.Millisecond, "time between probes (the reflector's --min-interval is the floor)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send probes")
	f.IntVar(&o.size, "size", 64, "UDP payload bytes (48..65507; 80 minimum with a key)")
	f.StringVar(&o.dscp, "dscp", "0", "DSCP for the probes: EF, CS0..CS7, AF11..AF43 or 0..63")
	f.DurationVar(&o.wait, "wait", 0, "wait for late replies after the last probe (0: 3 × max RTT, 200ms..3s)")
	o.out.register(f)
}

// config checks the flags and builds the probe's configuration.
func (o *probeUDPOptions) config(env *Env, args []string) (probe.UDPConfig, error) {
	key, err := readKey(env, o.out.key, o.out.keyFile)
	if err != nil {
		return probe.UDPConfig{}, err
	}
	d, err := parseDSCP("udp", o.dscp)
	if err != nil {
		return probe.UDPConfig{}, err
	}
	if o.interval <= 0 {
		return probe.UDPConfig{}, usageErr("udp", fmt.Errorf("interval %s: must be at least %s", o.interval, probe.MinInterval))
	}
	return probe.UDPConfig{Target: args[0], Interval: probe.Duration(o.interval), Duration: probe.Duration(o.duration), Size: o.size, DSCP: d, Wait: probe.Duration(o.wait), Key: key, Force: o.out.force}, nil
}

func runProbeUDP(ctx context.Context, env *Env, o *probeUDPOptions, args []string) error {
	cfg, err := o.config(env, args)
	if err != nil {
		return err
	}
	stop := progress(env, "probe udp", o.duration)
	res, err := probe.UDP(ctx, cfg)
	stop()
	if err != nil {
		return probeErr("udp", err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error { return humanUDP(w, env, res) })
}

func pctRow(t *report.Table, name string, p probe.Percentiles) {
	t.AddStrings(name, fmtUS(p.Min), fmtUS(p.P50), fmtUS(p.P90), fmtUS(p.P99), fmtUS(p.P999), fmtUS(p.Max), fmtUS(p.Mean))
}

func pctTable() *report.Table {
	return &report.Table{Header: []string{"", "min", "p50", "p90", "p99", "p99.9", "max", "mean"}}
}

// fmtUS renders microseconds with a unit that keeps three significant figures.
func fmtUS(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2fms", v/1e3)
	}
	return fmt.Sprintf("%.1fµs", v)
}

func humanUDP(w io.Writer, env *Env, r *probe.UDPResult) error {
	fmt.Fprintf(w, "udp probe %s: %d sent, %d received, interval %s, %d B, %s timestamps\n\n",
		r.Target, r.Sent, r.Received, time.Duration(r.Config.Interval), r.Config.Size, r.Timestamps)
	t := pctTable()
	pctRow(t, "rtt", r.RTT)
	if err := t.Render(w, env.TTY); err != nil {
		return err
	}
	lossStyle := report.Good
	if r.Loss.Up+r.Loss.Down > 0 {
		lossStyle = report.Warn
	}
	fmt.Fprintf(w, "\njitter %s (RFC 3550)  ipdv p50 %s p99 %s  pdv %s (p99 - min)\n", fmtUS(r.Jitter), fmtUS(r.IPDV.P50), fmtUS(r.IPDV.P99), fmtUS(r.PDV))
	fmt.Fprintln(w, report.Paint(fmt.Sprintf("loss up %d (%.2f%%) down %d (%.2f%%)", r.Loss.Up, r.Loss.UpPct, r.Loss.Down, r.Loss.DownPct), lossStyle, env.TTY)+
		fmt.Sprintf("  duplicates %d  reordered %d", r.Duplicates, r.Reordered))
	fmt.Fprintln(w, dscpLine(r.DSCP, env.TTY))
	return nil
}

// dscpLine says how probes were marked and how the marking came back.
func dscpLine(d probe.DSCPReport, tty bool) string {
	line := fmt.Sprintf("dscp sent %s, at the reflector %s, on replies %s", d.Sent, orUnknown(d.ReflectorReceived), orUnknown(d.Received))
	st := report.Good
	if d.Changed > 0 {
		st = report.Warn
		line += fmt.Sprintf(" (%d replies remarked on the way)", d.Changed)
	}
	return report.Paint(line, st, tty)
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// probeTCPOptions are probe tcp's flags.
type probeTCPOptions struct {
	conns         int
	rate          string
	size          int
	pattern       string
	nodelay       bool
	serverNodelay bool
	duration      time.Duration
	timeout       time.Duration
	out           outFlags
}

func newProbeTCPCmd(env *Env) *cobra.Command {
	var o probeTCPOptions
	cmd := &cobra.Command{
		Use:   "tcp HOST:PORT",
		Short: "request/response over N persistent connections at a constant rate (HDR percentiles)",
		Args:  exactArgs(1, "HOST:PORT"),
		RunE:  runWith(env, &o, runProbeTCP),
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *probeTCPOptions) register(f *pflag.FlagSet) {
	f.IntVar(&o.conns, "connections", 1, "persistent connections")
	f.StringVar(&o.rate, "rate", "", "requests per second over all connections (default 10 per connection)")
	f.IntVar(&o.size, "size", 64, "request and response bytes (1..65507)")
	f.StringVar(&o.pattern, "pattern", probe.PatternRR, "rr, or write-write-read (the request in two writes, then read)")
	f.BoolVar(&o.nodelay, "nodelay", true, "set TCP_NODELAY on the client's sockets (--nodelay=false: Nagle, the sockets left as the kernel makes them, with no setsockopt at all)")
	f.BoolVar(&o.serverNodelay, "server-nodelay", true, "ask the reflector to set TCP_NODELAY on its side")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send requests")
	f.DurationVar(&o.timeout, "timeout", 5*time.Second, "give up on one request or connection setup after this long")
	o.out.register(f)
}

// config checks the flags and builds the probe's configuration.
func (o *probeTCPOptions) config(env *Env, args []string) (probe.TCPConfig, error) {
	key, err := readKey(env, o.out.key, o.out.keyFile)
	if err != nil {
		return probe.TCPConfig{}, err
	}
	var r float64
	if o.rate != "" {
		if r, err = parseRate(o.rate); err != nil {
			return probe.TCPConfig{}, usageErr("tcp", err)
		}
		if r == 0 {
			return probe.TCPConfig{}, usageErr("tcp", errors.New("rate 0: must be above 0"))
		}
	}
	if o.conns <= 0 {
		return probe.TCPConfig{}, usageErr("tcp", fmt.Errorf("connections %d: must be 1..%d", o.conns, probe.MaxConnections))
	}
	return probe.TCPConfig{Target: args[0], Connections: o.conns, Rate: r, Size: o.size, Pattern: o.pattern, Nagle: !o.nodelay, ServerNagle: !o.serverNodelay,
		Duration: probe.Duration(o.duration), Timeout: probe.Duration(o.timeout), Key: key, Force: o.out.force}, nil
}

func runProbeTCP(ctx context.Context, env *Env, o *probeTCPOptions, args []string) error {
	cfg, err := o.config(env, args)
	if err != nil {
		return err
	}
	stop := progress(env, "probe tcp", o.duration)
	res, err := probe.TCP(ctx, cfg)
	stop()
	if err != nil {
		return probeErr("tcp", err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error {
		fmt.Fprintf(w, "tcp probe %s: %d connections, %d requests at %.0f/s, %s, %d B, nodelay=%v, %d errors, %s timestamps\n\n",
			res.Target, res.Connections, res.Requests, res.Config.Rate, res.Config.Pattern, res.Config.Size, res.Config.NoDelay, res.Errors, res.Timestamps)
		t := pctTable()
		pctRow(t, "latency", res.RTT)
		pctRow(t, "service", res.Service)
		pctRow(t, "connect", res.Connect)
		if err := t.Render(w, env.TTY); err != nil {
			return err
		}
		fmt.Fprintln(w, "\nlatency: from each request's scheduled time (a slow reply delays those behind it); service: send to reply, uncorrected")
		if res.Errors > 0 {
			fmt.Fprintln(w, report.Paint("first error: "+res.ErrorSample, report.Warn, env.TTY))
		}
		return nil
	})
}

// probeCRROptions are probe crr's flags.
type probeCRROptions struct {
	request  int
	response int
	fastopen bool
	rate     string
	parallel int
	duration time.Duration
	count    int
	timeout  time.Duration
	out      outFlags
}

func newProbeCRRCmd(env *Env) *cobra.Command {
	var o probeCRROptions
	cmd := &cobra.Command{
		Use:   "crr HOST:PORT",
		Short: "connect + request + response + close per transaction (netperf TCP_CRR)",
		Args:  exactArgs(1, "HOST:PORT"),
		RunE:  runWith(env, &o, runProbeCRR),
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *probeCRROptions) register(f *pflag.FlagSet) {
	f.IntVar(&o.request, "request", 1000, "request bytes on the wire per transaction (40-byte hello included)")
	f.IntVar(&o.response, "response", 300000, "response bytes on the wire per transaction (16-byte status included)")
	f.BoolVar(&o.fastopen, "fastopen", false, "send the request in the SYN (TCP_FASTOPEN_CONNECT); the reflector host needs net.ipv4.tcp_fastopen & 2")
	f.StringVar(&o.rate, "rate", "0", "transactions per second over all loops (0: back to back)")
	f.IntVar(&o.parallel, "parallel", 1, fmt.Sprintf("transaction loops running at once (1..%d)", probe.MaxParallel))
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to run transactions")
	f.IntVar(&o.count, "count", 0, "stop after this many transactions (0: run for --duration)")
	f.DurationVar(&o.timeout, "timeout", 10*time.Second, "give up on one transaction after this long")
	o.out.register(f)
}

// config checks the flags and builds the probe's configuration.
func (o *probeCRROptions) config(env *Env, args []string) (probe.CRRConfig, error) {
	key, err := readKey(env, o.out.key, o.out.keyFile)
	if err != nil {
		return probe.CRRConfig{}, err
	}
	r, err := parseRate(o.rate)
	if err != nil {
		return probe.CRRConfig{}, usageErr("crr", err)
	}
	if o.request <= 0 || o.response <= 0 {
		return probe.CRRConfig{}, usageErr("crr", fmt.Errorf("request %d / response %d: must be positive", o.request, o.response))
	}
	if o.parallel <= 0 {
		return probe.CRRConfig{}, usageErr("crr", fmt.Errorf("parallel %d: must be 1..%d", o.parallel, probe.MaxParallel))
	}
	return probe.CRRConfig{Target: args[0], Request: o.request, Response: o.response, FastOpen: o.fastopen, Rate: r, Parallel: o.parallel, Duration: probe.Duration(o.duration), Count: o.count, Timeout: probe.Duration(o.timeout), Key: key, Force: o.out.force}, nil
}

func runProbeCRR(ctx context.Context, env *Env, o *probeCRROptions, args []string) error {
	cfg, err := o.config(env, args)
	if err != nil {
		return err
	}
	stop := progress(env, "probe crr", o.duration)
	res, err := probe.CRR(ctx, cfg)
	stop()
	if err != nil {
		return probeErr("crr", err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error {
		fmt.Fprintf(w, "crr probe %s: %d transactions (%.2f/s, %d at once), %d B request, %d B response, %d errors", res.Target, res.Transactions, res.TransactionsPerSec, res.Config.Parallel, res.Config.Request, res.Config.Response, res.Errors)
		if res.Config.FastOpen {
			fmt.Fprintf(w, ", fast open used on %d", res.FastOpenUsed)
		}
		fmt.Fprint(w, "\n\n")
		t := pctTable()
		pctRow(t, "connect", res.Connect)
		pctRow(t, "first byte", res.FirstByte)
		pctRow(t, "last byte", res.LastByte)
		return t.Render(w, env.TTY)
	})
}

// probeLoadOptions are probe load's flags.
type probeLoadOptions struct {
	upload   bool
	download bool
	both     bool
	flows    int
	duration time.Duration
	idle     time.Duration
	interval time.Duration
	size     int
	dscp     string
	out      outFlags
}

func newProbeLoadCmd(env *Env) *cobra.Command {
	var o probeLoadOptions
	cmd := &cobra.Command{
		Use:   "load HOST:PORT",
		Short: "latency under load: idle RTT, then RTT while TCP flows saturate the path",
		Args:  exactArgs(1, "HOST:PORT"),
		RunE:  runWith(env, &o, runProbeLoad),
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *probeLoadOptions) register(f *pflag.FlagSet) {
	f.BoolVar(&o.upload, "upload", false, "load with flows from here to the reflector")
	f.BoolVar(&o.download, "download", false, "load with flows from the reflector to here")
	f.BoolVar(&o.both, "both", false, "load both directions (the default)")
	f.IntVar(&o.flows, "flows", 4, "TCP flows per direction (1..256)")
	f.DurationVar(&o.duration, "duration", 20*time.Second, "loaded phase")
	f.DurationVar(&o.idle, "idle", 5*time.Second, "idle phase before the load")
	f.DurationVar(&o.interval, "interval", 20*time.Millisecond, "UDP probe interval")
	f.IntVar(&o.size, "size", 64, "UDP probe payload bytes")
	f.StringVar(&o.dscp, "dscp", "0", "DSCP for the UDP probes (the load flows stay unmarked): EF, CS0..CS7, AF11..AF43 or 0..63")
	o.out.register(f)
}

// config checks the flags and builds the probe's configuration.
func (o *probeLoadOptions) config(env *Env, args []string) (probe.LoadConfig, error) {
	key, err := readKey(env, o.out.key, o.out.keyFile)
	if err != nil {
		return probe.LoadConfig{}, err
	}
	d, err := parseDSCP("load", o.dscp)
	if err != nil {
		return probe.LoadConfig{}, err
	}
	up, down := o.upload, o.download
	if o.both {
		up, down = true, true
	}
	if o.flows <= 0 {
		return probe.LoadConfig{}, usageErr("load", fmt.Errorf("flows %d: must be 1..256", o.flows))
	}
	if o.interval <= 0 || o.duration <= 0 || o.idle <= 0 {
		return probe.LoadConfig{}, usageErr("load", errors.New("interval, duration and idle must be positive"))
	}
	return probe.LoadConfig{Target: args[0], Upload: up, Download: down, Flows: o.flows, Duration: probe.Duration(o.duration), Idle: probe.Duration(o.idle), Interval: probe.Duration(o.interval), Size: o.size, DSCP: d, Key: key, Force: o.out.force}, nil
}

func runProbeLoad(ctx context.Context, env *Env, o *probeLoadOptions, args []string) error {
	cfg, err := o.config(env, args)
	if err != nil {
		return err
	}
	stop := progress(env, "probe load", o.idle+o.duration+time.Second)
	res, err := probe.Load(ctx, cfg)
	stop()
	if err != nil {
		return probeErr("load", err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error {
		fmt.Fprintf(w, "latency under load %s: %d flows, upload=%v download=%v\n\n", res.Target, res.Config.Flows, res.Config.Upload, res.Config.Download)
		t := pctTable()
		pctRow(t, "idle rtt", res.IdleRTT)
		pctRow(t, "loaded rtt", res.LoadedRTT)
		if err := t.Render(w, env.TTY); err != nil {
			return err
		}
		st := report.Good
		switch res.Grade {
		case "B", "C":
			st = report.Warn
		case "D", "F":
			st = report.Bad
		}
		fmt.Fprintf(w, "\nincrease %.1f ms  grade %s  responsiveness %.0f RPM  goodput up %.1f down %.1f Mbit/s\n", res.Increase, report.Paint(res.Grade, st, env.TTY), res.RPM, res.Goodput.Up, res.Goodput.Down)
		fmt.Fprintf(w, "loaded loss up %d down %d\n", res.LoadedLoss.Up, res.LoadedLoss.Down)
		if res.Config.DSCP != 0 {
			fmt.Fprintln(w, dscpLine(res.DSCP, env.TTY))
		}
		fmt.Fprintln(w, res.Diagnosis)
		return nil
	})
}

// probeCompareOptions are probe compare's flags.
type probeCompareOptions struct{ json bool }

func newProbeCompareCmd(env *Env) *cobra.Command {
	var o probeCompareOptions
	cmd := &cobra.Command{
		Use:   "compare BEFORE.json AFTER.json",
		Short: "every metric of two results side by side with the change",
		Args:  exactArgs(2, "BEFORE.json AFTER.json"),
		RunE:  runWith(env, &o, runProbeCompare),
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the comparison as JSON")
	return cmd
}

func runProbeCompare(ctx context.Context, env *Env, o *probeCompareOptions, args []string) error {
	// Both results are named on the command line: one that cannot be read
	// or compared is bad input.
	a, err := os.ReadFile(args[0])
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("probe compare: %w", err)}
	}
	b, err := os.ReadFile(args[1])
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("probe compare: %w", err)}
	}
	cmp, err := probe.Compare(a, b)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("probe compare: %w", err)}
	}
	if o.json {
		return report.JSON(env.Stdout, cmp)
	}
	fmt.Fprintf(env.Stdout, "%s results: before %s, after %s\n\n", cmp.Type, cmp.Before, cmp.After)
	t := &report.Table{Header: []string{"metric", "before", "after", "change", "change %"}}
	num := func(p *float64, text string) string {
		if p == nil {
			return text
		}
		return strconv.FormatFloat(*p, 'f', -1, 64)
	}
	for _, r := range cmp.Rows {
		st := report.Plain
		if r.Change != nil && *r.Change != 0 && r.Better != "" {
			if (*r.Change < 0) == (r.Better == "lower") {
				st = report.Good
			} else {
				st = report.Bad
			}
		}
		ch, pct := "", ""
		if r.Change != nil {
			ch = strconv.FormatFloat(*r.Change, 'f', -1, 64)
			if *r.Change > 0 {
				ch = "+" + ch
			}
		}
		if r.ChangePct != nil {
			pct = fmt.Sprintf("%+.1f%%", *r.ChangePct)
		}
		t.Add(report.C(r.Metric), report.C(num(r.Before, r.BeforeText)), report.C(num(r.After, r.AfterText)), report.S(ch, st), report.S(pct, st))
	}
	if err := t.Render(env.Stdout, env.TTY); err != nil {
		return err
	}
	if len(cmp.ConfigChanges) > 0 {
		fmt.Fprintln(env.Stdout, "\nconfiguration differs:")
		for _, c := range cmp.ConfigChanges {
			fmt.Fprintf(env.Stdout, "  %s: %s -> %s\n", c.Key, c.Before, c.After)
		}
	}
	return nil
}
