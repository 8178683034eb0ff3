// Package cli implements lowlat's command line on cobra: one file per
// subcommand, each building its *cobra.Command (flags declared on it, bound
// to an options struct) and running func(ctx, env, opts, args) error, which
// tests reach through Main with a captured Env. main only runs Main, prints
// the error and exits.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lowlat/lowlat/internal/hangup"
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
	// Hangup delivers the process's SIGHUPs, caught from its start
	// (package hangup): monitor reloads on one, any other command ends as
	// on SIGTERM. nil: no command catches SIGHUP (tests).
	Hangup <-chan os.Signal
}

// StdEnv returns the process environment.
func StdEnv() *Env {
	return &Env{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		Stdin:  os.Stdin,
		TTY:    term.IsTerminal(int(os.Stdout.Fd())) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb",
		Getenv: os.Getenv,
		Hangup: hangup.Signals(),
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

// ExitUsage is the exit code of a command line lowlat cannot run: an unknown
// command or flag, a missing or extra argument, a value out of range.
const ExitUsage = 2

func init() {
	// The help listing follows the order commands are added in: the loop's
	// steps first, not the alphabet.
	cobra.EnableCommandSorting = false
}

// Main runs the lowlat command line with args (without the program name).
func Main(ctx context.Context, args []string, env *Env) error {
	root := newRootCmd(env)
	if args == nil {
		args = []string{} // cobra reads os.Args when given nil
	}
	root.SetArgs(args)
	if env.Hangup != nil {
		// SIGHUP is caught from the process's start, so it no longer ends
		// a command by itself: one that does not reload on it ends as on
		// SIGTERM.
		if cmd, _, err := root.Find(args); err != nil || cmd.Annotations[annotReloads] == "" {
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			defer stop()
			go func() {
				select {
				case <-env.Hangup:
					stop()
				case <-ctx.Done():
				}
			}()
		}
	}
	return root.ExecuteContext(ctx)
}

// annotReloads marks a command that takes SIGHUP as a reload (Env.Hangup).
const annotReloads = "lowlat/reloads-on-sighup"

// Command groups of the top-level help listing.
const (
	groupLoop    = "loop"
	groupMeasure = "measure"
	groupUnits   = "units"
)

// newRootCmd builds the whole command tree, writing to env's streams. Each
// Main builds its own, so flag values never leak from one run to the next.
func newRootCmd(env *Env) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "lowlat <command>",
		Short: "diagnose, plan, apply reversibly, prove and roll back network latency tuning",
		Long:  "lowlat: diagnose, plan, apply reversibly, prove and roll back network latency tuning.",
		// Bad input is one line from Main's error, never a usage dump.
		SilenceErrors:     true,
		SilenceUsage:      true,
		DisableAutoGenTag: true, // reproducible man pages
		// newCompletionCmd replaces cobra's, whose bare "completion"
		// prints help and exits 0 instead of a usage error.
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		Args:              cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if showVersion && len(args) == 0 {
				return runVersion(cmd.Context(), env, &versionOptions{}, nil)
			}
			return missingSubcommand(cmd, "command", args)
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print the lowlat version (as 'lowlat version')")
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetIn(env.Stdin)
	root.SetFlagErrorFunc(usageError)
	root.SetUsageFunc(usage)
	root.SetHelpCommand(newHelpCmd())

	root.AddGroup(
		&cobra.Group{ID: groupLoop, Title: "Diagnose, tune and roll back:"},
		&cobra.Group{ID: groupMeasure, Title: "Measure and reproduce:"},
		&cobra.Group{ID: groupUnits, Title: "Run by lowlat's systemd units:"},
	)
	inGroup(groupLoop, root,
		newDoctorCmd(env),
		newCaptureCmd(env),
		newProfileCmd(env),
		newPlanCmd(env),
		newApplyCmd(env),
		newConfirmCmd(env),
		newProveCmd(env),
		newPinCmd(env),
		newRollbackCmd(env),
		newStatusCmd(env),
	)
	inGroup(groupMeasure, root,
		newProbeCmd(env),
		newReflectorCmd(env),
		newMonitorCmd(env),
		newWatchCmd(env),
		newLabCmd(env),
		newSocketsCmd(env),
		newCanaryCmd(env),
	)
	inGroup(groupLoop, root, newAutorateCmd(env))
	inGroup(groupUnits, root,
		newBootCmd(env),
		newReassertCmd(env),
	)
	root.AddCommand(
		newVersionCmd(env),
		newCompletionCmd(),
		newManCmd(),
		newWatchdogCmd(env),
		newUnitsCmd(),
		newRemovingCmd(env),
	)
	return root
}

// inGroup adds cmds to parent, listed under the help group id.
func inGroup(id string, parent *cobra.Command, cmds ...*cobra.Command) {
	for _, c := range cmds {
		c.GroupID = id
	}
	parent.AddCommand(cmds...)
}

// usage prints a command's usage: cobra's default layout, with one usage
// line (a command with subcommands names its placeholder in Use: "probe
// <kind>") and the command groups of the top level. It is a function, not
// a text/template: a template's reflection would keep every method of every
// type in the binary.
func usage(cmd *cobra.Command) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Usage:\n  %s\n", cmd.UseLine())
	if cmd.HasExample() {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", cmd.Example)
	}
	if cmd.HasAvailableSubCommands() {
		listed := func(c *cobra.Command) bool { return c.IsAvailableCommand() || c.Name() == "help" }
		section := func(title, group string) {
			fmt.Fprintf(&b, "\n%s\n", title)
			for _, c := range cmd.Commands() {
				if c.GroupID == group && listed(c) {
					fmt.Fprintf(&b, "  %-*s %s\n", c.NamePadding(), c.Name(), c.Short)
				}
			}
		}
		if len(cmd.Groups()) == 0 {
			section("Commands:", "")
		} else {
			for _, g := range cmd.Groups() {
				section(g.Title, g.ID)
			}
			if !cmd.AllChildCommandsHaveGroup() {
				section("Other commands:", "")
			}
		}
	}
	if cmd.HasAvailableLocalFlags() {
		fmt.Fprintf(&b, "\nFlags:\n%s", cmd.LocalFlags().FlagUsages())
	}
	if cmd.HasAvailableInheritedFlags() {
		fmt.Fprintf(&b, "\nGlobal flags:\n%s", cmd.InheritedFlags().FlagUsages())
	}
	if cmd.HasAvailableSubCommands() {
		fmt.Fprintf(&b, "\nRun '%s <command> --help' for a command's flags.\n", cmd.CommandPath())
	}
	_, err := io.WriteString(cmd.OutOrStdout(), b.String())
	return err
}

