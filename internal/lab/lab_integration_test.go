//go:build linux

package lab

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/sockops"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
)

// The integration tests run real scenarios: as root, in namespaces of their
// own (lowlat-lab-t<random>-*), with traffic only inside them. On this
// host's kernel (no netem, fq_codel, cake) they run nagle-small-messages and
// bufferbloat-uplink's variant without netem; in the stock-kernel VM
// (go run ./test/vmtest -pkg ./internal/lab) the full bufferbloat-uplink,
// game-egress and first-frame, where a missing feature is a failure.

func TestMain(m *testing.M) { testnet.Main(m) }

// lowlatBin is the lowlat binary the tests drive (see testnet.Lowlat).
var lowlatBin = testnet.Lowlat

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the lab creates network namespaces: needs root")
	}
}

func hostOnly(t *testing.T) {
	t.Helper()
	testnet.HostOnly(t, "a host-kernel test; the VM run covers the scenarios that need netem and fq_codel")
}

func testID(t *testing.T) string {
	b := make([]byte, 3)
	rand.Read(b)
	return "t" + hex.EncodeToString(b)
}

// hostLinks lists the interfaces of the test's own (the host's) namespace.
func hostLinks(t *testing.T) []string {
	t.Helper()
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range ifs {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}

// leftovers lists what a run with id left: namespaces, its state file,
// temporary directories and processes inside its namespaces.
func leftovers(id string, inodes []uint64) []string {
	var out []string
	names, _ := filepath.Glob(filepath.Join(NetnsDir, NSPrefix+id+"-*"))
	out = append(out, names...)
	if _, err := os.Stat(filepath.Join(StateDir, id+".json")); err == nil {
		out = append(out, filepath.Join(StateDir, id+".json"))
	}
	dirs, _ := filepath.Glob(filepath.Join(TempBase, "lowlat-lab-"+id+"-*"))
	out = append(out, dirs...)
	for _, ino := range inodes {
		for _, pid := range procsInNetns(ino) {
			out = append(out, fmt.Sprintf("process %d in namespace inode %d", pid, ino))
		}
	}
	return out
}

func checkClean(t *testing.T, id string, links []string, inodes ...uint64) {
	t.Helper()
	if l := leftovers(id, inodes); len(l) > 0 {
		t.Errorf("left behind: %v", l)
	}
	if got := hostLinks(t); !slices.Equal(got, links) {
		t.Errorf("host interfaces changed: %v, were %v", got, links)
	}
}

// needFeature tries a qdisc kind in a scratch namespace: a kernel without it
// skips the test here and fails it where LOWLAT_REQUIRE_QDISCS names it (the
// VM).
func needFeature(t *testing.T, kinds ...string) {
	t.Helper()
	ns := testnet.New(t)
	ns.Veth(t, "ft0", "ft1", nil, 1)
	for _, k := range kinds {
		err := ns.Do(func() error {
			l, err := netlink.LinkByName("ft0")
			if err != nil {
				return err
			}
			return qdisc.Probe(l.Attrs().Index, k)
		})
		testnet.NeedFeature(t, k, err)
	}
}

func hasQdisc(t *testing.T, kind string) bool {
	t.Helper()
	ns := testnet.New(t)
	ns.Veth(t, "fq0", "fq1", nil, 1)
	return ns.Do(func() error {
		l, err := netlink.LinkByName("fq0")
		if err != nil {
			return err
		}
		return qdisc.Probe(l.Attrs().Index, kind)
	}) == nil
}

// runScenario runs a scenario and checks it: every variant ran, every
// verdict agrees with the figure it judges, and every expectation held; a
// miss fails the test, whatever the reason. A timing-sensitive scenario gets
// one retry, and the test says so in its output with the misses that caused
// it: under qemu's software CPU, a burst of other work on a shared machine
// can starve the guest's senders and timers for tens of milliseconds.
func runScenario(t *testing.T, name string, opts Options, retry bool) *Result {
	t.Helper()
	allowCongestion(t)
	links := hostLinks(t)
	if opts.Lowlat == "" {
		// The application of its own (App.OwnProcess) is lowlat, not this
		// test binary.
		bin, err := lowlatBin()
		if err != nil {
			t.Fatal(err)
		}
		opts.Lowlat = bin
	}
	return retryOnce(t, name, retry, func(attempt int) (*Result, []string) {
		opts.ID = testID(t)
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		var steps []string
		opts.Progress = func(s Step) { steps = append(steps, s.Variant+": "+s.Phase) }
		r, err := Run(ctx, name, opts)
		cancel()
		checkClean(t, opts.ID, links)
		if err != nil {
			t.Fatalf("lab run %s: %v", name, err)
		}
		if len(steps) == 0 {
			t.Error("no progress reported")
		}
		var b bytes.Buffer
		WriteText(&b, r, false)
		t.Logf("attempt %d:\n%s", attempt, b.String())
		return r, checkResult(t, r)
	})
}

// checkResult checks verdict consistency and returns the missed
// expectations.
func checkResult(t *testing.T, r *Result) []string {
	t.Helper()
	var missed []string
	for _, v := range r.Variants {
		if v.Status != StatusRan {
			missed = append(missed, v.Name+" did not run: "+v.Why)
			continue
		}
		if v.Timeline == nil || len(v.Timeline.Points) == 0 {
			t.Errorf("%s: no RTT timeline", v.Name)
		}
		if v.CDF == "" || len(histCDF(v.Metrics, v.CDF)) < 2 {
			t.Errorf("%s: no CDF from %q", v.Name, v.CDF)
		}
		for _, e := range v.Expectations {
			if e.Observed == nil {
				missed = append(missed, fmt.Sprintf("%s: %s not measured", v.Name, e.Metric))
				continue
			}
			x := Expect{Op: e.Op}
			switch val := e.Value.(type) {
			case float64:
				x.Value = val
			case []float64:
				x.Value, x.Max = val[0], val[1]
			}
			if x.holds(*e.Observed) != e.Pass {
				t.Errorf("%s: verdict %v for %s = %g against %v", v.Name, e.Pass, e.Metric, *e.Observed, e.Value)
			}
			if !e.Pass {
				missed = append(missed, fmt.Sprintf("%s/%s/%s = %g, want %s %v (%s)", r.Scenario, v.Name, e.Metric, *e.Observed, e.Op, e.Value, e.Desc))
			}
		}
	}
	return missed
}

// allowCongestion lets the lab's namespaces choose every congestion control
// the kernel has, in the VM only: the guest is a throwaway machine standing
// in for a host that would set them in its own namespace (lab vm does the
// same). On a real host the lab never changes this host-wide list.
func allowCongestion(t *testing.T) {
	t.Helper()
	if !testnet.InVM() {
		return
	}
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	old, err := os.ReadFile(allowed)
	if err != nil {
		t.Fatal(err)
	}
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(allowed, avail, 0); err != nil {
		t.Fatalf("allow %s in namespaces: %v", strings.TrimSpace(string(avail)), err)
	}
	t.Cleanup(func() { os.WriteFile(allowed, old, 0) })
}

func TestIntegrationNagleSmallMessages(t *testing.T) {
	hostOnly(t)
	needRoot(t)
	r := runScenario(t, "nagle-small-messages", Options{}, true)
	if len(r.Variants) != 5 {
		t.Fatalf("%d variants ran, want 5", len(r.Variants))
	}
	// The passive figure beside the active one: the client's own RTT
	// samples carry the server's delayed ACK (runbook 001's request P99)
	// until TCP_NODELAY removes it.
	for _, c := range []struct {
		v        int
		min, max float64
	}{{0, 35, 1e9}, {2, 0, 5}} {
		v := r.Variants[c.v]
		d, _ := v.Metrics["derived"].(map[string]float64)
		got, ok := d["passive_rtt_p99_ms"]
		if !ok || got < c.min || got > c.max {
			t.Errorf("%s: passive RTT p99 %v ms (measured: %v), want %v..%v ms", v.Name, got, ok, c.min, c.max)
		}
	}
	// realtime-tcp was applied by the engine and rolled back: it changed
	// sysctls in the client namespace.
	if v := r.Variants[1]; len(v.Changes) == 0 {
		t.Errorf("%s: the engine changed nothing", v.Name)
	}
	// sockops-nodelay: the program went to the application's cgroup alone,
	// and the rollback and the run's cleanup took it and the cgroup away.
	v := r.Variants[3]
	if v.Name != "sockops-nodelay" || !slices.ContainsFunc(v.Changes, func(c KnobChange) bool {
		return strings.HasPrefix(c.Knob, "sockopt/cgroup:/"+NSPrefix) && strings.HasSuffix(c.Knob, "/nodelay")
	}) {
		t.Errorf("%s: changes %+v, want sockopt/cgroup:/%s…/nodelay", v.Name, v.Changes, NSPrefix)
	}
	noLabSockops(t)
}

// path-hops: lowlat probe path against mtr on a four-router chain, on this
// host's kernel (a tbf queue) and in the stock-kernel VM (netem).
func TestIntegrationPathHops(t *testing.T) {
	needRoot(t)
	r := runScenario(t, "path-hops", Options{}, true)
	if len(r.Variants) != 2 {
		t.Fatalf("%d variants ran, want 2", len(r.Variants))
	}
	netem := !slices.Contains(r.Kernel.Missing, "netem")
	if testnet.Required("netem") && !netem {
		t.Fatal("kernel feature netem is required here but missing")
	}
	for _, v := range r.Variants {
		key := "path_udp"
		if v.Name == "tcp" {
			key = "path_tcp"
		}
		res, ok := v.Metrics[key].(*pathprobe.Result)
		if !ok {
			t.Fatalf("%s: no %s result", v.Name, key)
		}
		for i, h := range res.Hops {
			if h.Address != ChainHops[i] {
				t.Errorf("%s: hop %d answered from %s, want %s", v.Name, i+1, h.Address, ChainHops[i])
			}
		}
		if v.Gate != nil {
			t.Errorf("%s: a variant that changes nothing got a gate verdict", v.Name)
		}
	}
	d := r.Variants[0].Metrics["derived"].(map[string]float64)
	t.Logf("hop 3 adds %.1f ms, the queue's own %.1f ms; lowlat %.2f s, mtr %.2f s for the same probes; netem %v", d["hop3_added_ms"], d["queue_ms"], d["lowlat_seconds"], d["mtr_seconds"], netem)
}

// noLabSockops fails when a lab run left a sock_ops pin or a client cgroup.
func noLabSockops(t *testing.T) {
	t.Helper()
	pins, _ := filepath.Glob("/sys/fs/bpf/lowlat/sockops/*/*")
	if len(pins) > 0 {
		t.Errorf("sock_ops pins left: %v", pins)
	}
	root, err := sockops.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(root, NSPrefix+"*")); len(left) > 0 {
		t.Errorf("client cgroups left: %v", left)
	}
}

