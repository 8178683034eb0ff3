package vm

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeLibRoot creates the files of a rooted fixture tree (contents do not
// matter: readELF is faked) and returns its root.
func fakeLibRoot(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestLibResolver(t *testing.T) {
	root := fakeLibRoot(t,
		"/usr/sbin/prog",
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/lib/x86_64-linux-gnu/liba.so.1",
		"/opt/app/lib/libpriv.so",
		"/opt/custom/libcustom.so.2",
		"/etc/ld.so.conf.d/custom.conf",
	)
	os.WriteFile(filepath.Join(root, "etc/ld.so.conf"), []byte("# comment\ninclude /etc/ld.so.conf.d/*.conf\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/ld.so.conf.d/custom.conf"), []byte("/opt/custom\n"), 0o644)

	infos := map[string]*elfInfo{
		"/usr/sbin/prog":                  {interp: "/lib64/ld-linux-x86-64.so.2", needed: []string{"liba.so.1", "libc.so.6"}},
		"/lib/x86_64-linux-gnu/liba.so.1": {needed: []string{"libpriv.so", "libcustom.so.2", "libc.so.6"}, runpath: []string{"$ORIGIN/../../../opt/app/lib"}},
		"/lib/x86_64-linux-gnu/libc.so.6": {needed: []string{"ld-linux-x86-64.so.2"}},
		"/opt/app/lib/libpriv.so":         {},
		"/opt/custom/libcustom.so.2":      {},
		"/usr/sbin/broken":                {needed: []string{"libnowhere.so"}},
		"/usr/sbin/static":                {},
	}
	r := newLibResolver(root)
	r.readELF = func(hostPath string) (*elfInfo, error) {
		rel := "/" + strings.TrimPrefix(filepath.ToSlash(strings.TrimPrefix(hostPath, root)), "/")
		if info, ok := infos[rel]; ok {
			return info, nil
		}
		return nil, fs.ErrNotExist
	}
	// ld-linux is also found as a library by name in /lib64.
	got, err := r.resolve("/usr/sbin/prog")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/lib64/ld-linux-x86-64.so.2",
		"/lib/x86_64-linux-gnu/liba.so.1",
		"/lib/x86_64-linux-gnu/libc.so.6",
		"/opt/app/lib/libpriv.so",
		"/opt/custom/libcustom.so.2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("resolve(prog) =\n%v\nwant\n%v", got, want)
	}
	if got, err := r.resolve("/usr/sbin/static"); err != nil || len(got) != 0 {
		t.Errorf("resolve(static) = %v, %v; want nothing", got, err)
	}
	if _, err := r.resolve("/usr/sbin/broken"); err == nil || !strings.Contains(err.Error(), "libnowhere.so") {
		t.Errorf("resolve(broken) err = %v, want one naming the library", err)
	}
}

func TestLibResolverRealHost(t *testing.T) {
	bin := "/bin/ls"
	if _, err := os.Stat(bin); err != nil {
		t.Skip(err)
	}
	got, err := newLibResolver("/").resolve(bin)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(got, " ")
	if !strings.Contains(got[0], "ld-linux") || !strings.Contains(all, "libc.so.6") {
		t.Errorf("resolve(%s) = %v, want the interpreter first and libc", bin, got)
	}
	if static, err := isStaticELF(bin); err != nil || static {
		t.Errorf("isStaticELF(%s) = %v, %v", bin, static, err)
	}
}
