package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runProbe runs 'lowlat probe ARGS...' in-process, as the probe tests do.
func runProbe(ctx context.Context, env *Env, args []string) error {
	return Main(ctx, append([]string{"probe"}, args...), env)
}

// isolatedRun is what one in-process lowlat run did.
type isolatedRun struct {
	stdout, stderr string
	err            error
	panicked       any
	// touched lists what appeared in the working directory or beside the
	// journal, and osStdio what went to the process's own stdout/stderr
	// instead of the Env's.
	touched []string
	osStdio string
}

// runIsolated runs Main with args as main.go does, in an empty working
// directory, with $LOWLAT_JOURNAL in an empty directory, and os.Stdout and
// os.Stderr redirected to a file, so it can tell whether the run wrote a
// file, opened the journal or printed past the Env.
func runIsolated(t *testing.T, args ...string) isolatedRun {
	t.Helper()
	work, state := t.TempDir(), t.TempDir()
	t.Chdir(work)
	journal := filepath.Join(state, "journal")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(k string) string {
		if k == "LOWLAT_JOURNAL" {
			return journal
		}
		return ""
	}}
	stdio, err := os.CreateTemp(t.TempDir(), "stdio")
	if err != nil {
		t.Fatal(err)
	}
	defer stdio.Close()
	var r isolatedRun
	func() {
		oldOut, oldErr := os.Stdout, os.Stderr
		os.Stdout, os.Stderr = stdio, stdio
		defer func() {
			os.Stdout, os.Stderr = oldOut, oldErr
			r.panicked = recover()
		}()
		r.err = Main(context.Background(), args, env)
	}()
	r.stdout, r.stderr = out.String(), errb.String()
	b, _ := os.ReadFile(stdio.Name())
	r.osStdio = string(b)
	for _, dir := range []string{work, state} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			r.touched = append(r.touched, filepath.Join(dir, e.Name()))
		}
	}
	return r
}

// mainStderr is what main.go prints for err.
func mainStderr(err error) string {
	if err == nil {
		return ""
	}
	if ee, ok := err.(*ExitError); ok {
		if ee.Err == nil {
			return ""
		}
		return fmt.Sprintln("lowlat:", ee.Err)
	}
	return fmt.Sprintln("lowlat:", err)
}

// commandTree returns the path of every command lowlat has ("" for lowlat
// itself, "probe udp", "__watchdog"…), hidden ones and help included.
func commandTree(t *testing.T) map[string]*cobra.Command {
	t.Helper()
	root := newRootCmd(&Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }})
	root.InitDefaultHelpCmd()
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		out[commandName(c)] = c
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// group marks a command that only holds subcommands in arity.
const group = -1

// arity is how many positional arguments each command takes, [min, max]
// (max -1: no limit); every command must be listed, so a new one is tested.
var arity = map[string][2]int{
	"":              {group, group},
	"doctor":        {0, 0},
	"capture":       {0, 0},
	"profile":       {group, group},
	"profile list":  {0, 0},
	"profile show":  {1, 1},
	"plan":          {0, 0},
	"apply":         {0, 0},
	"autorate":      {0, 0},
	"confirm":       {0, 0},
	"prove":         {0, 0},
	"pin":           {0, 0},
	"rollback":      {0, 0},
	"status":        {0, 0},
	"probe":         {group, group},
	"probe udp":     {1, 1},
	"probe tcp":     {1, 1},
	"probe crr":     {1, 1},
	"probe icmp":    {1, 1},
	"probe path":    {1, 1},
	"probe load":    {1, 1},
	"probe compare": {2, 2},
	"reflector":     {0, 0},
	"monitor":       {0, 0},
	"lab":           {group, group},
	"lab list":      {0, 0},
	"lab run":       {1, 1},
	"lab vm":        {1, 1},
	"lab report":    {1, -1},
	"lab clean":     {0, 0},
	"sockets":       {0, 0},
	"canary":        {group, group},
	"canary judge":  {0, 0},
	"boot":          {0, 0},
	"reassert":      {0, 0},
	"version":       {0, 0},
	"watch":         {0, 0},
	"completion":    {1, 1},
	"man":           {1, 1},
	"help":          {0, -1},
	"__watchdog":    {0, 0},
	"__units":       {1, 1},
	"__removing":    {0, 0},
}

