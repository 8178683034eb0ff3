package vm

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// fakeBzImage wraps payload the way a bzImage does: setup sectors with the
// "HdrS" header recording payload_offset and payload_length.
func fakeBzImage(payload []byte) []byte {
	const setupSects = 2
	img := make([]byte, (setupSects+1)*512+64)
	img[0x1f1] = setupSects
	copy(img[0x202:], "HdrS")
	binary.LittleEndian.PutUint16(img[0x206:], 0x20f)
	binary.LittleEndian.PutUint32(img[0x248:], 64) // payload_offset
	binary.LittleEndian.PutUint32(img[0x24c:], uint32(len(payload)))
	img = append(img, payload...)
	return append(img, 1, 2, 3, 4) // trailing size word, as in real images
}

func TestExtractVmlinux(t *testing.T) {
	pvh := testELF{typ: 2, sections: map[string][]byte{".text": {0x90}},
		note: append(elfNote("Xen", 6, []byte("linux\x00")), elfNote("Xen", xenElfnotePhys32Entry, []byte{0, 0, 0, 1})...)}.bytes(t)
	noPVH := testELF{typ: 2, sections: map[string][]byte{".text": {0x90}}, note: elfNote("GNU", 3, []byte{1, 2, 3, 4})}.bytes(t)
	gz := func(b []byte) []byte {
		var buf bytes.Buffer
		w := gzip.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	zst := func(b []byte) []byte {
		var buf bytes.Buffer
		w, _ := zstd.NewWriter(&buf)
		w.Write(b)
		w.Close()
		return buf.Bytes()
	}
	tests := []struct {
		name    string
		img     []byte
		want    []byte
		wantErr string
	}{
		{"gzip", fakeBzImage(gz(pvh)), pvh, ""},
		{"zstd", fakeBzImage(zst(pvh)), pvh, ""},
		{"no PVH note", fakeBzImage(gz(noPVH)), nil, "PVH"},
		{"unknown compression", fakeBzImage([]byte("BZh91AY&SY")), nil, "unsupported payload compression"},
		{"not a bzImage", []byte("hello"), nil, "not a bzImage"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "vmlinux")
			os.WriteFile(src, tt.img, 0o644)
			err := extractVmlinux(src, dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if _, serr := os.Stat(dst); serr == nil {
					t.Error("output left behind after an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(dst); !bytes.Equal(got, tt.want) {
				t.Error("extracted kernel differs from the payload")
			}
		})
	}
}

func TestPVHKernelCachesExtraction(t *testing.T) {
	dir := t.TempDir()
	pvh := testELF{typ: 2, sections: map[string][]byte{".text": {0x90}}, note: elfNote("Xen", xenElfnotePhys32Entry, []byte{0, 0, 0, 1})}.bytes(t)
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(pvh)
	w.Close()
	img := filepath.Join(dir, "vmlinuz-x")
	os.WriteFile(img, fakeBzImage(buf.Bytes()), 0o644)
	cache := filepath.Join(dir, "cache")
	k := &Kernel{Image: img}
	p1 := pvhKernel(k, cache, nil)
	if p1 == "" || !strings.HasPrefix(p1, cache) {
		t.Fatalf("pvhKernel = %q, want a file in the cache", p1)
	}
	if p2 := pvhKernel(k, cache, nil); p2 != p1 {
		t.Errorf("second call = %q, want the cached %q", p2, p1)
	}
	// An ELF kernel with the note is used as it is.
	if p := pvhKernel(&Kernel{Image: p1}, cache, nil); p != p1 {
		t.Errorf("ELF kernel: pvhKernel = %q, want %q", p, p1)
	}
	// A kernel that cannot be extracted falls back to the bzImage ("").
	bad := filepath.Join(dir, "vmlinuz-bad")
	os.WriteFile(bad, []byte("not a kernel"), 0o644)
	if p := pvhKernel(&Kernel{Image: bad}, cache, nil); p != "" {
		t.Errorf("bad kernel: pvhKernel = %q, want \"\"", p)
	}
}

func TestSortKernelPackages(t *testing.T) {
	got := []string{"linux-image-6.1.0-9-amd64", "linux-image-6.1.0-48-amd64", "linux-image-6.1.0-10-amd64"}
	sortKernelPackages(got)
	want := []string{"linux-image-6.1.0-9-amd64", "linux-image-6.1.0-10-amd64", "linux-image-6.1.0-48-amd64"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sorted = %v, want %v", got, want)
	}
	for _, n := range []string{"linux-image-6.1.0-48-cloud-amd64", "linux-image-6.1.0-48-amd64-unsigned", "linux-image-amd64"} {
		if debianKernelRE.MatchString(n) {
			t.Errorf("%s matched", n)
		}
	}
}

func TestCachedKernel(t *testing.T) {
	kdir := t.TempDir()
	mk := func(pkg, release string, complete bool) {
		d := filepath.Join(kdir, pkg)
		os.MkdirAll(filepath.Join(d, "boot"), 0o755)
		os.MkdirAll(filepath.Join(d, "lib", "modules", release, "kernel"), 0o755)
		os.WriteFile(filepath.Join(d, "boot", "vmlinuz-"+release), []byte("k"), 0o644)
		if complete {
			os.WriteFile(filepath.Join(d, completeStamp), []byte(pkg+" 1.0\n"), 0o644)
		}
	}
	mk("linux-image-6.1.0-9-amd64", "6.1.0-9-amd64", true)
	mk("linux-image-6.1.0-12-amd64", "6.1.0-12-amd64", true)
	mk("linux-image-6.1.0-13-amd64", "6.1.0-13-amd64", false) // interrupted extraction
	k := newestCachedKernel(kdir)
	if k == nil || k.Release != "6.1.0-12-amd64" || k.Package != "linux-image-6.1.0-12-amd64 1.0" {
		t.Fatalf("newestCachedKernel = %+v", k)
	}
	if !strings.HasSuffix(k.ModulesDir, filepath.Join("lib", "modules", "6.1.0-12-amd64")) {
		t.Errorf("ModulesDir = %s", k.ModulesDir)
	}
	if k := cachedKernel(kdir, "linux-image-6.1.0-13-amd64"); k != nil {
		t.Errorf("incomplete extraction used: %+v", k)
	}
}

func TestLocalKernel(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "bzImage")
	os.WriteFile(img, []byte("k"), 0o644)
	md := filepath.Join(dir, "lib", "modules", "6.9.0-custom")
	os.MkdirAll(md, 0o755)
	k, err := LocalKernel(img, md+"/")
	if err != nil || k.Release != "6.9.0-custom" || k.Image != img {
		t.Fatalf("LocalKernel = %+v, %v", k, err)
	}
	if _, err := LocalKernel(filepath.Join(dir, "nope"), ""); err == nil {
		t.Error("missing image accepted")
	}
	if _, err := LocalKernel(img, img); err == nil {
		t.Error("modules dir that is a file accepted")
	}
}

func TestDefaultCacheDir(t *testing.T) {
	t.Setenv("LOWLAT_VM_CACHE", "/c/vm")
	if got := DefaultCacheDir(); got != "/c/vm" {
		t.Errorf("with LOWLAT_VM_CACHE: %s", got)
	}
	t.Setenv("LOWLAT_VM_CACHE", "")
	t.Setenv("XDG_CACHE_HOME", "/xdg")
	if got := DefaultCacheDir(); got != "/xdg/lowlat/vm" {
		t.Errorf("with XDG_CACHE_HOME: %s", got)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/u")
	if got := DefaultCacheDir(); got != "/home/u/.cache/lowlat/vm" {
		t.Errorf("with HOME: %s", got)
	}
}
