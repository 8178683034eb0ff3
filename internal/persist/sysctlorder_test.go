//go:build linux

package persist

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
)

// bootRoot is a persist root as a Debian 12 or RHEL 9 host has it: an
// /etc/sysctl.conf the administrator edited, linked as
// /etc/sysctl.d/99-sysctl.conf, and the vendor's files in /usr/lib/sysctl.d
// (one of them overridden by name from /etc). Then two persisted
// transactions write their files, as apply --persist --persist-root does.
func bootRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	files := map[string]string{
		"etc/sysctl.conf":                        "# the administrator's\nnet.core.somaxconn = 4096\nnet.ipv4.tcp_fastopen=1\n",
		"etc/sysctl.d/README.sysctl":             "net.core.somaxconn = 1\n",
		"usr/lib/sysctl.d/50-default.conf":       "net.core.somaxconn = 128\n-net.ipv4.conf.*.rp_filter = 2\nnet/ipv4/tcp_ecn = 2\n",
		"usr/lib/sysctl.d/50-pid-max.conf":       "kernel.pid_max = 4194304\n",
		"etc/sysctl.d/50-pid-max.conf":           "kernel.pid_max = 65536\n",
		"usr/lib/sysctl.d/99-protect-links.conf": "fs.protected_fifos = 1\n",
	}
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../sysctl.conf", filepath.Join(root, "etc/sysctl.d/99-sysctl.conf")); err != nil {
		t.Fatal(err)
	}
	persistInto(t, root, "20261123T101010Z-aaaaaa", []Setting{{Knob: "sysctl/net.core.somaxconn", Value: "1024"}, {Knob: "sysctl/net.ipv4.tcp_fastopen", Value: "3"}})
	persistInto(t, root, "20261123T111111Z-bbbbbb", []Setting{{Knob: "sysctl/net.core.somaxconn", Value: "2048"}})
	return root
}

