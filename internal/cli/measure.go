package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/probe"
)

// measurement is a probe given as a command line ("udp HOST:PORT --interval
// 10ms"), parsed once with the same flags and checks as 'lowlat probe KIND',
// and run as often as the gate needs with exactly those parameters.
type measurement struct {
	// spec is the command line as given; kind its first word.
	spec, kind string
	// length is how long one run takes, about (idle + loaded phase for
	// load): the dead-man deadline must leave room for it.
	length time.Duration
	run    func(ctx context.Context) (any, error)
	// config is the probe's configuration as run (probe.UDPConfig, ...):
	// a baseline file must have been measured with the same.
	config any
	// notes say what the probe's figures cannot tell, shown with them.
	notes []string
	// For the passive measurement: how many values a window holds, the
	// fewest a gate may judge, and the notes that compare two windows'
	// traffic (nil for the probes, whose volume is their own).
	samples    func(res any) uint64
	minSamples uint64
	compare    func(before, after any) []string
}

// reflectorKinds are the probe kinds that measure toward a lowlat
// reflector (HOST:PORT); measureKinds every kind a gate can measure with,
// icmp toward any host that answers ping.
var (
	reflectorKinds = []string{"udp", "tcp", "crr", "load"}
	measureKinds   = append(slices.Clone(reflectorKinds), "icmp", "passive")
)

// parseMeasurement parses a --prove value. Every error is a usage error
// naming the flag it came from.
func parseMeasurement(env *Env, flag, spec string) (*measurement, error) {
	usage := func(err error) error {
		return &ExitError{Code: 2, Err: fmt.Errorf("%s %q: %v", flag, spec, err)}
	}
	args, err := splitArgs(spec)
	if err != nil {
		return nil, usage(err)
	}
	if len(args) == 0 {
		return nil, usage(fmt.Errorf("want a probe: %s HOST:PORT [probe flags], icmp HOST [probe flags], or passive port:N|egress IF|rx port:N [--for D]", strings.Join(reflectorKinds, "|")))
	}
	m := &measurement{spec: spec, kind: args[0]}
	fs := pflag.NewFlagSet("probe "+m.kind, pflag.ContinueOnError)
	fs.SetOutput(discard{})
	var out *outFlags
	var build func(args []string) error
	target := "HOST:PORT" // what the probe's one argument names
	switch m.kind {
	case "udp":
		var o probeUDPOptions
		o.register(fs)
		out = &o.out
		build = func(args []string) error {
			cfg, err := o.config(env, args)
			m.length = o.duration
			m.run = func(ctx context.Context) (any, error) { return probe.UDP(ctx, cfg) }
			m.config = cfg
			return err
		}
	case "tcp":
		var o probeTCPOptions
		o.register(fs)
		out = &o.out
		build = func(args []string) error {
			cfg, err := o.config(env, args)
			m.length = o.duration
			m.run = func(ctx context.Context) (any, error) { return probe.TCP(ctx, cfg) }
			m.config = cfg
			return err
		}
	case "crr":
		var o probeCRROptions
		o.register(fs)
		out = &o.out
		build = func(args []string) error {
			cfg, err := o.config(env, args)
			m.length = o.duration
			m.run = func(ctx context.Context) (any, error) { return probe.CRR(ctx, cfg) }
			m.config = cfg
			return err
		}
	case "load":
		var o probeLoadOptions
		o.register(fs)
		out = &o.out
		build = func(args []string) error {
			cfg, err := o.config(env, args)
			m.length = o.idle + o.duration
			m.run = func(ctx context.Context) (any, error) { return probe.Load(ctx, cfg) }
			m.config = cfg
			return err
		}
	case "icmp":
		// Toward a host that runs no reflector (a router, the provider's
		// gateway), as runbook 003 watched its uplink with ping.
		var o probeICMPOptions
		o.register(fs)
		out = &o.out
		target = "HOST"
		m.notes = icmpNotes
		build = func(args []string) error {
			cfg, err := o.config(args)
			m.length = o.duration
			m.run = func(ctx context.Context) (any, error) { return probe.ICMP(ctx, cfg) }
			m.config = cfg
			return err
		}
	case "passive":
		// The host's own traffic, measured in the kernel: no probe, no
		// reflector; the target is what to judge, in one or two words.
		return parsePassive(m, args[1:], usage)
	default:
		return nil, usage(fmt.Errorf("unknown probe %q (want %s)", m.kind, strings.Join(measureKinds, ", ")))
	}
	if err := fs.Parse(args[1:]); err != nil {
		return nil, usage(err)
	}
	if out.json || out.out != "" {
		return nil, usage(errors.New("the probe's own --json and -o are not used here: the gate's --json carries both results"))
	}
	switch pos := fs.Args(); {
	case len(pos) == 0:
		return nil, usage(errors.New("missing " + target))
	case len(pos) > 1:
		return nil, usage(fmt.Errorf("unexpected argument %q", strings.Join(pos[1:], " ")))
	}
	if err := build(fs.Args()); err != nil {
		var ee *ExitError
		if errors.As(err, &ee) && ee.Err != nil {
			return nil, usage(ee.Err)
		}
		return nil, usage(err)
	}
	return m, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// splitArgs splits a command line as a POSIX shell would, without expanding
// anything: words separated by blanks, '…' taken literally, "…" with \" \\
// escapes, and \ escaping the next character outside quotes.
func splitArgs(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated ' quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New(`unterminated " quote`)
			}
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			cur.WriteByte(s[i])
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}