func TestIntegrationBufferbloatUplink(t *testing.T) {
	needRoot(t)
	if !hasQdisc(t, "netem") {
		if testnet.Required("netem") {
			t.Fatal("kernel feature netem is required here but missing")
		}
		// This kernel: the variant without netem (tbf as the provider's
		// queue, no base delay). BBR is left out: without a base delay its
		// bandwidth samples come from back-to-back packets and the figure
		// says nothing about BBR (docs/lab.md).
		r := runScenario(t, "bufferbloat-uplink", Options{Variants: []string{"runbook-tbf", "capped-uplink"}}, true)
		if !slices.Contains(r.Kernel.Missing, "netem") {
			t.Errorf("kernel.missing %v does not name netem", r.Kernel.Missing)
		}
		if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "no netem") && strings.Contains(n, "no delay") }) {
			t.Errorf("no note says the provider adds no delay: %v", r.Notes)
		}
		return
	}
	needFeature(t, "cake", "fq_codel", "netem")
	r := runScenario(t, "bufferbloat-uplink", Options{}, true)
	// The mechanisms: both BBR variants ran BBR, one with the runbook's
	// single upload flow, the other with 4.
	for _, v := range r.Variants {
		want := map[string]int{"bbr-1-flow": 1, "bbr-4-flows": 4}[v.Name]
		if want == 0 {
			continue
		}
		if !slices.ContainsFunc(v.Changes, func(c KnobChange) bool {
			return c.Knob == "sysctl/net.ipv4.tcp_congestion_control" && c.After == "bbr"
		}) {
			t.Errorf("%s: the engine did not set bbr: %v", v.Name, v.Changes)
		}
		if l, ok := v.Metrics["load"].(*probe.LoadResult); !ok || l.Config.Flows != want {
			t.Errorf("%s: load %+v, want %d flows", v.Name, v.Metrics["load"], want)
		}
	}
}

