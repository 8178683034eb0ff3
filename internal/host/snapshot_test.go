package host

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestSnapshotRoundTrip(t *testing.T) {
	src, err := OpenRoot(filepath.Join("testdata", "hosts", "dual-i40e-nvme"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "capture.json")
	var b bytes.Buffer
	if err := Save(&b, f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Source != "capture:"+p {
		t.Errorf("Source = %q", got.Source)
	}
	got.Source = f.Source
	if d := diff(f, got); d != "" {
		t.Errorf("round trip %s", d)
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string // substrings of the one-line error
	}{
		{"newer schema", `{"schema": 7, "kernel": {"release": 12}}`, []string{"newer.json", "schema 7", "(1)"}},
		{"malformed", "{\"schema\": 1,\n \"kernel\": [}", []string{"malformed.json", "line 2, column 13", "offset 27"}},
		{"wrong type", "{\"schema\": 1, \"cpus\": \"x\"}", []string{"wrong.json", "offset"}},
		{"not a capture", `{"hello": 1}`, []string{"not.json", "no \"schema\""}},
		{"empty", ``, []string{"empty.json", "malformed"}},
	}
	dir := t.TempDir()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.Fields(tt.name)[0]+".json")
			if err := os.WriteFile(p, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(p)
			if err == nil {
				t.Fatal("Load accepted it")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestCaptureTreeMatchesLive captures this host and reads the tree back: the
// file facts must be identical to the ones the capture saw, since the tree
// holds exactly the bytes that were read.
func TestCaptureTreeMatchesLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc and /sys")
	}
	dir := filepath.Join(t.TempDir(), "tree")
	live, err := captureTree(Root{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	tree := &Facts{Schema: SchemaVersion, CapturedAt: live.CapturedAt, Sysctls: map[string]string{}, Sysfs: Sysfs{}}
	rd := &fileReader{r: Root{Dir: dir}, f: tree}
	rd.readAll()
	rd.flush()
	// The live host answers pidfd by trying it, a tree by its version.
	tree.Kernel.Pidfd = live.Kernel.Pidfd
	if d := diff(live, tree); d != "" {
		t.Errorf("Gather(tree) differs from the capture %s", d)
	}
	if len(live.Sysctls) < 100 || len(live.IRQs) == 0 || len(live.CPUs) == 0 || len(live.Interfaces) == 0 {
		t.Errorf("live capture looks empty: %d sysctls, %d irqs, %d cpus, %d interfaces",
			len(live.Sysctls), len(live.IRQs), len(live.CPUs), len(live.Interfaces))
	}
	for _, secret := range []string{"tcp_fastopen_key", "stable_secret"} {
		for name := range live.Sysctls {
			if strings.HasSuffix(name, secret) {
				t.Errorf("secret sysctl %s captured", name)
			}
		}
	}
	if err := CaptureTree(Root{}, dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("CaptureTree into a non-empty directory: %v", err)
	}
}

func TestGatherLive(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc and /sys")
	}
	src, err := OpenRoot("")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	checkLiveFacts(t, f)
	if runtime.GOOS == "linux" {
		if f.ErrorFor("netlink:links") != "" || f.Interface("lo").Root == nil || len(f.Routes) == 0 {
			t.Errorf("live netlink facts missing: %v, lo root %v, %d routes", f.Errors, f.Interface("lo").Root, len(f.Routes))
		}
	}
}

// checkLiveFacts checks what every Linux host must yield, whoever reads it.
func checkLiveFacts(t *testing.T, f *Facts) {
	t.Helper()
	if f.Kernel.Release == "" || f.Kernel.Major < 3 {
		t.Errorf("kernel = %+v", f.Kernel)
	}
	if len(f.CPUs) == 0 || len(f.IRQs) == 0 || len(f.Interfaces) == 0 || len(f.Sysctls) < 100 {
		t.Errorf("facts look empty: %d cpus, %d irqs, %d interfaces, %d sysctls",
			len(f.CPUs), len(f.IRQs), len(f.Interfaces), len(f.Sysctls))
	}
	if f.Interface("lo") == nil {
		t.Error("no lo")
	}
	if f.Sysctls["net.ipv4.tcp_congestion_control"] == "" {
		t.Error("no tcp_congestion_control")
	}
	if len(f.Kernel.Qdiscs) != len(QdiscKinds) {
		t.Errorf("qdisc support for %d kinds", len(f.Kernel.Qdiscs))
	}
	for _, e := range f.Errors {
		// Without netlink (written elsewhere) those three are expected;
		// nothing else on a normal host.
		if !strings.HasPrefix(e.Source, "netlink:") && e.Source != "kernel-config" && !strings.HasPrefix(e.Source, "/proc/sys/net/**") {
			t.Errorf("unexpected read error: %+v", e)
		}
	}
}

// TestGatherLiveUnprivileged runs Gather as nobody: files only root may read
// (0600 sysctls, some /proc/irq files on hardened kernels) must be recorded,
// not fail the run.
func TestGatherLiveUnprivileged(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc and /sys")
	}
	if os.Getenv("LOWLAT_HOST_CHILD") == "1" {
		src, _ := OpenRoot("")
		f, err := Gather(context.Background(), src)
		if err != nil {
			os.Exit(2)
		}
		json.NewEncoder(os.Stdout).Encode(f)
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		// Already unprivileged: the plain live test covers it.
		src, _ := OpenRoot("")
		f, err := Gather(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		checkLiveFacts(t, f)
		return
	}
	// Copy the test binary somewhere nobody can execute it.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lowlat-host-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "host.test")
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestGatherLiveUnprivileged$")
	cmd.Env = append(os.Environ(), "LOWLAT_HOST_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("Gather as nobody: %v", err)
	}
	var f Facts
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("child output: %v\n%s", err, out)
	}
	checkLiveFacts(t, &f)
	// As nobody the 0600 net sysctls (bpf_jit_*) are recorded, in one line.
	if e := f.ErrorFor("/proc/sys/net/**"); e != "" && !strings.Contains(e, "permission denied") {
		t.Errorf("sysctl error = %q", e)
	}
}
