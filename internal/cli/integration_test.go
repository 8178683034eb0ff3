//go:build linux

package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/persist"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// lowlatBin is the lowlat binary the tests drive (see testnet.Lowlat).
var lowlatBin = testnet.Lowlat

// world is a namespace with an uplink veth, an address and a default route, a
// private journal, and a place for persistence files.
type world struct {
	t       *testing.T
	ns      *testnet.NS
	journal string
	root    string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	if _, err := lowlatBin(); err != nil {
		t.Fatal(err)
	}
	ns := testnet.New(t)
	ns.Veth(t, "up0", "up1", nil, 1)
	if err := ns.Do(func() error {
		l, _ := netlink.LinkByName("up0")
		addr, _ := netlink.ParseAddr("10.77.0.2/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("0.0.0.0/0")
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.77.0.1")}); err != nil {
			return err
		}
		addr6, _ := netlink.ParseAddr("fd77::2/64")
		addr6.Flags = unix.IFA_F_NODAD
		if err := netlink.AddrAdd(l, addr6); err != nil {
			return err
		}
		_, dst6, _ := net.ParseCIDR("::/0")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst6, Gw: net.ParseIP("fd77::1")})
	}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &world{t: t, ns: ns, journal: filepath.Join(dir, "journal"), root: filepath.Join(dir, "root")}
}

type result struct {
	code   int
	killed bool
	stdout string
	stderr string
}

// run runs lowlat inside the namespace with the world's journal.
func (w *world) run(env []string, args ...string) result {
	w.t.Helper()
	bin, _ := lowlatBin()
	cmd := w.ns.Command(bin, args...)
	cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
	cmd.Env = append(cmd.Env, env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			r.killed = true
		}
	default:
		w.t.Fatalf("run lowlat %v: %v", args, err)
	}
	return r
}

