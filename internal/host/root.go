package host

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Root is a view of a host's filesystem: the live host when Dir is "" or "/",
// otherwise a captured or fixture tree whose top stands for "/". All file-based
// facts are read through a Root value, never through a global, so the same code
// reads this machine, a tree a user sent, or a test fixture.
//
// Paths given to Root's methods are host paths ("/sys/class/net/eth0/mtu").
// In a tree, symbolic links are resolved by Root itself, as a chroot would:
// absolute targets and ".." never leave Dir. Captured sysfs trees rely on this,
// since /sys/class/net/eth0 is a relative link into /sys/devices.
type Root struct {
	Dir string

	// rec, when set, remembers every file, link and directory read so that
	// CaptureTree can copy exactly what lowlat looked at.
	rec *recorder
	// mem, when set, serves the tree from memory (MemTree) instead of Dir.
	mem *MemTree
	// dirs caches resolved directories of a tree (see NewRoot), so reading
	// a thousand files below one directory resolves its links once.
	dirs *dirCache
}

// NewRoot returns a Root for dir with a cache of resolved directories: the
// form to use for reading a tree more than a few files deep. A Root{Dir: dir}
// literal works too, resolving every path from the top. The cache assumes the
// tree does not change while it is read.
func NewRoot(dir string) Root {
	r := Root{Dir: dir}
	if !r.Live() {
		r.dirs = &dirCache{m: map[string]string{}}
	}
	return r
}

type dirCache struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *dirCache) get(dir string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rd, ok := c.m[dir]
	return rd, ok
}

func (c *dirCache) put(dir, resolved string) {
	c.mu.Lock()
	c.m[dir] = resolved
	c.mu.Unlock()
}

// maxLinks bounds symlink resolution like the kernel's MAXSYMLINKS.
const maxLinks = 40

// Live reports whether r is the running host rather than a tree.
func (r Root) Live() bool { return r.mem == nil && (r.Dir == "" || r.Dir == "/") }

func (r Root) String() string {
	if r.Live() {
		return "/"
	}
	return r.Dir
}

// osPath maps an already-resolved host path to the path on this machine.
func (r Root) osPath(p string) string {
	if r.Live() || r.mem != nil {
		return p
	}
	return filepath.Join(r.Dir, filepath.FromSlash(p))
}

// clean makes p an absolute, lexically clean host path.
func clean(p string) string { return path.Clean("/" + p) }

// resolve follows the symlinks in host path p inside the root and returns the
// resolved host path. The last element is followed only when followLast is set.
// On the live host without recording the kernel resolves paths itself, which is
// both correct and cheaper.
func (r Root) resolve(op, p string, followLast bool) (string, error) {
	p = clean(p)
	if r.Live() && (r.rec == nil || p == "/proc/net" || strings.HasPrefix(p, "/proc/net/")) {
		// /proc/net links to self/net, whose target is our own pid: a capture
		// keeps it as plain /proc/net rather than recording the pid.
		return p, nil
	}
	// With a cache (and no recorder, which must see every link), resolve the
	// parent directory once and walk only the last element.
	if r.dirs != nil && r.rec == nil && p != "/" {
		dir, base := path.Dir(p), path.Base(p)
		rd, ok := r.dirs.get(dir)
		if !ok {
			var err error
			if rd, err = r.resolve(op, dir, true); err != nil {
				return "", &fs.PathError{Op: op, Path: p, Err: underlying(err)}
			}
			r.dirs.put(dir, rd)
		}
		return r.walk(op, p, rd, []string{base}, followLast)
	}
	return r.walk(op, p, "/", strings.Split(strings.TrimPrefix(p, "/"), "/"), followLast)
}

// walk resolves the elements rest below the resolved host path resolved.
func (r Root) walk(op, p, resolved string, rest []string, followLast bool) (string, error) {
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			resolved = path.Dir(resolved)
			continue
		}
		next := path.Join(resolved, c)
		if len(rest) == 0 && !followLast {
			resolved = next
			break
		}
		fi, err := r.lstat(next)
		if err != nil {
			return "", &fs.PathError{Op: op, Path: p, Err: underlying(err)}
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			resolved = next
			continue
		}
		links++
		if links > maxLinks {
			return "", &fs.PathError{Op: op, Path: p, Err: syscall.ELOOP}
		}
		target, err := r.readlinkAt(next)
		if err != nil {
			return "", &fs.PathError{Op: op, Path: p, Err: underlying(err)}
		}
		r.rec.link(next, target)
		if path.IsAbs(target) {
			resolved = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return resolved, nil
}

