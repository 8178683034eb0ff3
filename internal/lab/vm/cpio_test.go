package vm

import (
	"bytes"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// cpioEntry is one entry read back by readNewc.
type cpioEntry struct {
	name         string
	mode         uint32
	nlink        uint32
	data         []byte
	rmajor, rmin uint32
	headerOffset int64
}

// readNewc is an independent reader of the newc format, strict about the
// things the kernel is strict about: magic, alignment and the trailer.
func readNewc(t *testing.T, b []byte) []cpioEntry {
	t.Helper()
	var out []cpioEntry
	off := 0
	align := func(n int) int { return (n + 3) &^ 3 }
	for {
		if off+110 > len(b) {
			t.Fatalf("truncated header at %d", off)
		}
		h := string(b[off : off+110])
		if h[:6] != "070701" {
			t.Fatalf("bad magic %q at %d", h[:6], off)
		}
		field := func(i int) uint32 {
			v, err := strconv.ParseUint(h[6+8*i:14+8*i], 16, 32)
			if err != nil {
				t.Fatalf("bad field %d at %d: %v", i, off, err)
			}
			return uint32(v)
		}
		e := cpioEntry{mode: field(1), nlink: field(4), rmajor: field(9), rmin: field(10), headerOffset: int64(off)}
		size, namesize := int(field(6)), int(field(11))
		nameStart := off + 110
		if b[nameStart+namesize-1] != 0 {
			t.Fatalf("name at %d not NUL-terminated", off)
		}
		e.name = string(b[nameStart : nameStart+namesize-1])
		dataStart := align(nameStart + namesize)
		e.data = b[dataStart : dataStart+size]
		off = align(dataStart + size)
		if e.name == "TRAILER!!!" {
			if off != len(b) {
				t.Fatalf("%d bytes after the trailer", len(b)-off)
			}
			return out
		}
		out = append(out, e)
	}
}

func TestCPIOWriterRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	w := newCPIOWriter(&buf)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Dir("usr", 0o755))
	must(w.Dir("tmp", fs.ModeSticky|0o777))
	must(w.File("usr/a", 0o644, 0, strings.NewReader("")))
	must(w.File("usr/bb", 0o755, 5, strings.NewReader("hello")))
	must(w.File("usr/ccc", 0o600, 3, strings.NewReader("xyz-ignored-beyond-size")))
	must(w.Symlink("bin", "usr/bin"))
	must(w.Device("dev/console", fs.ModeDevice|fs.ModeCharDevice|0o600, 5, 1))
	must(w.Close())
	must(w.Close()) // idempotent

	got := readNewc(t, buf.Bytes())
	want := []struct {
		name string
		mode uint32
		data string
	}{
		{"usr", 0o040755, ""},
		{"tmp", 0o041777, ""},
		{"usr/a", 0o100644, ""},
		{"usr/bb", 0o100755, "hello"},
		{"usr/ccc", 0o100600, "xyz"},
		{"bin", 0o120777, "usr/bin"},
		{"dev/console", 0o020600, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.name != w.name || g.mode != w.mode || string(g.data) != w.data {
			t.Errorf("entry %d = {%q %o %q}, want {%q %o %q}", i, g.name, g.mode, g.data, w.name, w.mode, w.data)
		}
		if g.headerOffset%4 != 0 {
			t.Errorf("entry %q header at unaligned offset %d", g.name, g.headerOffset)
		}
	}
	if c := got[6]; c.rmajor != 5 || c.rmin != 1 {
		t.Errorf("dev/console rdev = %d:%d, want 5:1", c.rmajor, c.rmin)
	}
}

