package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/host/hosttest"
	"github.com/lowlat/lowlat/test/hostgen"
)

// The tests in this file run the commands over trees: the corpus of real
// trees (hosttest.CorpusDir), the fixture hosts, and generated ones. What a
// tree does not say stays unknown through capture and doctor.

// doctorJSON is doctor --json's output.
type doctorJSON struct {
	Findings []doctor.Finding `json:"findings"`
	// Host is decoded loosely: its CPU count may be null.
	Host   map[string]any `json:"host"`
	Checks any            `json:"checks"`
}

// cpus is the host's CPU count, "unknown" for null.
func (d doctorJSON) cpus() string {
	if n, ok := d.Host["cpus"].(float64); ok {
		return fmt.Sprint(n)
	}
	return "unknown"
}

// runDoctorJSON runs doctor --json with args and decodes it.
func runDoctorJSON(t *testing.T, args ...string) doctorJSON {
	t.Helper()
	env, out, errb := testEnv()
	if err := Main(context.Background(), append([]string{"doctor", "--json"}, args...), env); err != nil {
		t.Fatalf("doctor %v: %v (%s)", args, err, errb)
	}
	var d doctorJSON
	if err := json.Unmarshal(out.Bytes(), &d); err != nil {
		t.Fatalf("doctor %v: %v\n%s", args, err, out)
	}
	return d
}

// treeRoots are the trees doctor and capture are held to: the corpus,
// two fixture hosts (the two others differ only in size: a capture of
// their thousands of files takes seconds on a loaded machine), and a
// generated host without its netlink record.
func treeRoots(t *testing.T) map[string]string {
	t.Helper()
	roots := map[string]string{}
	for _, n := range hosttest.CorpusNames(t) {
		roots["corpus/"+n] = hosttest.CorpusDir(n)
	}
	for _, n := range []string{"virtio-vm", "centos7-3.10"} {
		roots["fixture/"+n] = hosttest.Dir(n)
	}
	dir := filepath.Join(t.TempDir(), "centos7")
	if err := hostgen.CentOS7().WriteTree(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, host.NetlinkFile)); err != nil {
		t.Fatal(err)
	}
	roots["generated/centos7-without-netlink"] = dir
	return roots
}

// TestCaptureTreeAnswersAsOriginal: doctor --root on a capture's tree
// answers exactly as on the tree it was captured from, row by row: what
// the original could not read (no netlink record, a missing file) is not
// read on the copy either, never an empty list or a passed check.
func TestCaptureTreeAnswersAsOriginal(t *testing.T) {
	for name, root := range treeRoots(t) {
		t.Run(name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "copy")
			env, _, errb := testEnv()
			if err := Main(context.Background(), []string{"capture", "--root", root, "--tree", cp}, env); err != nil {
				t.Fatalf("capture: %v (%s)", err, errb)
			}
			orig, copied := runDoctorJSON(t, "--root", root), runDoctorJSON(t, "--root", cp)
			// Rows may name where the facts came from; nothing else differs.
			for i := range orig.Findings {
				orig.Findings[i] = renamed(orig.Findings[i], root)
			}
			for i := range copied.Findings {
				copied.Findings[i] = renamed(copied.Findings[i], cp)
			}
			if len(orig.Findings) != len(copied.Findings) {
				t.Errorf("%d rows on the original, %d on the copy", len(orig.Findings), len(copied.Findings))
			}
			for i := range max(len(orig.Findings), len(copied.Findings)) {
				var o, c string
				if i < len(orig.Findings) {
					o = findingLine(orig.Findings[i])
				}
				if i < len(copied.Findings) {
					c = findingLine(copied.Findings[i])
				}
				if o != c {
					t.Errorf("row %d (-original +copy):\n- %s\n+ %s", i, o, c)
				}
			}
			if o, c := fmt.Sprint(orig.Checks), fmt.Sprint(copied.Checks); o != c {
				t.Errorf("checks (-original +copy):\n- %s\n+ %s", o, c)
			}
			if o, c := hostLine(orig), hostLine(copied); o != c {
				t.Errorf("host (-original +copy):\n- %s\n+ %s", o, c)
			}
		})
	}
}

// renamed is f with the tree's path written as TREE.
func renamed(f doctor.Finding, dir string) doctor.Finding {
	f.Summary = strings.ReplaceAll(f.Summary, dir, "TREE")
	ev := map[string]string{}
	for k, v := range f.Evidence {
		ev[k] = strings.ReplaceAll(v, dir, "TREE")
	}
	f.Evidence = ev
	return f
}

// hostLine is doctor's host summary, where the facts came from and how
// long it took aside.
func hostLine(d doctorJSON) string {
	h := map[string]any{}
	for k, v := range d.Host {
		if k != "source" && k != "elapsed" {
			h[k] = v
		}
	}
	b, _ := json.Marshal(h)
	return string(b)
}

