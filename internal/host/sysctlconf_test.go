package host

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseSysctlConf(t *testing.T) {
	in := "# comment\n; comment\n\nnet.core.somaxconn=1024\n  net/ipv4/conf/eth0.100/forwarding = 1 \n" +
		"-net.ipv4.conf.*.rp_filter = 2\n-net.ipv4.conf.lo.rp_filter\nkernel.domainname = a b  c\nnot an assignment\n= 3\n"
	want := []SysctlSetting{
		{Name: "net.core.somaxconn", Value: "1024", Line: 4},
		{Name: "net.ipv4.conf.eth0/100.forwarding", Value: "1", Line: 5},
		{Name: "net.ipv4.conf.*.rp_filter", Value: "2", Line: 6, Glob: true},
		{Name: "kernel.domainname", Value: "a b  c", Line: 8},
	}
	if got := ParseSysctlConf([]byte(in)); !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSysctlConf (-want +got):\n-%+v\n+%+v", want, got)
	}
}

// TestSysctlConfOrder: files sort by name across the directories, a name in
// an earlier directory hides it in later ones (a link to /dev/null masks),
// /etc/sysctl.conf is separate, and After gives what follows a file name
// under each loader, the last assignment first, globs never. A capture of
// the tree (capture --tree) reads back the same.
func TestSysctlConfOrder(t *testing.T) {
	dir := mkTree(t, map[string]string{
		"etc/sysctl.conf":                  "net.core.somaxconn = 9\n",
		"etc/sysctl.d/99-sysctl.conf":      "->../sysctl.conf",
		"etc/sysctl.d/README":              "net.core.somaxconn = 1\n",
		"etc/sysctl.d/10-masked.conf":      "->/dev/null",
		"usr/lib/sysctl.d/10-masked.conf":  "net.core.somaxconn = 2\n",
		"usr/lib/sysctl.d/50-default.conf": "net.core.somaxconn = 3\n",
		"run/sysctl.d/50-default.conf":     "net.core.somaxconn = 4\n",
		"usr/local/lib/sysctl.d/60-x.conf": "net.core.somaxconn = 5\n",
		"etc/sysctl.d/zz-lowlat-1.conf":    "net.core.somaxconn = 6\n",
		"etc/sysctl.d/zzz-local.conf":      "net.core.somaxconn = 7\nnet/core/somaxconn = 8\n",
		"etc/sysctl.d/zzzz-glob.conf":      "net.core.* = 0\n",
		"lib/sysctl.d/70-lib.conf":         "kernel.pid_max = 1\n",
	})
	want := []string{"/etc/sysctl.d/10-masked.conf", "/run/sysctl.d/50-default.conf", "/usr/local/lib/sysctl.d/60-x.conf", "/lib/sysctl.d/70-lib.conf",
		"/etc/sysctl.d/99-sysctl.conf", "/etc/sysctl.d/zz-lowlat-1.conf", "/etc/sysctl.d/zzz-local.conf", "/etc/sysctl.d/zzzz-glob.conf"}
	captured := filepath.Join(t.TempDir(), "tree")
	if err := CaptureTree(Root{Dir: dir}, captured); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]string{"tree": dir, "its capture": captured} {
		src, err := OpenRoot(d)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Gather(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		c := f.SysctlConf
		if c == nil {
			t.Fatalf("%s: no sysctl configuration", name)
		}
		var got []string
		for _, f := range c.Files {
			got = append(got, f.Path)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: order (-want +got):\n-%v\n+%v", name, want, got)
		}
		if c.Main == nil || len(c.Main.Settings) != 1 || c.Main.Settings[0].Value != "9" || len(c.Unreadable) != 0 {
			t.Errorf("%s: main %+v unreadable %v", name, c.Main, c.Unreadable)
		}
		lowlat := func(b string) bool { return b == "zz-lowlat-1.conf" }
		for _, tt := range []struct {
			loader SysctlLoader
			base   string
			want   []string
		}{
			{SystemdSysctl, "zz-lowlat-", []string{"8", "7"}},
			{ProcpsSystem, "zz-lowlat-", []string{"9", "8", "7"}},
			{SystemdSysctl, "zzzzz", nil},
			{ProcpsSystem, "zzzzz", []string{"9"}},
			{SystemdSysctl, "", []string{"8", "7", "9", "5", "4"}},
		} {
			var vals []string
			for _, o := range c.After(tt.loader, tt.base, "net.core.somaxconn", lowlat) {
				vals = append(vals, o.Value)
			}
			if !reflect.DeepEqual(vals, tt.want) {
				t.Errorf("%s: %v after %q: %v, want %v", name, tt.loader, tt.base, vals, tt.want)
			}
		}
	}
	// No place of the configuration in the facts: unknown, not empty.
	src, _ := OpenRoot(mkTree(t, map[string]string{"etc/os-release": "ID=x\n"}))
	if f, _ := Gather(context.Background(), src); f.SysctlConf != nil {
		t.Errorf("a tree without sysctl configuration: %+v", f.SysctlConf)
	}
}