func (w *world) mustRun(args ...string) result {
	w.t.Helper()
	r := w.run(nil, args...)
	if r.code != 0 {
		w.t.Fatalf("lowlat %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// resetRootQdisc deletes up0's root qdisc, so the kernel attaches its default
// again, as after a reboot.
func (w *world) resetRootQdisc() {
	w.t.Helper()
	if err := w.ns.Do(func() error {
		l, err := netlink.LinkByName("up0")
		if err != nil {
			return err
		}
		qs, err := netlink.QdiscList(l)
		if err != nil {
			return err
		}
		for _, q := range qs {
			if q.Attrs().Parent == netlink.HANDLE_ROOT {
				if err := netlink.QdiscDel(q); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) snapshot() string { return w.ns.Snapshot(w.t, "up0") }

// THP is host-global: a namespaced test must not touch it.
var skipGlobal = []string{"--skip", "sysfs.kernel/mm/transparent_hugepage/enabled", "--skip", "sysfs.kernel/mm/transparent_hugepage/defrag"}

func profileArgs(name string) []string {
	args := []string{"--profile", name}
	switch name {
	case "game-udp":
		args = append(args, skipGlobal...)
	case "capped-uplink":
		args = append(args, "--set", "rate=2mbit", "--set", "down=20mbit")
	}
	return args
}

type applyJSON struct {
	Txn     string `json:"txn"`
	Changed []struct {
		Knob, Before, After string
	} `json:"changes"`
	Failed []struct{ Knob, Error string } `json:"failed"`
	// Any is "changed": whether the host changed (Ansible's meaning).
	Any bool `json:"changed"`
}

// planDiff is what plan --json says for automation.
type planDiff struct {
	Changed bool `json:"changed"`
	Diff    []struct {
		BeforeHeader string `json:"before_header"`
		AfterHeader  string `json:"after_header"`
		Before       string `json:"before"`
		After        string `json:"after"`
	} `json:"diff"`
}

func (w *world) plan(args ...string) planDiff {
	w.t.Helper()
	r := w.mustRun(append([]string{"plan", "--json"}, args...)...)
	var p planDiff
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
		w.t.Fatalf("plan --json: %v\n%s", err, r.stdout)
	}
	return p
}

// TestIntegrationProfilesApplyStatusRollback applies each built-in profile's
// namespace-scoped knobs, checks status is clean, rolls back and checks every
// sysctl, qdisc, filter, route and link is byte-identical to before.
func TestIntegrationProfilesApplyStatusRollback(t *testing.T) {
	for _, name := range []string{"game-udp", "realtime-tcp", "live-edge", "capped-uplink"} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			before := w.snapshot()
			// plan --json is Ansible's diff: one before/after per knob.
			pd := w.plan(profileArgs(name)...)
			if !pd.Changed || len(pd.Diff) == 0 {
				t.Fatalf("plan before apply: changed %v, %d diffs", pd.Changed, len(pd.Diff))
			}
			for _, d := range pd.Diff {
				if d.BeforeHeader == "" || d.BeforeHeader != d.AfterHeader || d.Before == d.After || !strings.HasSuffix(d.After, "\n") {
					t.Errorf("plan diff entry %+v", d)
				}
			}
			r := w.mustRun(append([]string{"apply", "--yes", "--json"}, profileArgs(name)...)...)
			var res applyJSON
			if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
				t.Fatalf("apply --json: %v\n%s", err, r.stdout)
			}
			if res.Txn == "" || len(res.Changed) == 0 || len(res.Failed) != 0 || !res.Any {
				t.Fatalf("apply result: %+v", res)
			}
			t.Logf("%s changed %d knobs", name, len(res.Changed))
			applied := w.snapshot()
			if applied == before {
				t.Fatal("apply changed nothing visible to iproute2 or /proc/sys")
			}
			// Idempotence: the same apply again plans nothing and changes
			// nothing, and says so.
			if pd := w.plan(profileArgs(name)...); pd.Changed || len(pd.Diff) != 0 {
				t.Errorf("plan after apply: changed %v, diff %+v", pd.Changed, pd.Diff)
			}
			var again applyJSON
			r = w.mustRun(append([]string{"apply", "--yes", "--json"}, profileArgs(name)...)...)
			if err := json.Unmarshal([]byte(r.stdout), &again); err != nil || again.Any || again.Txn != "" || len(again.Changed) != 0 {
				t.Errorf("second apply is not a no-op: %v\n%s", err, r.stdout)
			}
			if got := w.snapshot(); got != applied {
				t.Errorf("second apply changed the namespace:\n%s", testnet.DiffLines(applied, got))
			}
			st := w.mustRun("status", "--json")
			var rep struct {
				Txn   *string `json:"txn"`
				Drift []any   `json:"drift"`
			}
			json.Unmarshal([]byte(st.stdout), &rep)
			if rep.Txn == nil || *rep.Txn != res.Txn || len(rep.Drift) != 0 {
				t.Fatalf("status after apply: %s", st.stdout)
			}
			var rb applyJSON
			json.Unmarshal([]byte(w.mustRun("rollback", "--json").stdout), &rb)
			if !rb.Any || len(rb.Changed) == 0 {
				t.Errorf("rollback --json: changed %v, %d changes", rb.Any, len(rb.Changed))
			}
			if after := w.snapshot(); after != before {
				t.Errorf("not byte-identical after rollback:\n%s", testnet.DiffLines(before, after))
			}
			json.Unmarshal([]byte(w.mustRun("rollback", "--json").stdout), &rb)
			if rb.Any {
				t.Errorf("a second rollback says it changed something: %+v", rb)
			}
			st = w.mustRun("status", "--json")
			if !strings.Contains(st.stdout, `"txn": null`) {
				t.Errorf("status after rollback: %s", st.stdout)
			}
		})
	}
}

// TestIntegrationKill9AtEveryPoint kills the apply with SIGKILL right after
// each knob write (and right after each journal intent, before its write), then
// recovers with rollback (or status) and checks the namespace is exactly as
// before.
func TestIntegrationKill9AtEveryPoint(t *testing.T) {
	w := newWorld(t)
	args := append([]string{"apply", "--yes", "--json"}, profileArgs("capped-uplink")...)
	args = append(args, "--set", "sysctl.net.ipv4.tcp_fin_timeout=11", "--set", "route.initcwnd=20")
	before := w.snapshot()
	// Count the writes of a full apply first.
	r := w.mustRun(args...)
	var res applyJSON
	json.Unmarshal([]byte(r.stdout), &res)
	n := len(res.Changed)
	if n < 4 {
		t.Fatalf("want a multi-knob apply, got %d changes", n)
	}
	w.mustRun("rollback")
	if after := w.snapshot(); after != before {
		t.Fatalf("plain rollback not clean:\n%s", testnet.DiffLines(before, after))
	}
	// On the host every kill point is recovered both ways. In the VM, which
	// is here for the kernel's side (its qdiscs restored exactly at every
	// point), each point is recovered once, the two ways taking turns: the
	// recovery itself is the same code on both kernels, and each of its
	// passes costs seconds of emulated CPU.
	recoveries := func(i int, stage string) []string {
		if !testnet.InVM() {
			return []string{"rollback", "status"}
		}
		if (i%2 == 0) == (stage == "intent") {
			return []string{"rollback"}
		}
		return []string{"status"}
	}
	for i := 1; i <= n; i++ {
		for _, stage := range []string{"intent", "write"} {
			for _, recover := range recoveries(i, stage) {
				point := fmt.Sprintf("%s:%d", stage, i)
				r := w.run([]string{"LOWLAT_TEST_CRASH=" + point}, args...)
				if !r.killed {
					t.Fatalf("%s: apply was not killed (exit %d): %s %s", point, r.code, r.stdout, r.stderr)
				}
				// A second apply must refuse while the first is unfinished.
				if r2 := w.run(nil, args...); r2.code == 0 || !strings.Contains(r2.stderr, "did not finish") {
					t.Fatalf("%s: apply over an unfinished transaction: exit %d %s", point, r2.code, r2.stderr)
				}
				rec := w.run(nil, recover)
				if rec.code != 0 {
					t.Fatalf("%s: %s after kill: exit %d\n%s\n%s", point, recover, rec.code, rec.stdout, rec.stderr)
				}
				if recover == "status" && !strings.Contains(rec.stdout, "Recovered") {
					t.Errorf("%s: status did not say it recovered:\n%s", point, rec.stdout)
				}
				if after := w.snapshot(); after != before {
					t.Fatalf("%s, recovered by %s: not restored:\n%s", point, recover, testnet.DiffLines(before, after))
				}
			}
		}
	}
}

// TestIntegrationKill9DuringRollback: a rollback killed after each restore is
// finished by the next rollback.
func TestIntegrationKill9DuringRollback(t *testing.T) {
	w := newWorld(t)
	args := append([]string{"apply", "--yes", "--json"}, profileArgs("realtime-tcp")...)
	before := w.snapshot()
	r := w.mustRun(args...)
	var res applyJSON
	json.Unmarshal([]byte(r.stdout), &res)
	if len(res.Changed) < 3 {
		t.Fatalf("want several changes, got %d", len(res.Changed))
	}
	w.mustRun("rollback")
	for i := 1; i <= len(res.Changed); i++ {
		w.mustRun(args...)
		k := w.run([]string{fmt.Sprintf("LOWLAT_TEST_CRASH=restore:%d", i)}, "rollback")
		if !k.killed {
			t.Fatalf("restore:%d: rollback not killed (exit %d) %s", i, k.code, k.stderr)
		}
		again := w.run(nil, "rollback")
		if again.code != 0 || !strings.Contains(again.stdout, "recovered interrupted transaction") {
			t.Fatalf("restore:%d: second rollback: exit %d\n%s\n%s", i, again.code, again.stdout, again.stderr)
		}
		if after := w.snapshot(); after != before {
			t.Fatalf("restore:%d: not restored:\n%s", i, testnet.DiffLines(before, after))
		}
	}
}

func TestIntegrationDriftExitsThree(t *testing.T) {
	w := newWorld(t)
	w.mustRun(append([]string{"apply", "--yes"}, profileArgs("realtime-tcp")...)...)
	if err := w.ns.Do(func() error {
		return os.WriteFile("/proc/sys/net/ipv4/tcp_fin_timeout", []byte("60"), 0)
	}); err != nil {
		t.Fatal(err)
	}
	r := w.run(nil, "status")
	if r.code != 3 || !strings.Contains(r.stdout, "sysctl/net.ipv4.tcp_fin_timeout") || !strings.Contains(r.stdout, "60") {
		t.Fatalf("status: exit %d\n%s", r.code, r.stdout)
	}
	rj := w.run(nil, "status", "--json")
	var rep struct {
		Drift []struct{ Knob, Applied, Live string } `json:"drift"`
	}
	json.Unmarshal([]byte(rj.stdout), &rep)
	if rj.code != 3 || len(rep.Drift) != 1 || rep.Drift[0].Applied != "15" || rep.Drift[0].Live != "60" {
		t.Fatalf("status --json: exit %d %s", rj.code, rj.stdout)
	}
	w.mustRun("rollback")
}

// TestIntegrationConfirmDeadman: an unconfirmed apply is rolled back by the
// detached watchdog after the deadline, even though the apply process is long
// gone; a confirmed one stays.
func TestIntegrationConfirmDeadman(t *testing.T) {
	w := newWorld(t)
	before := w.snapshot()
	// A second apply is refused while one awaits confirmation (a long
	// deadline, so a loaded machine cannot race it), and a plain rollback
	// ends the unconfirmed one.
	w.mustRun(append([]string{"apply", "--yes", "--confirm", "60s"}, profileArgs("live-edge")...)...)
	if w.snapshot() == before {
		t.Fatal("apply changed nothing")
	}
	if r := w.run(nil, append([]string{"apply", "--yes"}, profileArgs("realtime-tcp")...)...); r.code == 0 || !strings.Contains(r.stderr, "awaits confirmation") {
		t.Fatalf("a second apply while one awaits confirmation: exit %d %s", r.code, r.stderr)
	}
	w.mustRun("rollback")
	if after := w.snapshot(); after != before {
		t.Fatalf("rollback of an unconfirmed apply:\n%s", testnet.DiffLines(before, after))
	}

	// Unconfirmed: the watchdog rolls it back at the deadline.
	w.mustRun(append([]string{"apply", "--yes", "--confirm", "2s"}, profileArgs("live-edge")...)...)
	if !waitFor(15*time.Second, func() bool { return w.snapshot() == before }) {
		t.Fatalf("not rolled back 15 s after a 2 s deadline:\n%s", testnet.DiffLines(before, w.snapshot()))
	}
	if r := w.run(nil, "confirm"); r.code == 0 || !strings.Contains(r.stderr, "already rolled back") {
		t.Errorf("late confirm: exit %d %s", r.code, r.stderr)
	}

	w.mustRun(append([]string{"apply", "--yes", "--confirm", "5s"}, profileArgs("live-edge")...)...)
	applied := w.snapshot()
	w.mustRun("confirm")
	time.Sleep(6 * time.Second)
	if w.snapshot() != applied {
		t.Fatal("a confirmed change was rolled back")
	}
	w.mustRun("rollback")
	if after := w.snapshot(); after != before {
		t.Errorf("rollback after confirm:\n%s", testnet.DiffLines(before, after))
	}
}

func waitFor(d time.Duration, ok func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if ok() {
			return true
		}
		time.Sleep(200 * time.Millisecond)
	}
	return ok()
}

// TestIntegrationBadInput: each bad input gives one clear line naming the
// thing and leaves the namespace exactly as it was.
func TestIntegrationBadInput(t *testing.T) {
	testnet.HostOnly(t, "bad input is refused before the kernel is asked, or by a sysctl write both kernels refuse alike")
	w := newWorld(t)
	before := w.snapshot()
	badProfile := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(badProfile, []byte("extends = \"game-udp\"\n[qdisc.root]\nvalue = \"fq_codel targte 5ms\"\n"), 0o644)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown profile", []string{"apply", "--yes", "--profile", "gaming"}, `unknown profile "gaming"`},
		{"unknown interface", []string{"apply", "--yes", "--profile", "realtime-tcp", "--iface", "eth9"}, `unknown interface "eth9"`},
		{"malformed profile", []string{"apply", "--yes", "--profile", badProfile}, badProfile + ":3:9: qdisc.root: fq_codel: unknown option \"targte\""},
		{"missing parameter", []string{"apply", "--yes", "--profile", "capped-uplink"}, "needs parameter rate"},
		{"kernel rejects a value", []string{"apply", "--yes", "--profile", "realtime-tcp", "--set", "sysctl.net.ipv4.ip_local_port_range=70000 80000"}, "net.ipv4.ip_local_port_range: write \"70000 80000\""},
		{"no --yes without a terminal", []string{"apply", "--profile", "realtime-tcp"}, "pass --yes"},
		{"bad confirm", []string{"apply", "--yes", "--profile", "realtime-tcp", "--confirm", "0.5s"}, "--confirm 500ms: want 1s..192h"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := w.run(nil, tt.args...)
			if r.code == 0 || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("exit %d, stderr %q, want it to contain %q", r.code, r.stderr, tt.want)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n"); lines > 0 {
				t.Errorf("error is %d lines, want one:\n%s", lines+1, r.stderr)
			}
			if after := w.snapshot(); after != before {
				t.Fatalf("host changed:\n%s", testnet.DiffLines(before, after))
			}
		})
	}
	t.Run("kernel rejection rolls back and exits with the errno", func(t *testing.T) {
		r := w.run(nil, "apply", "--yes", "--profile", "realtime-tcp", "--set", "sysctl.net.ipv4.ip_local_port_range=70000 80000")
		if !strings.Contains(r.stderr, "invalid argument") || !strings.Contains(r.stderr, "rolled back") {
			t.Errorf("stderr: %s", r.stderr)
		}
	})
	t.Run("not root", func(t *testing.T) {
		bin, _ := lowlatBin()
		cmd := w.ns.Command(bin, "apply", "--yes", "--profile", "realtime-tcp")
		cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		// The namespace helper needs root to enter; run lowlat directly, as
		// nobody, in the host namespace: it must refuse before reading anything.
		cmd = exec.Command(bin, "apply", "--yes", "--profile", "realtime-tcp")
		cmd.Env = append(os.Environ(), "LOWLAT_JOURNAL="+w.journal)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "must run as root") {
			t.Errorf("as nobody: %v %s", err, out)
		}
	})
	t.Run("journal from a newer lowlat", func(t *testing.T) {
		j := filepath.Join(t.TempDir(), "journal")
		rec := `{"v":99,"type":"begin","txn":"x"}`
		line := fmt.Sprintf("%08x %s\n", crc32.Checksum([]byte(rec), crc32.MakeTable(crc32.Castagnoli)), rec)
		os.WriteFile(j, []byte(line), 0o644)
		for _, cmd := range [][]string{{"apply", "--yes", "--profile", "realtime-tcp", "--journal", j}, {"rollback", "--journal", j}, {"status", "--journal", j}} {
			r := w.run(nil, cmd...)
			if r.code == 0 || !strings.Contains(r.stderr, j) || !strings.Contains(r.stderr, "newer lowlat") {
				t.Errorf("%s: exit %d %s", cmd[0], r.code, r.stderr)
			}
		}
		if after := w.snapshot(); after != before {
			t.Fatal("host changed")
		}
	})
	t.Run("not a journal", func(t *testing.T) {
		dir := t.TempDir()
		passwd := filepath.Join(dir, "passwd")
		os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644)
		for _, cmd := range [][]string{{"status", "--journal", passwd}, {"rollback", "--journal", passwd}, {"apply", "--yes", "--profile", "realtime-tcp", "--journal", passwd}} {
			r := w.run(nil, cmd...)
			if r.code == 0 || !strings.Contains(r.stderr, passwd) || !strings.Contains(r.stderr, "not a lowlat journal") {
				t.Errorf("%s: exit %d %s", cmd[0], r.code, r.stderr)
			}
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("a refused journal path left files beside it: %v", ents)
		}
		if after := w.snapshot(); after != before {
			t.Fatal("host changed")
		}
	})
	t.Run("truncated last journal record", func(t *testing.T) {
		r := w.run([]string{"LOWLAT_TEST_CRASH=write:2"}, "apply", "--yes", "--profile", "realtime-tcp")
		if !r.killed {
			t.Fatal("not killed")
		}
		// Simulate the process dying inside the write of its next record.
		f, _ := os.OpenFile(w.journal, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`7f3a9c01 {"v":1,"type":"intent","txn":"`)
		f.Close()
		a := w.run(nil, "apply", "--yes", "--profile", "realtime-tcp")
		if a.code == 0 || !strings.Contains(a.stderr, "incomplete") || !strings.Contains(a.stderr, w.journal) {
			t.Fatalf("apply over a torn journal: exit %d %s", a.code, a.stderr)
		}
		rb := w.run(nil, "rollback")
		if rb.code != 0 || !strings.Contains(rb.stdout, "removed line") {
			t.Fatalf("rollback over a torn journal: exit %d %s %s", rb.code, rb.stdout, rb.stderr)
		}
		if after := w.snapshot(); after != before {
			t.Fatalf("not restored:\n%s", testnet.DiffLines(before, after))
		}
	})
}