func TestIntegrationGameEgress(t *testing.T) {
	needRoot(t)
	if !hasQdisc(t, "fq_codel") {
		if testnet.Required("fq_codel") {
			t.Fatal("kernel feature fq_codel is required here but missing")
		}
		// This kernel: the baseline only (the FIFO's queueing; without
		// netem there is no path delay). game-udp needs fq_codel and runs
		// in the VM.
		r := runScenario(t, "game-egress", Options{Variants: []string{"baseline"}}, true)
		if len(r.Variants) != 1 {
			t.Errorf("%d variants ran, want the baseline alone", len(r.Variants))
		}
		return
	}
	needFeature(t, "fq_codel", "netem")
	runScenario(t, "game-egress", Options{}, true)
}

func TestIntegrationFirstFrame(t *testing.T) {
	needRoot(t)
	needFeature(t, "netem", "fq")
	r := runScenario(t, "first-frame", Options{}, true)
	// The passive figure, the server's SYN-to-ACK time of each
	// connection's first 1 MB, reads the client's own last-byte figure
	// within half a round trip, in every variant.
	for _, v := range r.Variants {
		d, _ := v.Metrics["derived"].(map[string]float64)
		passive, ok := d["passive_first_1m_ms"]
		if !ok {
			t.Errorf("%s: no passive first-1MB figure (notes: %v)", v.Name, v.Notes)
			continue
		}
		if diff := passive - d["last_byte_1m_ms"]; diff > d["rtt_ms"]/2 || diff < -d["rtt_ms"]/2 {
			t.Errorf("%s: passive first 1 MB %.1f ms, the client's %.1f ms: more than half the RTT (%.1f ms) apart", v.Name, passive, d["last_byte_1m_ms"], d["rtt_ms"])
		}
	}
	// The mechanisms, not just the figures: initcwnd was set per route by
	// the engine, and repeat connections carried their request in the SYN.
	for _, v := range r.Variants {
		if v.Name == "initcwnd-40" && !slices.ContainsFunc(v.Changes, func(c KnobChange) bool {
			return strings.HasPrefix(c.Knob, "route/") && strings.HasSuffix(c.Knob, "/initcwnd") && c.After == "40"
		}) {
			t.Errorf("initcwnd-40 changed %v", v.Changes)
		}
		// sock_ops: the server's connections got the window, no route did.
		if v.Name == "sockops-initcwnd-40" && (len(v.Changes) != 1 || v.Changes[0].Knob != fmt.Sprintf("sockopt/port:%d/initcwnd", ReflectorPort) || v.Changes[0].After != "40") {
			t.Errorf("sockops-initcwnd-40 changed %v", v.Changes)
		}
	}
}

