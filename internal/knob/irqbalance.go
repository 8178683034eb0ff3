package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/atomicfile"
)

// IRQBalanceVars are the assignments lowlat manages in irqbalance's
// environment file: the banned CPUs (list form for irqbalance >= 1.8, hex for
// older ones; the list wins where both are understood) and the arguments,
// where --banirq=N keeps irqbalance's hands off interrupts lowlat placed.
var IRQBalanceVars = []string{"IRQBALANCE_ARGS", "IRQBALANCE_BANNED_CPULIST", "IRQBALANCE_BANNED_CPUS"}

// IRQBalanceUnit is the systemd unit of irqbalance on every distribution.
const IRQBalanceUnit = "irqbalance.service"

// irqbalanceKnob is irqbalance's configuration: "irqbalance/etc/default/irqbalance"
// (Debian, Ubuntu) or "irqbalance/etc/sysconfig/irqbalance" (Red Hat, SUSE).
// Its value is the managed assignment lines as written in the file, one per
// line, sorted ("" when none is set), or Absent when the file does not exist.
// Writing edits those lines in place (appending new ones, deleting removed
// ones) and leaves every other line alone, so a rollback gives back the file
// byte for byte; then it restarts irqbalance if it runs, because irqbalance
// reads the file only at start.
type irqbalanceKnob struct {
	sys  *System
	path string
}

func newIRQBalance(sys *System, rest string) (Knob, error) {
	p := "/" + rest
	if filepath.Clean(p) != p || (p != "/etc/default/irqbalance" && p != "/etc/sysconfig/irqbalance") {
		return nil, fmt.Errorf("irqbalance knob %q: want irqbalance/etc/default/irqbalance or irqbalance/etc/sysconfig/irqbalance", rest)
	}
	return &irqbalanceKnob{sys: sys, path: p}, nil
}

func (k *irqbalanceKnob) ID() string { return "irqbalance" + k.path }

var assignRE = regexp.MustCompile(`^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=`)

// assignedVar returns the variable a config line assigns, or "".
func assignedVar(line string) string {
	if m := assignRE.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

func managed(name string) bool {
	for _, v := range IRQBalanceVars {
		if v == name {
			return true
		}
	}
	return false
}

// IRQBalanceLines returns the managed lines of a config file's content.
func IRQBalanceLines(content string) string {
	var out []string
	for _, l := range strings.Split(content, "\n") {
		if managed(assignedVar(l)) {
			out = append(out, strings.TrimRight(l, "\r"))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return assignedVar(out[i]) < assignedVar(out[j]) })
	return strings.Join(out, "\n")
}

// IRQBalanceAssign formats one assignment, quoting values with spaces.
func IRQBalanceAssign(name, value string) string {
	if value == "" || strings.ContainsAny(value, " \t'$`\\") {
		return name + "=\"" + strings.ReplaceAll(value, `"`, `\"`) + "\""
	}
	return name + "=" + value
}

// ParseIRQBalanceLines maps each managed variable to its unquoted value.
func ParseIRQBalanceLines(v string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(v, "\n") {
		name := assignedVar(l)
		if name == "" {
			continue
		}
		_, val, _ := strings.Cut(l, "=")
		val = strings.TrimSpace(val)
		if i := strings.Index(val, " #"); i >= 0 && !strings.HasPrefix(val, `"`) {
			val = strings.TrimSpace(val[:i])
		}
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		out[name] = val
	}
	return out
}

func (k *irqbalanceKnob) Validate(v string) error {
	if v == Absent || v == "" {
		return nil
	}
	for _, l := range strings.Split(v, "\n") {
		if name := assignedVar(l); !managed(name) {
			return fmt.Errorf("irqbalance: line %q does not set one of %s", l, strings.Join(IRQBalanceVars, ", "))
		}
	}
	return nil
}

func (k *irqbalanceKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.sys.path(k.path))
	if errors.Is(err, fs.ErrNotExist) {
		return Absent, nil
	}
	if err != nil {
		return "", fmt.Errorf("irqbalance %s: read: %w", k.path, err)
	}
	return IRQBalanceLines(string(b)), nil
}

