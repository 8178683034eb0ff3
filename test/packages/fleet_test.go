//go:build linux

package packages

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/testnet"
)

// The fleet: four hosts, each in its own namespace, behind its own provider
// namespace, all probing one reflector in a server namespace; Ansible runs in
// a control namespace and reaches each host's sshd over a management veth.
const (
	fleetSize  = 4
	badHost    = 2 // the host whose gate fails
	reflector  = "10.99.0.1:7431"
	fleetProbe = "load " + reflector + " --upload --idle 1s --duration 4s"
)

type fleetHost struct {
	name    string
	ns      *testnet.NS
	mgmt    string // sshd's address
	journal string
	root    string // persist root
	monitor string // the monitor config the role writes
	before  string // the namespace before any play
	sshd    *os.Process
}

// ansibleStats is the play recap, per host. (The json callback lives in
// ansible.posix, which Debian's ansible-core does not ship: the test reads
// the default callback's recap lines.)
type ansibleStats map[string]hostStats

type hostStats struct{ OK, Changed, Unreachable, Failures int }

var recapLine = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

func recap(out string) ansibleStats {
	stats := ansibleStats{}
	for _, m := range recapLine.FindAllStringSubmatch(out, -1) {
		n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
		s := stats[m[1]]
		s.OK, s.Changed, s.Unreachable, s.Failures = s.OK+n(2), s.Changed+n(3), s.Unreachable+n(4), s.Failures+n(5)
		stats[m[1]] = s
	}
	return stats
}

