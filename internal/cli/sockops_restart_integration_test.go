//go:build linux

package cli_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// recreateCgroup does to the cgroup at dir what systemctl restart does to
// a service's: its processes leave it, it is removed, and a new one is
// made at the same path, without the old one's programs. The processes
// (the test's client) are put back in the new one, as a restarted
// service's new processes are.
func recreateCgroup(t *testing.T, root, dir string, pids ...int) {
	t.Helper()
	move := func(to string) {
		for _, pid := range pids {
			if err := os.WriteFile(filepath.Join(to, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
				t.Fatalf("move %d to %s: %v", pid, to, err)
			}
		}
	}
	move(root)
	if err := os.Remove(dir); err != nil {
		t.Fatalf("remove cgroup %s: %v", dir, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	move(dir)
}

// pinnedProgs lists the programs pinned (the legacy attachment's pins)
// or linked through pins under this namespace's pin directory.
func (w *sockopsWorld) pinnedProgs() []int {
	w.t.Helper()
	out, err := exec.Command("bpftool", "-j", "-f", "prog", "show").Output()
	if err != nil {
		w.t.Fatalf("bpftool prog show: %v", err)
	}
	var progs []struct {
		ID     int      `json:"id"`
		Pinned []string `json:"pinned"`
	}
	if err := json.Unmarshal(out, &progs); err != nil {
		w.t.Fatalf("bpftool prog show: %v", err)
	}
	ids := w.attached()
	for _, p := range progs {
		for _, f := range p.Pinned {
			if strings.HasPrefix(f, w.pins+"/") && !slices.Contains(ids, p.ID) {
				ids = append(ids, p.ID)
			}
		}
	}
	return ids
}

// TestIntegrationSocketsFixServiceRestart: a service's cgroup re-created
// (systemctl restart) loses the sock_ops program the kernel had attached
// to the old one, while the pins stay. The fix is gone on a new
// connection; status says so (exit 3, in words); lowlat sockets no longer
// claims the option is lowlat's; reassert attaches the pinned program to
// the new cgroup, and the fix is back. With bpf_link, and with the legacy
// attachment of kernels before 5.7.
func TestIntegrationSocketsFixServiceRestart(t *testing.T) {
	for _, c := range []struct {
		name string
		env  []string
	}{
		{"bpf_link", nil},
		{"legacy attachment", []string{"LOWLAT_TEST_NO_CGROUP_LINK=1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newSockopsWorld(t)
			run := func(args ...string) result { return w.run(c.env, args...) }
			const port = 7100
			testnet.EchoServer(t, w.ns, port)
			cg := testCgroup(t)
			service := strings.TrimPrefix(cg, "/")
			root := strings.TrimSuffix(cgroupRootOf(t), "/")
			client := testnet.NagleClient(t, w.ns, port, "/sys/fs/cgroup"+cg)
			knobID := "sockopt/service:" + service + "/nodelay"

			if r := run("sockets", "--fix", "nodelay", "--service", service, "--yes"); r.code != 0 {
				t.Fatalf("sockets --fix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			progs := bpftoolCgroup(t, root+cg)
			if len(progs) != 1 {
				t.Fatalf("programs at %s: %v, want lowlat's", root+cg, progs)
			}
			if p50 := testnet.Quantile(client.Measure("new", 20), 0.5); p50 >= testnet.Unstalled {
				t.Fatalf("new connection after --fix: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
			}

			recreateCgroup(t, root, root+cg, client.PID())
			if _, err := os.Stat(w.pins); err != nil {
				t.Fatalf("the pins went with the cgroup (%v): this test is about the pins that stay", err)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 0 {
				t.Fatalf("the re-created cgroup has programs %v", at)
			}
			lost := client.Measure("new", 10)
			t.Logf("after the restart, new connection: %s", quantiles(lost))
			if p50 := testnet.Quantile(lost, 0.5); p50 < 30*time.Millisecond {
				t.Fatalf("after the restart: p50 %v, want the stall (the program went with the old cgroup)", p50)
			}
			st := run("status")
			if st.code != 3 || !strings.Contains(st.stdout, knobID) || !strings.Contains(st.stdout, "<detached>") || !strings.Contains(st.stdout, "no longer attached") {
				t.Errorf("status after the restart: exit %d, want 3 naming %s as <detached>, in words\n%s%s", st.code, knobID, st.stdout, st.stderr)
			}
			var rep struct {
				Sockets []struct {
					PID      int      `json:"pid"`
					Enforced []string `json:"enforced_by_lowlat"`
				} `json:"sockets"`
			}
			json.Unmarshal([]byte(w.mustRun("sockets", "--port", fmt.Sprint(port), "--state", "established", "--json").stdout), &rep)
			for _, s := range rep.Sockets {
				if s.PID == client.PID() && len(s.Enforced) != 0 {
					t.Errorf("lowlat sockets marks the client's connection %v while the program is detached", s.Enforced)
				}
			}

			r := run("reassert")
			if r.code != 0 || !strings.Contains(r.stdout, "put back") || !strings.Contains(r.stdout, knobID) {
				t.Fatalf("reassert: exit %d, want 0 putting back %s\n%s%s", r.code, knobID, r.stdout, r.stderr)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 1 || at[0] != progs[0] {
				t.Errorf("programs at the new %s after reassert: %v, want the pinned one %d", root+cg, at, progs[0])
			}
			back := client.Measure("new", 20)
			t.Logf("after reassert, new connection: %s", quantiles(back))
			if p50 := testnet.Quantile(back, 0.5); p50 >= testnet.Unstalled {
				t.Errorf("new connection after reassert: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
			}
			if st := run("status"); st.code != 0 {
				t.Errorf("status after reassert: exit %d\n%s%s", st.code, st.stdout, st.stderr)
			}
			if r := run("reassert"); r.code != 0 || strings.Contains(r.stdout, "put back:") {
				t.Errorf("a second reassert: exit %d\n%s", r.code, r.stdout)
			}

			w.mustRun("rollback")
			if _, err := os.Stat(w.pins); err == nil {
				t.Errorf("pins left after rollback in %s", w.pins)
			}
			if at := bpftoolCgroup(t, root+cg); len(at) != 0 {
				t.Errorf("programs at %s after rollback: %v", root+cg, at)
			}
			if p50 := testnet.Quantile(client.Measure("new", 10), 0.5); p50 < 30*time.Millisecond {
				t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
			}
			// The kernel keeps a removed cgroup, and the programs attached
			// to it, while a socket opened in it lives (the client's first
			// connection, from before the restart): the program is freed
			// once the client is gone.
			syscall.Kill(client.PID(), syscall.SIGKILL)
			w.nothingLeft("after rollback, the client gone", progs)
		})
	}
}

// TestIntegrationSocketsFixLegacy: on a kernel without bpf_link for
// cgroups (before 5.7; made so here by the link probe answering "not
// supported", then a real BPF_PROG_ATTACH), the program lowlat attaches
// at the cgroup root stays attached after lowlat exits, pinned, with no
// link; rollback detaches exactly it, and a lowlat killed right after the
// attach leaves a pin the next rollback finds and detaches.
func TestIntegrationSocketsFixLegacy(t *testing.T) {
	w := newSockopsWorld(t)
	legacy := []string{"LOWLAT_TEST_NO_CGROUP_LINK=1"}
	root := strings.TrimSuffix(cgroupRootOf(t), "/")
	args := []string{"sockets", "--fix", "nodelay", "--port", fmt.Sprint(fixPort), "--yes"}
	if r := w.run(legacy, args...); r.code != 0 {
		t.Fatalf("sockets --fix: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if links := w.attached(); len(links) != 0 {
		t.Fatalf("links pinned %v: want the legacy attachment (a pinned program, no link)", links)
	}
	progs := w.pinnedProgs()
	if len(progs) != 1 || !slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Fatalf("pinned programs %v, attached at %s: %v; want one, attached there", progs, root, bpftoolCgroup(t, root))
	}
	fresh := testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 20)
	t.Logf("legacy attachment, lowlat gone, new connection: %s", quantiles(fresh))
	if p50 := testnet.Quantile(fresh, 0.5); p50 >= testnet.Unstalled {
		t.Errorf("new connection after lowlat exited: p50 %v, want < %v (no stall)", p50, testnet.Unstalled)
	}
	if st := w.run(legacy, "status"); st.code != 0 {
		t.Errorf("status: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	w.mustRun("rollback")
	w.nothingLeft("after rollback", progs)
	if slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Errorf("program %d is still attached at %s after rollback", progs[0], root)
	}
	if p50 := testnet.Quantile(testnet.RoundTrips(t, testnet.Dial(t, w.ns, fixPort), 10), 0.5); p50 < 30*time.Millisecond {
		t.Errorf("new connection after rollback: p50 %v, want the stall back", p50)
	}

	r := w.run(append(legacy, "LOWLAT_TEST_CRASH=write:1"), args...)
	if !r.killed {
		t.Fatalf("not killed (exit %d): %s%s", r.code, r.stdout, r.stderr)
	}
	progs = w.pinnedProgs()
	if len(progs) != 1 || !slices.Contains(bpftoolCgroup(t, root), progs[0]) {
		t.Fatalf("killed after the attach: pinned %v, attached at %s: %v; want one, attached", progs, root, bpftoolCgroup(t, root))
	}
	w.mustRun("rollback")
	w.nothingLeft("killed, then rolled back", progs)
}