func findingLine(f doctor.Finding) string {
	ev, _ := json.Marshal(f.Evidence)
	return fmt.Sprintf("%s %s not_checked=%v %q %s fix=%q", f.Severity, f.ID, f.NotChecked, f.Summary, ev, f.Fix)
}

// TestDoctorCPUsAreTheFacts: doctor --root and --from report the CPUs of
// the host they read, never this machine's; facts without CPUs say so.
func TestDoctorCPUsAreTheFacts(t *testing.T) {
	noCPUs := filepath.Join(t.TempDir(), "no-cpus")
	if err := hostgen.CentOS7().WriteTree(noCPUs); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(noCPUs, "sys", "devices", "system", "cpu")); err != nil {
		t.Fatal(err)
	}
	capture := filepath.Join(t.TempDir(), "capture.json")
	var b bytes.Buffer
	if err := host.Save(&b, &host.Facts{Schema: host.SchemaVersion, Hostname: "far-away"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(capture, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // the count, "unknown" for null
		text string // in the text report's first line
	}{
		// procfs's tree has cpu0..cpu2; this machine has another count.
		{"corpus procfs", []string{"--root", hosttest.CorpusDir("procfs")}, "3", ", 3 CPUs, "},
		{"corpus node_exporter", []string{"--root", hosttest.CorpusDir("node_exporter")}, "4", ", 4 CPUs, "},
		{"tree without CPUs", []string{"--root", noCPUs}, "unknown", ", ? CPUs, "},
		{"capture without CPUs", []string{"--from", capture}, "unknown", ", ? CPUs, "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := runDoctorJSON(t, tt.args...)
			if got := d.cpus(); got != tt.want {
				t.Errorf("doctor --json cpus = %s, want %s", got, tt.want)
			}
			env, out, _ := testEnv()
			if err := Main(context.Background(), append([]string{"doctor"}, tt.args...), env); err != nil {
				t.Fatal(err)
			}
			if first, _, _ := strings.Cut(out.String(), "\n"); !strings.Contains(first, tt.text) {
				t.Errorf("doctor says %q, want %q in it", first, tt.text)
			}
		})
	}
}

// TestBadInputExitsUsage: a command line that names something that is not
// there (a profile, a parameter, an interface, a tree, a capture) exits 2
// with one line naming it, prints nothing else and writes nothing.
func TestBadInputExitsUsage(t *testing.T) {
	fixture := hosttest.Dir("dual-i40e-nvme")
	missing := filepath.Join(t.TempDir(), "no-such-tree")
	notJSON := filepath.Join(t.TempDir(), "capture.json")
	if err := os.WriteFile(notJSON, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"plan", "--profile", "no-such", "--root", fixture}, `plan: unknown profile "no-such"`},
		{[]string{"plan", "--profile", "capped-uplink", "--root", fixture}, "plan: profile capped-uplink needs parameter rate"},
		{[]string{"plan", "--profile", "game-udp", "--iface", "eth9", "--root", fixture}, `plan: unknown interface "eth9"`},
		{[]string{"plan", "--profile", "game-udp", "--root", missing}, "root " + missing},
		{[]string{"plan", "--profile", "game-udp", "--from", missing}, missing},
		{[]string{"plan", "--profile", "game-udp", "--from", notJSON}, "malformed JSON"},
		{[]string{"plan", "--profile", "game-udp", "--skip", "no.such", "--root", fixture}, "--skip no.such"},
		{[]string{"plan", "--profile", "game-udp", "--set", "no_such=1", "--root", fixture}, "--set no_such"},
		{[]string{"doctor", "--root", missing}, "root " + missing},
		{[]string{"doctor", "--from", notJSON}, "malformed JSON"},
		{[]string{"doctor", "--profile", "no-such", "--root", fixture}, `doctor: unknown profile "no-such"`},
		{[]string{"capture", "--root", missing, "--tree", filepath.Join(t.TempDir(), "t")}, "root " + missing},
		{[]string{"capture", "--root", fixture, "--tree", full}, "is not empty"},
		{[]string{"pin", "--service", "gw", "--root", missing, "--dry-run"}, "root " + missing},
		{[]string{"pin", "--service", "gw", "--profile", "no-such", "--root", fixture, "--dry-run"}, `pin: unknown profile "no-such"`},
		{[]string{"pin", "--service", "gw", "--iface", "eth9", "--root", fixture, "--dry-run"}, `unknown interface "eth9"`},
		{[]string{"apply", "--profile", "no-such", "--dry-run"}, `apply: unknown profile "no-such"`},
		{[]string{"apply", "--profile", "capped-uplink", "--dry-run"}, "apply: profile capped-uplink needs parameter rate"},
		{[]string{"profile", "show", "no-such"}, `profile show: unknown profile "no-such"`},
		{[]string{"profile", "show", "game-udp", "--set", "no_such=1"}, "--set no_such"},
		{[]string{"lab", "report", missing}, missing},
		{[]string{"probe", "compare", missing, notJSON}, missing},
		{[]string{"probe", "compare", notJSON, notJSON}, "probe compare: "},
		{[]string{"sockets", "--pid", "999999999"}, "no such process"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := runIsolated(t, tt.args...)
			if r.panicked != nil {
				t.Fatalf("panicked: %v", r.panicked)
			}
			line := mainStderr(r.err)
			if code := exitCode(r.err); code != ExitUsage || strings.Count(line, "\n") != 1 || !strings.Contains(line, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit 2 and one line with %q", code, line, tt.want)
			}
			if r.stdout != "" || r.osStdio != "" || len(r.touched) > 0 {
				t.Errorf("printed or wrote more: stdout %q, os stdio %q, files %q", r.stdout, r.osStdio, r.touched)
			}
		})
	}
}

