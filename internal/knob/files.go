package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/host"
)

// sysctlKnob is /proc/sys/<name with dots as slashes>. Values are compared with
// whitespace collapsed: the kernel prints tcp_rmem with tabs, people write spaces.
type sysctlKnob struct {
	sys  *System
	name string
}

// SysctlPath maps a sysctl name to its /proc/sys path (see host.SysctlPath:
// a slash in a name stands for a dot inside one level, as in sysctl(8)).
func SysctlPath(name string) string { return host.SysctlPath(name) }

func newSysctl(sys *System, name string) (Knob, error) {
	if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, ".") {
		return nil, fmt.Errorf("sysctl %q: bad name", name)
	}
	return &sysctlKnob{sys: sys, name: name}, nil
}

func (k *sysctlKnob) ID() string { return "sysctl/" + k.name }

func (k *sysctlKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.sys.path(SysctlPath(k.name)))
	if err != nil {
		return "", fmt.Errorf("sysctl %s: read: %w", k.name, wrapNotExist(err))
	}
	return NormalizeSysctl(string(b)), nil
}

func (k *sysctlKnob) Write(ctx context.Context, value string) error {
	if err := writeExisting(k.sys.path(SysctlPath(k.name)), value+"\n"); err != nil {
		return fmt.Errorf("sysctl %s: write %q: %w", k.name, value, err)
	}
	return nil
}

func (k *sysctlKnob) Satisfied(live, desired string) bool {
	return NormalizeSysctl(live) == NormalizeSysctl(desired)
}

// NormalizeSysctl collapses runs of whitespace to one space and trims.
func NormalizeSysctl(v string) string { return strings.Join(strings.Fields(v), " ") }

// sysfsKnob is a plain file below /sys. Bracketed choice lists
// ("always madvise [never]") read as the selected word.
type sysfsKnob struct {
	sys  *System
	path string
}

func newSysfs(sys *System, rest string) (Knob, error) {
	clean := filepath.Clean("/" + rest)
	if clean != "/"+rest {
		return nil, fmt.Errorf("sysfs %q: bad path", rest)
	}
	return &sysfsKnob{sys: sys, path: rest}, nil
}

func (k *sysfsKnob) ID() string { return "sysfs/" + k.path }

func (k *sysfsKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.sys.path("/sys/" + k.path))
	if err != nil {
		return "", fmt.Errorf("sysfs %s: read: %w", k.path, wrapNotExist(err))
	}
	return SelectedWord(string(b)), nil
}

func (k *sysfsKnob) Write(ctx context.Context, value string) error {
	if err := writeExisting(k.sys.path("/sys/"+k.path), value); err != nil {
		return fmt.Errorf("sysfs %s: write %q: %w", k.path, value, err)
	}
	return nil
}

func (k *sysfsKnob) Satisfied(live, desired string) bool {
	return strings.TrimSpace(live) == strings.TrimSpace(desired)
}

// SelectedWord returns the bracketed word of a sysfs choice list
// ("always madvise [never]" -> "never"), or the trimmed content when there is
// none.
func SelectedWord(s string) string {
	if sel, _ := host.ParseSelection(s); sel != "" {
		return sel
	}
	return strings.TrimSpace(s)
}

// writeExisting writes to a kernel file that must already exist (never creates
// one: a typo in a sysctl name must not leave a stray file in a captured tree).
func writeExisting(path, content string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return wrapNotExist(err)
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		return mapErrno(err)
	}
	return mapErrno(f.Close())
}

func wrapNotExist(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w (%w)", ErrNotSupported, fs.ErrNotExist)
	}
	return mapErrno(err)
}

// mapErrno makes kernel refusals recognisable with errors.Is while keeping the
// errno in the message.
func mapErrno(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w (%w)", ErrNotSupported, err)
	}
	return err
}

// fileKnob is a configuration file lowlat owns (/etc/sysctl.d/99-lowlat-*.conf,
// a systemd unit). Its value is a FileValue: content, mode and owner, or
// absence (with the directory that was missing too), so a rollback gives back
// exactly the file that was there, or removes the file and the directories
// lowlat created for it.
type fileKnob struct {
	sys  *System
	path string
}

func newFile(sys *System, path string) (Knob, error) {
	if filepath.Clean(path) != path || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("file %q: bad path", path)
	}
	return &fileKnob{sys: sys, path: path}, nil
}

func (k *fileKnob) ID() string { return "file" + k.path }

