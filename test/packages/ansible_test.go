//go:build linux

package packages

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// TestAnsibleRollbackCheckMode runs the collection's rollback module (and
// tune's confirm) on a namespace holding two stacked transactions, in check
// mode and for real, with the same arguments: check mode must name the
// transaction the real run rolls back, and fail where the real run fails
// (an ambiguous prefix, a transaction that is not the newest, an unknown
// one, and a journal lowlat status cannot read).
func TestAnsibleRollbackCheckMode(t *testing.T) {
	testnet.Heavy(t, "applies with the packaged lowlat in a namespace and runs the collection's modules")
	if os.Geteuid() != 0 {
		t.Skip("applies in a network namespace: run as root (make test does)")
	}
	bin := packagedBinary(t)
	dir := t.TempDir()
	collection(t, dir)
	ns := testnet.New(t)
	uplink(t, ns)
	journal := filepath.Join(dir, "journal")

	apply := func(rate string) string {
		t.Helper()
		out, code := runCmd(t, ns.Command(bin, "apply", "--yes", "--json", "--journal", journal, "--profile", "capped-uplink", "--set", "rate="+rate, "--set", "down=20mbit"))
		var res struct{ Txn string }
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Txn == "" {
			t.Fatalf("apply rate=%s: exit %d\n%s", rate, code, out)
		}
		return res.Txn
	}
	t1, t2 := apply("2mbit"), apply("3mbit")
	common := 0
	for common < len(t1) && common < len(t2) && t1[common] == t2[common] {
		common++
	}
	t.Logf("transactions %s and %s, common prefix %q", t1, t2, t1[:common])
	inForce := func(want ...string) {
		t.Helper()
		out, _ := runCmd(t, ns.Command(bin, "status", "--json", "--journal", journal))
		var st struct{ Active []struct{ ID string } }
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		var got []string
		for _, a := range st.Active {
			got = append(got, a.ID)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("in force: %v, want %v", got, want)
		}
	}
	mod := func(name string, check bool, args map[string]any) moduleResult {
		t.Helper()
		args["binary"] = bin
		if _, ok := args["journal"]; !ok {
			args["journal"] = journal
		}
		return runModule(t, ns, dir, name, check, args)
	}

	for _, tt := range []struct {
		name, txn, wantMsg string
	}{
		{"a prefix of both", t1[:common], "ambiguous"},
		{"the older one", t1[:common+1], "not the newest"},
		{"none", "zzzz", "no transaction"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := mod("rollback", true, map[string]any{"txn": tt.txn})
			r := mod("rollback", false, map[string]any{"txn": tt.txn})
			if !r.Failed || !strings.Contains(r.Msg, tt.wantMsg) {
				t.Errorf("real run with txn=%s: %+v, want it to fail saying %q", tt.txn, r, tt.wantMsg)
			}
			if !c.Failed || !strings.Contains(c.Msg, tt.wantMsg) {
				t.Errorf("check mode with txn=%s: %+v; the real run: %+v", tt.txn, c, r)
			}
			inForce(t1, t2)
		})
	}

	t.Run("status fails", func(t *testing.T) {
		// A journal lowlat cannot read: status exits 1 and prints nothing.
		bad := t.TempDir()
		for _, m := range []struct {
			name string
			args map[string]any
		}{
			{"rollback", map[string]any{"all": true, "journal": bad}},
			{"tune", map[string]any{"state": "confirmed", "journal": bad}},
		} {
			if c := mod(m.name, true, m.args); !c.Failed || !strings.Contains(c.Msg, "journal") {
				t.Errorf("%s in check mode on an unreadable journal: %+v, want it to fail with lowlat's error", m.name, c)
			}
		}
	})

	t.Run("drift, then a unique prefix of the newest", func(t *testing.T) {
		// Drift: status exits 3 with a full report, which check mode reads.
		if out, err := ns.Command("tc", "qdisc", "del", "dev", "up0", "root").CombinedOutput(); err != nil {
			t.Fatalf("tc qdisc del: %v\n%s", err, out)
		}
		if _, code := runCmd(t, ns.Command(bin, "status", "--json", "--journal", journal)); code != 3 {
			t.Fatalf("status after deleting the root qdisc: exit %d, want 3 (drift)", code)
		}
		prefix := t2[:common+1]
		c := mod("rollback", true, map[string]any{"txn": prefix})
		if c.Failed || !c.Changed || c.Txn != t2 || strings.Join(c.RolledBack, " ") != t2 {
			t.Errorf("check mode with txn=%s: %+v, want %s rolled back", prefix, c, t2)
		}
		inForce(t1, t2)
		r := mod("rollback", false, map[string]any{"txn": prefix})
		if r.Failed || !r.Changed || r.Txn != t2 {
			t.Errorf("real run with txn=%s: %+v, want %s rolled back", prefix, r, t2)
		}
		inForce(t1)
	})

	t.Run("all", func(t *testing.T) {
		c := mod("rollback", true, map[string]any{"all": true})
		r := mod("rollback", false, map[string]any{"all": true})
		if c.Failed || r.Failed || !c.Changed || !r.Changed || strings.Join(c.RolledBack, " ") != strings.Join(r.RolledBack, " ") || c.Txn != r.Txn {
			t.Errorf("all: check mode %+v, real run %+v", c, r)
		}
		inForce()
	})
}