// TestFleetCanary drives the Ansible collection (deploy/ansible) with
// Debian's ansible-core over real SSH against four namespaced hosts. The
// canary play installs the package, writes the monitor config and tunes with
// a gate: host 1 keeps the change, host 2's gate fails (its uplink is fast,
// so the profile's shaper only adds a queue), the rollout stops there and
// hosts 3 and 4 are untouched. Check mode then shows the diff for 3 and 4 and
// changes nothing; a play on 1, 3 and 4 succeeds, and again reports
// changed=0; the rollback playbook restores every host exactly.
func TestFleetCanary(t *testing.T) {
	testnet.Heavy(t, "four namespaced hosts with sshd, Ansible plays with measured gates")
	if os.Geteuid() != 0 {
		t.Skip("installs a package and runs sshd in namespaces: run as root (make test does)")
	}
	for _, tool := range []string{"ansible-playbook", "ansible-lint", "ansible-test", "ansible-doc", "/usr/sbin/sshd", "ssh-keygen", "dpkg"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: make deps installs it (Debian packages ansible-core, ansible-lint, openssh-server)", tool)
		}
	}
	deb := filepath.Join(built(t), "lowlat_"+v1+"_amd64.deb")
	guardInstall(t)
	dir := t.TempDir()
	col := collection(t, dir)

	t.Run("lint", func(t *testing.T) { lintCollection(t, dir, col) })
	if t.Failed() {
		return
	}

	top := t // what must outlive a subtest is cleaned up with the test
	ctl, hosts := fleet(t, dir)
	inv := inventory(t, dir, deb, hosts)
	play := func(t *testing.T, args ...string) (ansibleStats, string, int) {
		t.Helper()
		cmd := ctl.Command("ansible-playbook", append([]string{"-i", inv}, args...)...)
		cmd.Env = append(cmd.Env, ansibleEnv(dir)...)
		start := time.Now()
		out, code := runBounded(t, cmd, 5*time.Minute)
		stats := recap(out)
		if len(stats) == 0 {
			t.Fatalf("ansible-playbook %v: exit %d, no recap:\n%s", args, code, out)
		}
		t.Logf("ansible-playbook %s: exit %d in %v, recap %+v", strings.Join(args, " "), code, time.Since(start).Round(100*time.Millisecond), stats)
		return stats, out, code
	}
	good := func(i int) bool { return i+1 != badHost }

	t.Run("a canary host's failed gate rolls the whole canary back", func(t *testing.T) {
		// h1 and h2 are the canary batch, judged by their gates alone:
		// h1's gate keeps the fix, h2's fails. The canary has failed: h1
		// is rolled back too, and h3 and h4 are untouched.
		// -f 1: one host at a time, as the hosts here share one file
		// system and so one dpkg (two at once: "dpkg frontend lock").
		stats, out, code := play(t, "lowlat.lowlat.canary", "-f", "1", "-e", "lowlat_canary_batch=h1:h2")
		if code == 0 {
			t.Errorf("the play passed although canary host h%d's gate failed", badHost)
		}
		if !strings.Contains(out, fmt.Sprintf("canary: h%d failed", badHost)) || !strings.Contains(out, "the canary hosts are rolled back") {
			t.Errorf("the play does not say which canary host failed and that the canary is rolled back:\n%.3000s", out)
		}
		if strings.Contains(out, "TASK [Wait the canary window") || strings.Contains(out, "PLAY [Roll out the rest") {
			t.Errorf("the play went on after a canary host failed:\n%.3000s", out)
		}
		for _, h := range hosts[:2] {
			if st := stats[h.name]; st.Failures != 1 {
				t.Errorf("%s (canary): %+v, want failed", h.name, st)
			}
			if got := h.snapshot(t); got != h.before {
				t.Errorf("%s: the canary failed but its namespace differs from before:\n%s", h.name, testnet.DiffLines(h.before, got))
			}
		}
		// h1's own gate kept the fix: the canary's failure rolled it back.
		o, _ := runCmd(t, hosts[0].ns.Command(exe, "status", "--json", "--journal", hosts[0].journal))
		var st struct {
			Active   []json.RawMessage `json:"active"`
			LastGate *struct {
				Evidence *struct {
					Keep bool `json:"keep"`
				} `json:"evidence"`
			} `json:"last_gate"`
		}
		if json.Unmarshal([]byte(o), &st) != nil || st.LastGate == nil || st.LastGate.Evidence == nil || !st.LastGate.Evidence.Keep || len(st.Active) != 0 {
			t.Errorf("h1: want its gate's keep and nothing in force after the canary's rollback:\n%s", o)
		}
		for _, h := range hosts[2:] {
			untouched(t, h)
		}
	})

	t.Run("a Prometheus that cannot answer is refused before anything changes", func(t *testing.T) {
		// With the judge on, the play asks Prometheus which hosts the
		// selectors select before it tunes anything: one that answers
		// nowhere stops the play there, not after a window. (The package
		// the plays above installed is the control node's lowlat too.)
		before := journals(hosts)
		// The default window, 24h: nothing is waited for (a window of 60 s
		// is bad input itself, with the default scrape interval of 15 s).
		// Judged, the play installs no package and writes no monitor
		// configuration (those are lowlat.lowlat.monitor's, on every host
		// first): the inventory's are left out.
		_, out, code := play(t, "lowlat.lowlat.canary", "-e", "lowlat_canary_judge=true", "-e", "lowlat_canary_batch=h1:h2",
			"-e", "lowlat_prometheus=http://127.0.0.1:9", "-e", `{"lowlat_package": "", "lowlat_monitor_targets": []}`)
		refused(t, hosts, before, out, code, "--list-hosts")
		if !strings.Contains(out, "connection refused") {
			t.Errorf("the play does not say that Prometheus refused the connection:\n%.3000s", out)
		}
	})

	t.Run("canary stops at the failing gate", func(t *testing.T) {
		stats, out, code := play(t, "lowlat.lowlat.canary")
		if code == 0 {
			t.Errorf("the canary play passed although host %d's gate fails", badHost)
		}
		for i, h := range hosts {
			st, seen := stats[h.name]
			switch {
			case i+1 < badHost:
				if !seen || st.Failures != 0 || st.Changed == 0 {
					t.Errorf("%s (before the failing batch): %+v", h.name, st)
				}
				gated(t, h, true)
				if h.snapshot(t) == h.before {
					t.Errorf("%s: kept the change, but its namespace is as before", h.name)
				}
			case i+1 == badHost:
				if st.Failures != 1 {
					t.Errorf("%s (the failing gate): %+v", h.name, st)
				}
				gated(t, h, false)
				if got := h.snapshot(t); got != h.before {
					t.Errorf("%s: the gate failed but the namespace differs from before:\n%s", h.name, testnet.DiffLines(h.before, got))
				}
			default:
				if seen && st.OK+st.Changed+st.Failures > 0 {
					t.Errorf("%s (after the failing batch) was touched: %+v", h.name, st)
				}
				untouched(t, h)
			}
		}
		if !strings.Contains(out, "lowlat gate: rolled back") {
			t.Errorf("the play's output does not say the gate rolled back:\n%.3000s", out)
		}
	})

	t.Run("check mode shows the diff and changes nothing", func(t *testing.T) {
		stats, out, code := play(t, "lowlat.lowlat.canary", "--check", "--diff", "-e", "lowlat_canary_hosts=h3:h4")
		if code != 0 {
			t.Fatalf("check mode: exit %d\n%.3000s", code, out)
		}
		for _, h := range hosts[2:] {
			if stats[h.name].Changed == 0 {
				t.Errorf("%s: check mode reports no change: %+v", h.name, stats[h.name])
			}
			untouched(t, h)
		}
		if !strings.Contains(out, "--- before: qdisc/up0/root") || !strings.Contains(out, "+++ after: qdisc/up0/root") {
			t.Errorf("check --diff shows no before/after for qdisc/up0/root:\n%.3000s", out)
		}
	})

	t.Run("a host cut off mid-apply rolls back by itself", func(t *testing.T) {
		unreachableMidApply(t, ctl, inv, dir, hosts[3])
	})

	t.Run("a host cut off in a batch of the rest stops the rollout and rolls the batch back", func(t *testing.T) {
		// h1, the canary, has its change (its gate kept it above); h3 and
		// h4 are one batch of the rest. Both gates keep the fix, and then
		// h4's sshd stops accepting (its listener ends right after h4's
		// apply): the role's confirm, over a new connection, cannot reach
		// h4, which leaves the play. The play rolls h3 back and stops; h4
		// rolls back by itself at its deadline; h1 keeps its change.
		h1, h3, h4 := hosts[0], hosts[2], hosts[3]
		before := journals(hosts)
		wrapper := filepath.Join(dir, "lowlat-then-no-new-ssh-on-h4")
		script := fmt.Sprintf("#!/bin/sh\n%s \"$@\"\nrc=$?\ncase \" $* \" in \" apply \"*\" %s \"*) [ $rc = 0 ] && kill -TERM %d ;; esac\nexit $rc\n", exe, h4.journal, h4.sshd.Pid)
		if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		stats, out, code := play(t, "lowlat.lowlat.canary", "-e", "lowlat_canary_hosts=h1:h3:h4", "-e", "lowlat_canary_batch=h1",
			"-e", `{"lowlat_rollout_serial": ["100%"]}`, "-e", "lowlat_binary="+wrapper, "-e", "lowlat_confirm=20s")
		deadline := awaiting(t, h4)
		want := "rollout: h4 left the play (unreachable); its own dead-man switch rolls it back at " + deadline.UTC().Format(time.RFC3339)
		if code == 0 || !strings.Contains(strings.Join(strings.Fields(out), " "), want) || !strings.Contains(out, "this batch's other hosts are rolled back") {
			t.Errorf("exit %d, want the rollout stopped saying %q:\n%.5000s", code, want, out)
		}
		if s := stats["h4"]; s.Unreachable == 0 {
			t.Errorf("h4: recap %+v, want unreachable", s)
		}
		if st, o := hostStatus(t, h3); len(st.Active) != 0 || h3.snapshot(t) != h3.before {
			t.Errorf("h3: not rolled back by the play:\n%s", o)
		}
		deadmanRolledBack(t, h4, deadline)
		gated(t, h1, true)
		if b, _ := os.ReadFile(hosts[1].journal); string(b) != before["h2"] {
			t.Error("h2: the play changed its journal")
		}
		h4.sshd = startSSHD(top, h4.ns, dir, h4.name, h4.mgmt)
		waitSSHD(t, ctl, dir, h4.name, h4.mgmt)
	})

	t.Run("a successful play, then changed=0", func(t *testing.T) {
		limit := []string{"-e", "lowlat_canary_hosts=h1:h3:h4"}
		stats, out, code := play(t, append([]string{"lowlat.lowlat.canary"}, limit...)...)
		if code != 0 {
			t.Fatalf("play on h1, h3, h4: exit %d\n%.3000s", code, out)
		}
		if stats["h1"].Changed != 0 {
			t.Errorf("h1 already had the change, but the play changed it: %+v", stats["h1"])
		}
		for _, h := range hosts[2:] {
			if stats[h.name].Changed == 0 || stats[h.name].Failures != 0 {
				t.Errorf("%s: %+v", h.name, stats[h.name])
			}
			gated(t, h, true)
		}
		stats, out, code = play(t, append([]string{"lowlat.lowlat.canary"}, limit...)...)
		if code != 0 {
			t.Fatalf("second play: exit %d\n%.3000s", code, out)
		}
		for _, n := range []string{"h1", "h3", "h4"} {
			if s := stats[n]; s.Changed != 0 || s.OK == 0 {
				t.Errorf("second run of a successful play: %s %+v", n, s)
			}
		}
	})

	t.Run("rollback restores every host", func(t *testing.T) {
		stats, out, code := play(t, "lowlat.lowlat.rollback")
		if code != 0 {
			t.Fatalf("rollback play: exit %d\n%.3000s", code, out)
		}
		for i, h := range hosts {
			if want := good(i); (stats[h.name].Changed > 0) != want {
				t.Errorf("%s: rollback changed=%d, want changed %v", h.name, stats[h.name].Changed, want)
			}
			if got := h.snapshot(t); got != h.before {
				t.Errorf("%s: not restored exactly:\n%s", h.name, testnet.DiffLines(h.before, got))
			}
			if files := filesBelow(h.root); len(files) > 0 {
				t.Errorf("%s: persisted files left after rollback: %v", h.name, files)
			}
		}
	})
}