// TestIntegrationPersistAndBoot: --persist writes the sysctl.d file and the
// boot unit (below --persist-root here), rollback removes them, and after a
// pretend reboot 'lowlat boot' re-applies the device knobs.
func TestIntegrationPersistAndBoot(t *testing.T) {
	w := newWorld(t)
	before := w.snapshot()
	args := append([]string{"apply", "--yes", "--persist", "--persist-root", w.root}, profileArgs("capped-uplink")...)
	var res applyJSON
	if err := json.Unmarshal([]byte(w.mustRun(append(args, "--json")...).stdout), &res); err != nil {
		t.Fatal(err)
	}
	sysctlFile := filepath.Join(w.root, persist.SysctlFile(res.Txn))
	conf, err := os.ReadFile(sysctlFile)
	if err != nil || !strings.Contains(string(conf), "net.ipv4.tcp_congestion_control = bbr") {
		t.Fatalf("sysctl.d file: %v\n%s", err, conf)
	}
	// This test host runs no systemd, so no unit is written and apply says so.
	if _, err := os.Stat(filepath.Join(w.root, "etc/systemd/system/lowlat-boot.service")); err == nil {
		if _, err := os.Stat("/run/systemd/system"); err != nil {
			t.Error("boot unit written although systemd does not run")
		}
	}
	applied := w.snapshot()
	// Idempotence with --persist: the second run writes no new file.
	var again applyJSON
	r0 := w.mustRun(append(args, "--json")...)
	if err := json.Unmarshal([]byte(r0.stdout), &again); err != nil || again.Any || again.Txn != "" || !strings.Contains(r0.stdout, "already applied and persisted by transaction "+res.Txn) {
		t.Errorf("a second apply --persist is not a no-op: %v\n%s", err, r0.stdout)
	}
	if files, _ := filepath.Glob(filepath.Join(w.root, persist.SysctlDir, "*")); len(files) != 1 {
		t.Errorf("sysctl.d after two applies: %v", files)
	}
	// Pretend a reboot: the qdiscs are back to the kernel default.
	w.resetRootQdisc()
	if r := w.run(nil, "status"); r.code != 3 {
		t.Fatalf("status after the qdisc reset: exit %d\n%s", r.code, r.stdout)
	}
	r := w.run([]string{"LOWLAT_TEST_BOOT_ID=another-boot"}, "boot")
	if r.code != 0 || !strings.Contains(r.stdout, "qdisc/up0/root") {
		t.Fatalf("boot: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	// A re-created qdisc gets a new kernel handle, as it would after a real
	// reboot; everything else must match.
	if now := w.snapshot(); normHandles(now) != normHandles(applied) {
		t.Errorf("boot did not restore the applied state:\n%s", testnet.DiffLines(normHandles(applied), normHandles(now)))
	}
	if r := w.run(nil, "status"); r.code != 0 {
		t.Errorf("status after boot: exit %d\n%s", r.code, r.stdout)
	}
	w.mustRun("rollback")
	if _, err := os.Stat(sysctlFile); !os.IsNotExist(err) {
		t.Errorf("rollback left the sysctl.d file: %v", err)
	}
	if after := w.snapshot(); after != before {
		t.Errorf("rollback:\n%s", testnet.DiffLines(before, after))
	}
	st := journalState(t, w.journal)
	if tx := st.Txns[0]; !tx.Meta.Persist || len(tx.Boots) != 2 {
		t.Errorf("journal: persist=%v boots=%v", tx.Meta.Persist, tx.Boots)
	}
}

// TestIntegrationConfirmPersistBoot: a --confirm --persist apply writes its
// persistence files only at confirm, and a reboot before confirm rolls it
// back at boot instead of re-applying it.
func TestIntegrationConfirmPersistBoot(t *testing.T) {
	w := newWorld(t)
	before := w.snapshot()
	args := append([]string{"apply", "--yes", "--json", "--confirm", "10m", "--persist", "--persist-root", w.root}, profileArgs("capped-uplink")...)
	var res applyJSON
	if err := json.Unmarshal([]byte(w.mustRun(args...).stdout), &res); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWatchdogOf(t, w.journal, res.Txn) })
	sysctlFile := filepath.Join(w.root, persist.SysctlFile(res.Txn))
	if _, err := os.Stat(sysctlFile); !os.IsNotExist(err) {
		t.Fatalf("sysctl.d file of an unconfirmed apply exists (%v): systemd-sysctl would apply it at boot", err)
	}
	// Pretend a reboot: the watchdog died with it, the qdiscs went back.
	stopWatchdogOf(t, w.journal, res.Txn)
	w.resetRootQdisc()
	r := w.run([]string{"LOWLAT_TEST_BOOT_ID=another-boot"}, "boot")
	if r.code != 0 || !strings.Contains(r.stdout, "rolled back transaction "+res.Txn) {
		t.Fatalf("boot: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if after := w.snapshot(); normHandles(after) != normHandles(before) {
		t.Errorf("boot re-applied an unconfirmed transaction:\n%s", testnet.DiffLines(normHandles(before), normHandles(after)))
	}
	st := journalState(t, w.journal)
	if tx := st.Txns[0]; tx.Status != journal.RolledBack || len(tx.Boots) != 1 {
		t.Errorf("journal: %s boots %v", tx.Status, tx.Boots)
	}

	// Confirmed in time, the files are written by confirm.
	if err := json.Unmarshal([]byte(w.mustRun(args...).stdout), &res); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopWatchdogOf(t, w.journal, res.Txn) })
	w.mustRun("confirm")
	if _, err := os.Stat(filepath.Join(w.root, persist.SysctlFile(res.Txn))); err != nil {
		t.Errorf("confirm did not write the sysctl.d file: %v", err)
	}
	w.mustRun("rollback")
	if _, err := os.Stat(filepath.Join(w.root, persist.SysctlFile(res.Txn))); !os.IsNotExist(err) {
		t.Errorf("rollback left the sysctl.d file: %v", err)
	}
}