// TestAnsibleRoleNeedsProfile plays the role on this machine (connection
// local) with an empty profile, and without one: the play must fail at the
// role's first task, before it writes the monitor configuration the
// inventory asks for (or installs a package), saying what is missing.
func TestAnsibleRoleNeedsProfile(t *testing.T) {
	testnet.Heavy(t, "runs the collection's role with ansible-playbook")
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatal("ansible-playbook not found: make deps installs it (Debian package ansible-core)")
	}
	bin := packagedBinary(t)
	dir := t.TempDir()
	collection(t, dir)
	play := filepath.Join(dir, "play.yml")
	if err := os.WriteFile(play, []byte("- name: The role alone\n  hosts: localhost\n  gather_facts: false\n  roles:\n    - role: lowlat.lowlat.lowlat\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		profile any // nil: not set
		want    string
	}{
		{"empty", "", "lowlat_profile is empty"},
		{"blank", "  ", "lowlat_profile is empty"},
		{"unset", nil, "missing required arguments: lowlat_profile"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			monitor := filepath.Join(t.TempDir(), "monitor.toml")
			vars := map[string]any{
				"ansible_python_interpreter": "/usr/bin/python3",
				"lowlat_binary":              bin, // validates the monitor config
				"lowlat_monitor_config":      monitor,
				"lowlat_monitor_targets":     []map[string]any{{"name": "edge", "kind": "udp", "address": "127.0.0.1:7431"}},
			}
			if tt.profile != nil {
				vars["lowlat_profile"] = tt.profile
			}
			b, _ := json.Marshal(vars)
			cmd := exec.Command("ansible-playbook", "-i", "localhost,", "-c", "local", "-e", string(b), play)
			cmd.Env = append(os.Environ(), ansibleEnv(dir)...)
			out, code := runBounded(t, cmd, 2*time.Minute)
			st := recap(out)["localhost"]
			if code == 0 || st.Failures != 1 || st.Changed != 0 || !strings.Contains(out, tt.want) {
				t.Errorf("lowlat_profile %s: exit %d, recap %+v, want a failure saying %q and nothing changed:\n%s", tt.name, code, st, tt.want, out)
			}
			if _, err := os.Stat(monitor); err == nil {
				t.Errorf("lowlat_profile %s: the role wrote %s before failing", tt.name, monitor)
			}
			// The failing task is the role's first (after the argument
			// validation Ansible adds).
			tasks := regexp.MustCompile(`(?m)^TASK \[([^\]]*)\]`).FindAllStringSubmatch(out, -1)
			if len(tasks) == 0 || len(tasks) > 2 {
				t.Errorf("lowlat_profile %s: tasks run %v, want the argument validation and at most the profile check", tt.name, tasks)
			}
		})
	}
}

