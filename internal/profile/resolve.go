package profile

import (
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

//go:embed builtin/*.toml
var builtinFS embed.FS

// Builtin returns a built-in profile by name.
func Builtin(name string) (*Profile, error) {
	b, err := builtinFS.ReadFile("builtin/" + name + ".toml")
	if err != nil {
		return nil, fmt.Errorf("unknown profile %q (built-in: %s; or give a file path)", name, strings.Join(BuiltinNames(), ", "))
	}
	p, err := Parse("builtin:"+name+".toml", b)
	if err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = name
	}
	return p, nil
}

// BuiltinNames lists the built-in profiles.
func BuiltinNames() []string {
	ents, _ := builtinFS.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".toml"))
	}
	sort.Strings(out)
	return out
}

// Load returns a profile by built-in name or file path (anything with a slash
// or a .toml suffix is a path).
func Load(nameOrPath string) (*Profile, error) {
	if !strings.ContainsRune(nameOrPath, '/') && !strings.HasSuffix(nameOrPath, ".toml") {
		return Builtin(nameOrPath)
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("profile %s: %w", nameOrPath, err)
	}
	p, err := Parse(nameOrPath, b)
	if err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(filepath.Base(nameOrPath), ".toml")
	}
	return p, nil
}

// Resolved is a profile ready for planning: extends merged, parameters bound,
// --set overrides applied, templates expanded.
type Resolved struct {
	Name    string            `json:"name"`
	Summary string            `json:"summary"`
	Source  string            `json:"source,omitempty"`
	Chain   []string          `json:"chain"` // this profile and what it extends, child first
	Params  map[string]string `json:"params,omitempty"`
	// Settings are in profile order; Fallbacks are expanded too.
	Settings []Setting `json:"-"`
}

// Resolve merges p with what it extends, binds params, applies sets
// ("sysctl.net.core.somaxconn=8192", "rate=2mbit") and drops skipped keys. Errors name the file
// position of the offending setting, or the --set that caused them.
func Resolve(p *Profile, sets map[string]string, skips ...string) (*Resolved, error) {
	chain, err := lineage(p)
	if err != nil {
		return nil, err
	}
	r := &Resolved{Name: p.Name, Summary: p.Summary, Source: p.Source, Params: map[string]string{}}
	params := map[string]Param{}
	var order []string
	merged := map[string]Setting{}
	// Oldest ancestor first, so children override.
	for i := len(chain) - 1; i >= 0; i-- {
		c := chain[i]
		r.Chain = append([]string{c.Name}, r.Chain...)
		if r.Summary == "" {
			r.Summary = c.Summary
		}
		for n, pr := range c.Params {
			if old, ok := params[n]; ok {
				if pr.Type == "string" && old.Type != "string" && c.File != old.Pos.File {
					pr.Type = old.Type // a child restating only the default keeps the type
				}
				if pr.Doc == "" {
					pr.Doc = old.Doc
				}
			}
			params[n] = pr
		}
		for _, s := range c.Settings {
			prev, ok := merged[s.Key]
			if !ok {
				order = append(order, s.Key)
				merged[s.Key] = s
				continue
			}
			merged[s.Key] = override(prev, s)
		}
	}
	// --set: parameters first, then settings.
	var setKeys []string
	for k := range sets {
		setKeys = append(setKeys, k)
	}
	sort.Strings(setKeys)
	given := map[string]string{}
	for _, k := range setKeys {
		v := sets[k]
		if pr, ok := params[k]; ok {
			cv, err := parseParam(pr, v)
			if err != nil {
				return nil, fmt.Errorf("--set %s=%s: %w", k, v, err)
			}
			given[k] = cv
			continue
		}
		section, name, ok := SplitKey(k)
		if !ok {
			return nil, fmt.Errorf("--set %s: not a parameter of %s (%s) nor a setting key (SECTION.NAME, sections: %s)", k, p.Name, paramList(params), strings.Join(Sections, ", "))
		}
		if err := checkName(section, name); err != nil {
			return nil, fmt.Errorf("--set %s: %w", k, err)
		}
		if err := checkValue(section, name, v); err != nil {
			return nil, fmt.Errorf("--set %s=%s: %w", k, v, err)
		}
		s := Setting{Key: k, Section: section, Name: name, Value: v, Why: "set on the command line", Source: "--set", Pos: Pos{File: "--set " + k}}
		if prev, ok := merged[k]; ok {
			merged[k] = override(prev, s)
		} else {
			order = append(order, k)
			merged[k] = s
		}
	}
	types := map[string]string{}
	for n, pr := range params {
		types[n] = pr.Type
		if v, ok := given[n]; ok {
			r.Params[n] = v
		} else if pr.Default != "" {
			cv, _ := parseParam(pr, pr.Default)
			r.Params[n] = cv
		} else if pr.Required {
			return nil, fmt.Errorf("profile %s needs parameter %s (%s): add --set %s=VALUE", p.Name, n, pr.Doc, n)
		}
	}
	for _, k := range skips {
		if _, ok := merged[k]; !ok {
			return nil, fmt.Errorf("--skip %s: profile %s has no such setting", k, p.Name)
		}
		s := merged[k]
		s.Skip = true
		merged[k] = s
	}
	for _, k := range order {
		s := merged[k]
		if s.Skip {
			continue
		}
		if s.When != "" {
			if _, ok := r.Params[s.When]; !ok {
				continue
			}
		}
		if s.Value == "" {
			return nil, errAt(s.Pos, "%s: has no value", s.Key)
		}
		v, err := expand(s.Value, r.Params, types)
		if err != nil {
			return nil, errAt(s.Pos, "%s: %s", s.Key, err)
		}
		if err := checkResolved(s.Section, s.Name, v); err != nil {
			return nil, errAt(s.Pos, "%s = %q: %s", s.Key, v, err)
		}
		s.Value = v
		for i, f := range s.Fallbacks {
			fv, err := expand(f, r.Params, types)
			if err != nil {
				return nil, errAt(s.Pos, "%s fallback: %s", s.Key, err)
			}
			if err := checkResolved(s.Section, s.Name, fv); err != nil {
				return nil, errAt(s.Pos, "%s fallback %q: %s", s.Key, fv, err)
			}
			s.Fallbacks = append([]string(nil), s.Fallbacks...)
			s.Fallbacks[i] = fv
		}
		r.Settings = append(r.Settings, s)
	}
	return r, nil
}

