// Package canaryprom reads what the canary judge (package canary) compares
// from Prometheus: each host's value of a lowlat metric at each step of a
// window and of the window before it, and a group's value over the whole
// window for its SLO terms. Hosts are the values of one label (instance,
// by default); the canary and control groups are label selectors.
//
// It reads through client_golang's api/v1 client, with one range query per
// metric and group, in PromQL that works on classic histograms (the
// _bucket series every Prometheus has) and on native ones (a server run
// with --enable-feature=native-histograms stores only those).
package canaryprom

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Matcher is one label matcher of a selector: Name Op "Value".
type Matcher struct {
	Name, Op, Value string
}

// Selector is a list of label matchers, as PromQL writes them between
// braces. Every series a group reads carries them.
type Selector []Matcher

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// ParseSelector parses 'group="canary"' or '{instance=~"10.1.0.(1|2):9431", role="edge"}':
// PromQL label matchers (=, !=, =~, !~) with quoted values, braces
// optional. A selector needs at least one matcher that matches something
// other than the empty string, as PromQL needs of a vector selector: one
// that every series matches is not a group. Each error names the matcher.
func ParseSelector(s string) (Selector, error) {
	text := strings.TrimSpace(s)
	if strings.HasPrefix(text, "{") {
		if !strings.HasSuffix(text, "}") {
			return nil, fmt.Errorf("%q: unclosed {", s)
		}
		text = strings.TrimSpace(text[1 : len(text)-1])
	}
	var sel Selector
	for text != "" {
		m, rest, err := parseMatcher(text)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", s, err)
		}
		sel = append(sel, m)
		rest = strings.TrimSpace(rest)
		if rest != "" {
			if rest[0] != ',' {
				return nil, fmt.Errorf("%q: want , between matchers, found %q", s, rest)
			}
			rest = strings.TrimSpace(rest[1:])
		}
		text = rest
	}
	if len(sel) == 0 {
		return nil, fmt.Errorf("%q: empty selector: name the group's hosts by a label, e.g. group=\"canary\"", s)
	}
	for _, m := range sel {
		if !m.matchesEmpty() {
			return sel, nil
		}
	}
	return nil, fmt.Errorf("%q: every matcher matches the empty string, so every series would be in the group", s)
}

// parseMatcher reads one matcher from the front of s.
func parseMatcher(s string) (Matcher, string, error) {
	i := strings.IndexAny(s, "=!")
	if i < 0 {
		return Matcher{}, "", fmt.Errorf("%q: want label OP \"value\" (OP is =, !=, =~ or !~)", s)
	}
	m := Matcher{Name: strings.TrimSpace(s[:i])}
	if !labelName.MatchString(m.Name) {
		return Matcher{}, "", fmt.Errorf("%q is not a label name", m.Name)
	}
	if m.Name == "__name__" {
		// The judge names each metric's series itself; a name here
		// would make every query but one empty, or Prometheus refuse it.
		return Matcher{}, "", errors.New("__name__: the judge picks each metric's series itself; select the group's hosts by their labels")
	}
	rest := s[i:]
	for _, op := range []string{"=~", "!~", "!=", "="} {
		if strings.HasPrefix(rest, op) {
			m.Op, rest = op, strings.TrimSpace(rest[len(op):])
			break
		}
	}
	if m.Op == "" {
		return Matcher{}, "", fmt.Errorf("%s: operator must be =, !=, =~ or !~", m.Name)
	}
	v, rest, err := quoted(rest)
	if err != nil {
		return Matcher{}, "", fmt.Errorf("%s%s: %v", m.Name, m.Op, err)
	}
	m.Value = v
	if m.Op == "=~" || m.Op == "!~" {
		// Prometheus anchors the expression and compiles it with Go's
		// RE2, as this does.
		if _, err := regexp.Compile("^(?:" + v + ")$"); err != nil {
			return Matcher{}, "", fmt.Errorf("%s%s%q: %v", m.Name, m.Op, v, err)
		}
	}
	return m, rest, nil
}

// quoted reads a PromQL string ("...", '...' or `...`) from the front of
// s and returns its value and what follows it.
func quoted(s string) (string, string, error) {
	if s == "" {
		return "", "", errors.New("no value (want a quoted string)")
	}
	q := s[0]
	if q != '"' && q != '\'' && q != '`' {
		return "", "", fmt.Errorf("%q: the value must be quoted", s)
	}
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			body := s[1:i]
			if q == '`' {
				return body, s[i+1:], nil
			}
			if q == '\'' { // as a Go string: unescape \' and escape "
				body = strings.ReplaceAll(strings.ReplaceAll(body, `\'`, `'`), `"`, `\"`)
			}
			v, err := strconv.Unquote(`"` + body + `"`)
			if err != nil || !utf8.ValidString(v) {
				return "", "", fmt.Errorf("%s: bad string", s[:i+1])
			}
			return v, s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("%s: unterminated string", s)
}

// matchesEmpty says whether the matcher matches a series without the label.
func (m Matcher) matchesEmpty() bool {
	switch m.Op {
	case "=":
		return m.Value == ""
	case "!=":
		return m.Value != ""
	}
	re := regexp.MustCompile("^(?:" + m.Value + ")$")
	return re.MatchString("") == (m.Op == "=~")
}

// String writes the matchers as PromQL does between braces.
func (s Selector) String() string {
	parts := make([]string, len(s))
	for i, m := range s {
		parts[i] = m.Name + m.Op + strconv.Quote(m.Value)
	}
	return strings.Join(parts, ", ")
}

// Equal says whether two selectors have the same matchers in any order.
func (s Selector) Equal(o Selector) bool {
	if len(s) != len(o) {
		return false
	}
	seen := map[Matcher]int{}
	for _, m := range s {
		seen[m]++
	}
	for _, m := range o {
		if seen[m] == 0 {
			return false
		}
		seen[m]--
	}
	return true
}