// moduleResult is what a module returned.
type moduleResult struct {
	Failed     bool     `json:"failed"`
	Changed    bool     `json:"changed"`
	Msg        string   `json:"msg"`
	Txn        string   `json:"txn"`
	RolledBack []string `json:"rolled_back"`
}

// runModule runs module name of the collection copied to dir in the
// namespace, as Ansible runs a module on a host: Debian's Python, the
// arguments in a file, the result as JSON on stdout.
func runModule(t *testing.T, ns *testnet.NS, dir, name string, check bool, args map[string]any) moduleResult {
	t.Helper()
	args["_ansible_check_mode"] = check
	b, err := json.Marshal(map[string]any{"ANSIBLE_MODULE_ARGS": args})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "args-")
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
	cmd := ns.Command("/usr/bin/python3", filepath.Join(dir, "collections/ansible_collections/lowlat/lowlat/plugins/modules", name+".py"), f.Name())
	cmd.Env = append(cmd.Env, "PYTHONPATH="+filepath.Join(dir, "collections"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var res moduleResult
	if jerr := json.Unmarshal([]byte(stdout.String()), &res); jerr != nil {
		t.Fatalf("module %s %s: %v, output not JSON: %v\n%s%s", name, b, err, jerr, stdout.String(), stderr.String())
	}
	t.Logf("module %s check=%v %v: %+v", name, check, args, res)
	return res
}

var (
	packagedOnce sync.Once
	packagedBin  string
)

// packagedBinary is lowlat's binary from the amd64 .deb the tests build.
func packagedBinary(t *testing.T) string {
	t.Helper()
	dir := built(t)
	packagedOnce.Do(func() {
		x := filepath.Join(dir, "x")
		if out, err := exec.Command("dpkg-deb", "-x", filepath.Join(dir, "lowlat_"+v1+"_amd64.deb"), x).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -x: %v\n%s", err, out)
		}
		packagedBin = filepath.Join(x, exe)
	})
	if packagedBin == "" {
		t.Fatal("no packaged binary")
	}
	return packagedBin
}