func TestArityCoversEveryCommand(t *testing.T) {
	tree := commandTree(t)
	var have, want []string
	for p := range tree {
		have = append(have, p)
	}
	for p := range arity {
		want = append(want, p)
	}
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("commands differ from the arity table:\nhave %q\nwant %q", have, want)
	}
}

// split turns a command path into arguments.
func split(path string) []string { return strings.Fields(path) }

// TestEveryCommandHelp: every command and subcommand, hidden ones included,
// answers --help (and 'help CMD') with its usage once on stdout, exit 0,
// and does nothing else: no dial, no panic, no file, no journal. A
// positional argument before --help does not make it run either.
func TestEveryCommandHelp(t *testing.T) {
	tree := commandTree(t)
	for path, cmd := range tree {
		args := split(path)
		forms := [][]string{append(slices.Clone(args), "--help"), append(slices.Clone(args), "-h")}
		if path != "" && path != "help" {
			forms = append(forms, append([]string{"help"}, args...))
		}
		if a := arity[path]; a[0] > 0 {
			// "probe tcp 127.0.0.1:1 --help" must not dial 127.0.0.1:1.
			with := slices.Clone(args)
			for range a[0] {
				with = append(with, "127.0.0.1:1")
			}
			forms = append(forms, append(with, "--help"))
		}
		for _, form := range forms {
			t.Run(strings.Join(form, " "), func(t *testing.T) {
				r := runIsolated(t, form...)
				if r.panicked != nil {
					t.Fatalf("panicked: %v", r.panicked)
				}
				if r.err != nil {
					t.Fatalf("exit %d: %v (stderr %q)", exitCode(r.err), r.err, r.stderr)
				}
				if n := strings.Count(r.stdout, "Usage:"); n != 1 {
					t.Errorf("printed Usage %d times:\n%s", n, r.stdout)
				}
				if !strings.Contains(r.stdout, "lowlat "+path) {
					t.Errorf("usage does not name 'lowlat %s':\n%s", path, r.stdout)
				}
				if r.stderr != "" || r.osStdio != "" || len(r.touched) > 0 {
					t.Errorf("did more than print help: stderr %q, os stdio %q, files %q", r.stderr, r.osStdio, r.touched)
				}
				// Help is generated from the flags: each one is there.
				cmd.Flags().VisitAll(func(f *pflag.Flag) {
					if !f.Hidden && !strings.Contains(r.stdout, "--"+f.Name) {
						t.Errorf("help lacks --%s", f.Name)
					}
				})
			})
		}
	}
}

// TestEveryCommandRejectsGarbage: an unknown flag, a positional argument
// beyond what the command takes, or none where it needs one, exits 2 with
// one line on stderr (what main prints), prints nothing else, runs nothing
// and never panics.
func TestEveryCommandRejectsGarbage(t *testing.T) {
	for path, a := range arity {
		args := split(path)
		cases := map[string][]string{
			"unknown flag":       append(slices.Clone(args), "--no-such-flag"),
			"unknown shorthand":  append(slices.Clone(args), "-Z"),
			"unknown flag first": append(slices.Clone(args), "--no-such-flag", "x"),
		}
		switch {
		case a[0] == group:
			cases["no subcommand"] = args
			cases["unknown subcommand"] = append(slices.Clone(args), "no-such-command")
		case path == "help":
			cases["unknown topic"] = []string{"help", "no-such-command"}
			cases["unknown subtopic"] = []string{"help", "probe", "no-such-kind"}
		default:
			if a[0] > 0 {
				cases["missing argument"] = args
			}
			if a[1] >= 0 {
				extra := slices.Clone(args)
				for range a[1] + 1 {
					extra = append(extra, "x")
				}
				cases["extra argument"] = extra
			}
		}
		for name, form := range cases {
			t.Run(path+"/"+name, func(t *testing.T) {
				r := runIsolated(t, form...)
				if r.panicked != nil {
					t.Fatalf("%q panicked: %v", form, r.panicked)
				}
				if code := exitCode(r.err); code != ExitUsage {
					t.Fatalf("%q: exit %d (%v), want %d", form, code, r.err, ExitUsage)
				}
				line := mainStderr(r.err)
				if strings.Count(line, "\n") != 1 || !strings.Contains(line, "--help') ") && !strings.HasSuffix(line, "--help')\n") {
					t.Errorf("%q: stderr %q, want one line pointing at --help", form, line)
				}
				if r.stdout != "" || r.stderr != "" || r.osStdio != "" || len(r.touched) > 0 {
					t.Errorf("%q: printed or wrote more: stdout %q, stderr %q, os stdio %q, files %q", form, r.stdout, r.stderr, r.osStdio, r.touched)
				}
			})
		}
	}
}