// labCmd runs the lowlat binary.
func labCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(bin, args...)
}

// waitLine reads r until a line contains want, or fails after d.
func waitLine(t *testing.T, lines <-chan string, want string, d time.Duration) {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("output ended before %q", want)
			}
			if strings.Contains(l, want) {
				return
			}
		case <-deadline:
			t.Fatalf("no %q within %s", want, d)
		}
	}
}

func startLab(t *testing.T, args ...string) (*exec.Cmd, <-chan string, *bytes.Buffer) {
	t.Helper()
	cmd := labCmd(t, args...)
	pr, pw, _ := os.Pipe()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, lines, &out
}

func nsInodes(t *testing.T, id string) []uint64 {
	t.Helper()
	var out []uint64
	for _, r := range roles {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(NetnsDir, nsName(id, r)), &st); err != nil {
			t.Fatalf("namespace %s: %v", nsName(id, r), err)
		}
		out = append(out, st.Ino)
	}
	return out
}

// SIGKILL in the middle of a measurement leaves the namespaces behind (that
// is the point of the state file); lowlat lab clean removes them, the state
// and the temporary directory, and nothing of it is left on the host.
func TestIntegrationKilledRunThenClean(t *testing.T) {
	hostOnly(t)
	needRoot(t)
	links := hostLinks(t)
	id := testID(t)
	cmd, lines, _ := startLab(t, "lab", "run", "bufferbloat-uplink", "--id", id, "--variant", "capped-uplink")
	waitLine(t, lines, "baseline: measure", time.Minute)
	time.Sleep(2 * time.Second) // flows running, sockets open in the namespaces
	inodes := nsInodes(t, id)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	if l := leftovers(id, nil); len(l) < 4 {
		t.Fatalf("after SIGKILL only %v remain: the test no longer kills the run mid-way", l)
	}
	out, err := labCmd(t, "lab", "clean").CombinedOutput()
	if err != nil {
		t.Fatalf("lab clean: %v\n%s", err, out)
	}
	for _, r := range roles {
		if !strings.Contains(string(out), "removed namespace "+nsName(id, r)) {
			t.Errorf("clean did not report %s:\n%s", nsName(id, r), out)
		}
	}
	checkClean(t, id, links, inodes...)
	out, _ = labCmd(t, "lab", "clean").CombinedOutput()
	if strings.Contains(string(out), id) {
		t.Errorf("a second clean still finds the run:\n%s", out)
	}
}

