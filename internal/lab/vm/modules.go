package vm

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// DefaultModules are the kernel modules every VM loads: the qdiscs, classifiers,
// actions and virtual devices lowlat's tests and lab scenarios use. A module
// the kernel has built in is skipped; one it lacks altogether is an error.
var DefaultModules = []string{
	"sch_fq_codel", "sch_fq", "sch_cake", "sch_netem", "sch_prio", "sch_sfq",
	"sch_codel", "sch_htb", "sch_tbf", "sch_ingress", "sch_mqprio",
	"cls_u32", "cls_matchall", "cls_bpf", "act_mirred", "act_skbedit",
	"ifb", "veth", "dummy", "tcp_bbr",
	// The MSS clamp is an nftables table (its meta, cmp, payload, bitwise,
	// exthdr, counter and immediate expressions are nf_tables' own).
	// nf_tables needs libcrc32c, whose init needs a "crc32c" hash: its
	// softdep names that alias, which the resolver does not look up, so
	// the generic implementation is named here, ahead of it.
	"crc32c_generic", "nf_tables",
	// The socket audit and sock_ops' live-socket half list connections
	// through inet_diag (the nagle-small-messages sock_ops variant).
	"inet_diag", "tcp_diag",
}

// DefaultOptionalModules are loaded when the kernel ships them and skipped
// (reported in Result.MissingModules) when it does not: Debian's 6.1 kernels are
// built without CONFIG_NETDEVSIM.
var DefaultOptionalModules = []string{"netdevsim"}

// moduleName normalises a module name the way the kernel does: '-' and '_' are
// the same character in module names.
func moduleName(s string) string {
	s = filepath.Base(s)
	s = trimModuleExt(s)
	return strings.ReplaceAll(s, "-", "_")
}

var moduleExts = []string{".ko.xz", ".ko.zst", ".ko.gz", ".ko"}

func trimModuleExt(s string) string {
	for _, ext := range moduleExts {
		if strings.HasSuffix(s, ext) {
			return strings.TrimSuffix(s, ext)
		}
	}
	return s
}

func isModuleFile(s string) bool {
	for _, ext := range moduleExts {
		if strings.HasSuffix(s, ext) {
			return true
		}
	}
	return false
}

// moduleTree indexes one kernel's /lib/modules/<release> directory.
type moduleTree struct {
	dir     string
	paths   map[string]string // module name -> path relative to dir
	builtin map[string]bool
	infos   map[string]*modInfo
}

// modInfo is what the loader needs from a module's .modinfo section.
type modInfo struct {
	name    string
	depends []string
	softPre []string // "softdep=pre: a b": loaded first when present
	aliases []string
}

func openModuleTree(dir string) (*moduleTree, error) {
	t := &moduleTree{dir: dir, paths: map[string]string{}, builtin: map[string]bool{}, infos: map[string]*modInfo{}}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !isModuleFile(d.Name()) {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		name := moduleName(d.Name())
		// Prefer the first path found, like depmod's search order does for
		// kernel/ over extra/: WalkDir is lexical, good enough here.
		if _, dup := t.paths[name]; !dup {
			t.paths[name] = rel
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("modules %s: %w", dir, err)
	}
	if f, err := os.Open(filepath.Join(dir, "modules.builtin")); err == nil {
		t.builtin = parseModulesBuiltin(f)
		f.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("modules %s: %w", dir, err)
	}
	if len(t.paths) == 0 && len(t.builtin) == 0 {
		return nil, fmt.Errorf("modules %s: no kernel modules found", dir)
	}
	return t, nil
}

// parseModulesBuiltin reads modules.builtin ("kernel/net/sched/sch_fq_codel.ko"
// per line) into a set of module names.
func parseModulesBuiltin(r io.Reader) map[string]bool {
	set := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			set[moduleName(line)] = true
		}
	}
	return set
}

// info reads and caches a module's .modinfo.
func (t *moduleTree) info(name string) (*modInfo, error) {
	if mi, ok := t.infos[name]; ok {
		return mi, nil
	}
	rel, ok := t.paths[name]
	if !ok {
		return nil, fmt.Errorf("module %s: %w", name, fs.ErrNotExist)
	}
	data, err := readModule(filepath.Join(t.dir, rel))
	if err != nil {
		return nil, err
	}
	mi, err := parseModInfoELF(data)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", rel, err)
	}
	if mi.name == "" {
		mi.name = name
	}
	t.infos[name] = mi
	return mi, nil
}

// readModule returns a module file's bytes, decompressed if it is a .ko.xz,
// .ko.zst or .ko.gz (Debian trixie and Ubuntu compress their modules; bookworm
// does not). busybox insmod hands the bytes to init_module(2), which wants a
// plain ELF object, so modules go into the initramfs decompressed.
func readModule(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".ko.xz"):
		r, err = xz.NewReader(bytes.NewReader(raw))
	case strings.HasSuffix(path, ".ko.zst"):
		var d *zstd.Decoder
		d, err = zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1))
		if err == nil {
			defer d.Close()
			r = d
		}
	case strings.HasSuffix(path, ".ko.gz"):
		r, err = gzip.NewReader(bytes.NewReader(raw))
	default:
		return raw, nil
	}
	if err != nil {
		return nil, fmt.Errorf("module %s: decompress: %w", path, err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("module %s: decompress: %w", path, err)
	}
	return out, nil
}