// TestAnsibleCanaryJudgeModule runs lowlat.lowlat.canary_judge on the
// controller against a stand-in for lowlat that records its command lines
// and answers as lowlat canary judge does: mode hosts returns the hosts each
// selector selects; a judgement whose HTML page could not be written
// (html_error) fails the task with lowlat's one line although its verdict
// (fail, exit 4) alone would not; in check mode the judgement is asked for
// no page (it wrote one on the controller), while mode validate still
// checks that one could be written.
func TestAnsibleCanaryJudgeModule(t *testing.T) {
	testnet.Heavy(t, "Ansible plays of the collection's canary_judge module")
	dir := t.TempDir()
	collection(t, dir)
	calls := filepath.Join(dir, "calls")
	fake := filepath.Join(dir, "lowlat")
	judgement := `{"verdict": "fail", "score": 33.3, "why": "p99 worse", "canary": {"hosts": ["a:9431", "b:9431"]}, "control": {"hosts": ["c:9431", "d:9431"]}`
	script := `#!/bin/sh
echo "$*" >> ` + calls + `
case " $* " in
*" --validate "*) exit 0 ;;
*" --list-hosts "*) echo '{"canary": {"selector": "x", "hosts": ["a:9431"]}, "control": {"selector": "y", "hosts": ["c:9431", "d:9431"]}}'; exit 0 ;;
*" --html "*) echo '` + judgement + `, "html_error": "write /no/such/dir/canary.html: no such file or directory"}'
	echo "lowlat: canary judge: --html /no/such/dir/canary.html: write: no such file or directory" >&2; exit 4 ;;
esac
echo '` + judgement + `}'
exit 4
`
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// Each mode's result, saved (also in check mode) for the test to read.
	playbook := func(name string, modes ...string) string {
		var b strings.Builder
		b.WriteString("- name: Judge\n  hosts: localhost\n  gather_facts: false\n  tasks:\n")
		for _, m := range modes {
			fmt.Fprintf(&b, `    - name: Judge, %[1]s
      lowlat.lowlat.canary_judge:
        mode: %[1]s
        binary: %[2]s
        prometheus: http://127.0.0.1:9
        canary: 'instance=~"a:9431|b:9431"'
        control: 'instance=~"c:9431|d:9431"'
        window: 24h
        html: /no/such/dir/canary.html
      register: r_%[1]s
      ignore_errors: true
`, m, fake)
		}
		fmt.Fprintf(&b, "    - name: Save the results\n      ansible.builtin.copy:\n        content: \"{{ {%s} | to_json }}\"\n        dest: %s\n        mode: \"0644\"\n      check_mode: false\n",
			strings.Join(mapStrings(modes, func(m string) string { return fmt.Sprintf("'%s': r_%s", m, m) }), ", "), filepath.Join(dir, name+".json"))
		p := filepath.Join(dir, name+".yml")
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	type result struct {
		Failed       bool     `json:"failed"`
		Changed      bool     `json:"changed"`
		Msg          string   `json:"msg"`
		RC           int      `json:"rc"`
		Verdict      string   `json:"verdict"`
		HTMLError    string   `json:"html_error"`
		CanaryHosts  []string `json:"canary_hosts"`
		ControlHosts []string `json:"control_hosts"`
	}
	play := func(name string, check bool, modes ...string) (map[string]result, []string) {
		t.Helper()
		os.Remove(calls)
		args := []string{"-i", "localhost,", "-c", "local", playbook(name, modes...)}
		if check {
			args = append(args, "--check")
		}
		cmd := exec.Command("ansible-playbook", args...)
		cmd.Env = append(os.Environ(), ansibleEnv(dir)...)
		out, code := runBounded(t, cmd, 2*time.Minute)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", name, code, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		var res map[string]result
		if err != nil || json.Unmarshal(b, &res) != nil {
			t.Fatalf("%s: no results (%v):\n%s", name, err, out)
		}
		c, _ := os.ReadFile(calls)
		return res, strings.Split(strings.TrimSpace(string(c)), "\n")
	}

	res, calls1 := play("judge", false, "judge", "hosts")
	t.Logf("judge: %+v\nhosts: %+v\ncalls: %q", res["judge"], res["hosts"], calls1)
	if j := res["judge"]; !j.Failed || j.RC != 4 || j.Verdict != "fail" || j.HTMLError == "" || !strings.HasPrefix(j.Msg, "lowlat: canary judge: --html ") || strings.Contains(j.Msg, "\n") {
		t.Errorf("a judgement whose page was not written: %+v; want the task failed with lowlat's one line, the verdict and html_error", j)
	}
	if h := res["hosts"]; h.Failed || h.Changed || !slices.Equal(h.CanaryHosts, []string{"a:9431"}) || !slices.Equal(h.ControlHosts, []string{"c:9431", "d:9431"}) {
		t.Errorf("mode hosts: %+v", h)
	}
	if len(calls1) != 2 || !strings.Contains(calls1[1], "--list-hosts --json") {
		t.Errorf("lowlat's command lines: %q", calls1)
	}

	res, calls2 := play("check", true, "judge", "validate")
	t.Logf("check mode: judge %+v, validate %+v\ncalls: %q", res["judge"], res["validate"], calls2)
	if j := res["judge"]; j.Failed || j.Verdict != "fail" || j.Changed {
		t.Errorf("check mode's judgement: %+v, want the verdict, not a failure", j)
	}
	if v := res["validate"]; v.Failed || v.RC != 0 {
		t.Errorf("check mode's validate: %+v", v)
	}
	if len(calls2) != 2 || strings.Contains(calls2[0], "--html") || !strings.Contains(calls2[1], "--validate") || !strings.Contains(calls2[1], "--html /no/such/dir/canary.html") {
		t.Errorf("check mode's command lines %q: want no --html for the judgement, --html for validate", calls2)
	}
}

func mapStrings(xs []string, f func(string) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}