// SIGKILL while lowlat's sock_ops program enforces TCP_NODELAY on the
// client application's cgroup: the program, its pins and the cgroup outlive
// the run, keyed by its namespace; lowlat lab clean removes them with it.
func TestIntegrationKilledSockopsRunThenClean(t *testing.T) {
	hostOnly(t)
	needRoot(t)
	links := hostLinks(t)
	id := testID(t)
	cmd, lines, _ := startLab(t, "lab", "run", "nagle-small-messages", "--id", id, "--variant", "sockops-nodelay")
	waitLine(t, lines, "sockops-nodelay: measure", time.Minute)
	time.Sleep(time.Second) // the application's connection open
	inodes := nsInodes(t, id)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	root, err := sockops.Cgroup2Root()
	if err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(root, nsName(id, "client"))
	pins, _ := filepath.Glob("/sys/fs/bpf/lowlat/sockops/*/*")
	if _, err := os.Stat(cg); err != nil || len(pins) == 0 {
		t.Fatalf("after SIGKILL: cgroup %s (%v), pins %v: the test no longer kills the run while the program is attached", cg, err, pins)
	}
	out, err := labCmd(t, "lab", "clean").CombinedOutput()
	if err != nil {
		t.Fatalf("lab clean: %v\n%s", err, out)
	}
	for _, want := range []string{"removed sock_ops entry " + nsName(id, "client") + ": cgroup:/" + nsName(id, "client"), "removed cgroup " + cg} {
		if !strings.Contains(string(out), want) {
			t.Errorf("clean did not report %q:\n%s", want, out)
		}
	}
	noLabSockops(t)
	checkClean(t, id, links, inodes...)
}

// Ctrl-C: the run stops, says so in one line, exits 130 and removes
// everything itself.
func TestIntegrationInterruptedRun(t *testing.T) {
	hostOnly(t)
	needRoot(t)
	links := hostLinks(t)
	id := testID(t)
	cmd, lines, out := startLab(t, "lab", "run", "nagle-small-messages", "--id", id)
	waitLine(t, lines, "measure", time.Minute)
	inodes := nsInodes(t, id)
	var rest []string
	go func() {
		for l := range lines {
			rest = append(rest, l)
		}
	}()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Errorf("exit %v, want status 130", err)
	}
	time.Sleep(100 * time.Millisecond)
	if last := strings.Join(rest, "\n"); !strings.Contains(last, "interrupted") || !strings.Contains(last, "removed") {
		t.Errorf("stderr does not say the run was interrupted and cleaned up:\n%s", last)
	}
	if out.Len() != 0 {
		t.Errorf("an interrupted run printed a result:\n%s", out)
	}
	checkClean(t, id, links, inodes...)
}

