package plan

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
)

// TestPlanNamesBootOverride: when a file the boot reads after lowlat's
// --persist file sets a key the plan sets, to another value, the row says
// which file and line (Persist). The files are facts like any other: read through the
// host seam from a tree (plan --root), and carried by a capture (plan
// --from). Each case's tree holds its sysctl configuration (and
// /run/systemd/system where systemd runs); the rest of the facts are CentOS
// 7's fixture.
func TestPlanNamesBootOverride(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		links   map[string]string
		systemd bool
		// want maps a knob to a text its note must hold, "" for no note.
		want map[string]string
	}{{
		name:    "sysctl.conf through 99-sysctl.conf, systemd",
		files:   map[string]string{"etc/sysctl.conf": "net.core.somaxconn = 1024\n"},
		links:   map[string]string{"etc/sysctl.d/99-sysctl.conf": "../sysctl.conf"},
		systemd: true,
		want:    map[string]string{"sysctl/net.core.somaxconn": ""},
	}, {
		name: "a file named after lowlat's, systemd",
		files: map[string]string{
			"etc/sysctl.conf":             "net.core.somaxconn = 1024\n",
			"etc/sysctl.d/zzz-local.conf": "# local\nnet/core/somaxconn = 2048\n",
		},
		links:   map[string]string{"etc/sysctl.d/99-sysctl.conf": "../sysctl.conf"},
		systemd: true,
		want: map[string]string{
			"sysctl/net.core.somaxconn":    "/etc/sysctl.d/zzz-local.conf (line 2) sets net.core.somaxconn = 2048 after lowlat's --persist file (systemd-sysctl",
			"sysctl/net.ipv4.tcp_fastopen": "",
		},
	}, {
		name:  "sysctl.conf, no systemd",
		files: map[string]string{"etc/sysctl.conf": "net.core.somaxconn = 1024\nnet.ipv4.tcp_fastopen = 3\n"},
		links: map[string]string{"etc/sysctl.d/99-sysctl.conf": "../sysctl.conf"},
		want: map[string]string{
			"sysctl/net.core.somaxconn":    "/etc/sysctl.conf (line 1) sets net.core.somaxconn = 1024 after lowlat's --persist file (sysctl --system",
			"sysctl/net.ipv4.tcp_fastopen": "", // the value lowlat sets too
		},
	}, {
		name: "lowlat's own older files",
		files: map[string]string{
			"etc/sysctl.d/zz-lowlat-20261123T101010Z-aaaaaa.conf": "net.core.somaxconn = 512\n",
			"etc/sysctl.d/99-lowlat-20251123T101010Z-bbbbbb.conf": "net.core.somaxconn = 256\n",
		},
		systemd: true,
		want:    map[string]string{"sysctl/net.core.somaxconn": ""},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			if tt.systemd {
				if err := os.MkdirAll(filepath.Join(root, "run/systemd/system"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, c := range tt.files {
				writeTreeFile(t, filepath.Join(root, p), c)
			}
			for p, target := range tt.links {
				os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755)
				if err := os.Symlink(target, filepath.Join(root, p)); err != nil {
					t.Fatal(err)
				}
			}
			src, err := host.OpenRoot(root)
			if err != nil {
				t.Fatal(err)
			}
			tree, err := host.Gather(context.Background(), src)
			if err != nil {
				t.Fatal(err)
			}
			fromRoot := loadFixture(t, "centos7-3.10")
			fromRoot.SysctlConf, fromRoot.Systemd = tree.SysctlConf, tree.Systemd
			var capture bytes.Buffer
			if err := host.Save(&capture, fromRoot); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(t.TempDir(), "capture.json")
			os.WriteFile(file, capture.Bytes(), 0o644)
			fromCapture, err := host.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			for seam, f := range map[string]*host.Facts{"--root": fromRoot, "--from": fromCapture} {
				p, err := Make(f, resolve(t, "realtime-tcp", nil), Options{})
				if err != nil {
					t.Fatal(err)
				}
				for k, want := range tt.want {
					c := find(p, k)
					switch {
					case c == nil:
						t.Errorf("%s: no row %s", seam, k)
					case want == "" && c.Persist != "":
						t.Errorf("%s: %s: %q, want nothing", seam, k, c.Persist)
					case want != "" && !strings.Contains(c.Persist, want):
						t.Errorf("%s: %s: %q, want it to say %q", seam, k, c.Persist, want)
					}
				}
			}
		})
	}
}

// TestPlanBootOverrideUnknown: a sysctl configuration lowlat could not read
// is unknown, and the rows say so; facts without any say nothing.
func TestPlanBootOverrideUnknown(t *testing.T) {
	f := loadFixture(t, "centos7-3.10")
	f.SysctlConf = &host.SysctlConf{Files: []host.SysctlFile{}, Unreadable: []string{"/etc/sysctl.d"}}
	p, err := Make(f, resolve(t, "realtime-tcp", nil), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := find(p, "sysctl/net.core.somaxconn"); c == nil || !strings.Contains(c.Persist, "unknown: /etc/sysctl.d could not be read") {
		t.Errorf("row with an unreadable /etc/sysctl.d: %+v", c)
	}
	f.SysctlConf = nil
	p, _ = Make(f, resolve(t, "realtime-tcp", nil), Options{})
	if c := find(p, "sysctl/net.core.somaxconn"); c == nil || c.Persist != "" {
		t.Errorf("row without the configuration in the facts: %+v", c)
	}
}

func writeTreeFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
