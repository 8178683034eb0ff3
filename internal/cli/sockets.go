package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/sockets"
)

// Exit codes of 'sockets --require'.
const (
	// ExitRequireFailed: a matching socket lacks a required option.
	ExitRequireFailed = 1
	// ExitRequireUnknown: nothing lacked an option, but no socket matched or
	// some socket's options could not be read, so nothing was proven.
	ExitRequireUnknown = 3
)

// requireResult is the --require part of the JSON report.
type requireResult struct {
	Options []string        `json:"options"`
	Checked int             `json:"checked"`
	OK      bool            `json:"ok"`
	Failed  []requireFailed `json:"failed"`
}

type requireFailed struct {
	PID    int    `json:"pid"`
	Comm   string `json:"comm"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
	State  string `json:"state"`
	Reason string `json:"reason"`
}

// socketsOptions are sockets' flags.
type socketsOptions struct {
	pid     int
	comm    string
	port    int
	states  listFlag
	require listFlag
	noOpts  bool
	json    bool
	fix     fixOptions
}

func newSocketsCmd(env *Env) *cobra.Command {
	var o socketsOptions
	cmd := &cobra.Command{
		Use:   "sockets",
		Short: "audit TCP sockets: owner, TCP_NODELAY and other options, live tcp_info (--require for health checks)",
		Args:  noArgs,
		RunE:  runWith(env, &o, runSockets),
	}
	f := cmd.Flags()
	f.IntVar(&o.pid, "pid", 0, "only sockets of process `P`")
	f.StringVar(&o.comm, "comm", "", "only sockets of processes named `NAME` (as in /proc/PID/comm)")
	f.IntVar(&o.port, "port", 0, "only sockets whose local or remote port is `N`")
	f.Var(&o.states, "state", "only sockets in `STATE` (repeatable: "+strings.Join(sockets.States(), ", ")+")")
	f.Var(&o.require, "require", "exit 1 if a matching socket lacks `OPT` ("+strings.Join(sockets.OptionNames(), ", ")+"; !OPT for must-not-have); exit 3 if nothing could be verified")
	f.BoolVar(&o.noOpts, "no-options", false, "do not duplicate sockets to read their options (tcp_info only)")
	f.BoolVar(&o.json, "json", false, "print JSON")
	o.fix.register(f)
	return cmd
}

func runSockets(ctx context.Context, env *Env, o *socketsOptions, args []string) error {
	usage := func(format string, a ...any) error {
		return &ExitError{Code: 2, Err: fmt.Errorf("sockets: "+format+" (see 'lowlat sockets --help')", a...)}
	}
	if o.pid < 0 {
		return usage("--pid %d: want a process id", o.pid)
	}
	if o.port < 0 || o.port > 65535 {
		return usage("--port %d: want 1-65535", o.port)
	}
	if len(o.fix.fix) > 0 {
		return runFix(ctx, env, o)
	}
	if o.fix.set() {
		return usage("--cgroup, --service, --confirm, --persist, --yes, --dry-run and --journal go with --fix")
	}
	for _, s := range o.states {
		if !sockets.ValidState(s) {
			return usage("--state %q: want one of %s", s, strings.Join(sockets.States(), ", "))
		}
	}
	var reqs []sockets.Requirement
	for _, r := range o.require {
		q, err := sockets.ParseRequirement(r)
		if err != nil {
			return usage("--require: %v", err)
		}
		reqs = append(reqs, q)
	}
	if len(reqs) > 0 && o.noOpts {
		return usage("--require needs the options: drop --no-options")
	}
	cfg := sockets.Config{
		Filter:    sockets.Filter{PID: o.pid, Comm: o.comm, Port: uint16(o.port), States: o.states},
		NoOptions: o.noOpts,
	}
	rep, err := sockets.Audit(ctx, cfg)
	if err != nil {
		if errors.Is(err, sockets.ErrNoProcess) {
			return &ExitError{Code: ExitUsage, Err: fmt.Errorf("sockets: %w", err)} // --pid names no process
		}
		return fmt.Errorf("sockets: %w", err)
	}
	markEnforced(rep)
	var rr *requireResult
	if len(reqs) > 0 {
		rr = checkRequire(rep, reqs)
	}
	if o.json {
		if err := writeSocketsJSON(env.Stdout, rep, rr); err != nil {
			return err
		}
	} else {
		renderSockets(env, rep, rr != nil)
		if rr != nil {
			renderRequire(env, rr)
		}
	}
	return requireExit(rr)
}

// checkRequire applies the requirements to every matching socket they
// concern.
func checkRequire(rep *sockets.Report, reqs []sockets.Requirement) *requireResult {
	rr := &requireResult{Failed: []requireFailed{}}
	for _, q := range reqs {
		rr.Options = append(rr.Options, q.String())
	}
	for i := range rep.Sockets {
		s := &rep.Sockets[i]
		if s.State == "time-wait" {
			continue // closed by the application: nothing to hold against it
		}
		checked := false
		var why []string
		for _, q := range reqs {
			if !q.Applies(s) {
				continue
			}
			checked = true
			if ok, w := q.Check(s); !ok {
				why = append(why, w)
			}
		}
		if !checked {
			continue
		}
		rr.Checked++
		if len(why) > 0 {
			rr.Failed = append(rr.Failed, requireFailed{PID: s.PID, Comm: s.Comm, Local: s.Local, Remote: s.Remote, State: s.State, Reason: strings.Join(why, "; ")})
		}
	}
	rr.OK = rr.Checked > 0 && len(rr.Failed) == 0
	return rr
}

// writeSocketsJSON writes the report as report.JSON would, one socket at a
// time: encoding tens of thousands of rows in one value would hold the whole
// document in memory (90 MB for 10,000 sockets), streaming holds one row.
func writeSocketsJSON(w io.Writer, rep *sockets.Report, rr *requireResult) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var row bytes.Buffer
	enc := json.NewEncoder(&row)
	enc.SetEscapeHTML(false)
	enc.SetIndent("    ", "  ")
	bw.WriteString("{\n  \"sockets\": [")
	for i := range rep.Sockets {
		row.Reset()
		if err := enc.Encode(&rep.Sockets[i]); err != nil {
			return fmt.Errorf("write json: %w", err)
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString("\n    ")
		bw.Write(bytes.TrimRight(row.Bytes(), "\n"))
	}
	if len(rep.Sockets) > 0 {
		bw.WriteString("\n  ")
	}
	bw.WriteString("],")
	rest, err := json.MarshalIndent(struct {
		Warnings []string       `json:"warnings,omitempty"`
		Stats    sockets.Stats  `json:"stats"`
		Require  *requireResult `json:"require,omitempty"`
	}{rep.Warnings, rep.Stats, rr}, "", "  ")
	if err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	bw.Write(rest[1:]) // the object's fields, after its opening brace
	bw.WriteByte('\n')
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

func requireExit(rr *requireResult) error {
	if rr == nil || rr.OK {
		return nil
	}
	for _, f := range rr.Failed {
		if !strings.HasPrefix(f.Reason, "cannot verify") {
			return &ExitError{Code: ExitRequireFailed}
		}
	}
	return &ExitError{Code: ExitRequireUnknown}
}

func renderRequire(env *Env, rr *requireResult) {
	fmt.Fprintln(env.Stdout)
	want := strings.Join(rr.Options, ", ")
	switch {
	case rr.Checked == 0:
		fmt.Fprintf(env.Stdout, "%s no socket matched, so %s could not be verified\n", report.Paint("UNKNOWN", report.Warn, env.TTY), want)
	case len(rr.Failed) == 0:
		fmt.Fprintf(env.Stdout, "%s %d sockets checked: all have %s\n", report.Paint("OK", report.Good, env.TTY), rr.Checked, want)
	default:
		for _, f := range rr.Failed {
			fmt.Fprintf(env.Stdout, "%s pid %d (%s) %s -> %s %s: %s\n", report.Paint("FAIL", report.Bad, env.TTY), f.PID, f.Comm, f.Local, f.Remote, f.State, f.Reason)
		}
		fmt.Fprintf(env.Stdout, "%d of %d sockets checked fail %s\n", len(rr.Failed), rr.Checked, want)
	}
}

func renderSockets(env *Env, rep *sockets.Report, quietEmpty bool) {
	t := report.Table{Header: []string{"pid/comm", "state", "local", "remote", "options", "rtt ms", "cwnd", "retr", "delivery", "busy / rwnd / sndbuf-limited"}}
	for i := range rep.Sockets {
		s := &rep.Sockets[i]
		owner := "-"
		if s.PID != 0 {
			owner = strconv.Itoa(s.PID) + "/" + s.Comm
			if len(s.Owners) > 1 {
				owner += fmt.Sprintf(" +%d", len(s.Owners)-1)
			}
		}
		opts, st := optionsText(s)
		cells := []report.Cell{report.C(owner), report.C(s.State), report.C(s.Local), report.C(s.Remote), report.S(opts, st)}
		if ti := s.TCPInfo; ti != nil && !s.Listener() {
			retr := strconv.FormatUint(uint64(ti.TotalRetrans), 10)
			st := report.Plain
			if ti.TotalRetrans > 0 {
				st = report.Warn
			}
			cells = append(cells,
				report.C(fmt.Sprintf("%.2f/%.2f", float64(ti.RTTus)/1000, float64(ti.RTTVarus)/1000)),
				report.C(strconv.FormatUint(uint64(ti.Cwnd), 10)),
				report.S(retr, st),
				report.C(rateText(ti.DeliveryRate)),
				report.C(limitedText(ti)))
		} else if s.Listener() && ti != nil {
			cells = append(cells, report.C(""), report.C(""), report.C(""), report.C(""), report.S(fmt.Sprintf("accept queue %d/%d", s.RecvQ, s.SendQ), report.Dim))
		}
		t.Add(cells...)
	}
	if len(rep.Sockets) > 0 {
		t.Render(env.Stdout, env.TTY)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(env.Stdout, "warning:", w)
	}
	if len(rep.Sockets) == 0 && !quietEmpty {
		fmt.Fprintln(env.Stdout, "no TCP socket matched")
	}
	fmt.Fprintf(env.Stdout, "%d sockets (%d in the kernel's table), options read for %d, pidfd: %s, %.1f ms\n",
		rep.Stats.Listed, rep.Stats.Dumped, rep.Stats.Options, rep.Stats.Pidfd, float64(rep.Stats.ElapsedUs)/1000)
}

// optionsText is the options cell: what differs from a default socket, or
// why the options are unknown.
func optionsText(s *sockets.Socket) (string, report.Style) {
	o := s.Options
	if o == nil {
		if s.OptionsError == "" {
			return "-", report.Dim
		}
		e := s.OptionsError
		// Keep the cell short: "unknown (permission)"; JSON has the detail.
		if i := strings.Index(e, ":"); i > 0 && strings.HasPrefix(e, "unknown (") {
			e = e[:i] + ")"
		}
		return e, report.Dim
	}
	var parts []string
	st := report.Plain
	if s.Listener() {
		if o.NoDelay {
			parts = append(parts, "nodelay")
		}
		if o.FastOpenQLen > 0 {
			parts = append(parts, fmt.Sprintf("fastopen=%d", o.FastOpenQLen))
		}
	} else if o.NoDelay {
		parts = append(parts, "nodelay"+byLowlat(s, "nodelay"))
	} else {
		parts = append(parts, "NAGLE")
		if sockets.SmallWrites(s) {
			st = report.Warn
		}
	}
	if o.Cork {
		parts = append(parts, "cork")
	}
	if o.ReusePort {
		parts = append(parts, "reuseport")
	}
	parts = append(parts, "snd="+sizeText(o.SndBuf), "rcv="+sizeText(o.RcvBuf), o.Congestion+byLowlat(s, "congestion="+o.Congestion))
	if o.NotSentLowat > 0 {
		parts = append(parts, "lowat="+sizeText(int(o.NotSentLowat))+byLowlat(s, fmt.Sprintf("notsent_lowat=%d", o.NotSentLowat)))
	}

	if o.TOS != 0 {
		parts = append(parts, fmt.Sprintf("tos=0x%02x", o.TOS))
	}
	if o.Priority != 0 {
		parts = append(parts, fmt.Sprintf("prio=%d", o.Priority))
	}
	return strings.Join(parts, " "), st
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + "M"
	case n >= 1<<10:
		return strconv.Itoa(n>>10) + "K"
	}
	return strconv.Itoa(n)
}

func rateText(r *uint64) string {
	if r == nil {
		return "-"
	}
	bps := float64(*r)
	switch {
	case bps >= 1e9:
		return fmt.Sprintf("%.1fGbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.1fMbit/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.0fkbit/s", bps/1e3)
	}
	return fmt.Sprintf("%.0fbit/s", bps)
}

func limitedText(ti *sockets.TCPInfo) string {
	if ti.BusyUs == nil {
		return "-"
	}
	ms := func(p *uint64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprintf("%.0fms", float64(*p)/1000)
	}
	return ms(ti.BusyUs) + " / " + ms(ti.RwndLimitedUs) + " / " + ms(ti.SndbufLimitedUs)
}