func (h *fleetHost) snapshot(t *testing.T) string { return h.ns.Snapshot(t, "up0") }

// runBounded runs cmd for at most d: a play that hangs is killed and fails
// the test instead of the test binary's timeout taking the cleanups with it.
func runBounded(t *testing.T, cmd *exec.Cmd, d time.Duration) (string, int) {
	t.Helper()
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	if !timer.Stop() {
		t.Fatalf("%s: killed after %v:\n%s", strings.Join(cmd.Args, " "), d, out.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	}
	t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	return "", 0
}

// unreachableMidApply starts the canary play on host h, and while lowlat
// is in the gate's measurement, with the change applied and awaiting its
// verdict, cuts the host's management link and kills the apply (its SSH
// session is gone with the controller). Nobody confirms and nobody rolls
// back from outside: the host's own dead-man switch must.
func unreachableMidApply(t *testing.T, ctl *testnet.NS, inv, dir string, h *fleetHost) {
	cmd := ctl.Command("ansible-playbook", "-i", inv, "lowlat.lowlat.canary", "-e", "lowlat_canary_hosts="+h.name)
	cmd.Env = append(cmd.Env, ansibleEnv(dir)...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	played := make(chan error, 1)
	go func() { played <- cmd.Wait() }()
	ended := false
	defer func() {
		if !ended {
			cmd.Process.Kill()
			<-played
		}
	}()
	// Wait for the change to be applied and awaiting the gate's verdict.
	var deadline time.Time
	for start := time.Now(); deadline.IsZero(); time.Sleep(100 * time.Millisecond) {
		if time.Since(start) > 90*time.Second {
			t.Fatalf("%s: no transaction awaiting confirmation after 90 s:\n%s", h.name, out.String())
		}
		o, _ := runCmd(t, h.ns.Command(exe, "status", "--json", "--journal", h.journal))
		var st struct {
			Active []struct {
				ConfirmBy *time.Time `json:"confirm_by"`
				Confirmed bool       `json:"confirmed"`
			} `json:"active"`
		}
		if json.Unmarshal([]byte(o), &st) == nil && len(st.Active) == 1 && st.Active[0].ConfirmBy != nil && !st.Active[0].Confirmed {
			deadline = *st.Active[0].ConfirmBy
		}
	}
	t.Logf("%s: applied, awaiting the gate's verdict, deadline in %v", h.name, time.Until(deadline).Round(time.Second))
	if h.snapshot(t) == h.before {
		t.Fatalf("%s: awaiting confirmation, but nothing is applied", h.name)
	}
	if o, err := h.ns.Command("ip", "link", "set", "mg0", "down").CombinedOutput(); err != nil {
		t.Fatalf("cut %s's management link: %v %s", h.name, err, o)
	}
	defer h.ns.Command("ip", "link", "set", "mg0", "up").Run()
	killed := 0
	for _, pid := range applyPIDs(h.journal) {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	if killed == 0 {
		t.Fatalf("%s: no lowlat apply process to kill", h.name)
	}
	t.Logf("%s: cut off and apply killed %v before its deadline", h.name, time.Until(deadline).Round(time.Second))
	select {
	case err := <-played:
		ended = true
		if err == nil {
			t.Errorf("the play passed although %s became unreachable:\n%s", h.name, out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Errorf("the play did not end within 2 minutes of %s becoming unreachable", h.name)
	}
	if s := recap(out.String())[h.name]; s.Unreachable+s.Failures == 0 {
		t.Errorf("%s: recap %+v, want unreachable or failed:\n%s", h.name, s, out.String())
	}
	t.Logf("%s: the play ended: %+v", h.name, recap(out.String())[h.name])
	// The watchdog rolls back at the deadline (the link back up: the play
	// has ended, and the namespace is compared with the link up).
	h.ns.Command("ip", "link", "set", "mg0", "up").Run()
	deadmanRolledBack(t, h, deadline)
}

// applyPIDs finds the lowlat apply processes using journal.
func applyPIDs(journal string) []int {
	return pidsWhere(func(args []string) bool {
		return len(args) > 2 && filepath.Base(args[0]) == "lowlat" && args[1] == "apply" && slices.Contains(args, journal)
	})
}

// pidsWhere lists the processes whose command line (its words) match says
// yes to.
func pidsWhere(match func(args []string) bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if match(strings.Split(string(b), "\x00")) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// gated checks the host's journal: its newest gated transaction's verdict
// is keep, and it is in force exactly when kept.
func gated(t *testing.T, h *fleetHost, keep bool) {
	t.Helper()
	out, code := runCmd(t, h.ns.Command(exe, "status", "--json", "--journal", h.journal))
	var st struct {
		Active []struct {
			ID        string `json:"id"`
			Confirmed bool   `json:"confirmed"`
		} `json:"active"`
		LastGate *struct {
			Evidence *struct {
				Keep   bool   `json:"keep"`
				Reason string `json:"reason"`
			} `json:"evidence"`
		} `json:"last_gate"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || st.LastGate == nil || st.LastGate.Evidence == nil {
		t.Errorf("%s: status shows no gate evidence: exit %d\n%s", h.name, code, out)
		return
	}
	if st.LastGate.Evidence.Keep != keep || (len(st.Active) == 1) != keep {
		t.Errorf("%s: gate keep=%v (%s), %d in force; want keep=%v", h.name, st.LastGate.Evidence.Keep, st.LastGate.Evidence.Reason, len(st.Active), keep)
	}
	// A change the gate keeps is held for the play's confirm: kept only
	// once that confirm reached the host (over a new connection).
	if keep && len(st.Active) == 1 && !st.Active[0].Confirmed {
		t.Errorf("%s: %s kept by its gate but not confirmed: its dead-man switch will roll it back", h.name, st.Active[0].ID)
	}
	t.Logf("%s: gate keep=%v: %s", h.name, st.LastGate.Evidence.Keep, st.LastGate.Evidence.Reason)
}

// untouched checks that no play reached the host: no journal, no monitor
// config, the namespace as before.
func untouched(t *testing.T, h *fleetHost) {
	t.Helper()
	for _, p := range []string{h.journal, h.monitor} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s: %s exists", h.name, p)
		}
	}
	if got := h.snapshot(t); got != h.before {
		t.Errorf("%s: namespace changed:\n%s", h.name, testnet.DiffLines(h.before, got))
	}
}

func filesBelow(root string) []string {
	var out []string
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// collection copies deploy/ansible to DIR/collections/ansible_collections/
// lowlat/lowlat, where Ansible, ansible-lint and ansible-test look for it.
func collection(t *testing.T, dir string) string {
	t.Helper()
	col := filepath.Join(dir, "collections/ansible_collections/lowlat/lowlat")
	if err := os.MkdirAll(filepath.Dir(col), 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ := filepath.Abs("../../deploy/ansible")
	mustRun(t, "cp", "-r", src, col)
	if err := os.WriteFile(filepath.Join(dir, "ansible.cfg"), []byte("[defaults]\ninterpreter_python = /usr/bin/python3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return col
}

// sanityMustRun are the ansible-test sanity tests that must run on the
// collection, never be skipped: the ones that install their requirements
// from PyPI, which testdata/ansible_test_offline.py takes from Debian's
// packages instead (ansible-doc and import need only Ansible and PyYAML).
var sanityMustRun = []string{"ansible-doc", "import", "pep8", "pylint", "runtime-metadata", "validate-modules", "yamllint"}

// sanityNotApplicable are the tests that have nothing to check in the
// collection (no changelogs/, no empty __init__.py, no PowerShell, no shell
// scripts): ansible-test skips them with "No tests applicable.".
var sanityNotApplicable = []string{"changelog", "empty-init", "pslint", "shellcheck"}

func lintCollection(t *testing.T, dir, col string) {
	env := append(os.Environ(), ansibleEnv(dir)...)
	cmd := exec.Command("ansible-lint", "--nocolor", "--offline")
	cmd.Dir, cmd.Env = col, env
	if out, code := runCmd(t, cmd); code != 0 || !strings.Contains(out, "Passed") {
		t.Errorf("ansible-lint: exit %d\n%s", code, out)
	}
	for _, m := range []string{"tune", "probe", "rollback", "facts", "canary_judge"} {
		cmd := exec.Command("ansible-doc", "lowlat.lowlat."+m)
		cmd.Env = env
		if out, code := runCmd(t, cmd); code != 0 || !strings.Contains(out, "EXAMPLES") || !strings.Contains(out, "RETURN VALUES") {
			t.Errorf("ansible-doc lowlat.lowlat.%s: exit %d\n%s", m, code, out)
		}
	}
	sanity(t, dir, col, env)
}

// sanity runs every ansible-test sanity test on the collection, offline:
// testdata/ansible_test_offline.py gives the tests Debian's pylint, yamllint,
// voluptuous and pycodestyle where ansible-test would pip-install its pins.
// It reads ansible-test's JUnit results: every test ran, or had nothing to
// check; none was skipped for a missing tool.
func sanity(t *testing.T, dir, col string, env []string) {
	t.Helper()
	const python = "/usr/bin/python3" // Debian's, which its ansible-core and these packages are for
	check := exec.Command(python, "-c", "import ansible_test, pylint, yamllint, voluptuous, pycodestyle")
	if out, code := runCmd(t, check); code != 0 {
		t.Fatalf("%s lacks a sanity test's tool: make deps installs them (Debian packages ansible-core, pylint, yamllint, python3-voluptuous, python3-pycodestyle)\n%s", python, out)
	}
	// ansible-test wants the collection under version control.
	git := exec.Command("git", "init", "-q", ".")
	git.Dir = col
	if out, code := runCmd(t, git); code != 0 {
		t.Fatalf("git init: %s", out)
	}
	offline, err := filepath.Abs("testdata/ansible_test_offline.py")
	if err != nil {
		t.Fatal(err)
	}
	// Its virtual environments go below HOME: the test's, not root's.
	home := filepath.Join(dir, "home")
	args := []string{offline, "sanity", "--python-interpreter", python, "--junit"}
	cmd := exec.Command(python, args...)
	cmd.Dir, cmd.Env = col, append(slices.Clone(env), "HOME="+home)
	start := time.Now()
	out, code := runCmd(t, cmd)
	t.Logf("ansible-test sanity: exit %d in %v", code, time.Since(start).Round(100*time.Millisecond))
	if code != 0 {
		t.Errorf("ansible-test %s: exit %d\n%s", strings.Join(args[1:], " "), code, out)
	}
	cmd = exec.Command(python, offline, "sanity", "--list-tests", "--python-interpreter", python)
	cmd.Dir, cmd.Env = col, append(slices.Clone(env), "HOME="+home)
	list, code := runCmd(t, cmd)
	if code != 0 {
		t.Fatalf("ansible-test sanity --list-tests: exit %d\n%s", code, list)
	}
	results := junitResults(t, filepath.Join(col, "tests/output/junit"))
	var tests []string
	for _, l := range strings.Split(list, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "WARNING") {
			tests = append(tests, l)
		}
	}
	for _, name := range append(slices.Clone(sanityMustRun), sanityNotApplicable...) {
		if !slices.Contains(tests, name) {
			t.Errorf("ansible-test sanity --list-tests lacks %s:\n%s", name, list)
		}
	}
	for _, name := range tests {
		r, ok := results[name]
		switch {
		case !ok:
			t.Errorf("sanity test %s: no result", name)
		case r.failed:
			t.Errorf("sanity test %s failed", name)
		case r.skipped == "":
		case slices.Contains(sanityNotApplicable, name) && r.skipped == "No tests applicable.":
		default:
			t.Errorf("sanity test %s was skipped: %s", name, r.skipped)
		}
	}
}

// junitPython is the "-python-X.Y" ansible-test appends to a test's name.
var junitPython = regexp.MustCompile(`-python-[0-9.]+$`)

type junitResult struct {
	failed  bool
	skipped string // the reason, "" when it ran
}

// junitResults reads ansible-test's JUnit files: test name (without its
// "-python-X.Y") → result.
func junitResults(t *testing.T, dir string) map[string]junitResult {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.xml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no JUnit results in %s: %v", dir, err)
	}
	results := map[string]junitResult{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Suites []struct {
				Cases []struct {
					Name     string    `xml:"name,attr"`
					Skipped  *string   `xml:"skipped"`
					Failures []xmlText `xml:"failure"`
					Errors   []xmlText `xml:"error"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal(b, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range doc.Suites {
			for _, c := range s.Cases {
				name := junitPython.ReplaceAllString(c.Name, "")
				r := results[name]
				r.failed = r.failed || len(c.Failures)+len(c.Errors) > 0
				if c.Skipped != nil {
					r.skipped = *c.Skipped
				}
				results[name] = r
			}
		}
	}
	return results
}

type xmlText struct {
	Text string `xml:",chardata"`
}

// ansibleEnv points Ansible at the test's collection and SSH settings.
func ansibleEnv(dir string) []string {
	return []string{
		"ANSIBLE_COLLECTIONS_PATH=" + filepath.Join(dir, "collections"),
		"ANSIBLE_CONFIG=" + filepath.Join(dir, "ansible.cfg"),
		"ANSIBLE_HOST_KEY_CHECKING=False",
		"ANSIBLE_PIPELINING=True",
		"ANSIBLE_STDOUT_CALLBACK=default",
		"ANSIBLE_LOCAL_TEMP=" + filepath.Join(dir, "ansible-local"),
		// No ControlPersist: a persisting master would hold the play's output
		// open, and a cut-off host's connection must fail on its own.
		"ANSIBLE_SSH_ARGS=-o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o ControlMaster=no -o ServerAliveInterval=1 -o ServerAliveCountMax=3",
		"ANSIBLE_NOCOLOR=1",
	}
}

// fleet builds the namespaces, starts the reflector and each host's sshd,
// and records each host's namespace before any play: fleetSize hosts, every
// one but badHost behind a capped provider.
func fleet(t *testing.T, dir string) (*testnet.NS, []*fleetHost) {
	t.Helper()
	return fleetOf(t, dir, fleetSize, func(i int) bool { return i != badHost })
}

// fleetOf builds n hosts (h1...hn); host i's provider caps its uplink when
// capped(i).
func fleetOf(t *testing.T, dir string, n int, capped func(i int) bool) (*testnet.NS, []*fleetHost) {
	t.Helper()
	ip := func(ns *testnet.NS, args ...string) {
		t.Helper()
		if out, err := ns.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ctl, srv := testnet.New(t), testnet.New(t)
	ip(srv, "addr", "add", "10.99.0.1/32", "dev", "lo")
	r := probe.NewReflector(probe.ReflectorConfig{MinInterval: time.Millisecond, MaxSessionsPerIP: -1, AllowLoad: true, LoadRate: -1, LoadDuration: -1})
	ctx, cancel := context.WithCancel(context.Background())
	if err := srv.Do(func() error { return r.Listen(ctx, reflector) }); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	sshKeys(t, dir)

	var hosts []*fleetHost
	for i := 1; i <= n; i++ {
		h, p := testnet.New(t), testnet.New(t)
		sub, wan, mg := fmt.Sprintf("10.%d.0", 80+i), fmt.Sprintf("10.%d.0", 90+i), fmt.Sprintf("10.100.%d", i)
		h.Veth(t, "up0", "pc0", p, 1)
		p.Veth(t, "ps0", fmt.Sprintf("s%d", i), srv, 1)
		h.Veth(t, "mg0", fmt.Sprintf("c%d", i), ctl, 1)
		ip(h, "addr", "add", sub+".2/24", "dev", "up0")
		ip(h, "route", "add", "default", "via", sub+".1")
		ip(h, "addr", "add", mg+".2/24", "dev", "mg0")
		ip(ctl, "addr", "add", mg+".1/24", "dev", fmt.Sprintf("c%d", i))
		ip(p, "addr", "add", sub+".1/24", "dev", "pc0")
		ip(p, "addr", "add", wan+".1/24", "dev", "ps0")
		ip(p, "route", "add", "10.99.0.1/32", "via", wan+".2")
		ip(srv, "addr", "add", wan+".2/24", "dev", fmt.Sprintf("s%d", i))
		ip(srv, "route", "add", sub+".0/24", "via", wan+".1")
		if err := p.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0) }); err != nil {
			t.Fatal(err)
		}
		if capped(i) {
			// The provider's cap: 2 Mbit/s with a FIFO that holds 2 s of
			// it, the bufferbloat the profile fixes.
			if out, err := p.Command("tc", "qdisc", "add", "dev", "ps0", "root", "tbf", "rate", "2mbit", "burst", "4096", "latency", "2s").CombinedOutput(); err != nil {
				t.Fatalf("tc: %v\n%s", err, out)
			}
		}
		name := fmt.Sprintf("h%d", i)
		hd := filepath.Join(dir, name) // startSSHD makes it
		sshd := startSSHD(t, h, dir, name, mg+".2")
		fh := &fleetHost{name: name, ns: h, mgmt: mg + ".2", journal: filepath.Join(hd, "journal"), root: filepath.Join(hd, "root"), monitor: filepath.Join(hd, "monitor.toml"), sshd: sshd}
		fh.before = fh.snapshot(t)
		hosts = append(hosts, fh)
	}
	for _, h := range hosts {
		waitSSHD(t, ctl, dir, h.name, h.mgmt)
	}
	return ctl, hosts
}

// sshKeys makes the controller's key (DIR/id) and the hosts' key
// (DIR/hostkey), and authorizes the first for root.
func sshKeys(t *testing.T, dir string) {
	t.Helper()
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "id"))
	mustRun(t, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "hostkey"))
	pub, err := os.ReadFile(filepath.Join(dir, "id.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	// sshd's privilege separation directory.
	if _, err := os.Stat("/run/sshd"); err != nil {
		if err := os.Mkdir("/run/sshd", 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove("/run/sshd") })
	}
}

// startSSHD runs sshd in ns on addr:22 with sshKeys' keys and its files in
// DIR/name, until the test ends; it returns sshd's process (the listener).
func startSSHD(t *testing.T, ns *testnet.NS, dir, name, addr string) *os.Process {
	t.Helper()
	hd := filepath.Join(dir, name)
	os.MkdirAll(hd, 0o700)
	cfg := filepath.Join(hd, "sshd_config")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`ListenAddress %s:22
HostKey %s
AuthorizedKeysFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PidFile %s
Subsystem sftp /usr/lib/openssh/sftp-server
LogLevel ERROR
`, addr, filepath.Join(dir, "hostkey"), filepath.Join(dir, "authorized_keys"), filepath.Join(hd, "sshd.pid"))), 0o600)
	sshd := ns.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfg)
	var logb strings.Builder
	sshd.Stdout, sshd.Stderr = &logb, &logb
	if err := sshd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { sshd.Wait(); close(exited) }()
	t.Cleanup(func() {
		sshd.Process.Kill()
		<-exited
		if t.Failed() && logb.Len() > 0 {
			t.Logf("%s sshd:\n%s", name, logb.String())
		}
	})
	return sshd.Process
}