// parseModInfoELF reads the NUL-separated key=value strings of a module's
// .modinfo section: "depends=a,b", "softdep=pre: c", "alias=...", "name=...".
func parseModInfoELF(data []byte) (*modInfo, error) {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("read ELF: %w", err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, errors.New("no .modinfo section (not a kernel module?)")
	}
	b, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("read .modinfo: %w", err)
	}
	return parseModInfo(b), nil
}

func parseModInfo(b []byte) *modInfo {
	mi := &modInfo{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		k, v, ok := strings.Cut(string(kv), "=")
		if !ok {
			continue
		}
		switch k {
		case "name":
			mi.name = moduleName(v)
		case "depends":
			for _, d := range strings.Split(v, ",") {
				if d = strings.TrimSpace(d); d != "" {
					mi.depends = append(mi.depends, moduleName(d))
				}
			}
		case "softdep":
			// "pre: a b post: c": only pre dependencies must be loaded first.
			pre := false
			for _, w := range strings.Fields(v) {
				switch w {
				case "pre:":
					pre = true
				case "post:":
					pre = false
				default:
					if pre {
						mi.softPre = append(mi.softPre, moduleName(w))
					}
				}
			}
		case "alias":
			mi.aliases = append(mi.aliases, v)
		}
	}
	return mi
}

// moduleSource is what resolveModules needs from a kernel's module tree, so the
// dependency walk can be tested on fixture data.
type moduleSource interface {
	has(name string) bool
	isBuiltin(name string) bool
	info(name string) (*modInfo, error)
}

func (t *moduleTree) has(name string) bool       { _, ok := t.paths[name]; return ok }
func (t *moduleTree) isBuiltin(name string) bool { return t.builtin[name] }

// moduleResolution is the outcome of resolving a module set.
type moduleResolution struct {
	// load lists the loadable modules, each after everything it depends on.
	load []string
	// builtin lists the requested modules the kernel has built in.
	builtin []string
	// missingOptional lists optional modules the kernel has neither as a
	// module nor built in.
	missingOptional []string
}

// resolveModules orders required and optional modules (and their
// dependencies, and their "pre" soft dependencies when present) so that each
// comes after the modules it needs. A required module, or any module's hard
// dependency, that the kernel lacks is an error naming all of them.
func resolveModules(src moduleSource, required, optional []string) (*moduleResolution, error) {
	res := &moduleResolution{}
	const (
		visiting = 1
		done     = 2
	)
	state := map[string]int{}
	seenBuiltin := map[string]bool{}
	var missing []string
	var visit func(name string, chain []string) error
	visit = func(name string, chain []string) error {
		switch state[name] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("module dependency cycle: %s -> %s", strings.Join(chain, " -> "), name)
		}
		if !src.has(name) {
			if src.isBuiltin(name) {
				state[name] = done
				return nil
			}
			missing = append(missing, strings.Join(append(chain, name), " -> "))
			state[name] = done
			return nil
		}
		state[name] = visiting
		mi, err := src.info(name)
		if err != nil {
			return err
		}
		chain = append(chain, name)
		for _, sd := range mi.softPre {
			if src.has(sd) {
				if err := visit(sd, chain); err != nil {
					return err
				}
			}
		}
		for _, d := range mi.depends {
			if err := visit(d, chain); err != nil {
				return err
			}
		}
		state[name] = done
		res.load = append(res.load, name)
		return nil
	}
	for _, group := range []struct {
		names    []string
		optional bool
	}{{required, false}, {optional, true}} {
		for _, raw := range group.names {
			name := moduleName(raw)
			if !src.has(name) && src.isBuiltin(name) {
				if !seenBuiltin[name] {
					seenBuiltin[name] = true
					res.builtin = append(res.builtin, name)
				}
				continue
			}
			if group.optional && !src.has(name) {
				res.missingOptional = append(res.missingOptional, name)
				continue
			}
			if err := visit(name, nil); err != nil {
				return nil, err
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("kernel modules not in this kernel (neither a .ko nor built in): %s", strings.Join(missing, ", "))
	}
	return res, nil
}

// modulesDep renders modules.dep and modules.alias for the loaded subset, so
// busybox modprobe (and the kernel's request_module, which runs it) work in
// the guest too.
func modulesDep(t *moduleTree, load []string) (dep, alias []byte, err error) {
	var db, ab bytes.Buffer
	for _, name := range load {
		mi, err := t.info(name)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(&db, "%s:", guestModulePath(t.paths[name]))
		// modules.dep lists all transitive dependencies, nearest last.
		for _, d := range transitiveDeps(t, name) {
			fmt.Fprintf(&db, " %s", guestModulePath(t.paths[d]))
		}
		db.WriteByte('\n')
		for _, a := range mi.aliases {
			fmt.Fprintf(&ab, "alias %s %s\n", a, name)
		}
	}
	return db.Bytes(), ab.Bytes(), nil
}

func transitiveDeps(t *moduleTree, name string) []string {
	var out []string
	seen := map[string]bool{name: true}
	var walk func(n string)
	walk = func(n string) {
		mi, err := t.info(n)
		if err != nil {
			return
		}
		for _, d := range mi.depends {
			if seen[d] || !t.has(d) {
				continue
			}
			seen[d] = true
			out = append(out, d)
			walk(d)
		}
	}
	walk(name)
	return out
}

// guestModulePath is a module's path relative to /lib/modules/<release> in the
// guest: always the uncompressed .ko.
func guestModulePath(rel string) string {
	return trimModuleExt(filepath.ToSlash(rel)) + ".ko"
}