// stopWatchdogOf kills the watchdog of a transaction, as a reboot would.
func stopWatchdogOf(t *testing.T, journalPath, id string) {
	st, err := journal.ReadState(journalPath)
	if err != nil {
		return
	}
	if tx, err := st.Find(id); err == nil && tx.Meta.WatchdogPID > 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", tx.Meta.WatchdogPID)); err == nil && strings.Contains(string(b), id) {
			syscall.Kill(tx.Meta.WatchdogPID, syscall.SIGKILL)
		}
	}
}

var handleRE = regexp.MustCompile(`\b[0-9a-f]{1,4}:[0-9a-f]{0,4}`)

func normHandles(s string) string { return handleRE.ReplaceAllString(s, "H:") }

func journalState(t *testing.T, path string) *journal.State {
	t.Helper()
	st, err := journal.ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestIntegrationDoctorUnprivileged: doctor works without root wherever the
// data is readable: as nobody it reports findings and checks everything
// (the few root-only sysctls are not ones doctor needs).
func TestIntegrationDoctorUnprivileged(t *testing.T) {
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch to nobody")
	}
	cmd := exec.Command(bin, "doctor", "--json")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("doctor as nobody: %v\n%s", err, out)
	}
	var rep struct {
		Findings []struct {
			ID         string `json:"id"`
			NotChecked bool   `json:"not_checked"`
			Summary    string `json:"summary"`
		} `json:"findings"`
		Host struct {
			Kernel string `json:"kernel"`
		} `json:"host"`
		Checks struct{ Run, NotChecked int } `json:"checks"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor --json: %v\n%s", err, out)
	}
	if rep.Host.Kernel == "" || rep.Checks.Run < 14 {
		t.Fatalf("report: %+v", rep)
	}
	for _, f := range rep.Findings {
		if f.NotChecked {
			t.Errorf("as nobody, %s was not checked: %s", f.ID, f.Summary)
		}
	}
}
