package host

import (
	"bufio"
	"bytes"
	"path"
	"sort"
	"strings"
)

// The sysctl configuration a boot applies, and in which order. Two programs
// apply it, with the same rules for the drop-in directories and one
// difference:
//
//   - systemd-sysctl (systemd-sysctl.service, and udev for each network
//     interface as it appears): sysctl.d(5), "Configuration Directories and
//     Precedence": *.conf files in /etc/sysctl.d, /run/sysctl.d,
//     /usr/local/lib/sysctl.d, /usr/lib/sysctl.d (and /lib/sysctl.d when
//     systemd is built for a split /usr), a file name in an earlier
//     directory hiding the same name in the later ones; "all configuration
//     files are sorted by their filename in lexicographic order, regardless
//     of which of the directories they reside in", and of two assignments
//     of one key the later wins ("Overwriting earlier assignment" in
//     src/sysctl/sysctl.c). Since systemd 207 it does not read
//     /etc/sysctl.conf (NEWS: "should be symlinked from
//     /etc/sysctl.d/99-sysctl.conf"), which Debian (before 13) and Fedora
//     and RHEL do; that link then sorts with the other files.
//   - procps-ng's 'sysctl --system' (Debian's sysvinit procps script,
//     OpenRC, hosts without systemd): sysctl(8), "System File Precedence",
//     and PreloadSystem in src/sysctl.c: the same five directories in the
//     same order, the first file of a name kept, all of them sorted by name
//     with strcmp and applied in turn, then /etc/sysctl.conf, when it is a
//     regular file, after all of them.
//
// Both compare names byte by byte (strcmp), as Go compares strings. A glob
// in a key ("net.ipv4.conf.*.rp_filter") never overrides a key set
// explicitly elsewhere, whatever the order (sysctl.d(5): "Keys for which an
// explicit pattern exists will be excluded from any glob matching"; procps
// 4 skips such paths in write_setting_list).

// SysctlConfDirs are the sysctl.d directories, the highest precedence first.
var SysctlConfDirs = []string{"/etc/sysctl.d", "/run/sysctl.d", "/usr/local/lib/sysctl.d", "/usr/lib/sysctl.d", "/lib/sysctl.d"}

// SysctlConfMain is the file procps' sysctl --system applies last.
const SysctlConfMain = "/etc/sysctl.conf"

// SysctlConf is the sysctl configuration a boot applies.
type SysctlConf struct {
	// Files are the sysctl.d files both programs read, in the order they
	// apply them: by file name across the directories, a name in an earlier
	// directory hiding the same name in later ones. A file masked by a link
	// to /dev/null is listed, with no settings.
	Files []SysctlFile `json:"files"`
	// Main is /etc/sysctl.conf (nil when there is none): procps' sysctl
	// --system applies it after every file; systemd-sysctl only through a
	// link among Files.
	Main *SysctlFile `json:"main,omitempty"`
	// Unreadable lists the directories and files that could not be read:
	// what they set is unknown.
	Unreadable []string `json:"unreadable,omitempty"`
}

// SysctlFile is one configuration file and its assignments, in file order.
type SysctlFile struct {
	Path     string          `json:"path"`
	Settings []SysctlSetting `json:"settings,omitempty"`
}

// SysctlSetting is one "key = value" line. Name is in lowlat's dotted form
// (a slash stands for a dot inside one level, as in sysctl(8)).
type SysctlSetting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Line  int    `json:"line"`
	// Glob is set for a key with a glob pattern: it never overrides a key
	// another line sets explicitly.
	Glob bool `json:"glob,omitempty"`
}

// SysctlLoader is the program that applies the configuration at boot.
type SysctlLoader int

// The two loaders.
const (
	// SystemdSysctl is systemd-sysctl: the sysctl.d files only.
	SystemdSysctl SysctlLoader = iota
	// ProcpsSystem is procps' sysctl --system: the files, then
	// /etc/sysctl.conf.
	ProcpsSystem
)

func (l SysctlLoader) String() string {
	if l == ProcpsSystem {
		return "sysctl --system"
	}
	return "systemd-sysctl"
}

// Loader is the program that applies the sysctl configuration on a host:
// systemd-sysctl where systemd runs, procps' sysctl --system elsewhere.
func (f *Facts) Loader() SysctlLoader {
	if f.Systemd {
		return SystemdSysctl
	}
	return ProcpsSystem
}

