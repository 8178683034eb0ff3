package knob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func writeTree(t *testing.T, files map[string]string) *System {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return &System{Root: root}
}

func TestSysctlKnob(t *testing.T) {
	sys := writeTree(t, map[string]string{
		"/proc/sys/net/ipv4/tcp_rmem":                "4096\t131072\t6291456\n",
		"/proc/sys/net/ipv4/conf/eth0.100/rp_filter": "1\n",
	})
	ctx := context.Background()
	k, err := New(sys, "sysctl/net.ipv4.tcp_rmem")
	if err != nil {
		t.Fatal(err)
	}
	v, err := k.Read(ctx)
	if err != nil || v != "4096 131072 6291456" {
		t.Fatalf("Read = %q, %v", v, err)
	}
	if !k.Satisfied(v, "4096  131072 6291456 ") {
		t.Error("whitespace must not matter")
	}
	if err := k.Write(ctx, "4096 87380 4194304"); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, "4096 87380 4194304"); err != nil {
		t.Fatal(err)
	}
	vlan, _ := New(sys, "sysctl/net.ipv4.conf.eth0/100.rp_filter")
	if v, err := vlan.Read(ctx); err != nil || v != "1" {
		t.Errorf("dotted interface sysctl = %q, %v", v, err)
	}
	missing, _ := New(sys, "sysctl/net.ipv4.tcp_tw_recycle")
	if _, err := missing.Read(ctx); !errors.Is(err, ErrNotSupported) {
		t.Errorf("absent sysctl read error = %v, want ErrNotSupported", err)
	}
	if err := missing.Write(ctx, "1"); !errors.Is(err, ErrNotSupported) {
		t.Errorf("absent sysctl write error = %v, want ErrNotSupported", err)
	}
	if _, err := os.Stat(filepath.Join(sys.Root, "/proc/sys/net/ipv4/tcp_tw_recycle")); err == nil {
		t.Error("writing an absent sysctl created a file")
	}
}

func TestSysfsKnob(t *testing.T) {
	sys := writeTree(t, map[string]string{"/sys/kernel/mm/transparent_hugepage/enabled": "always madvise [never]\n"})
	k, err := New(sys, "sysfs/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := k.Read(context.Background()); err != nil || v != "never" {
		t.Fatalf("Read = %q, %v", v, err)
	}
	if _, err := New(sys, "sysfs/../etc/passwd"); err == nil {
		t.Error("path escaping /sys accepted")
	}
}

func TestFileKnob(t *testing.T) {
	sys := &System{Root: t.TempDir()}
	ctx := context.Background()
	k, err := New(sys, "file/etc/sysctl.d/99-lowlat.conf")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := k.Read(ctx)
	if before != "<absent; no /etc>" || !IsAbsent(before) {
		t.Fatalf("missing file in a missing /etc reads %q, want <absent; no /etc>", before)
	}
	want := FileContent("net.core.somaxconn = 4096\n", 0o640)
	if err := k.Write(ctx, want); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(sys.Root, "etc/sysctl.d/99-lowlat.conf"))
	if err != nil || fi.Mode().Perm() != 0o640 {
		t.Fatalf("written file: %v, %v; want mode 0640", fi, err)
	}
	if k.Satisfied(mustRead(t, k), FileContent("net.core.somaxconn = 4096\n", 0o644)) {
		t.Error("a file with mode 0640 satisfies a desired 0644")
	}
	// Restoring the recorded absence removes the file and the directories
	// the write created, and reads back exactly as before.
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	if v := mustRead(t, k); !Same(k, v, before) || v != before {
		t.Errorf("after restore reads %q, want %q", v, before)
	}
	if _, err := os.Stat(filepath.Join(sys.Root, "etc")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("restore left the directory it created: %v", err)
	}
}