// underlying strips the *PathError a tree operation returns, whose path names the
// tree on this machine: errors from Root always name the host path instead.
func underlying(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// ReadFile returns the content of host path p.
func (r Root) ReadFile(p string) ([]byte, error) {
	rp, err := r.resolve("open", p, true)
	if err != nil {
		return nil, err
	}
	b, err := r.readFileAt(rp, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: clean(p), Err: underlying(err)}
	}
	r.rec.file(rp, b)
	return b, nil
}

// Open opens host path p for streaming reads (large files such as
// /proc/interrupts on a big host). Reads through Open are not recorded for
// CaptureTree; use ReadFile for anything a capture must contain.
func (r Root) Open(p string) (io.ReadCloser, error) {
	rp, err := r.resolve("open", p, true)
	if err != nil {
		return nil, err
	}
	if r.mem != nil {
		b, err := r.mem.readFile(rp)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: clean(p), Err: err}
		}
		return newMemReader(b), nil
	}
	f, err := os.Open(r.osPath(rp))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: clean(p), Err: underlying(err)}
	}
	return f, nil
}

// ReadDir lists host directory p, sorted by name.
func (r Root) ReadDir(p string) ([]fs.DirEntry, error) {
	rp, err := r.resolve("open", p, true)
	if err != nil {
		return nil, err
	}
	ents, err := r.readDirAt(rp)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: clean(p), Err: underlying(err)}
	}
	if r.rec != nil {
		r.rec.dir(rp)
		for _, e := range ents {
			r.rec.entry(r, path.Join(rp, e.Name()), e.Type())
		}
	}
	return ents, nil
}

// ReadDirNames lists the names in host directory p, unsorted. It is the cheap
// form for directories such as /proc where only names matter; like Open it is
// not recorded for CaptureTree (a capture must not copy every process).
func (r Root) ReadDirNames(p string) ([]string, error) {
	rp, err := r.resolve("open", p, true)
	if err != nil {
		return nil, err
	}
	if r.mem != nil {
		ents, err := r.mem.readDir(rp)
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: clean(p), Err: err}
		}
		names := make([]string, len(ents))
		for i, e := range ents {
			names[i] = e.Name()
		}
		return names, nil
	}
	f, err := os.Open(r.osPath(rp))
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: clean(p), Err: underlying(err)}
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: clean(p), Err: underlying(err)}
	}
	if !r.Live() {
		names = slices.DeleteFunc(names, func(n string) bool { return n == TreeKeepFile })
	}
	return names, nil
}

// readDirResolved lists host directory p and also returns its resolved host
// path, so callers can read the regular files it lists with readAt without
// resolving each path again (the sysctl walk reads a thousand files).
func (r Root) readDirResolved(p string) (string, []fs.DirEntry, error) {
	rp, err := r.resolve("open", p, true)
	if err != nil {
		return "", nil, err
	}
	ents, err := r.readDirAt(rp)
	if err != nil {
		return "", nil, &fs.PathError{Op: "readdir", Path: clean(p), Err: underlying(err)}
	}
	if r.rec != nil {
		r.rec.dir(rp)
		for _, e := range ents {
			r.rec.entry(r, path.Join(rp, e.Name()), e.Type())
		}
	}
	return rp, ents, nil
}

// readAt reads the file name inside dir, a resolved host path containing no
// links (from readDirResolved or EvalSymlinks). name may have several
// elements when the intermediate ones were listed as directories. The last
// element is opened without following links, so a crafted tree cannot point
// it outside the root.
func (r Root) readAt(dir, name string) ([]byte, error) {
	rp := path.Join(dir, name)
	b, err := r.readFileAt(rp, oNoFollow)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rp, Err: underlying(err)}
	}
	r.rec.file(rp, b)
	return b, nil
}

// Readlink returns the target of the symbolic link at host path p, as stored.
func (r Root) Readlink(p string) (string, error) {
	rp, err := r.resolve("readlink", p, false)
	if err != nil {
		return "", err
	}
	t, err := r.readlinkAt(rp)
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: clean(p), Err: underlying(err)}
	}
	r.rec.link(rp, t)
	return t, nil
}