func TestIntegrationBadInput(t *testing.T) {
	hostOnly(t)
	needRoot(t)
	links := hostLinks(t)
	run := func(t *testing.T, cmd *exec.Cmd, code int, want string) string {
		t.Helper()
		var stderr, stdout bytes.Buffer
		cmd.Stderr, cmd.Stdout = &stderr, &stdout
		err := cmd.Run()
		got := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			got = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		msg := strings.TrimSpace(stderr.String())
		if got != code || !strings.Contains(msg, want) || strings.Count(msg, "\n") > 0 {
			t.Errorf("exit %d, stderr %q; want exit %d and one line containing %q", got, msg, code, want)
		}
		return msg
	}
	t.Run("unknown scenario", func(t *testing.T) {
		run(t, labCmd(t, "lab", "run", "no-such"), 2, `unknown scenario "no-such" (known: bufferbloat-uplink, capped-uplink-varying, cross-border-jitter, first-frame, game-egress, nagle-small-messages, path-hops)`)
		run(t, labCmd(t, "lab", "vm", "no-such"), 2, `unknown scenario "no-such"`)
	})
	t.Run("unknown variant", func(t *testing.T) {
		run(t, labCmd(t, "lab", "run", "first-frame", "--variant", "nope", "--quiet"), 2, `has no variant "nope"`)
	})
	t.Run("not root", func(t *testing.T) {
		cmd := labCmd(t, "lab", "run", "nagle-small-messages", "--id", "notroot")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		run(t, cmd, 1, "must run as root")
		if l := leftovers("notroot", nil); len(l) > 0 {
			t.Errorf("left %v", l)
		}
	})
	t.Run("namespace name taken", func(t *testing.T) {
		id := testID(t)
		taken := nsName(id, "provider")
		if err := exec.Command("ip", "netns", "add", taken).Run(); err != nil {
			t.Fatalf("ip netns add: %v", err)
		}
		t.Cleanup(func() { exec.Command("ip", "netns", "del", taken).Run() })
		run(t, labCmd(t, "lab", "run", "nagle-small-messages", "--id", id, "--quiet"), 1, "already taken")
		if _, err := os.Stat(filepath.Join(NetnsDir, taken)); err != nil {
			t.Errorf("the lab removed a namespace it did not make: %v", err)
		}
		exec.Command("ip", "netns", "del", taken).Run()
		checkClean(t, id, links)
	})
	t.Run("qemu missing", func(t *testing.T) {
		cmd := labCmd(t, "lab", "vm", "nagle-small-messages")
		cmd.Env = append(os.Environ(), "PATH=/nonexistent")
		run(t, cmd, 1, "apt-get install qemu-system-x86")
	})
	t.Run("kernel missing", func(t *testing.T) {
		if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
			t.Skip("needs qemu to get past the qemu check")
		}
		run(t, labCmd(t, "lab", "vm", "nagle-small-messages", "--kernel", "/nonexistent/vmlinuz"), 1, "/nonexistent/vmlinuz")
		// No kernel cached and no apt to fetch one: the message names the package.
		qemu, _ := exec.LookPath("qemu-system-x86_64")
		bin := t.TempDir()
		os.Symlink(qemu, filepath.Join(bin, "qemu-system-x86_64"))
		cmd := labCmd(t, "lab", "vm", "nagle-small-messages")
		cmd.Env = append(os.Environ(), "PATH="+bin, "LOWLAT_VM_CACHE="+t.TempDir())
		run(t, cmd, 1, "linux-image-6.1.0")
	})
}

