//go:build linux

package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/testnet"
)

// sockopsWorld is a world with runbook 001's server on port 7000 and a
// second one on 7001, and the namespace's sock_ops pin directory.
type sockopsWorld struct {
	*world
	pins string // lowlat's pin directory for this namespace
}

const fixPort, otherPort = 7000, 7001

func newSockopsWorld(t *testing.T) *sockopsWorld {
	w := newWorld(t)
	testnet.NagleServer(t, w.ns, fixPort)
	testnet.NagleServer(t, w.ns, otherPort)
	var cookie uint64
	if err := w.ns.Do(func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		cookie, err = unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
		return err
	}); err != nil {
		t.Fatalf("netns cookie: %v", err)
	}
	sw := &sockopsWorld{world: w, pins: fmt.Sprintf("/sys/fs/bpf/lowlat/sockops/%d", cookie)}
	// Whatever a failing test leaves attached goes with it.
	t.Cleanup(func() {
		if _, err := os.Stat(sw.pins); err == nil {
			w.run(nil, "rollback", "--all")
			os.RemoveAll(sw.pins)
		}
	})
	return sw
}

// attached returns the IDs of the programs linked through this namespace's
// pin directory, by Debian's bpftool.
func (w *sockopsWorld) attached() []int {
	w.t.Helper()
	out, err := exec.Command("bpftool", "-j", "-f", "link", "show").Output()
	if err != nil {
		w.t.Fatalf("bpftool link show: %v", err)
	}
	var links []struct {
		ProgID int      `json:"prog_id"`
		Pinned []string `json:"pinned"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		w.t.Fatalf("bpftool link show: %v\n%s", err, out)
	}
	var ids []int
	for _, l := range links {
		for _, p := range l.Pinned {
			if strings.HasPrefix(p, w.pins+"/") {
				ids = append(ids, l.ProgID)
			}
		}
	}
	return ids
}

// removePins removes the pins behind lowlat's back, as a reboot or an
// operator would, and waits for the kernel to free the link (a worker does
// it a moment after its last reference goes). It returns the programs.
func (w *sockopsWorld) removePins() []int {
	w.t.Helper()
	progs := w.attached()
	if err := os.RemoveAll(w.pins); err != nil {
		w.t.Fatal(err)
	}
	if !waitFor(5*time.Second, func() bool {
		for _, id := range progs {
			if progExists(w.t, id) {
				return false
			}
		}
		return true
	}) {
		w.t.Fatalf("programs %v still loaded 5 s after their pins went", progs)
	}
	return progs
}

// progExists asks bpftool whether program id is still loaded.
func progExists(t *testing.T, id int) bool {
	return exec.Command("bpftool", "prog", "show", "id", fmt.Sprint(id)).Run() == nil
}

// nothingLeft checks that nothing of lowlat's is attached or pinned for
// this namespace, and that the programs it had are gone.
func (w *sockopsWorld) nothingLeft(what string, progs []int) {
	w.t.Helper()
	if ids := w.attached(); len(ids) != 0 {
		w.t.Errorf("%s: bpftool still shows programs linked from %s: %v", what, w.pins, ids)
	}
	// Detached at once; the program itself is freed by a kernel worker
	// a moment after its link.
	for _, id := range progs {
		if !waitFor(5*time.Second, func() bool { return !progExists(w.t, id) }) {
			w.t.Errorf("%s: program %d is still loaded 5 s later", what, id)
		}
	}
	if _, err := os.Stat(w.pins); err == nil {
		entries, _ := os.ReadDir(w.pins)
		w.t.Errorf("%s: %s is still there (%d entries)", what, w.pins, len(entries))
	}
}

type socketRow struct {
	Local    string   `json:"local"`
	State    string   `json:"state"`
	Enforced []string `json:"enforced_by_lowlat"`
	Options  *struct {
		NoDelay bool `json:"nodelay"`
	} `json:"options"`
}

// serverSockets lists the established sockets whose local port is port.
func (w *sockopsWorld) serverSockets(port int) []socketRow {
	w.t.Helper()
	r := w.mustRun("sockets", "--port", fmt.Sprint(port), "--state", "established", "--json")
	var rep struct {
		Sockets []socketRow `json:"sockets"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		w.t.Fatalf("sockets --json: %v\n%s", err, r.stdout)
	}
	var out []socketRow
	for _, s := range rep.Sockets {
		if strings.HasSuffix(s.Local, fmt.Sprintf(":%d", port)) {
			out = append(out, s)
		}
	}
	return out
}