// EvalSymlinks returns host path p with every symbolic link resolved, as a host
// path (inside the root for a tree).
func (r Root) EvalSymlinks(p string) (string, error) {
	if r.Live() && r.rec == nil {
		rp, err := filepath.EvalSymlinks(clean(p))
		if err != nil {
			return "", &fs.PathError{Op: "lstat", Path: clean(p), Err: underlying(err)}
		}
		return rp, nil
	}
	rp, err := r.resolve("lstat", p, true)
	if err != nil {
		return "", err
	}
	fi, err := r.lstat(rp)
	if err != nil {
		return "", &fs.PathError{Op: "lstat", Path: clean(p), Err: underlying(err)}
	}
	// The target's existence is a fact (an empty device directory still
	// says the interface has a device): a capture keeps it.
	if r.rec != nil && fi.IsDir() {
		r.rec.dir(rp)
	}
	return rp, nil
}

// Stat returns information about host path p, following links.
func (r Root) Stat(p string) (fs.FileInfo, error) {
	rp, err := r.resolve("stat", p, true)
	if err != nil {
		return nil, err
	}
	var fi fs.FileInfo
	if r.Live() && r.rec == nil {
		fi, err = os.Stat(rp) // the kernel resolved nothing yet
	} else {
		fi, err = r.lstat(rp) // rp is resolved: never a link
	}
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: clean(p), Err: underlying(err)}
	}
	if r.rec != nil && fi.IsDir() {
		r.rec.dir(rp)
	}
	return fi, nil
}

// recorder remembers what was read through a Root, by resolved host path.
type recorder struct {
	mu    sync.Mutex
	files map[string][]byte
	links map[string]string
	dirs  map[string]bool
	// empty are directory entries seen in a listing but never read: they are
	// materialized as empty files so the listing looks the same (msi_irqs/N).
	empty map[string]bool
}

func newRecorder() *recorder {
	return &recorder{
		files: map[string][]byte{},
		links: map[string]string{},
		dirs:  map[string]bool{},
		empty: map[string]bool{},
	}
}

func (rc *recorder) file(p string, b []byte) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	rc.files[p] = b
	rc.mu.Unlock()
}

func (rc *recorder) link(p, target string) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	rc.links[p] = target
	rc.mu.Unlock()
}

func (rc *recorder) dir(p string) {
	if rc == nil {
		return
	}
	rc.mu.Lock()
	rc.dirs[p] = true
	rc.mu.Unlock()
}

// entry records one listed entry of a directory; links are read so the copy
// keeps them as links.
func (rc *recorder) entry(r Root, p string, t fs.FileMode) {
	switch {
	case t&fs.ModeSymlink != 0:
		if target, err := r.readlinkAt(p); err == nil {
			rc.link(p, target)
		}
	case t.IsDir():
		rc.dir(p)
	case strings.HasPrefix(p, "/proc/"):
		// procfs files that matter are read one by one (sysctls); an unread
		// one is write-only or secret and must not appear as an empty value.
	default:
		rc.mu.Lock()
		rc.empty[p] = true
		rc.mu.Unlock()
	}
}

// paths returns the recorded paths of a kind, sorted, for deterministic output.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The primitives below take resolved host paths and dispatch to the disk or
// to a MemTree.

var (
	// errNotExist is ENOENT, as a tree on disk says it: a MemTree's errors
	// read the same.
	errNotExist error = syscall.ENOENT
	errIsDir    error = syscall.EISDIR
	errLoop     error = syscall.ELOOP
	errNotDir   error = syscall.ENOTDIR
)

func (r Root) lstat(rp string) (fs.FileInfo, error) {
	if r.mem != nil {
		return r.mem.lstat(rp)
	}
	return os.Lstat(r.osPath(rp))
}

func (r Root) readlinkAt(rp string) (string, error) {
	if r.mem != nil {
		return r.mem.readlink(rp)
	}
	return os.Readlink(r.osPath(rp))
}

func (r Root) readFileAt(rp string, flags int) ([]byte, error) {
	if r.mem != nil {
		return r.mem.readFile(rp)
	}
	return readFileFlags(r.osPath(rp), flags)
}

func (r Root) readDirAt(rp string) ([]fs.DirEntry, error) {
	if r.mem != nil {
		return r.mem.readDir(rp)
	}
	ents, err := os.ReadDir(r.osPath(rp))
	if r.Live() {
		return ents, err
	}
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool { return e.Name() == TreeKeepFile }), err
}