// TestUsageErrorNamesCommand: the one line names the command and its help.
func TestUsageErrorNamesCommand(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "lowlat: missing command (see 'lowlat --help')\n"},
		{[]string{"frobnicate"}, "lowlat: unknown command \"frobnicate\" (see 'lowlat --help')\n"},
		{[]string{"apply", "--bogus"}, "lowlat: apply: unknown flag: --bogus (see 'lowlat apply --help')\n"},
		{[]string{"probe", "udp", "--interval", "soon", "h:1"}, "lowlat: probe udp: invalid argument \"soon\" for \"--interval\" flag: time: invalid duration \"soon\" (see 'lowlat probe udp --help')\n"},
		{[]string{"probe", "udp"}, "lowlat: probe udp: missing HOST:PORT (see 'lowlat probe udp --help')\n"},
		{[]string{"probe"}, "lowlat: probe: missing kind: udp, tcp, crr, icmp, path, load or compare (see 'lowlat probe --help')\n"},
		{[]string{"probe", "smtp"}, "lowlat: probe: unknown kind \"smtp\"; want udp, tcp, crr, icmp, path, load or compare (see 'lowlat probe --help')\n"},
		{[]string{"probe", "icmp"}, "lowlat: probe icmp: missing HOST (see 'lowlat probe icmp --help')\n"},
		{[]string{"monitor", "--config"}, "lowlat: monitor: flag needs an argument: --config (see 'lowlat monitor --help')\n"},
		{[]string{"status", "now"}, "lowlat: status: unexpected argument \"now\" (see 'lowlat status --help')\n"},
		{[]string{"completion", "tcsh"}, "lowlat: completion: unknown shell \"tcsh\": want bash, zsh or fish (see 'lowlat completion --help')\n"},
	}
	for _, tt := range tests {
		r := runIsolated(t, tt.args...)
		if got := mainStderr(r.err); got != tt.want || exitCode(r.err) != ExitUsage {
			t.Errorf("%q: exit %d, stderr %q, want 2 and %q", tt.args, exitCode(r.err), got, tt.want)
		}
	}
}

// labResults copies saved lab results into a new working directory, two
// of them under names that look like flags.
func labResults(t *testing.T) {
	t.Helper()
	files, _ := filepath.Glob("../lab/testdata/results/*.json")
	if len(files) < 2 {
		t.Fatal("need two result fixtures")
	}
	for i := range files {
		files[i], _ = filepath.Abs(files[i])
	}
	dir := t.TempDir()
	t.Chdir(dir)
	for i, name := range []string{"-a.json", "-b.json", "plain.json"} {
		b, err := os.ReadFile(files[i%2])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDoubleDashEndsFlags: after "--" every argument is positional, even
// one that looks like a flag (the old parser read "-b.json" as a flag), and
// flags may still follow positional arguments before it.
func TestDoubleDashEndsFlags(t *testing.T) {
	labResults(t)
	tests := []struct {
		name string
		args []string
		// results is how many results --json printed; 0: the run fails
		// naming errWant.
		results int
		errWant string
	}{
		{"flag-like files after --", []string{"lab", "report", "--json", "--", "-a.json", "-b.json"}, 2, ""},
		{"flag after a positional", []string{"lab", "report", "plain.json", "--json", "--", "-a.json"}, 2, ""},
		{"--json after -- is a file", []string{"lab", "report", "plain.json", "--", "--json"}, 0, "--json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
			err := Main(context.Background(), tt.args, env)
			if tt.results == 0 {
				if err == nil || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("err %v, want one naming %q", err, tt.errWant)
				}
				return
			}
			if c := exitCode(err); c != 0 && c != 1 { // 1: an expectation in the fixtures missed
				t.Fatalf("exit %d: %v", c, err)
			}
			var rs []json.RawMessage
			if err := json.Unmarshal(out.Bytes(), &rs); err != nil || len(rs) != tt.results {
				t.Fatalf("want %d results as JSON, got %d (%v):\n%.300s", tt.results, len(rs), err, out.String())
			}
		})
	}
}

