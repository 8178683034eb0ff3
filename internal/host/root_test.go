package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mkTree builds a tree from path -> content; content "->target" makes a link.
func mkTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRootStaysInside(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := mkTree(t, map[string]string{
		"sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/mtu": "1400\n",
		"sys/class/net/eth0":         "->../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0",
		"etc/secret":                 "inside",
		"etc/abs":                    "->" + secret,                       // absolute: rebased into the tree
		"etc/up":                     "->../../../../../../../etc/secret", // ".." stops at the top
		"etc/loop":                   "->loop",
		"sys/class/net/eth0x":        "->/sys/class/net/eth0",
		"proc/sys/net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
	})
	r := Root{Dir: dir}
	tests := []struct {
		path, want string
		err        error
	}{
		{"/sys/class/net/eth0/mtu", "1400\n", nil},
		{"sys/class/net/eth0x/mtu", "1400\n", nil},
		{"/etc/up", "inside", nil},
		{"/../../etc/secret", "inside", nil},
		{"/etc/abs", "", fs.ErrNotExist},
		{"/etc/missing", "", fs.ErrNotExist},
	}
	for _, tt := range tests {
		b, err := r.ReadFile(tt.path)
		if !errors.Is(err, tt.err) || (err == nil && string(b) != tt.want) {
			t.Errorf("ReadFile(%q) = %q, %v; want %q, %v", tt.path, b, err, tt.want, tt.err)
		}
		if err != nil && strings.Contains(err.Error(), dir) {
			t.Errorf("ReadFile(%q) error names the tree on this machine: %v", tt.path, err)
		}
	}
	if _, err := r.ReadFile("/etc/loop"); err == nil || !strings.Contains(err.Error(), "/etc/loop") {
		t.Errorf("link loop: %v", err)
	}
	got, err := r.EvalSymlinks("/sys/class/net/eth0")
	if err != nil || got != "/sys/devices/pci0000:00/0000:00:03.0/virtio2/net/eth0" {
		t.Errorf("EvalSymlinks = %q, %v", got, err)
	}
	if l, err := r.Readlink("/sys/class/net/eth0"); err != nil || !strings.HasPrefix(l, "../../devices") {
		t.Errorf("Readlink = %q, %v", l, err)
	}
	// readAt never follows a link in its last element.
	if _, err := r.readAt("/etc", "abs"); err == nil {
		t.Error("readAt followed a link")
	}
}

func TestRecorderCapturesReads(t *testing.T) {
	dir := mkTree(t, map[string]string{
		"sys/devices/virtual/net/lo/mtu":                  "65536\n",
		"sys/devices/virtual/net/lo/statistics/a":         "1\n",
		"sys/class/net/lo":                                "->../../devices/virtual/net/lo",
		"sys/devices/pci0000:00/0000:00:03.0/msi_irqs/37": "msix\n",
		"proc/sys/net/core/somaxconn":                     "4096\n",
		"proc/sys/net/core/unread":                        "1\n",
	})
	r := Root{Dir: dir, rec: newRecorder()}
	if _, err := r.ReadFile("/sys/class/net/lo/mtu"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadDir("/sys/devices/pci0000:00/0000:00:03.0/msi_irqs"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadDir("/proc/sys/net/core"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "tree")
	if err := r.rec.writeTree(dst); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "sys/class/net/lo")); err != nil || l != "../../devices/virtual/net/lo" {
		t.Errorf("link not kept relative: %q %v", l, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sys/class/net/lo/mtu")); err != nil || string(b) != "65536\n" {
		t.Errorf("mtu through the link: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(dst, "sys/devices/pci0000:00/0000:00:03.0/msi_irqs/37")); err != nil {
		t.Errorf("listed msi_irqs entry missing: %v", err)
	}
	// Unread procfs files are not materialized (they would read as "").
	if _, err := os.Stat(filepath.Join(dst, "proc/sys/net/core/unread")); !os.IsNotExist(err) {
		t.Errorf("unread sysctl copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "sys/devices/virtual/net/lo/statistics")); !os.IsNotExist(err) {
		t.Errorf("unread directory copied: %v", err)
	}
}