func mustRead(t *testing.T, k Knob) string {
	t.Helper()
	v, err := k.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestFileKnobRestoresModeAndOwner: an existing file that lowlat replaces
// comes back with its content, mode and owner, and a directory that holds
// other files is kept when the file lowlat added is removed.
func TestFileKnobRestoresModeAndOwner(t *testing.T) {
	root := t.TempDir()
	sys := &System{Root: root}
	ctx := context.Background()
	p := filepath.Join(root, "etc/systemd/system/gw.service.d/50-lowlat-cpus.conf")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("[Service]\nCPUAffinity=0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		// As root the owner can really change: record a file owned by
		// somebody else, as an admin's own drop-in may be.
		uid, gid = 65534, 65534
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	k, _ := New(sys, "file/etc/systemd/system/gw.service.d/50-lowlat-cpus.conf")
	before := mustRead(t, k)
	wantBefore := fmt.Sprintf("mode=0600 owner=%d:%d\n[Service]\nCPUAffinity=0\n", uid, gid)
	if before != wantBefore {
		t.Fatalf("Read = %q, want %q", before, wantBefore)
	}
	if err := k.Write(ctx, FileContent("[Service]\nCPUAffinity=2-3\n", 0o644)); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, before); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("restored mode %v owner %d:%d, want 0600 %d:%d", fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
	}
	if v := mustRead(t, k); v != before {
		t.Errorf("restored %q, want %q", v, before)
	}

	// A new file in a directory that exists: removing it keeps the
	// directory and what else is in it.
	k2, _ := New(sys, "file/etc/systemd/system/gw.service.d/60-lowlat.conf")
	b2 := mustRead(t, k2)
	if b2 != Absent {
		t.Fatalf("new file beside another reads %q, want %q", b2, Absent)
	}
	if err := k2.Write(ctx, FileContent("x\n", 0o644)); err != nil {
		t.Fatal(err)
	}
	if err := k2.Write(ctx, b2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Errorf("removing a new file took its neighbour: %v", err)
	}

	// A directory lowlat created that somebody else put a file in is kept.
	k3, _ := New(sys, "file/etc/lowlat-new/a/b.conf")
	b3 := mustRead(t, k3)
	if b3 != "<absent; no /etc/lowlat-new>" {
		t.Fatalf("Read = %q", b3)
	}
	if err := k3.Write(ctx, FileContent("b\n", 0o644)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/lowlat-new/theirs.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := k3.Write(ctx, b3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/lowlat-new/theirs.conf")); err != nil {
		t.Errorf("somebody else's file went with lowlat's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/lowlat-new/a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lowlat's own empty directory a/ was kept: %v", err)
	}
}

// TestFileValueSpace: no content reads as Absent, whatever it says.
func TestFileValueSpace(t *testing.T) {
	sys := &System{Root: t.TempDir()}
	ctx := context.Background()
	k, _ := New(sys, "file/etc/x.conf")
	if err := os.MkdirAll(filepath.Join(sys.Root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{Absent, "<absent; no /etc>", "", "mode=0644\n", "-> /x"} {
		if err := os.WriteFile(filepath.Join(sys.Root, "etc/x.conf"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		v := mustRead(t, k)
		if IsAbsent(v) || ParseFileValue(v).Content != content {
			t.Errorf("file holding %q reads %q (absent %v)", content, v, IsAbsent(v))
		}
		if err := k.Write(ctx, v); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(filepath.Join(sys.Root, "etc/x.conf")); string(b) != content {
			t.Errorf("writing back %q gave %q", v, b)
		}
	}
	// A link whose target is the text of Absent is still a link.
	l, _ := New(sys, "link/etc/l")
	if err := os.Symlink(Absent, filepath.Join(sys.Root, "etc/l")); err != nil {
		t.Fatal(err)
	}
	if v := mustRead(t, l); v == Absent || v != LinkTo(Absent) {
		t.Errorf("link to %q reads %q", Absent, v)
	}
	// An older lowlat's bare content and bare link target still restore.
	if err := k.Write(ctx, "legacy = 1\n"); err != nil {
		t.Fatal(err)
	}
	if v := mustRead(t, k); ParseFileValue(v).Content != "legacy = 1\n" || !Same(k, v, "legacy = 1\n") {
		t.Errorf("legacy value restored as %q", v)
	}
	if err := l.Write(ctx, "/etc/target"); err != nil {
		t.Fatal(err)
	}
	if v := mustRead(t, l); !l.Satisfied(v, "/etc/target") {
		t.Errorf("legacy link target restored as %q", v)
	}
}

// TestFileKnobRefusesNonRegular: a symlink or directory where lowlat would
// write a file is not lowlat's to replace.
func TestFileKnobRefusesNonRegular(t *testing.T) {
	sys := &System{Root: t.TempDir()}
	if err := os.MkdirAll(filepath.Join(sys.Root, "etc/sysctl.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", filepath.Join(sys.Root, "etc/sysctl.d/99-lowlat.conf")); err != nil {
		t.Fatal(err)
	}
	k, _ := New(sys, "file/etc/sysctl.d/99-lowlat.conf")
	if _, err := k.Read(context.Background()); !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "99-lowlat.conf") {
		t.Errorf("Read of a symlink: %v, want ErrNotWritable naming the file", err)
	}
}

func TestNewRejectsBadIDs(t *testing.T) {
	for _, id := range []string{"", "sysctl", "sysctl/", "bogus/x", "qdisc/eth0/egress", "qdisc/eth0", "route/default/main/cwnd", "route/default/nosuchtable/initcwnd", "route/999.1.1.1/main/initcwnd", "file/relative/../x"} {
		if _, err := New(Live, id); err == nil {
			t.Errorf("New(%q) accepted", id)
		}
	}
}

func TestIFBName(t *testing.T) {
	if got := IFBName("eth0"); got != "ifb4eth0" {
		t.Errorf("IFBName(eth0) = %q", got)
	}
	long := IFBName("enp129s0f1np1")
	if len(long) > 15 || long == IFBName("enp129s0f0np0") {
		t.Errorf("long names: %q (len %d) must fit IFNAMSIZ and stay distinct", long, len(long))
	}
}