// runWith adapts a command's run function to cobra: the context of
// Main, the Env, the command's options and its positional arguments.
func runWith[O any](env *Env, o *O, run func(context.Context, *Env, *O, []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return run(cmd.Context(), env, o, args)
	}
}

// usageError is a command line lowlat cannot run, as one line naming the
// command and where its help is: exit 2, no usage dump.
func usageError(cmd *cobra.Command, err error) error {
	name := commandName(cmd)
	if name == "" {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%v (see 'lowlat --help')", err)}
	}
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf("%s: %v (see 'lowlat %s --help')", name, err, name)}
}

// commandName is the command's path without the program name ("probe udp").
func commandName(cmd *cobra.Command) string {
	path := cmd.CommandPath()
	if _, rest, ok := strings.Cut(path, " "); ok {
		return rest
	}
	return ""
}

// noArgs is Args for commands that take no positional argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError(cmd, fmt.Errorf("unexpected argument %q", strings.Join(args, " ")))
	}
	return nil
}

// exactArgs wants n positional arguments, described by what when missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError(cmd, fmt.Errorf("missing %s", what))
		}
		if len(args) > n {
			return usageError(cmd, fmt.Errorf("unexpected argument %q", strings.Join(args[n:], " ")))
		}
		return nil
	}
}

// minArgs wants at least n positional arguments.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError(cmd, fmt.Errorf("missing %s", what))
		}
		return nil
	}
}

// newGroupCmd is a command that only holds subcommands ("probe", "lab"):
// without one, or with an unknown one, it is a usage error naming the
// choices; noun says what a subcommand is called ("kind", "command").
func newGroupCmd(use, short, long, noun string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return missingSubcommand(cmd, noun, args)
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// missingSubcommand is the usage error of a group run without a known
// subcommand; a subcommand group names the choices, the top-level list is
// too long for one line (--help has it).
func missingSubcommand(cmd *cobra.Command, noun string, args []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	want := ""
	if cmd.HasParent() && len(names) > 0 {
		want = ": " + strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	if len(args) == 0 {
		return usageError(cmd, fmt.Errorf("missing %s%s", noun, want))
	}
	if want != "" {
		want = "; want" + want[1:]
	}
	return usageError(cmd, fmt.Errorf("unknown %s %q%s", noun, args[0], want))
}

// newHelpCmd replaces cobra's help command, which answers an unknown topic
// with the top-level usage and exit 0: here it is a usage error.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]...",
		Short: "show the help of lowlat or of a command",
		Args:  cobra.ArbitraryArgs,
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, c := range target.Commands() {
				if c.IsAvailableCommand() && strings.HasPrefix(c.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(c.Name(), c.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err == nil && len(rest) > 0 {
				err = fmt.Errorf("unknown command %q", strings.Join(args, " "))
			}
			if err != nil {
				return usageError(cmd, err)
			}
			return target.Help()
		},
	}
}