// persistInto writes the files of a persisted transaction below root.
func persistInto(t *testing.T, root, id string, settings []Setting) {
	t.Helper()
	changes, _ := Changes(settings, Options{ID: id, Profile: "p", Exe: "/usr/bin/lowlat", Journal: "/var/lib/lowlat/journal", Root: root})
	sys := &knob.System{}
	for _, c := range changes {
		k, err := knob.New(sys, c.Knob)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Write(context.Background(), c.Value); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPersistedSysctlReadLast: with an /etc/sysctl.conf that sets the same
// keys, linked as 99-sysctl.conf, what systemd-sysctl leaves at boot is
// what the newest persisted transaction set. systemd's own order (systemd-
// analyze cat-config, which reads a root as systemd-sysctl reads /) is the
// judge; lowlat's model of it (host.SysctlConf, read through the host seam
// as plan --root reads a tree) must agree with it, file by file.
func TestPersistedSysctlReadLast(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze (Debian package systemd) is needed: apt-get install systemd")
	}
	root := bootRoot(t)
	out, err := exec.Command(analyze, "--root="+root, "cat-config", "sysctl.d").CombinedOutput()
	if err != nil {
		t.Fatalf("systemd-analyze cat-config: %v\n%s", err, out)
	}
	order, values := catConfig(string(out), root)
	want := map[string]string{"net.core.somaxconn": "2048", "net.ipv4.tcp_fastopen": "3"}
	for k, v := range want {
		if values[k] != v {
			t.Errorf("systemd-sysctl sets %s = %s at boot, want %s (the newest persisted transaction's): files in order:\n%s", k, values[k], v, strings.Join(order, "\n"))
		}
	}

	conf := gatherConf(t, root)
	var model []string
	for _, f := range conf.Files {
		model = append(model, f.Path)
	}
	if !slices.Equal(model, order) {
		t.Errorf("lowlat's order of the sysctl.d files differs from systemd's (-want +got):\n-%s\n+%s", strings.Join(order, "\n-"), strings.Join(model, "\n+"))
	}
	for k, v := range values {
		if strings.ContainsAny(k, "*?[") {
			continue
		}
		got := conf.After(host.SystemdSysctl, "", k, func(string) bool { return false })
		if len(got) == 0 || got[0].Value != v {
			t.Errorf("lowlat's model leaves %s = %+v at boot, systemd-sysctl %s", k, got, v)
		}
	}
}

// gatherConf reads root's sysctl configuration the way plan --root does.
func gatherConf(t *testing.T, root string) *host.SysctlConf {
	t.Helper()
	src, err := host.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	f, err := host.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	if f.SysctlConf == nil {
		t.Fatal("no sysctl configuration in the facts of a root that has one")
	}
	return f.SysctlConf
}

// catConfig reads systemd-analyze cat-config's output: the files in the
// order systemd applies them (host paths), and the value each key has after
// the last of them. Keys are in dotted form.
func catConfig(out, root string) ([]string, map[string]string) {
	var order []string
	values := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if p, ok := strings.CutPrefix(line, "# "+root+"/"); ok {
			order = append(order, "/"+p)
			continue
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k = strings.TrimPrefix(strings.TrimSpace(k), "-")
		if i := strings.IndexAny(k, "./"); i >= 0 && k[i] == '/' {
			k = strings.ReplaceAll(k, "/", ".") // no dots inside levels here
		}
		values[k] = strings.TrimSpace(v)
	}
	return order, values
}

// TestIntegrationSysctlSystemOrder checks lowlat's model of procps' sysctl
// --system, the loader of hosts without systemd, against the real one: in a
// mount namespace of its own the test tree's sysctl directories and
// /etc/sysctl.conf are bound over this host's, and 'sysctl --system
// --dry-run' says which files it applies in which order and what it would
// write (nothing is written: --dry-run, and in a network namespace of its
// own all the same). It reads /etc/sysctl.conf after every file: no file
// name can follow it, which is why plan names it when it sets a key lowlat
// persists.
func TestIntegrationSysctlSystemOrder(t *testing.T) {
	for _, tool := range []string{"sysctl", "sh", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s (Debian packages procps, dash, mount) is needed", tool)
		}
	}
	for _, p := range []string{"/etc/sysctl.conf", "/etc/sysctl.d", "/usr/lib/sysctl.d"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("this test binds its tree over %s, which this host lacks: %v", p, err)
		}
	}
	root := bootRoot(t)
	// /run/sysctl.d too: it hides a same-named file of /usr/lib.
	if err := os.MkdirAll(filepath.Join(root, "run/sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "run/sysctl.d/99-protect-links.conf"), []byte("fs.protected_fifos = 2\nnet.core.somaxconn = 64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := testnet.New(t)
	script := `set -e
mount -t tmpfs lowlat-test /run
mkdir /run/sysctl.d
mount --bind "$1/run/sysctl.d" /run/sysctl.d
mount --bind "$1/etc/sysctl.d" /etc/sysctl.d
mount --bind "$1/etc/sysctl.conf" /etc/sysctl.conf
mount --bind "$1/usr/lib/sysctl.d" /usr/lib/sysctl.d
if [ -d /usr/local/lib/sysctl.d ]; then mount -t tmpfs lowlat-test /usr/local/lib/sysctl.d; fi
if [ -d /lib/sysctl.d ] && [ ! /lib/sysctl.d -ef /usr/lib/sysctl.d ]; then mount -t tmpfs lowlat-test /lib/sysctl.d; fi
exec sysctl --system --dry-run`
	out, err := ns.Command("sh", "-c", script, "sh", root).CombinedOutput()
	if err != nil {
		t.Fatalf("sysctl --system --dry-run: %v\n%s", err, out)
	}
	var applied []string
	values := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(line, "* Applying "); ok {
			applied = append(applied, strings.TrimSuffix(p, " ..."))
			continue
		}
		if k, v, ok := strings.Cut(line, " = "); ok {
			values[k] = v
		}
	}

	conf := gatherConf(t, root)
	var model []string
	for _, f := range conf.Files {
		model = append(model, f.Path)
	}
	model = append(model, conf.Main.Path)
	if !slices.Equal(model, applied) {
		t.Errorf("lowlat's order of the files sysctl --system applies differs (-want +got):\n-%s\n+%s", strings.Join(applied, "\n-"), strings.Join(model, "\n+"))
	}
	for _, k := range []string{"net.core.somaxconn", "net.ipv4.tcp_fastopen", "fs.protected_fifos", "kernel.pid_max", "net.ipv4.tcp_ecn"} {
		got := conf.After(host.ProcpsSystem, "", k, func(string) bool { return false })
		if values[k] == "" || len(got) == 0 || got[0].Value != values[k] {
			t.Errorf("%s: sysctl --system leaves %q, lowlat's model %+v", k, values[k], got)
		}
	}
	// The administrator's /etc/sysctl.conf wins over any persisted file.
	if values["net.core.somaxconn"] != "4096" {
		t.Errorf("sysctl --system leaves somaxconn %s, want /etc/sysctl.conf's 4096:\n%s", values["net.core.somaxconn"], out)
	}
}