// override applies a child's setting over its parent's: fields the child gives
// win; a new value drops the parent's fallbacks (they were alternatives to the
// old value) and, without a new rationale, says where it came from.
func override(parent, child Setting) Setting {
	out := parent
	out.Pos = child.Pos
	if child.Value != "" {
		out.Value = child.Value
		out.Fallbacks = nil
		out.Why = "overridden in " + child.Pos.File
		out.Source = child.Source
	}
	if child.Fallbacks != nil {
		out.Fallbacks = child.Fallbacks
	}
	if child.Why != "" {
		out.Why = child.Why
	}
	if child.Source != "" {
		out.Source = child.Source
	}
	if child.When != "" {
		out.When = child.When
	}
	out.Skip = child.Skip
	return out
}

// lineage returns p and its ancestors, child first.
func lineage(p *Profile) ([]*Profile, error) {
	chain := []*Profile{p}
	seen := map[string]bool{p.File: true}
	cur := p
	for cur.Extends != "" {
		var parent *Profile
		var err error
		name := cur.Extends
		if strings.ContainsRune(name, '/') || strings.HasSuffix(name, ".toml") {
			if !filepath.IsAbs(name) && !strings.HasPrefix(cur.File, "builtin:") {
				name = filepath.Join(filepath.Dir(cur.File), name)
			}
			parent, err = Load(name)
		} else {
			parent, err = Builtin(name)
		}
		if err != nil {
			var pe *Error
			if errors.As(err, &pe) {
				return nil, err
			}
			return nil, fmt.Errorf("%s: extends %q: %w", cur.File, cur.Extends, err)
		}
		if seen[parent.File] {
			return nil, fmt.Errorf("%s: extends %q: cycle", cur.File, cur.Extends)
		}
		seen[parent.File] = true
		chain = append(chain, parent)
		cur = parent
		if len(chain) > 8 {
			return nil, fmt.Errorf("%s: extends chain too deep", p.File)
		}
	}
	return chain, nil
}

func paramList(params map[string]Param) string {
	if len(params) == 0 {
		return "no parameters"
	}
	var out []string
	for n := range params {
		out = append(out, n)
	}
	sort.Strings(out)
	return "parameters: " + strings.Join(out, ", ")
}