// TestIntegrationCappedUplinkVarying runs capped-uplink-varying at half
// length (15 s steps; the 5 s windows of its expectations unchanged): the
// provider's cap moves under 4 upload flows, and autorate, run as its own
// process, follows it. It checks what autorate does today, side by side
// with the baseline of the same run; the scenario's own targets (issue 14:
// added p99 ≤ 30 ms, goodput ≥ 85 %, convergence ≤ 5/10 s, rsd ≤ 5 %) are
// not all met yet, and their verdicts are logged, not checked (see
// docs/autorate.md, "Where it stands").
func TestIntegrationCappedUplinkVarying(t *testing.T) {
	needRoot(t)
	allowCongestion(t)
	opts := Options{Scale: 0.5}
	// autorate's policy in a directory of the test's own: the package
	// tests own /etc/lowlat while they run beside this package's.
	t.Setenv(autorate.PolicyDirEnv, t.TempDir())
	// Each of autorate's two ways to read the queue on one of the two
	// shapers it drives: the reflector (with the passive signal beside it,
	// and its outage) on cake in the VM, the passive signal alone on the
	// host's tbf. Both on both kernels took 365 s of a suite that must stay
	// under 25 minutes; 'lab run|vm capped-uplink-varying' runs all four,
	// and the static shaper and the oracle, for the figures.
	if !hasQdisc(t, "cake") {
		if testnet.Required("cake") {
			t.Fatal("kernel feature cake is required here but missing")
		}
		// This kernel: capped-uplink's last-resort shaper, a plain tbf.
		opts.Variants = []string{"autorate-passive"}
	} else {
		needFeature(t, "cake", "netem")
		opts.Variants = []string{"autorate-reflector"}
	}
	links := hostLinks(t)
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	opts.Lowlat, opts.ID = bin, testID(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r, err := Run(ctx, "capped-uplink-varying", opts)
	checkClean(t, opts.ID, links)
	if err != nil {
		t.Fatalf("lab run: %v", err)
	}
	var b bytes.Buffer
	WriteText(&b, r, false)
	t.Logf("\n%s", b.String())
	derived := func(v VariantResult, k string) float64 {
		d, _ := v.Metrics["derived"].(map[string]float64)
		return d[k]
	}
	var base *VariantResult
	for i, v := range r.Variants {
		if v.Status != StatusRan {
			t.Errorf("%s: %s (%s)", v.Name, v.Status, v.Why)
			continue
		}
		if v.Name == "baseline" {
			base = &r.Variants[i]
		}
		for _, e := range v.Expectations {
			if !e.Pass && v.Name != "baseline" {
				t.Logf("target missed (reported, issue 14 blocked; see docs/autorate.md): %s %s %s %v: observed %v", v.Name, e.Metric, e.Op, e.Value, deref(e.Observed))
			}
		}
	}
	if base == nil {
		t.Fatal("no baseline")
	}
	// The baseline reproduces the problem: the provider's 5 s buffer fills.
	if got := derived(*base, "added_p99_ms"); got < 4000 {
		t.Errorf("baseline added p99 %.0f ms: want ≥ 4000 (the provider's buffer full)", got)
	}
	for _, v := range r.Variants {
		if !strings.HasPrefix(v.Name, "autorate") || v.Status != StatusRan {
			continue
		}
		// Autorate ran on the fix's shaper, moved its rate both ways,
		// and was stopped (back to base) before the rollback.
		sum, _ := v.Metrics["autorate"].(map[string]any)
		adj, _ := sum["adjustments"].(map[string]int)
		var down, up int
		for k, n := range adj {
			if strings.HasPrefix(k, "down/") {
				down += n
			}
			if strings.HasPrefix(k, "up/") {
				up += n
			}
		}
		if down == 0 || up == 0 || adj["base/stop"] != 1 {
			t.Errorf("%s: adjustments %v: want cuts, rises and one stop", v.Name, adj)
		}
		if v.Rates == nil || len(v.Rates.Points) < 100 {
			t.Errorf("%s: rate timeline %v: want the shaper's rate every 200 ms", v.Name, v.Rates)
		}
		// Side by side with the baseline of this run: the queue no
		// longer sits in the provider's buffer. An added p99 a tenth of
		// the baseline's is far above what autorate gets today (0.8–3.1 %:
		// 74–237 ms against 7.7–10.6 s in the VM and on the host, full
		// length, runs K and L of docs/autorate.md) and far below a
		// provider's buffer that fills.
		if got, bl := derived(v, "added_p99_ms"), derived(*base, "added_p99_ms"); got > bl/10 {
			t.Errorf("%s: added p99 %.0f ms, baseline %.0f ms: want under a tenth of it", v.Name, got, bl)
		}
		// Reflector killed in the last step: the rate holds on the
		// passive signal and is never left at --min.
		if strings.Contains(v.Name, "reflector") {
			log, _ := sum["log"].([]string)
			if !slices.ContainsFunc(log, func(l string) bool { return strings.Contains(l, "no answer for 2 s; holding") }) {
				t.Errorf("%s: the reflector's outage was not logged", v.Name)
			}
		}
	}
	for _, f := range []string{autorate.PolicyPath(ClientIf), autorate.PIDPath(ClientIf)} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left after the run: %v", f, err)
		}
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
