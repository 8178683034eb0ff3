package host

import (
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"
)

// MemTree is a host tree held in memory, for generated hosts and tests that
// would otherwise write thousands of small files only to read them back. A
// Root from MemTree.Root behaves exactly like a Root over the same tree on
// disk, links resolved inside it.
type MemTree struct {
	files    map[string][]byte
	links    map[string]string
	dirs     map[string]bool
	children map[string]map[string]bool
}

// NewMemTree returns an empty tree holding only "/".
func NewMemTree() *MemTree {
	m := &MemTree{files: map[string][]byte{}, links: map[string]string{}, dirs: map[string]bool{"/": true},
		children: map[string]map[string]bool{}}
	return m
}

func (m *MemTree) addParents(p string) {
	for p != "/" {
		dir := path.Dir(p)
		if m.children[dir] == nil {
			m.children[dir] = map[string]bool{}
		}
		m.children[dir][path.Base(p)] = true
		if m.dirs[dir] {
			return
		}
		m.dirs[dir] = true
		p = dir
	}
}

// WriteFile adds a file at host path p.
func (m *MemTree) WriteFile(p string, b []byte) {
	p = clean(p)
	m.files[p] = b
	m.addParents(p)
}

// Symlink adds a symbolic link at host path p pointing to target (relative
// or absolute, as stored on disk).
func (m *MemTree) Symlink(target, p string) {
	p = clean(p)
	m.links[p] = target
	m.addParents(p)
}

// Mkdir adds a directory (and its parents).
func (m *MemTree) Mkdir(p string) {
	p = clean(p)
	m.dirs[p] = true
	m.addParents(p)
}

// Root returns a Root reading this tree.
func (m *MemTree) Root() Root { return Root{Dir: "mem:", mem: m} }

func (m *MemTree) lstat(p string) (fs.FileInfo, error) {
	switch {
	case m.dirs[p]:
		return memInfo{name: path.Base(p), mode: fs.ModeDir | 0o755}, nil
	case m.links[p] != "":
		return memInfo{name: path.Base(p), mode: fs.ModeSymlink | 0o777}, nil
	}
	if b, ok := m.files[p]; ok {
		return memInfo{name: path.Base(p), mode: 0o644, size: int64(len(b))}, nil
	}
	return nil, errNotExist
}

func (m *MemTree) readlink(p string) (string, error) {
	if t, ok := m.links[p]; ok {
		return t, nil
	}
	if _, err := m.lstat(p); err != nil {
		return "", err
	}
	return "", fs.ErrInvalid
}

func (m *MemTree) readFile(p string) ([]byte, error) {
	if b, ok := m.files[p]; ok {
		return b, nil
	}
	if m.dirs[p] {
		return nil, errIsDir
	}
	if _, ok := m.links[p]; ok {
		return nil, errLoop
	}
	return nil, errNotExist
}

func (m *MemTree) readDir(p string) ([]fs.DirEntry, error) {
	if !m.dirs[p] {
		if _, err := m.lstat(p); err != nil {
			return nil, err
		}
		return nil, errNotDir
	}
	names := make([]string, 0, len(m.children[p]))
	for n := range m.children[p] {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]fs.DirEntry, len(names))
	for i, n := range names {
		fi, _ := m.lstat(path.Join(p, n))
		out[i] = fs.FileInfoToDirEntry(fi)
	}
	return out, nil
}

type memInfo struct {
	name string
	mode fs.FileMode
	size int64
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

// nopCloser wraps a reader for Root.Open on a memory tree.
type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

func newMemReader(b []byte) io.ReadCloser { return nopCloser{strings.NewReader(string(b))} }
