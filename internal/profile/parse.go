package profile

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/lowlat/lowlat/internal/sockops"
)

// settingFields are the keys a setting table may hold.
var settingFields = map[string]bool{"value": true, "why": true, "source": true, "fallback": true, "when": true, "skip": true}

var paramFields = map[string]bool{"type": true, "doc": true, "default": true, "required": true}

var topFields = map[string]bool{"name": true, "summary": true, "source": true, "extends": true}

// Parse parses a profile file. file names it in errors. It checks the shape of
// the file (known keys, types, duplicates) and each value's syntax; values that
// depend on parameters are checked again when resolved.
func Parse(file string, data []byte) (*Profile, error) {
	p := &parser{file: file, prof: &Profile{File: file, Params: map[string]Param{}}, seen: map[string]Pos{}}
	p.toml.Reset(data)
	var table []string
	for p.toml.NextExpression() {
		e := p.toml.Expression()
		switch e.Kind {
		case unstable.Table:
			if err := p.endSockets(); err != nil {
				return nil, err
			}
			parts, poss := p.keyPartsPos(e)
			table = parts
			if err := p.checkTable(parts, poss); err != nil {
				return nil, err
			}
		case unstable.ArrayTable:
			parts, pos := p.keyParts(e)
			if len(parts) != 1 || parts[0] != "sockets" {
				return nil, errAt(pos, "arrays of tables ([[...]]) are used only for [[sockets]]")
			}
			if err := p.endSockets(); err != nil {
				return nil, err
			}
			p.sock = &socketsBlock{pos: pos}
			table = []string{"[[sockets]]"}
		case unstable.KeyValue:
			parts, pos := p.keyParts(e)
			if p.sock != nil {
				if err := p.socketsKey(parts, pos, e.Value()); err != nil {
					return nil, err
				}
				continue
			}
			base := table
			if len(table) >= 2 && table[0] != "params" {
				// Inside [section.NAME] only setting fields may appear.
				if len(parts) != 1 || !settingFields[parts[0]] {
					return nil, errAt(pos, "unknown key %q in [%s] (known: %s)", strings.Join(parts, "."), strings.Join(table, "."), keys(settingFields))
				}
				parts = []string{strings.Join(table[1:], "."), parts[0]}
				base = table[:1]
			}
			full := append(append([]string(nil), base...), parts...)
			if err := p.keyValue(full, pos, e.Value()); err != nil {
				return nil, err
			}
		}
	}
	if err := p.toml.Error(); err != nil {
		var pe *unstable.ParserError
		if errors.As(err, &pe) && len(pe.Highlight) > 0 {
			return nil, errAt(p.pos(p.toml.Range(pe.Highlight)), "TOML syntax: %s", pe.Message)
		}
		return nil, errAt(Pos{File: file}, "TOML syntax: %v", err)
	}
	if err := p.endSockets(); err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return p.prof, nil
}

type parser struct {
	file string
	toml unstable.Parser
	prof *Profile
	// seen maps a full key path to where it was first set (duplicates are errors).
	seen map[string]Pos
	// settings by key while parsing, in file order.
	order []string
	byKey map[string]*Setting
	// sock is the [[sockets]] block being read.
	sock *socketsBlock
}

func (p *parser) pos(r unstable.Range) Pos {
	s := p.toml.Shape(r)
	return Pos{File: p.file, Line: s.Start.Line, Col: s.Start.Column}
}

func (p *parser) keyPartsPos(e *unstable.Node) ([]string, []Pos) {
	var parts []string
	var poss []Pos
	it := e.Key()
	for it.Next() {
		n := it.Node()
		poss = append(poss, p.pos(n.Raw))
		parts = append(parts, string(n.Data))
	}
	return parts, poss
}

