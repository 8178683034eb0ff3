package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/report"
)

type probeICMPOptions struct {
	interval time.Duration
	duration time.Duration
	size     int
	dscp     string
	wait     time.Duration
	socket   string
	out      outFlags
}

func newProbeICMPCmd(env *Env) *cobra.Command {
	var o probeICMPOptions
	cmd := &cobra.Command{
		Use:   "icmp HOST",
		Short: "isochronous ICMP echo to a host that runs no reflector: RTT, jitter, loss (no direction)",
		Args:  exactArgs(1, "HOST"),
		RunE:  runWith(env, &o, runProbeICMP),
	}
	o.register(cmd.Flags())
	return cmd
}

func (o *probeICMPOptions) register(f *pflag.FlagSet) {
	f.DurationVar(&o.interval, "interval", time.Second, "time between echo requests (at least 10ms)")
	f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send")
	f.IntVar(&o.size, "size", 56, "echo payload bytes (16..65499; ping's default is 56)")
	f.StringVar(&o.dscp, "dscp", "0", "DSCP for the requests: EF, CS0..CS7, AF11..AF43 or 0..63")
	f.DurationVar(&o.wait, "wait", 0, "wait for late replies after the last request (0: 3 × max RTT, 200ms..3s)")
	f.StringVar(&o.socket, "socket", "auto", "auto (a datagram socket where net.ipv4.ping_group_range allows, else raw), dgram or raw")
	registerICMPOut(f, &o.out)
}

// config checks the flags and builds the probe's configuration.
func (o *probeICMPOptions) config(args []string) (probe.ICMPConfig, error) {
	d, err := parseDSCP("icmp", o.dscp)
	if err != nil {
		return probe.ICMPConfig{}, err
	}
	sock := o.socket
	switch sock {
	case "auto":
		sock = ""
	case "dgram", "raw":
	default:
		return probe.ICMPConfig{}, usageErr("icmp", fmt.Errorf("--socket %q: want auto, dgram or raw", o.socket))
	}
	if o.interval <= 0 {
		return probe.ICMPConfig{}, usageErr("icmp", fmt.Errorf("interval %s: must be at least %s", o.interval, probe.MinWatchInterval))
	}
	// A reflector's HOST:PORT given to icmp would otherwise fail its name
	// lookup after the gate's baseline started.
	if _, _, err := net.SplitHostPort(args[0]); err == nil {
		return probe.ICMPConfig{}, usageErr("icmp", fmt.Errorf("%q: a HOST, not HOST:PORT: ICMP echo has no port", args[0]))
	}
	return probe.ICMPConfig{Target: args[0], Interval: probe.Duration(o.interval), Duration: probe.Duration(o.duration), Size: o.size, DSCP: d, Wait: probe.Duration(o.wait), Socket: sock, Force: o.out.force}, nil
}

// icmpNotes are what ICMP figures cannot tell, said wherever a gate shows
// them.
var icmpNotes = []string{
	"ICMP loss has no direction: an echo request lost on the way out and its reply lost on the way back look the same (a reflector tells them apart: udp)",
	"routers may answer ping at a low priority or at a limited rate: ICMP RTT and loss can read worse than the traffic's own, and a change in how the far end treats ICMP reads as a change",
}

// registerICMPOut registers the output flags; ICMP has no key.
func registerICMPOut(f *pflag.FlagSet, of *outFlags) {
	f.BoolVar(&of.json, "json", false, "print the result as JSON")
	f.StringVarP(&of.out, "output", "o", "", "also write the JSON result to `FILE` (written whole or not at all)")
	f.BoolVar(&of.force, "force", false, "allow runs longer than 24h")
}

func runProbeICMP(ctx context.Context, env *Env, o *probeICMPOptions, args []string) error {
	cfg, err := o.config(args)
	if err != nil {
		return err
	}
	stop := progress(env, "probe icmp", o.duration)
	res, err := probe.ICMP(ctx, cfg)
	stop()
	if err != nil {
		return probeErr("icmp", err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error { return humanICMP(w, env, res) })
}

func humanICMP(w io.Writer, env *Env, r *probe.ICMPResult) error {
	fmt.Fprintf(w, "icmp probe %s (%s): %d sent, %d received, interval %s, %d B, %s socket, %s timestamps\n\n",
		r.Target, r.Address, r.Sent, r.Received, time.Duration(r.Config.Interval), r.Config.Size, r.Socket, r.Timestamps)
	t := pctTable()
	pctRow(t, "rtt", r.RTT)
	if err := t.Render(w, env.TTY); err != nil {
		return err
	}
	lossStyle := report.Good
	if r.Loss.Lost > 0 {
		lossStyle = report.Warn
	}
	fmt.Fprintf(w, "\njitter %s (RFC 3550)  ipdv p50 %s p99 %s  pdv %s (p99 - min)\n", fmtUS(r.Jitter), fmtUS(r.IPDV.P50), fmtUS(r.IPDV.P99), fmtUS(r.PDV))
	fmt.Fprintln(w, report.Paint(fmt.Sprintf("loss %d (%.2f%%)", r.Loss.Lost, r.Loss.Pct), lossStyle, env.TTY)+
		fmt.Sprintf("  duplicates %d  reordered %d", r.Duplicates, r.Reordered))
	fmt.Fprintln(w, "ICMP cannot tell a request lost on the way out from a reply lost on the way back; a reflector can (probe udp).")
	return nil
}