func TestCPIOWriterErrors(t *testing.T) {
	tests := []struct {
		name string
		op   func(w *cpioWriter) error
	}{
		{"absolute name", func(w *cpioWriter) error { return w.Dir("/usr", 0o755) }},
		{"empty name", func(w *cpioWriter) error { return w.Dir("", 0o755) }},
		{"short file", func(w *cpioWriter) error { return w.File("a", 0o644, 10, strings.NewReader("abc")) }},
		{"after close", func(w *cpioWriter) error { w.Close(); return w.Dir("a", 0o755) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.op(newCPIOWriter(io.Discard)); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestCPIOWriterAgainstGNUCpio cross-checks the archive with GNU cpio when it
// is installed (apt-get install cpio).
func TestCPIOWriterAgainstGNUCpio(t *testing.T) {
	cpioBin, err := exec.LookPath("cpio")
	if err != nil {
		t.Skip("cpio not installed")
	}
	var buf bytes.Buffer
	w := newCPIOWriter(&buf)
	w.Dir("d", 0o755)
	w.File("d/f", 0o644, 3, strings.NewReader("abc"))
	w.Symlink("d/l", "f")
	w.Close()
	dir := t.TempDir()
	cmd := exec.Command(cpioBin, "-idm", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "d", "f")); err != nil || string(b) != "abc" {
		t.Errorf("d/f = %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dir, "d", "l")); err != nil || l != "f" {
		t.Errorf("d/l -> %q, %v", l, err)
	}
}

func TestCanonicalPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/bin/lowlat", "usr/bin/lowlat"},
		{"/sbin/ip", "usr/sbin/ip"},
		{"/usr/sbin/ip", "usr/sbin/ip"},
		{"/lib64/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2"},
		{"/lib/modules/x/a.ko", "usr/lib/modules/x/a.ko"},
		{"/libexec/x", "libexec/x"},
		{"/etc/../bin//x", "usr/bin/x"},
		{"/out", "out"},
	}
	for _, tt := range tests {
		if got, err := canonicalPath(tt.in); err != nil || got != tt.want {
			t.Errorf("canonicalPath(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"rel/path", "/", ""} {
		if _, err := canonicalPath(bad); err == nil {
			t.Errorf("canonicalPath(%q): no error", bad)
		}
	}
}

// TestInitramfsLayout builds an archive with a fake busybox and checks the
// merged-/usr layout, parent order and that busybox applets do not shadow
// real programs.
func TestInitramfsLayout(t *testing.T) {
	dir := t.TempDir()
	bb := filepath.Join(dir, "busybox")
	testELF{typ: 2 /* ET_EXEC */, sections: map[string][]byte{".text": {0xc3}}}.write(t, bb)
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/true\n"), 0o755)
	tree := filepath.Join(dir, "tree")
	os.MkdirAll(filepath.Join(tree, "sub"), 0o755)
	os.WriteFile(filepath.Join(tree, "sub", "x.json"), []byte("{}"), 0o644)
	os.Symlink("sub/x.json", filepath.Join(tree, "link"))

	ir := newInitramfs()
	for _, err := range []error{
		ir.hostFile("/bin/lowlat", prog, 0),
		ir.hostFile("/usr/sbin/ip", prog, 0), // stands for the real iproute2
		ir.data("/etc/x.conf", []byte("k=v\n"), 0o600),
		ir.hostTree("/src/fixtures", tree),
		ir.busybox(bb, []string{"bin/sh", "sbin/ip", "sbin/tc", "usr/bin/ip", "sbin/insmod", "linuxrc"}, newLibResolver("/")),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := ir.data("/bin/lowlat/x", nil, 0o644); err == nil {
		t.Error("adding a file below a file: no error")
	}
	var buf bytes.Buffer
	if err := ir.writeTo(&buf); err != nil {
		t.Fatal(err)
	}
	entries := readNewc(t, buf.Bytes())
	got := map[string]cpioEntry{}
	for _, e := range entries {
		if _, dup := got[e.name]; dup {
			t.Errorf("duplicate entry %q", e.name)
		}
		if parent := filepath.Dir(e.name); parent != "." {
			if _, ok := got[parent]; !ok {
				t.Errorf("%q comes before its parent %q", e.name, parent)
			}
		}
		got[e.name] = e
	}
	checks := []struct {
		name string
		mode uint32
		data string
	}{
		{"bin", 0o120777, "usr/bin"},
		{"sbin", 0o120777, "usr/sbin"},
		{"lib64", 0o120777, "usr/lib64"},
		{"usr/bin/lowlat", 0o100755, "#!/bin/true\n"},
		{"usr/sbin/ip", 0o100755, "#!/bin/true\n"},
		{"usr/bin/sh", 0o120777, "/usr/bin/busybox"},
		{"usr/sbin/insmod", 0o120777, "/usr/bin/busybox"},
		{"usr/sbin/tc", 0o120777, "/usr/bin/busybox"},
		{"etc/x.conf", 0o100600, "k=v\n"},
		{"src/fixtures/sub/x.json", 0o100644, "{}"},
		{"src/fixtures/link", 0o120777, "sub/x.json"},
		{"tmp", 0o041777, ""},
		{"dev/console", 0o020600, ""},
	}
	for _, c := range checks {
		e, ok := got[c.name]
		if !ok {
			t.Errorf("missing %q", c.name)
			continue
		}
		if e.mode != c.mode || string(e.data) != c.data {
			t.Errorf("%q = {%o %q}, want {%o %q}", c.name, e.mode, e.data, c.mode, c.data)
		}
	}
	if e, ok := got["usr/bin/ip"]; ok {
		t.Errorf("busybox ip link installed (%q) although /usr/sbin/ip is real", e.data)
	}
	if p := ir.lookPath("ip"); p != "/usr/sbin/ip" {
		t.Errorf("lookPath(ip) = %q, want the real one", p)
	}
	if p := ir.lookPath("tc"); p != "" {
		t.Errorf("lookPath(tc) = %q, want \"\" for a busybox applet", p)
	}
	if p := ir.lookPath("lowlat"); p != "/usr/bin/lowlat" {
		t.Errorf("lookPath(lowlat) = %q", p)
	}
}

func TestInitramfsHostBinary(t *testing.T) {
	const tc = "/usr/sbin/tc"
	if _, err := os.Stat(tc); err != nil {
		t.Skip("iproute2 not installed")
	}
	ir := newInitramfs()
	if err := ir.hostBinary(tc, newLibResolver("/")); err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range ir.entries {
		names = append(names, n)
	}
	all := strings.Join(names, "\n")
	for _, want := range []string{"usr/sbin/tc", "usr/lib64/ld-linux-x86-64.so.2", "libc.so.6"} {
		if !strings.Contains(all, want) {
			t.Errorf("entries lack %s:\n%s", want, all)
		}
	}
}
