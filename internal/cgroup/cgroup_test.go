package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Mount tables as real hosts list them (trimmed to the cgroup lines and
// one other).
const (
	unifiedInfo = `25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`
	hybridInfo = `30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,name=systemd
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpu,cpuacct
`
	legacyInfo = `30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 30 0:28 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:11 - cgroup cgroup rw,xattr,release_agent=/usr/lib/systemd/systemd-cgroups-agent,name=systemd
35 30 0:31 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,cpuacct,cpu
36 30 0:32 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpuset
37 30 0:33 / /sys/fs/cgroup/cpuset\040again rw,nosuid,nodev,noexec,relatime shared:17 - cgroup cgroup rw,cpuset
`
	// A container without a cgroup namespace: its own cgroup is bound
	// where the hierarchy's root would be.
	boundInfo = `40 39 0:26 /docker/0123abcd /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw
`
)

func TestParseMountinfo(t *testing.T) {
	got, err := ParseMountinfo(strings.NewReader(legacyInfo))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{
		{Dir: "/sys/fs/cgroup/systemd", Root: "/", Version: 1, Controllers: []string{"name=systemd"}},
		{Dir: "/sys/fs/cgroup/cpu,cpuacct", Root: "/", Version: 1, Controllers: []string{"cpu", "cpuacct"}},
		{Dir: "/sys/fs/cgroup/cpuset", Root: "/", Version: 1, Controllers: []string{"cpuset"}},
		{Dir: "/sys/fs/cgroup/cpuset again", Root: "/", Version: 1, Controllers: []string{"cpuset"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("(-want +got)\n-%+v\n+%+v", want, got)
	}
	if h := got[1].Hierarchy(); h != "cpu,cpuacct" {
		t.Errorf("hierarchy %q, want cpu,cpuacct as /proc/PID/cgroup names it", h)
	}
	got, _ = ParseMountinfo(strings.NewReader(boundInfo))
	if len(got) != 1 || got[0].Version != 2 || got[0].Root != "/docker/0123abcd" || got[0].Hierarchy() != "cgroup2" {
		t.Errorf("a bound container cgroup: %+v", got)
	}
}

func TestParseProcCgroup(t *testing.T) {
	ms, err := ParseProcCgroup(strings.NewReader("12:cpuacct,cpu:/user.slice\n1:name=systemd:/user.slice/user-1000.slice/session-4.scope\n0::/user.slice/user-1000.slice/session-4.scope\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := In(ms, "cpu,cpuacct"); !ok || p != "/user.slice" {
		t.Errorf("cpu,cpuacct: %q %v", p, ok)
	}
	if p := Main(ms); p != "/user.slice/user-1000.slice/session-4.scope" {
		t.Errorf("main cgroup %q", p)
	}
	legacy, _ := ParseProcCgroup(strings.NewReader("3:cpu,cpuacct:/\n1:name=systemd:/system.slice/cron.service\n"))
	if p := Main(legacy); p != "/system.slice/cron.service" {
		t.Errorf("v1 main cgroup %q, want name=systemd's", p)
	}
	if _, err := ParseProcCgroup(strings.NewReader("garbage\n")); err == nil {
		t.Error("a line that is not ID:CONTROLLERS:PATH was read")
	}
}

// host is a fixture tree: proc/self/{mountinfo,cgroup} and a cgroup.procs
// at every mounted hierarchy's root (as the kernel shows them).
func host(t *testing.T, mountinfo string) FS {
	t.Helper()
	root := t.TempDir()
	write(t, filepath.Join(root, "proc/self/mountinfo"), mountinfo)
	write(t, filepath.Join(root, "proc/self/cgroup"), "0::/user.slice/session-4.scope\n")
	ms, err := ParseMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		write(t, filepath.Join(root, m.Dir, "cgroup.procs"), "1\n")
		if m.Hierarchy() == "cpuset" {
			write(t, filepath.Join(root, m.Dir, "cpuset.cpus"), "0-3\n")
			write(t, filepath.Join(root, m.Dir, "cpuset.mems"), "0\n")
		}
	}
	return FS{Root: root}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestHierarchies: the unified hierarchy alone where it is mounted, hybrid
// or not; every v1 hierarchy once (its last reachable mount) where it is
// not; nothing where only a container's own cgroup is bound.
func TestHierarchies(t *testing.T) {
	for _, tt := range []struct {
		name, info string
		want       []string
		err        string
	}{
		{"unified", unifiedInfo, []string{"/sys/fs/cgroup"}, ""},
		{"hybrid", hybridInfo, []string{"/sys/fs/cgroup/unified"}, ""},
		{"legacy", legacyInfo, []string{"/sys/fs/cgroup/systemd", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuset again"}, ""},
		{"container", boundInfo, nil, "mounted only below their roots: cgroup2 from /docker/0123abcd"},
		{"none", "25 30 0:23 / /sys rw - sysfs sysfs rw\n", nil, ErrNoHierarchy.Error()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs, err := host(t, tt.info).Hierarchies()
			var dirs []string
			for _, h := range hs {
				dirs = append(dirs, h.Dir)
			}
			if tt.err != "" {
				if err == nil || !errors.Is(err, ErrNoHierarchy) || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("got %v, %v; want an error with %q", dirs, err, tt.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(dirs, tt.want) {
				t.Errorf("got %v, %v; want %v", dirs, err, tt.want)
			}
		})
	}
}

// TestHierarchiesCovered: a mount covered by a later one (a namespace's
// own /sys over the host's, as lowlat's tests and ip netns exec make) is
// passed over for the one in reach.
func TestHierarchiesCovered(t *testing.T) {
	info := hybridInfo + "50 25 0:40 / /sys rw - sysfs sysfs rw\n51 50 0:27 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n"
	fs := host(t, info)
	// The covered mount's directory is not there any more.
	if err := os.RemoveAll(filepath.Join(fs.Root, "sys/fs/cgroup/unified")); err != nil {
		t.Fatal(err)
	}
	hs, err := fs.Hierarchies()
	if err != nil || len(hs) != 1 || hs[0].Dir != "/sys/fs/cgroup" {
		t.Errorf("got %+v, %v; want the namespace's /sys/fs/cgroup", hs, err)
	}
}

// TestOwn: a cgroup of lowlat's own is made at each hierarchy's root (a
// v1 cpuset one with its parent's CPUs and nodes), a process is moved
// into it and found listed, and it is removed; an existing empty one is
// taken, one with a process in it refused.
func TestOwn(t *testing.T) {
	fs := host(t, legacyInfo)
	o, err := fs.Own("lowlat-watchdog-T1")
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Mounts) != 3 || o.Path() != "/lowlat-watchdog-T1" {
		t.Fatalf("own cgroup %+v", o)
	}
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	cpus, _ := os.ReadFile(filepath.Join(fs.Root, "sys/fs/cgroup/cpuset again/lowlat-watchdog-T1/cpuset.cpus"))
	if string(cpus) != "0-3\n" {
		t.Errorf("the new cpuset cgroup's CPUs %q, want its parent's", cpus)
	}
	if err := o.Attach(4321); err != nil {
		t.Fatal(err)
	}
	for _, m := range o.Mounts {
		if b, _ := os.ReadFile(filepath.Join(fs.Root, m.Dir, "lowlat-watchdog-T1/cgroup.procs")); string(b) != "4321" {
			t.Errorf("%s: cgroup.procs %q, want the pid", m.Dir, b)
		}
	}
	// A second one of the same name while the first holds a process.
	again, _ := fs.Own("lowlat-watchdog-T1")
	if err := again.Create(); !errors.Is(err, ErrPopulated) || !strings.Contains(err.Error(), "pid 4321") {
		t.Errorf("create over a populated cgroup: %v, want ErrPopulated naming pid 4321", err)
	}
	// Emptied (the process was killed): taken as it is.
	for _, m := range o.Mounts {
		write(t, filepath.Join(fs.Root, m.Dir, "lowlat-watchdog-T1/cgroup.procs"), "")
	}
	if err := again.Create(); err != nil {
		t.Errorf("create over an empty leftover: %v", err)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := fs.Own(bad); err == nil {
			t.Errorf("cgroup name %q taken", bad)
		}
	}
}

// TestOwnFails: each failure names the operation and the cgroup.
func TestOwnFails(t *testing.T) {
	fs := host(t, unifiedInfo)
	o, _ := fs.Own("lowlat-watchdog-T2")
	// Something that is not a cgroup where it would go.
	write(t, filepath.Join(fs.Root, "sys/fs/cgroup/lowlat-watchdog-T2"), "")
	if err := o.Create(); err == nil || !strings.Contains(err.Error(), "cgroup "+filepath.Join(fs.Root, "sys/fs/cgroup/lowlat-watchdog-T2")) {
		t.Errorf("create over a file: %v", err)
	}
	os.Remove(filepath.Join(fs.Root, "sys/fs/cgroup/lowlat-watchdog-T2"))
	if err := o.Create(); err != nil {
		t.Fatal(err)
	}
	// The kernel refuses the move (a directory stands for cgroup.procs).
	if err := os.Mkdir(filepath.Join(fs.Root, "sys/fs/cgroup/lowlat-watchdog-T2/cgroup.procs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := o.Attach(99); err == nil || !strings.Contains(err.Error(), "move pid 99") {
		t.Errorf("a refused move: %v", err)
	}
}