// waitSSHD waits for sshd at addr to let the controller in.
func waitSSHD(t *testing.T, ctl *testnet.NS, dir, name, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		cmd := ctl.Command("ssh", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no", "-o", "ConnectTimeout=2", "-i", filepath.Join(dir, "id"), "root@"+addr, "true")
		if err := cmd.Run(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: sshd at %s does not answer", name, addr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// inventoryHosts writes the inventory's group of hosts, each with its own
// address, journal, persist root and monitor config; the group's vars follow.
func inventoryHosts(b *strings.Builder, hosts []*fleetHost, extra ...map[string]string) {
	b.WriteString("lowlat:\n  hosts:\n")
	for _, h := range hosts {
		fmt.Fprintf(b, "    %s:\n      ansible_host: %s\n      lowlat_journal: %s\n      lowlat_persist_root: %s\n      lowlat_monitor_config: %s\n", h.name, h.mgmt, h.journal, h.root, h.monitor)
		for _, e := range extra {
			b.WriteString(e[h.name])
		}
	}
}

// inventory writes the fleet's inventory: one group, each host with its own
// journal, persist root and monitor config; every host gates the same
// change on the same probe. There is no Prometheus: the canary play runs
// without its judge (lowlat_canary_judge: false), the per-host gates alone
// decide (TestFleetCanaryJudge runs the judge).
//
// The bad host, whose provider has no cap, is given a rate of 100 kbit/s:
// its gate must fail whatever else the machine runs. At the fleet's 2
// Mbit/s its loaded RTT rose only from 0.3 to 13 ms (the tbf's queue), and
// a clean-clone make test once kept that change: the 2-core host, busy with
// the tests beside, woke the prober that late in its baseline, and the
// gate rightly read 13 ms as the host's own noise. At 100 kbit/s (a tbf
// of 90 kbit/s, 2 ms of queue) one full frame takes 134 ms and the upload
// leaves the probe's packets no room: its loaded phase gets no reply.
func inventory(t *testing.T, dir, deb string, hosts []*fleetHost) string {
	t.Helper()
	var b strings.Builder
	inventoryHosts(&b, hosts, map[string]string{fmt.Sprintf("h%d", badHost): "      lowlat_set:\n        rate: 100kbit\n"})
	fmt.Fprintf(&b, `  vars:
    ansible_user: root
    ansible_ssh_private_key_file: %s
    lowlat_package: %s
    lowlat_profile: capped-uplink
    lowlat_set:
      rate: 2mbit
    lowlat_persist: true
    lowlat_prove: %s
    lowlat_settle: 1s
    lowlat_canary_judge: false
    lowlat_monitor_targets:
      - name: edge
        kind: udp
        address: "%s"
        interval: 50ms
        slo_p99: 30ms
        labels:
          role: edge
`, filepath.Join(dir, "id"), deb, fleetProbe, reflector)
	p := filepath.Join(dir, "inventory.yml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