func quantiles(ds []time.Duration) string {
	return fmt.Sprintf("p50 %v p99 %v", testnet.Quantile(ds, 0.5).Round(time.Microsecond), testnet.Quantile(ds, 0.99).Round(time.Microsecond))
}

// TestIntegrationSocketsFixNagle is runbook 001's night, fixed from the
// outside: a Python server that answers in two writes without TCP_NODELAY
// stalls each answer on the client's delayed ACK; 'lowlat sockets --fix
// nodelay --port 7000' ends the stall on a new connection and on the one
// already open, without restarting the server; the server on 7001 keeps
// its stall; 'lowlat rollback' brings it back and leaves nothing behind.
func TestIntegrationSocketsFixNagle(t *testing.T) {
	w := newSockopsWorld(t)
	open := testnet.Dial(t, w.ns, fixPort)
	other := testnet.Dial(t, w.ns, otherPort)
	before := testnet.RoundTrips(t, open, 20)
	t.Logf("before: %s", quantiles(before))
	if p50 := testnet.Quantile(before, 0.5); p50 < 30*time.Millisecond {
		t.Fatalf("before: p50 %v, want the Nagle/delayed-ACK stall (>= 30 ms)", p50)
	}

	r := w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes", "--json")
	var res applyJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Changed) != 2 {
		t.Fatalf("sockets --fix --json: %v, %d changes\n%s", err, len(res.Changed), r.stdout)
	}
	progs := w.attached()
	if len(progs) != 1 {
		t.Fatalf("after --fix bpftool shows %d programs linked from %s, want 1", len(progs), w.pins)
	}

	existing := testnet.RoundTrips(t, open, 50)
	fresh := testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 50)
	t.Logf("after, already-open connection: %s", quantiles(existing))
	t.Logf("after, new connection: %s", quantiles(fresh))
	if p50 := testnet.Quantile(existing, 0.5); p50 >= testnet.Unstalled {
		t.Errorf("already-open connection after --fix: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if p50 := testnet.Quantile(fresh, 0.5); p50 >= testnet.Unstalled {
		t.Errorf("new connection after --fix: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, other, 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("port %d is not selected, but its p50 is %v (want the stall)", otherPort, p50)
	}
	for _, s := range w.serverSockets(fixPort) {
		if s.Options == nil || !s.Options.NoDelay || strings.Join(s.Enforced, ",") != "nodelay" {
			t.Errorf("port %d socket %s: options %+v, enforced %v; want nodelay enforced by lowlat", fixPort, s.Local, s.Options, s.Enforced)
		}
	}
	for _, s := range w.serverSockets(otherPort) {
		if s.Options == nil || s.Options.NoDelay || len(s.Enforced) != 0 {
			t.Errorf("port %d socket %s: options %+v, enforced %v; want it untouched", otherPort, s.Local, s.Options, s.Enforced)
		}
	}
	if st := w.run(nil, "status"); st.code != 0 || !strings.Contains(st.stdout, "No drift") {
		t.Errorf("status after --fix: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	if again := w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes", "--json"); !strings.Contains(again.stdout, `"changed": false`) {
		t.Errorf("a second --fix changed something:\n%s", again.stdout)
	}

	w.mustRun("rollback")
	w.nothingLeft("after rollback", progs)
	after := testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 10)
	t.Logf("after rollback, new connection: %s", quantiles(after))
	if p50 := testnet.Quantile(after, 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, open, 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("already-open connection after rollback: p50 %v, want its own setting (Nagle) back", p50)
	}
}

// TestIntegrationSocketsFixDrift: pins removed behind lowlat's back are
// drift (exit 3), and a rollback still ends clean.
func TestIntegrationSocketsFixDrift(t *testing.T) {
	w := newSockopsWorld(t)
	w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes")
	progs := w.removePins()
	st := w.run(nil, "status")
	if st.code != 3 || !strings.Contains(st.stdout, "sockopt/port:7000/nodelay") {
		t.Errorf("status with the pins gone: exit %d, want 3 naming the knob\n%s%s", st.code, st.stdout, st.stderr)
	}
	w.mustRun("rollback")
	w.nothingLeft("rollback after drift", progs)
}

// TestIntegrationSocketsFixKilled: lowlat killed between attaching the
// program and committing the transaction leaves a pinned program; the next
// rollback, or status as root, finds it through the journal and removes it,
// and the open connection gets its own setting back.
func TestIntegrationSocketsFixKilled(t *testing.T) {
	w := newSockopsWorld(t)
	open := testnet.Dial(t, w.ns, fixPort)
	testnet.RoundTrips(t, open, 1)
	args := []string{"sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes"}
	for _, point := range []string{"write:1", "intent:2", "write:2"} {
		for _, recover := range []string{"rollback", "status"} {
			r := w.run([]string{"LOWLAT_TEST_CRASH=" + point}, args...)
			if !r.killed {
				t.Fatalf("%s: not killed (exit %d): %s%s", point, r.code, r.stdout, r.stderr)
			}
			progs := w.attached()
			if len(progs) != 1 {
				t.Fatalf("%s: killed after attaching, but bpftool shows %d programs linked from %s", point, len(progs), w.pins)
			}
			if rec := w.run(nil, recover); rec.code != 0 {
				t.Fatalf("%s: %s after the kill: exit %d\n%s%s", point, recover, rec.code, rec.stdout, rec.stderr)
			}
			w.nothingLeft(point+", recovered by "+recover, progs)
			for _, s := range w.serverSockets(fixPort) {
				if s.Options == nil || s.Options.NoDelay {
					t.Errorf("%s, recovered by %s: socket %s still has nodelay", point, recover, s.Local)
				}
			}
		}
	}
}

// TestIntegrationSocketsFixBadInput: each refusal is one line, and nothing
// is attached or journaled.
func TestIntegrationSocketsFixBadInput(t *testing.T) {
	testnet.HostOnly(t, "each refusal comes before anything is loaded into the kernel")
	w := newSockopsWorld(t)
	bin, _ := lowlatBin()
	fix := func(extra ...string) []string {
		return append([]string{"sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes"}, extra...)
	}
	noCgroup2 := filepath.Join(t.TempDir(), "mountinfo")
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.Split(string(mi), "\n") {
		if !strings.Contains(l, " - cgroup2 ") {
			kept = append(kept, l)
		}
	}
	os.WriteFile(noCgroup2, []byte(strings.Join(kept, "\n")), 0o644)
	profileFile := func(body string) string {
		p := filepath.Join(t.TempDir(), "p.toml")
		os.WriteFile(p, []byte("name = \"p\"\n"+body), 0o644)
		return p
	}
	for _, c := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"no bpf", []string{"LOWLAT_TEST_NO_BPF=1"}, fix(), 1, "this kernel has no BPF"},
		{"cgroup v1 only", []string{"LOWLAT_TEST_MOUNTINFO=" + noCgroup2}, fix(), 1, "cgroup v2 is not mounted"},
		{"not root", nil, append([]string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin}, fix()...), 1, "needs root"},
		{"no port", nil, []string{"sockets", "--fix", "nodelay", "--yes"}, 2, "--fix needs --port"},
		{"unknown option", nil, []string{"sockets", "--fix", "cork", "--port", "7000"}, 2, `unknown socket option "cork"`},
		{"bad value", nil, []string{"sockets", "--fix", "initcwnd=0", "--port", "7000"}, 2, "initcwnd: want a positive integer"},
		{"value missing", nil, []string{"sockets", "--fix", "initcwnd", "--port", "7000"}, 2, "give a value"},
		{"fix flag without --fix", nil, []string{"sockets", "--yes"}, 2, "go with --fix"},
		{"unknown service", nil, []string{"sockets", "--fix", "nodelay", "--service", "nosuch.service", "--yes"}, 1, "unknown service nosuch.service"},
		{"no such cgroup", nil, []string{"sockets", "--fix", "nodelay", "--cgroup", "/no/such/cgroup", "--yes"}, 1, "cgroup /no/such/cgroup does not exist"},
		{"root cgroup", nil, []string{"sockets", "--fix", "nodelay", "--cgroup", "/", "--yes"}, 2, "the root cgroup holds every process"},
		{"two selectors", nil, []string{"sockets", "--fix", "nodelay", "--port", "7000", "--service", "x.service", "--yes"}, 2, "one of them"},
		{"sockets without match", nil, []string{"plan", "--profile", profileFile("[[sockets]]\nnodelay = true\n")}, 2, "needs match"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r result
			if c.args[0] == "setpriv" {
				cmd := w.ns.Command(c.args[0], c.args[1:]...)
				cmd.Env = append(cmd.Env, "LOWLAT_JOURNAL="+w.journal)
				var out, errb strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &errb
				err := cmd.Run()
				r = result{stdout: out.String(), stderr: errb.String()}
				if ee, ok := err.(*exec.ExitError); ok {
					r.code = ee.ExitCode()
				}
			} else {
				r = w.run(c.env, c.args...)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != c.code || len(lines) != 1 || !strings.Contains(r.stderr, c.want) {
				t.Errorf("exit %d, want %d; stderr (want one line with %q):\n%s", r.code, c.code, c.want, r.stderr)
			}
			if ids := w.attached(); len(ids) != 0 {
				t.Errorf("programs attached: %v", ids)
			}
			if st := w.run(nil, "status"); !strings.Contains(st.stdout, "Nothing applied") {
				t.Errorf("status: %s", st.stdout)
			}
		})
	}

	// A port nothing listens on is allowed: the plan says the entry waits
	// for a future listener.
	const idle = 7999
	dry := w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(idle), "--dry-run", "--json")
	if !strings.Contains(dry.stdout, fmt.Sprintf("nothing listens on port %d now", idle)) {
		t.Errorf("--dry-run on an idle port does not say it waits for a listener:\n%s", dry.stdout)
	}
	w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(idle), "--yes")
	progs := w.attached()
	if len(progs) != 1 {
		t.Errorf("--fix on an idle port: %d programs attached, want 1", len(progs))
	}
	w.mustRun("rollback")
	w.nothingLeft("rollback of the idle port", progs)
}