// irqbalanceRunsOutsideSystemd reports an irqbalance process on a host
// without systemd: lowlat could change its file but not make it reread it.
func (k *irqbalanceKnob) irqbalanceRunsOutsideSystemd() bool {
	if SystemdRuns(k.sys) {
		return false
	}
	if k.sys != nil && k.sys.Services != nil {
		return false // a test's service manager stands in for systemd
	}
	ents, err := os.ReadDir(k.sys.path("/proc"))
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		if c, err := os.ReadFile(k.sys.path("/proc/" + e.Name() + "/comm")); err == nil && strings.TrimSpace(string(c)) == "irqbalance" {
			return true
		}
	}
	return false
}

func (k *irqbalanceKnob) Write(ctx context.Context, value string) error {
	if err := k.Validate(value); err != nil {
		return err
	}
	if k.irqbalanceRunsOutsideSystemd() {
		return fmt.Errorf("irqbalance %s: %w", k.path, NotWritable(errors.New("irqbalance runs without systemd: lowlat cannot restart it to load banned CPUs; stop it instead (irq.irqbalance = \"stop\")")))
	}
	p := k.sys.path(k.path)
	old, err := os.ReadFile(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		old = nil
	case err != nil:
		return fmt.Errorf("irqbalance %s: read: %w", k.path, err)
	}
	if value == Absent {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("irqbalance %s: remove: %w", k.path, err)
		}
	} else {
		content := EditIRQBalance(string(old), value)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("irqbalance %s: %w", k.path, err)
		}
		if err := atomicfile.Write(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("irqbalance %s: write: %w", k.path, err)
		}
	}
	return k.restart()
}

// restart makes a running irqbalance load the file again.
func (k *irqbalanceKnob) restart() error {
	m := ServicesOf(k.sys)
	a, _, err := m.State(IRQBalanceUnit)
	if errors.Is(err, ErrNoSystemd) || errors.Is(err, ErrNotSupported) {
		return nil // not running (checked above), or a file tree
	}
	if err != nil {
		return fmt.Errorf("irqbalance: %w", err)
	}
	if activeWord(a) != "active" {
		return nil
	}
	if err := m.Run("try-restart", IRQBalanceUnit); err != nil {
		return fmt.Errorf("irqbalance: restart to load %s: %w", k.path, err)
	}
	return nil
}

// EditIRQBalance returns content with its managed assignments replaced by
// those in lines: an existing assignment is replaced where it is, a new one is
// appended, one missing from lines is deleted.
func EditIRQBalance(content, lines string) string {
	want := map[string]string{}
	var order []string
	for _, l := range strings.Split(lines, "\n") {
		if name := assignedVar(l); name != "" {
			if _, dup := want[name]; !dup {
				order = append(order, name)
			}
			want[name] = l
		}
	}
	var out []string
	done := map[string]bool{}
	src := strings.Split(content, "\n")
	trailingNL := strings.HasSuffix(content, "\n")
	if trailingNL {
		src = src[:len(src)-1]
	}
	if content == "" {
		src = nil
	}
	for _, l := range src {
		name := assignedVar(l)
		if !managed(name) {
			out = append(out, l)
			continue
		}
		if w, ok := want[name]; ok && !done[name] {
			out = append(out, w)
			done[name] = true
		}
	}
	for _, name := range order {
		if !done[name] {
			out = append(out, want[name])
		}
	}
	if len(out) == 0 {
		return ""
	}
	s := strings.Join(out, "\n")
	if trailingNL || content == "" {
		s += "\n"
	}
	return s
}

// Satisfied compares the managed variables' values, whatever the quoting.
func (k *irqbalanceKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	l, d := ParseIRQBalanceLines(live), ParseIRQBalanceLines(desired)
	if len(l) != len(d) {
		return false
	}
	for name, v := range d {
		if lv, ok := l[name]; !ok || strings.Join(strings.Fields(lv), " ") != strings.Join(strings.Fields(v), " ") {
			return false
		}
	}
	return true
}

// Same is byte equality of the managed lines.
func (k *irqbalanceKnob) Same(a, b string) bool { return a == b }