func (p *parser) keyParts(e *unstable.Node) ([]string, Pos) {
	var parts []string
	var pos Pos
	it := e.Key()
	for it.Next() {
		n := it.Node()
		if len(parts) == 0 {
			pos = p.pos(n.Raw)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, pos
}

func (p *parser) valuePos(v *unstable.Node, keyPos Pos) Pos {
	if v != nil && v.Raw.Length > 0 {
		return p.pos(v.Raw)
	}
	return keyPos
}

func (p *parser) checkTable(parts []string, poss []Pos) error {
	switch parts[0] {
	case "sockets":
		return errAt(poss[0], "socket options are written as [[sockets]] blocks with match = \"port:N\"")
	case "params":
		if len(parts) > 2 {
			return errAt(poss[0], "unknown table [%s] (parameters are [params.NAME])", strings.Join(parts, "."))
		}
		return nil
	case "sysctl", "qdisc", "route", "sysfs", "ethtool", "irq", "nvme", "cpu", "autorate", "mss":
		if len(parts) >= 2 {
			if err := checkName(parts[0], strings.Join(parts[1:], ".")); err != nil {
				return errAt(poss[1], "%s", err)
			}
		}
		return nil
	}
	return errAt(poss[0], "unknown section [%s] (known: params, %s)", parts[0], strings.Join(Sections, ", "))
}

func (p *parser) keyValue(full []string, pos Pos, v *unstable.Node) error {
	path := strings.Join(full, "\x00")
	if prev, dup := p.seen[path]; dup {
		return errAt(pos, "duplicate key %q (first set at line %d)", strings.Join(full, "."), prev.Line)
	}
	p.seen[path] = pos
	vpos := p.valuePos(v, pos)
	if len(full) == 1 {
		if !topFields[full[0]] {
			return errAt(pos, "unknown key %q (known: %s)", full[0], keys(topFields))
		}
		s, err := p.str(v, vpos, full[0])
		if err != nil {
			return err
		}
		switch full[0] {
		case "name":
			p.prof.Name = s
		case "summary":
			p.prof.Summary = s
		case "source":
			p.prof.Source = s
		case "extends":
			p.prof.Extends = s
		}
		return nil
	}
	switch full[0] {
	case "params":
		return p.param(full, pos, vpos, v)
	case "sysctl", "qdisc", "route", "sysfs", "ethtool", "irq", "nvme", "cpu", "autorate", "mss":
		return p.setting(full, pos, vpos, v)
	case "sockets":
		return errAt(pos, "socket options are written as [[sockets]] blocks with match = \"port:N\"")
	}
	return errAt(pos, "unknown key %q (known: %s, and sections %s)", strings.Join(full, "."), keys(topFields), strings.Join(Sections, ", "))
}

func (p *parser) param(full []string, pos, vpos Pos, v *unstable.Node) error {
	if len(full) != 3 {
		return errAt(pos, "parameters are written [params.NAME] with keys %s", keys(paramFields))
	}
	name, field := full[1], full[2]
	if !paramFields[field] {
		return errAt(pos, "unknown key %q in [params.%s] (known: %s)", field, name, keys(paramFields))
	}
	pr := p.prof.Params[name]
	if pr.Name == "" {
		pr = Param{Name: name, Type: "string", Pos: pos}
	}
	switch field {
	case "required":
		b, err := p.boolean(v, vpos, field)
		if err != nil {
			return err
		}
		pr.Required = b
	default:
		s, err := p.str(v, vpos, field)
		if err != nil {
			return err
		}
		switch field {
		case "type":
			if s != "rate" && s != "int" && s != "string" && s != "mss" {
				return errAt(vpos, "parameter %s: type %q (want rate, int, mss or string)", name, s)
			}
			pr.Type = s
		case "doc":
			pr.Doc = s
		case "default":
			pr.Default = s
		}
	}
	p.prof.Params[name] = pr
	return nil
}

// setting handles sysctl/qdisc/route/sysfs/autorate/mss keys, both the table form
// ([sysctl."net.core.somaxconn"] value = "4096") and the shorthand
// ([sysctl] "net.core.somaxconn" = "4096").
func (p *parser) setting(full []string, pos, vpos Pos, v *unstable.Node) error {
	section := full[0]
	rest := full[1:]
	field := "value"
	if len(rest) >= 2 && settingFields[rest[len(rest)-1]] {
		field = rest[len(rest)-1]
		rest = rest[:len(rest)-1]
	}
	name := strings.Join(rest, ".")
	if err := checkName(section, name); err != nil {
		return errAt(pos, "%s", err)
	}
	key := section + "." + name
	if p.byKey == nil {
		p.byKey = map[string]*Setting{}
	}
	s := p.byKey[key]
	if s == nil {
		s = &Setting{Key: key, Section: section, Name: name, Pos: pos}
		p.byKey[key] = s
		p.order = append(p.order, key)
	}
	switch field {
	case "value":
		val, err := p.scalar(v, vpos, key)
		if err != nil {
			return err
		}
		if err := checkValue(section, name, val); err != nil {
			return errAt(vpos, "%s: %s", key, err)
		}
		s.Value = val
	case "fallback":
		list, err := p.strings(v, vpos, "fallback")
		if err != nil {
			return err
		}
		for _, f := range list {
			if err := checkValue(section, name, f); err != nil {
				return errAt(vpos, "%s fallback: %s", key, err)
			}
		}
		s.Fallbacks = list
	case "skip":
		b, err := p.boolean(v, vpos, field)
		if err != nil {
			return err
		}
		s.Skip = b
	default:
		str, err := p.str(v, vpos, field)
		if err != nil {
			return err
		}
		switch field {
		case "why":
			s.Why = str
		case "source":
			s.Source = str
		case "when":
			s.When = str
		}
	}
	return nil
}

func (p *parser) finish() error {
	for _, key := range p.order {
		s := p.byKey[key]
		if s.Value == "" && !s.Skip && len(s.Fallbacks) == 0 && s.Why == "" && s.Source == "" && s.When == "" {
			return errAt(s.Pos, "%s: has no value", key)
		}
		p.prof.Settings = append(p.prof.Settings, *s)
	}
	for name, pr := range p.prof.Params {
		if pr.Default != "" {
			if _, err := parseParam(pr, pr.Default); err != nil {
				return errAt(pr.Pos, "parameter %s default: %s", name, err)
			}
		}
	}
	for _, s := range p.prof.Settings {
		if s.When != "" {
			if _, ok := p.prof.Params[s.When]; !ok && p.prof.Extends == "" {
				return errAt(s.Pos, "%s: when = %q names no declared parameter", s.Key, s.When)
			}
		}
	}
	return nil
}

func (p *parser) str(v *unstable.Node, pos Pos, what string) (string, error) {
	if v == nil || v.Kind != unstable.String {
		return "", errAt(pos, "%s must be a string", what)
	}
	return string(v.Data), nil
}

// scalar accepts strings and integers (somaxconn = 4096).
func (p *parser) scalar(v *unstable.Node, pos Pos, what string) (string, error) {
	if v == nil {
		return "", errAt(pos, "%s: missing value", what)
	}
	switch v.Kind {
	case unstable.String:
		return string(v.Data), nil
	case unstable.Integer:
		n, err := strconv.ParseInt(strings.ReplaceAll(string(v.Data), "_", ""), 0, 64)
		if err != nil {
			return "", errAt(pos, "%s: bad integer %s", what, v.Data)
		}
		return strconv.FormatInt(n, 10), nil
	}
	return "", errAt(pos, "%s: value must be a string or an integer, not %s", what, strings.ToLower(v.Kind.String()))
}

func (p *parser) boolean(v *unstable.Node, pos Pos, what string) (bool, error) {
	if v == nil || v.Kind != unstable.Bool {
		return false, errAt(pos, "%s must be true or false", what)
	}
	return string(v.Data) == "true", nil
}

func (p *parser) strings(v *unstable.Node, pos Pos, what string) ([]string, error) {
	if v == nil {
		return nil, errAt(pos, "%s: missing value", what)
	}
	if v.Kind == unstable.String {
		return []string{string(v.Data)}, nil
	}
	if v.Kind != unstable.Array {
		return nil, errAt(pos, "%s must be a string or a list of strings", what)
	}
	var out []string
	it := v.Children()
	for it.Next() {
		n := it.Node()
		if n.Kind != unstable.String {
			return nil, errAt(p.valuePos(n, pos), "%s must be a list of strings", what)
		}
		out = append(out, string(n.Data))
	}
	return out, nil
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// checkName validates a setting's name for its section.
func checkName(section, name string) error {
	switch section {
	case "sysctl":
		if !validSysctlName(name) {
			return fmt.Errorf("bad sysctl name %q", name)
		}
		top, _, _ := strings.Cut(name, ".")
		switch top {
		case "net", "vm", "kernel", "fs":
		default:
			return fmt.Errorf("sysctl %q: lowlat manages net.*, vm.*, kernel.* and fs.* only", name)
		}
	case "qdisc":
		if name != "root" && name != "ingress" {
			return fmt.Errorf("unknown qdisc setting %q (known: root, ingress)", name)
		}
	case "autorate":
		if name != "policy" {
			return fmt.Errorf("unknown autorate setting %q (known: policy)", name)
		}
	case "mss":
		if name != "clamp" {
			return fmt.Errorf("unknown mss setting %q (known: clamp)", name)
		}
	case "route":
		switch name {
		case "initcwnd", "initrwnd", "quickack":
		default:
			return fmt.Errorf("unknown route setting %q (known: initcwnd, initrwnd, quickack)", name)
		}
	case "sysfs":
		if name == "" || strings.Contains(name, "..") || strings.HasPrefix(name, "/") {
			return fmt.Errorf("bad sysfs path %q (relative to /sys, no ..)", name)
		}
	case "ethtool", "irq", "nvme", "cpu":
		return checkNICName(section, name)
	case "sockets":
		if _, _, err := sockops.SplitSetting(name); err != nil {
			return err
		}
	}
	return nil
}

func validSysctlName(name string) bool {
	if name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return false
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_.-/:", r)
		if !ok {
			return false
		}
	}
	return true
}