// Override is an assignment a boot applies after a given file.
type Override struct {
	File string
	SysctlSetting
}

// After returns the explicit assignments of sysctl name that loader applies
// after a file named base in /etc/sysctl.d (which need not exist), the last
// one first: the first is the value a boot leaves. Files for which skip
// returns true are left out (lowlat's own).
func (c *SysctlConf) After(loader SysctlLoader, base, name string, skip func(base string) bool) []Override {
	var out []Override
	add := func(f SysctlFile) {
		for _, s := range f.Settings {
			if !s.Glob && s.Name == name {
				out = append(out, Override{File: f.Path, SysctlSetting: s})
			}
		}
	}
	for _, f := range c.Files {
		b := path.Base(f.Path)
		if b > base && !skip(b) {
			add(f)
		}
	}
	if loader == ProcpsSystem && c.Main != nil {
		add(*c.Main)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// sysctlConf reads the boot sysctl configuration. When none of its places
// exists the facts say nothing (nil): a tree without them (a capture that
// predates this, a tree of /proc and /sys only) does not show a host with
// no configuration.
func (rd *fileReader) sysctlConf() {
	c := &SysctlConf{Files: []SysctlFile{}}
	known := false
	seen := map[string]bool{}
	for _, dir := range SysctlConfDirs {
		ents, err := rd.r.ReadDir(dir)
		if isNotExist(err) {
			continue
		}
		known = true
		if err != nil {
			rd.fail(dir, err)
			c.Unreadable = append(c.Unreadable, dir)
			continue
		}
		for _, e := range ents {
			name := e.Name()
			if !strings.HasSuffix(name, ".conf") || e.IsDir() || seen[name] {
				continue
			}
			seen[name] = true
			p := path.Join(dir, name)
			b, err := rd.r.ReadFile(p)
			switch {
			case isNotExist(err):
				// A link to /dev/null (outside a tree: not there), or
				// dangling: it sets nothing, and hides the name.
			case err != nil:
				rd.fail(p, err)
				c.Unreadable = append(c.Unreadable, p)
			}
			c.Files = append(c.Files, SysctlFile{Path: p, Settings: ParseSysctlConf(b)})
		}
	}
	sort.SliceStable(c.Files, func(i, j int) bool { return path.Base(c.Files[i].Path) < path.Base(c.Files[j].Path) })
	if fi, err := rd.r.Stat(SysctlConfMain); err == nil && fi.Mode().IsRegular() {
		known = true
		b, err := rd.r.ReadFile(SysctlConfMain)
		if err != nil {
			rd.fail(SysctlConfMain, err)
			c.Unreadable = append(c.Unreadable, SysctlConfMain)
		}
		c.Main = &SysctlFile{Path: SysctlConfMain, Settings: ParseSysctlConf(b)}
	} else if err != nil && !isNotExist(err) {
		known = true
		rd.fail(SysctlConfMain, err)
		c.Unreadable = append(c.Unreadable, SysctlConfMain)
	}
	if known {
		rd.f.SysctlConf = c
	}
}

// ParseSysctlConf parses a sysctl.d file as both systemd-sysctl and procps
// do: blank lines and lines starting with '#' or ';' are comments, "key =
// value" assigns (whitespace around key and value trimmed), a '-' before
// the key only tolerates failure, and a line without '=' ("-key", which
// excludes a key from globs) assigns nothing.
func ParseSysctlConf(b []byte) []SysctlSetting {
	var out []SysctlSetting
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key = strings.TrimPrefix(strings.TrimSpace(key), "-")
		key = strings.TrimSpace(key)
		if key == "" {
			continue
		}
		out = append(out, SysctlSetting{Name: normalizeSysctlKey(key), Value: strings.TrimSpace(value), Line: n,
			Glob: strings.ContainsAny(key, "*?[")})
	}
	return out
}

// normalizeSysctlKey turns a key into lowlat's dotted form. Both programs
// read a key whose first separator is a slash as a path ("net/ipv4/conf/
// eth0.100/forwarding", dots inside levels) and swap dots and slashes
// otherwise (sysctl.d(5); procps' slashdot): the dotted form is the latter.
func normalizeSysctlKey(k string) string {
	i := strings.IndexAny(k, "./")
	if i < 0 || k[i] == '.' {
		return k
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '/':
			return '.'
		case '.':
			return '/'
		}
		return r
	}, k)
}