// TestFlagsAfterPositional: GNU order, flags anywhere on the line.
func TestFlagsAfterPositional(t *testing.T) {
	for _, args := range [][]string{
		{"profile", "show", "game-udp", "--json"},
		{"profile", "show", "--json", "game-udp"},
		{"profile", "show", "--json", "--", "game-udp"},
	} {
		var out bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &bytes.Buffer{}, Getenv: func(string) string { return "" }}
		if err := Main(context.Background(), args, env); err != nil {
			t.Errorf("%q: %v", args, err)
			continue
		}
		var p struct{ Name string }
		if err := json.Unmarshal(out.Bytes(), &p); err != nil || p.Name != "game-udp" {
			t.Errorf("%q: want game-udp as JSON, got %v:\n%.200s", args, err, out.String())
		}
	}
}

// TestCompletion: 'completion bash|zsh|fish' print scripts on stdout, and
// the hidden __complete command they call answers from the command tree.
func TestCompletion(t *testing.T) {
	for shell, marker := range map[string]string{
		"bash": "__start_lowlat",
		"zsh":  "#compdef lowlat",
		"fish": "complete -c lowlat",
	} {
		r := runIsolated(t, "completion", shell)
		if r.err != nil || !strings.Contains(r.stdout, marker) || r.stderr != "" || r.osStdio != "" {
			t.Errorf("completion %s: err %v, stdout lacks %q (%d bytes), stderr %q, os stdio %q", shell, r.err, marker, len(r.stdout), r.stderr, r.osStdio)
			continue
		}
		if shell == "bash" {
			if bash, err := exec.LookPath("bash"); err == nil {
				cmd := exec.Command(bash, "-n")
				cmd.Stdin = strings.NewReader(r.stdout)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("bash -n: %v\n%s", err, out)
				}
			}
		}
	}
	r := runIsolated(t, "__complete", "probe", "")
	for _, kind := range []string{"udp", "tcp", "crr", "load", "compare"} {
		if !strings.Contains(r.stdout, kind+"\t") {
			t.Errorf("__complete probe '' lacks %s:\n%s", kind, r.stdout)
		}
	}
	r = runIsolated(t, "__complete", "apply", "--res")
	if !strings.Contains(r.stdout, "--reserve-cpus") {
		t.Errorf("__complete apply --res lacks --reserve-cpus:\n%s", r.stdout)
	}
}

// TestManPages: 'man DIR' writes one page per visible command, each
// listing that command's flags.
func TestManPages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "man1")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	if err := Main(context.Background(), []string{"man", dir}, env); err != nil {
		t.Fatal(err)
	}
	var want []string
	for path, cmd := range commandTree(t) {
		if path == "" || cmd.IsAvailableCommand() {
			want = append(want, strings.Join(append([]string{"lowlat"}, split(path)...), "-")+".1")
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, e := range entries {
		have = append(have, e.Name())
	}
	slices.Sort(want)
	slices.Sort(have)
	if !slices.Equal(have, want) {
		t.Errorf("pages:\nhave %q\nwant %q", have, want)
	}
	if slices.Contains(have, "lowlat-__watchdog.1") || slices.Contains(have, "lowlat-man.1") || slices.Contains(have, "lowlat-help.1") {
		t.Error("a hidden command has a page")
	}
	b, err := os.ReadFile(filepath.Join(dir, "lowlat-apply.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--profile", "--skip", "--reserve-cpus", "--journal", "--confirm"} {
		if !bytes.Contains(b, []byte(`\fB`+f+`\fP`)) {
			t.Errorf("lowlat-apply.1 lacks %s", f)
		}
	}
	if out.Len() != 0 || errb.Len() != 0 {
		t.Errorf("man printed: %q %q", out.String(), errb.String())
	}
}
