// Package cli implements lowlat's command line: one file per subcommand, each a
// func(ctx, env, args) error that tests can call directly with a captured Env.
// main only runs Main, prints the error and exits.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"golang.org/x/term"
)

// Env is everything a command may touch outside its arguments, so tests can run
// commands in-process and read what they printed.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	Stdin  io.Reader
	// TTY reports whether Stdout is a terminal: colour and progress bars only then.
	TTY bool
	// Getenv reads the environment (LOWLAT_JOURNAL and friends).
	Getenv func(string) string
}

// StdEnv returns the process environment.
func StdEnv() *Env {
	return &Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Stdin:  os.Stdin,
		TTY:    term.IsTerminal(int(os.Stdout.Fd())) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb",
		Getenv: os.Getenv,
	}
}

// ExitError carries a specific exit code (status exits 3 on drift). Err may be nil
// when the command already printed everything it had to say.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// command is one subcommand. Files register theirs from init so parallel work on
// different subcommands never edits the same table.
type command struct {
	name    string
	summary string
	// order sorts the help listing: the loop's steps first, helpers after.
	order  int
	hidden bool
	run    func(ctx context.Context, env *Env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("cli: duplicate command " + c.name)
	}
	commands[c.name] = c
}

// Main runs the lowlat command line with args (without the program name).
func Main(ctx context.Context, args []string, env *Env) error {
	if len(args) == 0 {
		usage(env.Stderr)
		return &ExitError{Code: 2}
	}
	name := args[0]
	switch name {
	case "-h", "--help", "help":
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				return c.run(ctx, env, []string{"--help"})
			}
		}
		usage(env.Stdout)
		return nil
	case "--version", "-version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		return &ExitError{Code: 2, Err: fmt.Errorf("unknown command %q (run 'lowlat help' for the list)", name)}
	}
	return c.run(ctx, env, args[1:])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "lowlat: diagnose, plan, apply reversibly, prove and roll back network latency tuning.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: lowlat <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	var list []*command
	for _, c := range commands {
		if !c.hidden {
			list = append(list, c)
		}
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].order != list[j].order {
			return list[i].order < list[j].order
		}
		return list[i].name < list[j].name
	})
	for _, c := range list {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'lowlat <command> --help' for a command's flags.")
}

// flagSet returns a FlagSet that never prints on its own: parse errors become one
// line naming the command, and --help prints the usage to stdout.
func flagSet(env *Env, name, usageLine string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		fmt.Fprintf(env.Stdout, "Usage: lowlat %s\n\nFlags:\n", usageLine)
		fs.SetOutput(env.Stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	return fs
}

// errHelp signals that --help was printed; commands return nil for it.
var errHelp = flag.ErrHelp

// parse parses flags anywhere among args (Go's flag package stops at the first
// positional argument; users write "probe udp host:port --interval 1ms").
// It returns the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				// flag already printed the usage (through fs.Usage).
				return nil, errHelp
			}
			return nil, &ExitError{Code: 2, Err: fmt.Errorf("%s: %v (see 'lowlat %s --help')", fs.Name(), err, fs.Name())}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// A lone "--" was consumed by Parse; everything after it is positional only
		// if the previous token was "--". flag cannot tell us, so treat the rest
		// uniformly: take one positional and keep parsing.
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// positional checks the count of positional arguments.
func positional(fs *flag.FlagSet, pos []string, min, max int, what string) error {
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		if len(pos) < min {
			return &ExitError{Code: 2, Err: fmt.Errorf("%s: missing %s (see 'lowlat %s --help')", fs.Name(), what, fs.Name())}
		}
		return &ExitError{Code: 2, Err: fmt.Errorf("%s: unexpected argument %q (see 'lowlat %s --help')", fs.Name(), strings.Join(pos[max:], " "), fs.Name())}
	}
	return nil
}

// sub is one sub-command of a command group ("probe udp", "lab run").
type sub struct {
	name string
	run  func(ctx context.Context, env *Env, args []string) error
}

// dispatch runs the sub-command args[0] of a group: no argument prints the
// usage on stderr and exits 2, --help prints it on stdout, an unknown name is
// a one-line usage error naming the noun ("kind", "command") and the choices.
func dispatch(ctx context.Context, env *Env, group, usage, noun string, subs []sub, args []string) error {
	if len(args) == 0 {
		fmt.Fprint(env.Stderr, usage)
		return &ExitError{Code: 2}
	}
	var names []string
	for _, s := range subs {
		if s.name == args[0] {
			return s.run(ctx, env, args[1:])
		}
		names = append(names, s.name)
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(env.Stdout, usage)
		return nil
	}
	return &ExitError{Code: 2, Err: fmt.Errorf("%s: unknown %s %q (%s)", group, noun, args[0], strings.Join(names, ", "))}
}

// withoutCtx adapts a sub-command that needs no context.
func withoutCtx(f func(*Env, []string) error) func(context.Context, *Env, []string) error {
	return func(_ context.Context, env *Env, args []string) error { return f(env, args) }
}