// TestIntegrationSocketsFixPersist: --persist re-attaches the program at
// boot. A reboot is pretended: the pins are gone (bpffs is in memory) and
// the boot id differs; 'lowlat boot' puts the entry back and new
// connections get the option again.
func TestIntegrationSocketsFixPersist(t *testing.T) {
	w := newSockopsWorld(t)
	w.mustRun("sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes", "--persist")
	w.removePins()
	if p50 := testnet.Quantile(testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 10), 0.5); p50 < 30*time.Millisecond {
		t.Fatalf("with the pins gone: p50 %v, want the stall", p50)
	}
	r := w.run([]string{"LOWLAT_TEST_BOOT_ID=another-boot"}, "boot")
	if r.code != 0 || !strings.Contains(r.stdout, "sockopt/port:7000/nodelay") {
		t.Fatalf("boot: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	progs := w.attached()
	if len(progs) != 1 {
		t.Fatalf("after boot: %d programs linked from %s, want 1", len(progs), w.pins)
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 20), 0.5); p50 >= testnet.Unstalled {
		t.Errorf("new connection after boot: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if st := w.run([]string{"LOWLAT_TEST_BOOT_ID=another-boot"}, "status"); st.code != 0 {
		t.Errorf("status after boot: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	w.mustRun("rollback")
	w.nothingLeft("rollback after boot", progs)
}

// testCgroup makes a cgroup v2 directory below the hierarchy's root for the
// test and returns its path below the root; it is removed when the test
// ends, once the processes in it are gone.
func testCgroup(t *testing.T) string {
	t.Helper()
	root := cgroupRootOf(t)
	if root == "" {
		t.Fatal("cgroup v2 is not mounted: sock_ops has nothing to attach to")
	}
	// Named like a unit, so a service: selector finds it too.
	rel := fmt.Sprintf("/lowlat-test-%d.service", time.Now().UnixNano())
	if err := os.Mkdir(root+rel, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Registered after the clients' cleanups, so it runs once they are
		// killed; the kernel may take a moment to empty the cgroup.
		waitFor(5*time.Second, func() bool { return os.Remove(root+rel) == nil })
	})
	return rel
}

// bpftoolCgroup lists the sock_ops programs attached at cgroup dir itself.
func bpftoolCgroup(t *testing.T, dir string) []int {
	out, err := exec.Command("bpftool", "-j", "cgroup", "show", dir).Output()
	if err != nil {
		t.Fatalf("bpftool cgroup show %s: %v", dir, err)
	}
	var progs []struct {
		ID         int    `json:"id"`
		AttachType string `json:"attach_type"`
	}
	json.Unmarshal(out, &progs)
	var ids []int
	for _, p := range progs {
		if p.AttachType == "cgroup_sock_ops" || p.AttachType == "sock_ops" {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// TestIntegrationSocketsFixCgroup: a client that sends each request in two
// writes without TCP_NODELAY stalls on the server's delayed ACK; 'sockets
// --fix nodelay --cgroup PATH' ends it for the connections the cgroup's
// processes open, the one already open and a new one, with the program
// attached at that cgroup, not at the root. The same client outside the
// cgroup keeps its stall; rollback brings it back.
func TestIntegrationSocketsFixCgroup(t *testing.T) {
	w := newSockopsWorld(t)
	const port = 7100
	testnet.EchoServer(t, w.ns, port)
	cg := testCgroup(t)
	in := testnet.NagleClient(t, w.ns, port, "/sys/fs/cgroup"+cg)
	out := testnet.NagleClient(t, w.ns, port, "")
	before := in.Measure("old", 20)
	t.Logf("before: %s", quantiles(before))
	if p50 := testnet.Quantile(before, 0.5); p50 < 30*time.Millisecond {
		t.Fatalf("before: p50 %v, want the Nagle/delayed-ACK stall (>= 30 ms)", p50)
	}
	r := w.mustRun("sockets", "--fix", "nodelay", "--cgroup", cg, "--yes", "--json")
	var res applyJSON
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || len(res.Changed) != 2 {
		t.Fatalf("sockets --fix --cgroup: %v\n%s", err, r.stdout)
	}
	progs := w.attached()
	if len(progs) != 1 {
		t.Fatalf("bpftool shows %d programs linked from %s, want 1", len(progs), w.pins)
	}
	root := strings.TrimSuffix(cgroupRootOf(t), "/")
	if at := bpftoolCgroup(t, root+cg); len(at) != 1 || at[0] != progs[0] {
		t.Errorf("programs at %s: %v, want [%d]", root+cg, at, progs[0])
	}
	if ids := bpftoolCgroup(t, root); slices.Contains(ids, progs[0]) {
		t.Errorf("the cgroup selector's program is attached at the root %s", root)
	}
	existing, fresh := in.Measure("old", 30), in.Measure("new", 30)
	t.Logf("after, already-open connection: %s; new: %s", quantiles(existing), quantiles(fresh))
	if p50 := testnet.Quantile(existing, 0.5); p50 >= testnet.Unstalled {
		t.Errorf("already-open connection after --fix: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if p50 := testnet.Quantile(fresh, 0.5); p50 >= testnet.Unstalled {
		t.Errorf("new connection after --fix: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if p50 := testnet.Quantile(out.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("a client outside the cgroup: p50 %v, want the stall", p50)
	}
	// lowlat sockets marks the cgroup's connections, and only those.
	var rep struct {
		Sockets []struct {
			PID      int      `json:"pid"`
			Local    string   `json:"local"`
			Enforced []string `json:"enforced_by_lowlat"`
			Options  *struct {
				NoDelay bool `json:"nodelay"`
			} `json:"options"`
		} `json:"sockets"`
	}
	json.Unmarshal([]byte(w.mustRun("sockets", "--port", fmt.Sprint(port), "--state", "established", "--json").stdout), &rep)
	var marked int
	for _, s := range rep.Sockets {
		switch s.PID {
		case in.PID():
			if s.Options == nil || !s.Options.NoDelay || strings.Join(s.Enforced, ",") != "nodelay" {
				t.Errorf("the cgroup's connection %s: %+v enforced %v", s.Local, s.Options, s.Enforced)
			}
			marked++
		case out.PID():
			if len(s.Enforced) != 0 {
				t.Errorf("the outside client's connection %s is marked %v", s.Local, s.Enforced)
			}
		}
	}
	if marked != 1 {
		t.Errorf("%d of the cgroup's connections listed, want its open one", marked)
	}
	w.mustRun("rollback")
	w.nothingLeft("after rollback", progs)
	if p50 := testnet.Quantile(in.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
	}
	if p50 := testnet.Quantile(in.Measure("old", 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("already-open connection after rollback: p50 %v, want the stall back", p50)
	}

	// The same cgroup named as a service: found by its unit name.
	service := strings.TrimPrefix(cg, "/")
	w.mustRun("sockets", "--fix", "nodelay", "--service", service, "--yes")
	progs = w.attached()
	if at := bpftoolCgroup(t, root+cg); len(progs) != 1 || len(at) != 1 || at[0] != progs[0] {
		t.Errorf("--service %s: linked %v, attached at %s: %v", service, progs, root+cg, at)
	}
	if p50 := testnet.Quantile(in.Measure("new", 20), 0.5); p50 >= testnet.Unstalled {
		t.Errorf("--service %s: new connection p50 %v, want < %v (no stall)", service, p50, testnet.Unstalled)
	}
	w.mustRun("rollback")
	w.nothingLeft("after the service's rollback", progs)
}

// cgroupRootOf is where this process sees the cgroup v2 root.
func cgroupRootOf(t *testing.T) string {
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	root := ""
	for _, l := range strings.Split(string(mi), "\n") {
		pre, post, ok := strings.Cut(l, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			root = f[4]
		}
	}
	return root
}
