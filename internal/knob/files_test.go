package knob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	if v, _ := k.Read(ctx); v != Absent {
		t.Fatalf("missing file reads %q, want Absent", v)
	}
	if err := k.Write(ctx, "net.core.somaxconn = 4096\n"); err != nil {
		t.Fatal(err)
	}
	if err := Verify(ctx, k, "net.core.somaxconn = 4096\n"); err != nil {
		t.Fatal(err)
	}
	if err := k.Write(ctx, Absent); err != nil {
		t.Fatal(err)
	}
	if v, _ := k.Read(ctx); v != Absent {
		t.Errorf("after removal reads %q", v)
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
