package vm

import (
	"bufio"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// elfInfo is what copying a dynamically linked program needs from its ELF
// headers.
type elfInfo struct {
	interp  string   // PT_INTERP, "" for a static binary
	needed  []string // DT_NEEDED
	runpath []string // DT_RUNPATH, or DT_RPATH when there is no RUNPATH
}

func readELFInfo(p string) (*elfInfo, error) {
	f, err := elf.Open(p)
	if err != nil {
		return nil, fmt.Errorf("elf %s: %w", p, err)
	}
	defer f.Close()
	info := &elfInfo{}
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_INTERP {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return nil, fmt.Errorf("elf %s: read PT_INTERP: %w", p, err)
		}
		info.interp = strings.TrimRight(string(b), "\x00")
	}
	if f.Section(".dynamic") == nil {
		return info, nil
	}
	if info.needed, err = f.DynString(elf.DT_NEEDED); err != nil {
		return nil, fmt.Errorf("elf %s: DT_NEEDED: %w", p, err)
	}
	rp, _ := f.DynString(elf.DT_RUNPATH)
	if len(rp) == 0 {
		rp, _ = f.DynString(elf.DT_RPATH)
	}
	for _, s := range rp {
		info.runpath = append(info.runpath, filepath.SplitList(s)...)
	}
	return info, nil
}

// defaultLibDirs is glibc's search order after ld.so.cache on Debian amd64.
var defaultLibDirs = []string{
	"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
	"/lib64", "/usr/lib64", "/lib", "/usr/lib",
}

// libResolver finds the shared libraries a program needs the way the dynamic
// loader would, under root (a rooted view: "/" on a real host, a fixture tree
// in tests).
type libResolver struct {
	root    string
	dirs    []string // ld.so.conf directories, then the defaults
	readELF func(hostPath string) (*elfInfo, error)
}

func newLibResolver(root string) *libResolver {
	r := &libResolver{root: root, readELF: readELFInfo}
	r.dirs = append(parseLdSoConf(root, "/etc/ld.so.conf", 0), defaultLibDirs...)
	return r
}

// parseLdSoConf reads ld.so.conf and the files its "include" lines name.
func parseLdSoConf(root, name string, depth int) []string {
	if depth > 8 {
		return nil
	}
	f, err := os.Open(filepath.Join(root, name))
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "include"); ok && (strings.HasPrefix(rest, " ") || strings.HasPrefix(rest, "\t")) {
			for _, pat := range strings.Fields(rest) {
				if !path.IsAbs(pat) {
					pat = path.Join(path.Dir(name), pat)
				}
				matches, _ := filepath.Glob(filepath.Join(root, pat))
				for _, m := range matches {
					rel, err := filepath.Rel(root, m)
					if err != nil {
						continue
					}
					dirs = append(dirs, parseLdSoConf(root, "/"+filepath.ToSlash(rel), depth+1)...)
				}
			}
			continue
		}
		dirs = append(dirs, line)
	}
	return dirs
}

// hostFile maps a guest-style absolute path to the file under root.
func (r *libResolver) hostFile(p string) string { return filepath.Join(r.root, p) }

func (r *libResolver) exists(p string) bool {
	st, err := os.Stat(r.hostFile(p))
	return err == nil && st.Mode().IsRegular()
}

// resolve returns the ELF interpreter and every shared library program needs,
// transitively, as absolute paths (relative to root) at which the dynamic
// loader will look for them. Each is listed once, the interpreter first. A
// static program gives an empty list.
func (r *libResolver) resolve(program string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	queue := []string{program}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		info, err := r.readELF(r.hostFile(p))
		if err != nil {
			return nil, err
		}
		if info.interp != "" && !seen[info.interp] {
			if !r.exists(info.interp) {
				return nil, fmt.Errorf("elf %s: interpreter %s: %w", p, info.interp, fs.ErrNotExist)
			}
			seen[info.interp] = true
			out = append(out, info.interp)
		}
		for _, lib := range info.needed {
			found, err := r.find(lib, p, info.runpath)
			if err != nil {
				return nil, err
			}
			if seen[found] {
				continue
			}
			seen[found] = true
			out = append(out, found)
			queue = append(queue, found)
		}
	}
	return out, nil
}

func (r *libResolver) find(lib, from string, runpath []string) (string, error) {
	if strings.Contains(lib, "/") {
		if r.exists(lib) {
			return path.Clean(lib), nil
		}
		return "", fmt.Errorf("elf %s: needed %s: %w", from, lib, fs.ErrNotExist)
	}
	var dirs []string
	for _, d := range runpath {
		d = strings.ReplaceAll(d, "$ORIGIN", path.Dir(from))
		d = strings.ReplaceAll(d, "${ORIGIN}", path.Dir(from))
		dirs = append(dirs, d)
	}
	dirs = append(dirs, r.dirs...)
	for _, d := range dirs {
		if c := path.Join(d, lib); r.exists(c) {
			return c, nil
		}
	}
	return "", fmt.Errorf("elf %s: needed library %s not found in %s: %w", from, lib, strings.Join(dirs, ":"), fs.ErrNotExist)
}

// isStaticELF reports whether the file is an ELF executable without an
// interpreter (busybox-static, a CGO_ENABLED=0 Go binary).
func isStaticELF(p string) (bool, error) {
	info, err := readELFInfo(p)
	if err != nil {
		return false, err
	}
	return info.interp == "" && len(info.needed) == 0, nil
}
