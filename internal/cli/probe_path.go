package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/report"
)

// probePathOptions are probe path's flags.
type probePathOptions struct {
	proto    string
	count    int
	interval time.Duration
	maxHops  int
	timeout  time.Duration
	flow     int
	names    bool
	out      outFlags
}

func newProbePathCmd(env *Env) *cobra.Command {
	var o probePathOptions
	cmd := &cobra.Command{
		Use:   "path HOST[:PORT]",
		Short: "hop-by-hop latency, jitter and loss (mtr-class), and which hop adds them",
		Long: "Sends TTL-limited probes to every hop on the way to HOST, all on one flow (ECMP keeps them on one path), " +
			"and reports each hop's RTT, jitter and loss, the delay it adds, and a verdict: the first hop whose added delay or " +
			"loss carries on to the destination. Loss or delay at one hop only is labelled rate-limited: the router answers " +
			"slowly, and forwards fine. UDP and TCP need no privilege; ICMP needs a ping socket (net.ipv4.ping_group_range) or root.",
		Args: exactArgs(1, "HOST"),
		RunE: runWith(env, &o, runProbePath),
	}
	f := cmd.Flags()
	f.StringVar(&o.proto, "proto", "udp", "udp (to a closed port: traceroute's 33434 unless :PORT), icmp (echo) or tcp (SYN to :PORT, 443 by default)")
	f.IntVar(&o.count, "count", 10, "probes per hop")
	f.DurationVar(&o.interval, "interval", time.Second, "time between rounds (a round probes every hop once)")
	f.IntVar(&o.maxHops, "max-hops", 30, "largest TTL (1..255)")
	f.DurationVar(&o.timeout, "timeout", 2*time.Second, "how long to wait for one probe's reply")
	f.IntVar(&o.flow, "flow", 0, "the flow ID: source port (udp, tcp) or echo identifier (icmp); 0 derives it from the target, so repeated runs take one path")
	f.BoolVar(&o.names, "names", false, "look up each hop's reverse name")
	registerICMPOut(f, &o.out)
	return cmd
}

func runProbePath(ctx context.Context, env *Env, o *probePathOptions, args []string) error {
	cfg := pathprobe.Config{Target: args[0], Proto: o.proto, Count: o.count, Interval: o.interval, MaxHops: o.maxHops, Timeout: o.timeout, Flow: o.flow, Names: o.names}
	// Zero means "the default" to the library: on the command line it is a
	// mistake.
	for name, v := range map[string]int64{"count": int64(o.count), "max-hops": int64(o.maxHops), "interval": int64(o.interval), "timeout": int64(o.timeout)} {
		if v <= 0 {
			return usageErr("path", fmt.Errorf("--%s must be positive", name))
		}
	}
	// The first round walks the path (up to a timeout for silent hops),
	// the last waits for the last replies.
	total := time.Duration(o.count)*o.interval + 2*o.timeout
	stop := progress(env, "probe path", total)
	res, err := pathprobe.Run(ctx, cfg)
	stop()
	switch {
	case errors.Is(err, pathprobe.ErrConfig):
		return &ExitError{Code: ExitUsage, Err: err}
	case errors.Is(err, context.Canceled):
		return &ExitError{Code: 130, Err: errors.New("probe path: interrupted; no result written")}
	case err != nil:
		return fmt.Errorf("probe path %s: %w", args[0], err)
	}
	return emit(env, &o.out, res, func(w io.Writer) error { return humanPath(w, env, res) })
}

func humanPath(w io.Writer, env *Env, r *pathprobe.Result) error {
	port := ""
	if r.Port != 0 {
		port = ":" + strconv.Itoa(r.Port)
	}
	fmt.Fprintf(w, "path %s (%s%s): %s, flow %d, %d probes per hop every %s, %s socket, %.1f s\n\n",
		r.Target, r.Address, port, r.Proto, r.Flow, r.Count, r.Interval, r.Socket, r.Seconds)
	t := &report.Table{Header: []string{"hop", "address", "loss", "sent", "recv", "min", "p50", "p90", "p99", "max", "jitter", "added p50", "note"}}
	for _, h := range r.Hops {
		addr := h.Address
		if addr == "" {
			addr = "???"
		} else if h.Name != "" {
			addr = h.Name + " (" + h.Address + ")"
		}
		loss := report.C(fmt.Sprintf("%.1f%%", h.LossPct))
		note := pathNote(r, h)
		if h.LossPct > 0 && !h.RateLimited {
			loss.Style = report.Warn
		}
		cells := []report.Cell{report.C(strconv.Itoa(h.Index)), report.C(addr), loss, report.C(strconv.Itoa(h.Sent)), report.C(strconv.Itoa(h.Received))}
		if h.Received == 0 {
			cells = append(cells, report.C("-"), report.C("-"), report.C("-"), report.C("-"), report.C("-"), report.C("-"), report.C("-"))
		} else {
			for _, v := range []float64{h.RTT.Min, h.RTT.P50, h.RTT.P90, h.RTT.P99, h.RTT.Max, h.JitterUS, h.AddedUS.P50} {
				cells = append(cells, report.C(fmtUS(v)))
			}
		}
		t.Add(append(cells, report.C(note))...)
	}
	if err := t.Render(w, env.TTY); err != nil {
		return err
	}
	style := report.Good
	switch {
	case r.Verdict.Hop > 0:
		style = report.Warn
	case r.Verdict.LossHiddenFrom > 0:
		style = report.Plain // loss unknown past a hop: not a clean bill
	}
	fmt.Fprintln(w)
	if !r.Reached {
		fmt.Fprintln(w, report.Paint(fmt.Sprintf("the destination did not answer within %d hops: the hops end at the last that did", len(r.Hops)), report.Warn, env.TTY))
	}
	fmt.Fprintln(w, report.Paint("verdict: "+r.Verdict.Text, style, env.TTY))
	if r.JitterFrom > 0 {
		fmt.Fprintf(w, "jitter rises from hop %d on\n", r.JitterFrom)
	}
	return nil
}

// pathNote says what a hop is: the destination, where delay or loss
// starts, and why its own loss or delay is not the path's.
func pathNote(r *pathprobe.Result, h pathprobe.Hop) string {
	var notes []string
	if h.Destination {
		notes = append(notes, "destination")
	}
	if r.Verdict.DelayHop == h.Index && r.Verdict.LossHop == h.Index {
		notes = append(notes, "← delay and loss start here")
	} else if r.Verdict.DelayHop == h.Index {
		notes = append(notes, "← delay starts here")
	} else if r.Verdict.LossHop == h.Index {
		notes = append(notes, "← loss starts here")
	}
	switch {
	case h.ReplyRateLimited && h.ReplyEveryMS > 0:
		notes = append(notes, fmt.Sprintf("ICMP replies rate-limited (one every %s): its loss is not the path's", fmtUS(h.ReplyEveryMS*1000)))
	case h.ReplyRateLimited:
		notes = append(notes, "ICMP replies rate-limited: its loss is not the path's")
	case h.RateLimited:
		notes = append(notes, "rate-limited / slow-path reply, not on the forwarding path")
	}
	return strings.Join(notes, "; ")
}
