package vm

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

func TestParseModInfo(t *testing.T) {
	tests := []struct {
		name string
		in   []string
		want modInfo
	}{
		{"no deps", []string{"name=sch_netem", "depends=", "license=GPL"}, modInfo{name: "sch_netem"}},
		{"deps normalised", []string{"depends=nf-conntrack,ipv6", "name=x"}, modInfo{name: "x", depends: []string{"nf_conntrack", "ipv6"}}},
		{"softdep pre only", []string{"softdep=pre: crc32c-generic  post: foo", "name=y"}, modInfo{name: "y", softPre: []string{"crc32c_generic"}}},
		{"aliases", []string{"alias=net-sch-netem", "alias=tcf-netem"}, modInfo{aliases: []string{"net-sch-netem", "tcf-netem"}}},
		{"junk", []string{"", "novalue", "depends=a"}, modInfo{depends: []string{"a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b []byte
			for _, s := range tt.in {
				b = append(append(b, s...), 0)
			}
			if got := parseModInfo(b); !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("parseModInfo() = %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// fixtureModules writes a fake /lib/modules/<release> tree:
//
//	a -> b, c;  b -> c;  d softdep pre e;  f -> missing_x;  dash-name;
//	g built in.  b is .ko.xz, c .ko.zst, e .ko.gz, the rest plain .ko.
func fixtureModules(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "6.1.0-test-amd64")
	mods := []struct {
		rel string
		kv  []string
	}{
		{"kernel/net/sched/a.ko", []string{"name=a", "depends=b,c", "alias=net-a"}},
		{"kernel/net/sched/b.ko.xz", []string{"name=b", "depends=c"}},
		{"kernel/lib/c.ko.zst", []string{"name=c", "depends="}},
		{"kernel/net/d.ko", []string{"name=d", "depends=", "softdep=pre: e absent"}},
		{"kernel/net/e.ko.gz", []string{"name=e", "depends="}},
		{"kernel/net/f.ko", []string{"name=f", "depends=missing_x"}},
		{"kernel/drivers/net/dash-name.ko", []string{"name=dash_name", "depends="}},
	}
	for _, m := range mods {
		p := filepath.Join(dir, m.rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		raw := modinfoELF(m.kv...).bytes(t)
		var buf bytes.Buffer
		switch {
		case strings.HasSuffix(p, ".xz"):
			w, _ := xz.NewWriter(&buf)
			w.Write(raw)
			w.Close()
		case strings.HasSuffix(p, ".zst"):
			w, _ := zstd.NewWriter(&buf)
			w.Write(raw)
			w.Close()
		case strings.HasSuffix(p, ".gz"):
			w := gzip.NewWriter(&buf)
			w.Write(raw)
			w.Close()
		default:
			buf.Write(raw)
		}
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(dir, "modules.builtin"), []byte("kernel/net/sched/g.ko\nkernel/net/sched/sch_fq_codel.ko\n"), 0o644)
	return dir
}

func TestResolveModulesFixture(t *testing.T) {
	tree, err := openModuleTree(fixtureModules(t))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name               string
		required, optional []string
		load, builtin      []string
		missing            []string
		wantErr            string
	}{
		{
			name:     "deps first, builtin skipped, optional missing reported",
			required: []string{"a", "g", "d", "dash-name"},
			optional: []string{"h", "e", "a"},
			load:     []string{"c", "b", "a", "e", "d", "dash_name"},
			builtin:  []string{"g"},
			missing:  []string{"h"},
		},
		{name: "file name forms", required: []string{"c.ko", "kernel/net/sched/b.ko.xz"}, load: []string{"c", "b"}},
		{name: "missing required", required: []string{"a", "zz"}, wantErr: "zz"},
		{name: "missing dependency names its chain", required: []string{"f"}, wantErr: "f -> missing_x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := resolveModules(tree, tt.required, tt.optional)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(res.load, tt.load) {
				t.Errorf("load = %v, want %v", res.load, tt.load)
			}
			if !reflect.DeepEqual(res.builtin, tt.builtin) {
				t.Errorf("builtin = %v, want %v", res.builtin, tt.builtin)
			}
			if !reflect.DeepEqual(res.missingOptional, tt.missing) {
				t.Errorf("missingOptional = %v, want %v", res.missingOptional, tt.missing)
			}
		})
	}
}

func TestModulesDepFixture(t *testing.T) {
	tree, err := openModuleTree(fixtureModules(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := resolveModules(tree, []string{"a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dep, alias, err := modulesDep(tree, res.load)
	if err != nil {
		t.Fatal(err)
	}
	wantDep := "kernel/lib/c.ko:\n" +
		"kernel/net/sched/b.ko: kernel/lib/c.ko\n" +
		"kernel/net/sched/a.ko: kernel/net/sched/b.ko kernel/lib/c.ko\n"
	if string(dep) != wantDep {
		t.Errorf("modules.dep:\n%s\nwant:\n%s", dep, wantDep)
	}
	if string(alias) != "alias net-a a\n" {
		t.Errorf("modules.alias = %q", alias)
	}
}

func TestReadModuleDecompresses(t *testing.T) {
	dir := fixtureModules(t)
	for _, rel := range []string{"kernel/net/sched/b.ko.xz", "kernel/lib/c.ko.zst", "kernel/net/e.ko.gz", "kernel/net/d.ko"} {
		b, err := readModule(filepath.Join(dir, rel))
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if _, err := parseModInfoELF(b); err != nil {
			t.Errorf("%s: %v", rel, err)
		}
	}
}

// fakeModules is a moduleSource from a map, for graph shapes a module tree
// cannot have on disk.
type fakeModules map[string][]string

func (f fakeModules) has(n string) bool       { _, ok := f[n]; return ok }
func (f fakeModules) isBuiltin(n string) bool { return false }
func (f fakeModules) info(n string) (*modInfo, error) {
	return &modInfo{name: n, depends: f[n]}, nil
}

func TestResolveModulesCycle(t *testing.T) {
	_, err := resolveModules(fakeModules{"a": {"b"}, "b": {"c"}, "c": {"a"}}, []string{"a"}, nil)
	if err == nil || !strings.Contains(err.Error(), "cycle: a -> b -> c -> a") {
		t.Fatalf("err = %v, want a cycle error", err)
	}
}

func TestResolveModulesDiamond(t *testing.T) {
	res, err := resolveModules(fakeModules{"top": {"l", "r"}, "l": {"base"}, "r": {"base"}, "base": nil}, []string{"top", "r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"base", "l", "r", "top"}; !reflect.DeepEqual(res.load, want) {
		t.Errorf("load = %v, want %v", res.load, want)
	}
}

// TestDefaultModulesInCachedDebianKernel checks the default set against the
// real Debian kernel when one is cached (no download here).
func TestDefaultModulesInCachedDebianKernel(t *testing.T) {
	k := newestCachedKernel(filepath.Join(DefaultCacheDir(), "kernels"))
	if k == nil {
		t.Skip("no Debian kernel in the cache")
	}
	tree, err := openModuleTree(k.ModulesDir)
	if err != nil {
		t.Fatal(err)
	}
	res, err := resolveModules(tree, DefaultModules, DefaultOptionalModules)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: load %v, builtin %v, missing %v", k.Release, res.load, res.builtin, res.missingOptional)
	loaded := map[string]bool{}
	for _, m := range res.load {
		loaded[m] = true
	}
	for _, m := range res.builtin {
		loaded[m] = true
	}
	for _, m := range DefaultModules {
		if !loaded[m] {
			t.Errorf("%s neither loaded nor built in", m)
		}
	}
}