// TestCorpusCommands runs doctor, plan (every built-in profile) and
// capture over every corpus tree: none panics or fails (each runs three
// times and logs its best time; bench/foundation measures them against
// their 0.25 s budget, since a timed test fails on a busy machine), and
// none states a fact the tree lacks:
// no row reads netlink or ethtool (the trees have neither), a sysctl row
// shows the tree's own value or none, and doctor answers the same from
// the capture file (--from) as from the tree.
func TestCorpusCommands(t *testing.T) {
	for _, name := range hosttest.CorpusNames(t) {
		root := hosttest.CorpusDir(name)
		t.Run(name, func(t *testing.T) {
			// run runs the command line args(i) three times and returns
			// the last output.
			run := func(args func(i int) []string) *bytes.Buffer {
				t.Helper()
				best := time.Hour
				var out *bytes.Buffer
				for i := range 3 {
					env, o, errb := testEnv()
					start := time.Now()
					func() {
						defer func() {
							if r := recover(); r != nil {
								t.Fatalf("%v panicked: %v", args(i), r)
							}
						}()
						if err := Main(context.Background(), args(i), env); err != nil {
							t.Fatalf("%v: %v (%s)", args(i), err, errb)
						}
					}()
					best = min(best, time.Since(start))
					out = o
				}
				t.Logf("%s: best of 3 %v", strings.ReplaceAll(strings.Join(args(0), " "), root, "TREE"), best.Round(100*time.Microsecond))
				return out
			}
			same := func(args ...string) func(int) []string { return func(int) []string { return args } }
			capture := filepath.Join(t.TempDir(), "capture.json")
			run(same("capture", "--root", root, "-o", capture))
			trees := t.TempDir()
			run(func(i int) []string {
				return []string{"capture", "--root", root, "--tree", filepath.Join(trees, strconv.Itoa(i))}
			})
			run(same("doctor", "--root", root))
			fromTree, fromFile := runDoctorJSON(t, "--root", root), runDoctorJSON(t, "--from", capture)
			if len(fromTree.Findings) != len(fromFile.Findings) {
				t.Errorf("doctor: %d rows from the tree, %d from its capture file", len(fromTree.Findings), len(fromFile.Findings))
			}
			for i := range min(len(fromTree.Findings), len(fromFile.Findings)) {
				a, b := findingLine(renamed(fromTree.Findings[i], "root:"+root)), findingLine(renamed(fromFile.Findings[i], "capture:"+capture))
				if a != b {
					t.Errorf("doctor row %d (-tree +capture file):\n- %s\n+ %s", i, a, b)
				}
			}
			for _, p := range []string{"game-udp", "realtime-tcp", "live-edge", "capped-uplink"} {
				args := []string{"plan", "--root", root, "--profile", p, "--json"}
				if p == "capped-uplink" {
					args = append(args, "--set", "rate=2mbit")
				}
				out := run(same(args...))
				var pl struct {
					Changes []struct{ Knob, Current, Action string }
				}
				if err := json.Unmarshal(out.Bytes(), &pl); err != nil {
					t.Fatal(err)
				}
				for _, c := range pl.Changes {
					kind, rest, _ := strings.Cut(c.Knob, "/")
					switch kind {
					case "qdisc", "route", "ethtool":
						if c.Current != "?" || c.Action != "skip" {
							t.Errorf("%s: %s is %q (%s), but the tree has no netlink or ethtool record", p, c.Knob, c.Current, c.Action)
						}
					case "sysctl":
						b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(host.SysctlPath(rest))))
						switch {
						case err != nil && c.Current != "?" && c.Current != "-":
							t.Errorf("%s: %s is %q, but the tree has no such file", p, c.Knob, c.Current)
						case err == nil && c.Current != strings.Join(strings.Fields(string(b)), " "):
							t.Errorf("%s: %s is %q, the tree says %q", p, c.Knob, c.Current, b)
						}
					}
				}
			}
		})
	}
}