func (k *fileKnob) Read(ctx context.Context) (string, error) {
	v, err := k.read()
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

func (k *fileKnob) read() (FileValue, error) {
	p := k.sys.path(k.path)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return FileValue{Absent: true, NoDir: k.missingDir(), UID: -1, GID: -1}, nil
	}
	if err != nil {
		return FileValue{}, fmt.Errorf("file %s: %w", k.path, err)
	}
	if !fi.Mode().IsRegular() {
		// A symlink or directory is somebody else's arrangement: writing
		// would replace it with a plain file that no rollback could undo.
		return FileValue{}, fmt.Errorf("file %s: %w: not a regular file (%s)", k.path, ErrNotWritable, fi.Mode().Type())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return FileValue{}, fmt.Errorf("file %s: read: %w", k.path, err)
	}
	v := FileValue{Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), UID: -1, GID: -1, Content: string(b)}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		v.UID, v.GID = int(st.Uid), int(st.Gid)
	}
	return v, nil
}

// missingDir returns the topmost directory of the file's path that does not
// exist (relative to the system's root), or "" when its directory exists.
func (k *fileKnob) missingDir() string {
	missing := ""
	for d := filepath.Dir(k.path); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Lstat(k.sys.path(d)); err == nil {
			break
		}
		missing = d
	}
	return missing
}

// Write replaces the file atomically (temp file with its mode and owner,
// fsync, rename, fsync dir), or removes it for an absent value, so a crash
// leaves either the old or the new file.
func (k *fileKnob) Write(ctx context.Context, value string) error {
	v := ParseFileValue(value)
	p := k.sys.path(k.path)
	if v.Absent {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s: remove: %w", k.path, err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s: %w", k.path, err)
		}
		return k.removeDirs(v.NoDir)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("file %s: %w", k.path, err)
	}
	if err := atomicfile.WriteOwned(p, []byte(v.Content), v.Mode, v.UID, v.GID); err != nil {
		return fmt.Errorf("file %s: %w", k.path, err)
	}
	return nil
}

// removeDirs removes the file's directories up to and including top, while
// they are empty: the ones an earlier write created.
func (k *fileKnob) removeDirs(top string) error {
	if top == "" || !strings.HasPrefix(k.path, top+"/") {
		return nil
	}
	for d := filepath.Dir(k.path); ; d = filepath.Dir(d) {
		err := os.Remove(k.sys.path(d))
		if errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) {
			return nil // something else lives there now: keep it
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s: remove directory %s: %w", k.path, d, err)
		}
		if d == top {
			return atomicfile.SyncDir(k.sys.path(filepath.Dir(d)))
		}
	}
}

func (k *fileKnob) Satisfied(live, desired string) bool {
	return ParseFileValue(live).satisfies(ParseFileValue(desired))
}

// Same compares content, mode and owner.
func (k *fileKnob) Same(a, b string) bool { return ParseFileValue(a).same(ParseFileValue(b)) }

// linkKnob is a symbolic link lowlat owns (enabling a systemd unit). Its value
// is "-> TARGET", or Absent. (An older lowlat recorded the bare target.)
type linkKnob struct {
	sys  *System
	path string
}

// LinkTo is the value of a link knob pointing at target.
func LinkTo(target string) string { return "-> " + target }

func linkTarget(v string) string { return strings.TrimPrefix(v, "-> ") }

func newLink(sys *System, path string) (Knob, error) {
	if filepath.Clean(path) != path || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("link %q: bad path", path)
	}
	return &linkKnob{sys: sys, path: path}, nil
}

func (k *linkKnob) ID() string { return "link" + k.path }

func (k *linkKnob) Read(ctx context.Context) (string, error) {
	p := k.sys.path(k.path)
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Absent, nil
	}
	if err != nil {
		return "", fmt.Errorf("link %s: %w", k.path, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		return "", fmt.Errorf("link %s: %w: not a symbolic link (%s)", k.path, ErrNotWritable, fi.Mode().Type())
	}
	t, err := os.Readlink(p)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", k.path, err)
	}
	return LinkTo(t), nil
}

func (k *linkKnob) Write(ctx context.Context, value string) error {
	p := k.sys.path(k.path)
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("link %s: remove: %w", k.path, err)
	}
	if value != Absent {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("link %s: %w", k.path, err)
		}
		if err := os.Symlink(linkTarget(value), p); err != nil {
			return fmt.Errorf("link %s -> %s: %w", k.path, linkTarget(value), err)
		}
	}
	return atomicfile.SyncDir(filepath.Dir(p))
}

func (k *linkKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	return linkTarget(live) == linkTarget(desired)
}
