// Package profile holds lowlat's tuning profiles: built-in ones embedded in the
// binary (game-udp, realtime-tcp, live-edge, capped-uplink), each setting with a
// one-line rationale and the runbook it comes from, and user files that extend a
// built-in and override it. Files are TOML, parsed strictly: an unknown key or a
// bad value is an error naming file:line:col, never silently ignored.
//
// A profile says what to set, not where: the plan package maps "qdisc.root" to
// each interface's qdisc knob and "route.initcwnd" to each route.
package profile

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/lowlat/lowlat/internal/mssclamp"
)

// Pos is a place in a profile file.
type Pos struct {
	File string
	Line int
	Col  int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// Error is a problem at a position in a profile file.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }

func errAt(p Pos, format string, args ...any) *Error {
	return &Error{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// Sections are the kinds of settings a profile may contain.
var Sections = []string{"sysctl", "qdisc", "route", "sysfs", "ethtool", "irq", "nvme", "cpu", "sockets", "autorate", "mss"}

// Setting is one thing a profile sets.
type Setting struct {
	// Key is "<section>.<name>": "sysctl.net.core.somaxconn", "qdisc.root",
	// "qdisc.ingress", "route.initcwnd", "sysfs.kernel/mm/transparent_hugepage/enabled",
	// "autorate.policy", "mss.clamp".
	Key     string
	Section string
	Name    string
	// Value may contain parameter templates ("{rate*0.9}"), resolved by Resolve.
	Value string
	// Fallbacks are tried in order when the kernel cannot do Value (a qdisc kind
	// it lacks).
	Fallbacks []string
	Why       string
	Source    string
	// When names a parameter that must be given for the setting to apply.
	When string
	// Skip removes an inherited setting.
	Skip bool
	Pos  Pos
}

// Param is a profile parameter ("capped-uplink --set rate=2mbit").
type Param struct {
	Name     string
	Type     string // rate, int, mss (a TCP MSS clamp: auto, off or bytes), string
	Doc      string
	Default  string
	Required bool
	Pos      Pos
}

// Profile is a parsed profile file (before extends and parameters are resolved).
type Profile struct {
	Name    string
	Summary string
	Source  string
	Extends string
	// File is where it came from ("builtin:game-udp.toml" for built-ins).
	File     string
	Params   map[string]Param
	Settings []Setting
}

// ParamNames lists the declared parameters, sorted.
func (p *Profile) ParamNames() []string {
	var out []string
	for n := range p.Params {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// SplitKey splits "sysctl.net.core.somaxconn" into section and name.
func SplitKey(key string) (section, name string, ok bool) {
	section, name, ok = strings.Cut(key, ".")
	if !ok || name == "" {
		return "", "", false
	}
	for _, s := range Sections {
		if s == section {
			return section, name, true
		}
	}
	return "", "", false
}

// Has reports whether any setting of r is in section.
func (r *Resolved) Has(section string) bool {
	for _, s := range r.Settings {
		if s.Section == section {
			return true
		}
	}
	return false
}

// ClampsMSS reports whether r clamps TCP's MSS: an [mss.clamp] setting that
// is not off. Only then does planning need to read the clamps in force.
func (r *Resolved) ClampsMSS() bool {
	for _, s := range r.Settings {
		if s.Section != "mss" {
			continue
		}
		if c, err := mssclamp.ParseSetting(s.Value); err != nil || !c.Off() {
			return true
		}
	}
	return false
}

// SocketSelectors lists the selectors of r's [[sockets]] settings.
func (r *Resolved) SocketSelectors() []string {
	var out []string
	for _, s := range r.Settings {
		if s.Section != "sockets" {
			continue
		}
		if i := strings.LastIndexByte(s.Name, '/'); i > 0 && !slices.Contains(out, s.Name[:i]) {
			out = append(out, s.Name[:i])
		}
	}
	return out
}
