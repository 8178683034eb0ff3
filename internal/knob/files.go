package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// fileKnob is a configuration file lowlat owns (/etc/sysctl.d/99-lowlat.conf, a
// systemd unit). Its value is the whole content, or Absent.
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
	b, err := os.ReadFile(k.sys.path(k.path))
	if errors.Is(err, fs.ErrNotExist) {
		return Absent, nil
	}
	if err != nil {
		return "", fmt.Errorf("file %s: read: %w", k.path, err)
	}
	return string(b), nil
}

// Write replaces the file atomically (temp file, fsync, rename, fsync dir), or
// removes it for Absent, so a crash leaves either the old or the new content.
func (k *fileKnob) Write(ctx context.Context, value string) error {
	p := k.sys.path(k.path)
	if value == Absent {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("file %s: remove: %w", k.path, err)
		}
		return atomicfile.SyncDir(filepath.Dir(p))
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("file %s: %w", k.path, err)
	}
	if err := atomicfile.Write(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("file %s: %w", k.path, err)
	}
	return nil
}

func (k *fileKnob) Satisfied(live, desired string) bool { return live == desired }

// linkKnob is a symbolic link lowlat owns (enabling a systemd unit). Its value
// is the link target, or Absent.
type linkKnob struct {
	sys  *System
	path string
}

func newLink(sys *System, path string) (Knob, error) {
	if filepath.Clean(path) != path || !filepath.IsAbs(path) {
		return nil, fmt.Errorf("link %q: bad path", path)
	}
	return &linkKnob{sys: sys, path: path}, nil
}

func (k *linkKnob) ID() string { return "link" + k.path }

func (k *linkKnob) Read(ctx context.Context) (string, error) {
	t, err := os.Readlink(k.sys.path(k.path))
	if errors.Is(err, fs.ErrNotExist) {
		return Absent, nil
	}
	if err != nil {
		return "", fmt.Errorf("link %s: %w", k.path, err)
	}
	return t, nil
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
		if err := os.Symlink(value, p); err != nil {
			return fmt.Errorf("link %s -> %s: %w", k.path, value, err)
		}
	}
	return atomicfile.SyncDir(filepath.Dir(p))
}

func (k *linkKnob) Satisfied(live, desired string) bool { return live == desired }
