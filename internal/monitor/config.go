package monitor

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/passive"
	"github.com/lowlat/lowlat/internal/pathprobe"
	"github.com/lowlat/lowlat/internal/probe"
)

// DefaultListen keeps the metrics and the status page on loopback unless the
// operator opens them: they name the hosts this one talks to.
const DefaultListen = "127.0.0.1:9431"

// DefaultDoctorInterval is how often the doctor runs.
const DefaultDoctorInterval = 10 * time.Minute

// Kinds of target.
var Kinds = []string{"udp", "tcp", "crr", "icmp", "path"}

// Path targets: how often the path is measured by default and at least
// (a run sends PathCount probes to every hop), and a run's shape.
const (
	DefaultPathInterval = time.Minute
	MinPathInterval     = 10 * time.Second
	PathCount           = 10
	PathRound           = 200 * time.Millisecond
)

// Config is a monitor's configuration (monitor.toml).
type Config struct {
	File           string
	Listen         string
	DoctorInterval time.Duration // 0: the doctor never runs
	Journal        string        // "" : the default journal
	// AutorateDir is where autorate daemons publish their state (one
	// <device>.json each); "": autorate.RunDir.
	AutorateDir string
	Targets     []Target
	// Passive is the [passive] section: what the monitor measures of the
	// host's real traffic in the kernel; nil: nothing.
	Passive *PassiveConfig
}

// PassiveConfig is the [passive] section. Devices and ports come from the
// config, never from the traffic, so the series' labels stay bounded.
type PassiveConfig struct {
	Devices    []string
	Ports      []passive.Port
	FirstBytes []uint64
	// DSCP splits the devices' egress by class (label dscp).
	DSCP []int
	Pos  Pos
}

// Session is the passive session the section asks for.
func (p *PassiveConfig) Session() passive.Config {
	c := passive.Config{Egress: len(p.Devices) > 0, Devices: p.Devices, Ports: p.Ports, FirstBytes: p.FirstBytes, DSCP: p.DSCP}
	if len(p.Ports) > 0 {
		c.RX, c.TCP = true, true
	}
	return c
}

// same reports whether two sections measure the same (a reload keeps the
// session, and its counters).
func (p *PassiveConfig) same(q *PassiveConfig) bool {
	if p == nil || q == nil {
		return p == q
	}
	return fmt.Sprint(p.Devices, p.Ports, p.FirstBytes, p.DSCP) == fmt.Sprint(q.Devices, q.Ports, q.FirstBytes, q.DSCP)
}

// Target is one [[target]].
type Target struct {
	Name, Kind, Address string
	Interval            time.Duration
	Size, Response      int
	DSCP                int
	Timeout             time.Duration
	KeyFile             string
	Key                 []byte
	SLO                 time.Duration // p99 objective; 0: none
	Labels              map[string]string
	// Pos is the [[target]] line; keys where each key's value is.
	Pos  Pos
	keys map[string]Pos
}

// at is where key was set in t, or t's own line.
func (t *Target) at(key string) Pos {
	if p, ok := t.keys[key]; ok {
		return p
	}
	return t.Pos
}

// Watch is the probe configuration of t.
func (t *Target) Watch() probe.WatchConfig {
	return probe.WatchConfig{Target: t.Address, Interval: t.Interval, Size: t.Size, Response: t.Response, DSCP: t.DSCP, Timeout: t.Timeout, Key: t.Key}
}

// same reports whether t and u probe the same way (a reload keeps such a
// target running, with its history).
func (t *Target) same(u *Target) bool {
	a, b := t.Watch(), u.Watch()
	return t.Kind == u.Kind && a.Target == b.Target && a.Interval == b.Interval && a.Size == b.Size &&
		a.Response == b.Response && a.DSCP == b.DSCP && a.Timeout == b.Timeout && string(a.Key) == string(b.Key)
}

// Pos is a place in the config file.
type Pos struct {
	File      string
	Line, Col int
}

func (p Pos) String() string {
	if p.Line == 0 {
		return p.File
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col)
}

// ConfigError is a config the monitor refuses, at a position.
type ConfigError struct {
	Pos Pos
	Msg string
}

func (e *ConfigError) Error() string { return e.Pos.String() + ": " + e.Msg }

func errAt(p Pos, format string, args ...any) error {
	return &ConfigError{Pos: p, Msg: fmt.Sprintf(format, args...)}
}

// LoadConfig reads and checks a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &ConfigError{Pos: Pos{File: path}, Msg: "read: " + errors.Unwrap(err).Error()}
	}
	return ParseConfig(path, data)
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	labelRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,63}$`)
	// Label names the monitor's own series use; a user label may not take them.
	reservedLabels = map[string]bool{"target": true, "kind": true, "address": true, "direction": true, "quantile": true, "le": true, "job": true, "instance": true}
)

// MaxTargets bounds a config: every target costs a watch, its series and
// an hour of history.
const MaxTargets = 1000

// ParseConfig parses config text; file names it in errors.
func ParseConfig(file string, data []byte) (*Config, error) {
	c := &Config{File: file, Listen: DefaultListen, DoctorInterval: DefaultDoctorInterval}
	p := &cparser{file: file, seen: map[string]bool{}}
	p.toml.Reset(data)
	var (
		cur   *Target // the [[target]] being read; nil at top level
		names = map[string]Pos{}
	)
	for p.toml.NextExpression() {
		e := p.toml.Expression()
		switch e.Kind {
		case unstable.Table:
			parts, pos := p.key(e)
			if len(parts) != 1 || parts[0] != "passive" || c.Passive != nil {
				if c.Passive != nil && len(parts) == 1 && parts[0] == "passive" {
					return nil, errAt(pos, "[passive] twice")
				}
				return nil, errAt(pos, "unknown table [%s] (targets are [[target]]; the host's own traffic is [passive])", strings.Join(parts, "."))
			}
			c.Passive = &PassiveConfig{Pos: pos}
			cur = nil
			p.seen = map[string]bool{}
		case unstable.ArrayTable:
			parts, pos := p.key(e)
			if len(parts) != 1 || parts[0] != "target" {
				return nil, errAt(pos, "unknown table [[%s]] (targets are [[target]])", strings.Join(parts, "."))
			}
			if len(c.Targets) == MaxTargets {
				return nil, errAt(pos, "more than %d targets", MaxTargets)
			}
			c.Targets = append(c.Targets, Target{Pos: pos, keys: map[string]Pos{}})
			cur = &c.Targets[len(c.Targets)-1]
			p.seen = map[string]bool{}
		case unstable.KeyValue:
			parts, pos := p.key(e)
			key := strings.Join(parts, ".")
			if p.seen[key] {
				return nil, errAt(pos, "%s set twice", key)
			}
			p.seen[key] = true
			v := e.Value()
			vpos := p.pos(v.Raw, pos)
			var err error
			switch {
			case cur == nil && c.Passive != nil:
				err = p.passive(c.Passive, key, v)
			case cur == nil:
				err = p.top(c, key, v, vpos)
			default:
				cur.keys[key] = vpos
				err = p.target(cur, key, v, vpos)
			}
			if errors.Is(err, errUnknownKey) {
				err = errAt(pos, "unknown key %q %s", key, err.(unknownKey).known)
			}
			if err != nil {
				var ce *ConfigError
				if errors.As(err, &ce) {
					return nil, err
				}
				return nil, errAt(vpos, "%s: %v", key, err)
			}
		}
	}
	if err := p.toml.Error(); err != nil {
		var pe *unstable.ParserError
		if errors.As(err, &pe) && len(pe.Highlight) > 0 {
			return nil, errAt(p.pos(p.toml.Range(pe.Highlight), Pos{File: file}), "TOML syntax: %s", pe.Message)
		}
		return nil, errAt(Pos{File: file}, "TOML syntax: %v", err)
	}
	if c.Passive != nil {
		if err := c.Passive.Session().Check(); err != nil {
			return nil, errAt(c.Passive.Pos, "[passive]: %v", err)
		}
	}
	for i := range c.Targets {
		t := &c.Targets[i]
		if err := finishTarget(t); err != nil {
			return nil, err
		}
		if prev, dup := names[t.Name]; dup {
			return nil, errAt(t.at("name"), "target %q: name already used at line %d", t.Name, prev.Line)
		}
		names[t.Name] = t.Pos
	}
	return c, nil
}

func finishTarget(t *Target) error {
	switch {
	case t.Name == "":
		return errAt(t.Pos, "target: name missing")
	case t.Kind == "":
		return errAt(t.Pos, "target %q: kind missing (one of %s)", t.Name, strings.Join(Kinds, ", "))
	case t.Address == "":
		return errAt(t.Pos, "target %q: address missing", t.Name)
	}
	if t.Kind == "path" {
		return finishPathTarget(t)
	}
	if t.Interval == 0 {
		t.Interval = time.Second
	}
	w := t.Watch()
	if err := w.Check(t.Kind); err != nil {
		// Check's errors start with the field's name.
		field, _, _ := strings.Cut(err.Error(), " ")
		return errAt(t.at(field), "target %q: %v", t.Name, err)
	}
	t.Timeout, t.Response = w.Timeout, w.Response
	if t.Kind != "icmp" {
		if _, port, err := net.SplitHostPort(t.Address); err != nil || port == "" {
			return errAt(t.at("address"), "target %q: address %q: want host:port of a lowlat reflector", t.Name, t.Address)
		}
	}
	if t.KeyFile != "" {
		key, err := os.ReadFile(t.KeyFile)
		if err != nil {
			return errAt(t.at("key_file"), "target %q: key_file: %v", t.Name, err)
		}
		t.Key = []byte(strings.TrimSpace(string(key)))
		if len(t.Key) == 0 {
			return errAt(t.at("key_file"), "target %q: key_file %s is empty", t.Name, t.KeyFile)
		}
	}
	return nil
}

// finishPathTarget checks a kind = "path" target: a host (or host:port for
// its UDP probes), measured every interval, each reply waited for up to
// timeout. The probe options of the other kinds do not apply.
func finishPathTarget(t *Target) error {
	for _, k := range []string{"size", "response", "dscp", "key_file", "rate", "slo_p99"} {
		if p, ok := t.keys[k]; ok {
			return errAt(p, "target %q: %s does not apply to a path target (name, kind, address, interval, timeout, labels)", t.Name, k)
		}
	}
	if t.Interval == 0 {
		t.Interval = DefaultPathInterval
	}
	if t.Interval < MinPathInterval {
		return errAt(t.at("interval"), "target %q: interval %s: a path target runs %d probes per hop each time; at least %s", t.Name, t.Interval, PathCount, MinPathInterval)
	}
	if t.Timeout == 0 {
		t.Timeout = time.Second
	}
	if err := t.PathConfig().Check(); err != nil {
		return errAt(t.at("address"), "target %q: %v", t.Name, err)
	}
	return nil
}

// PathConfig is the path probe run of a kind = "path" target.
func (t *Target) PathConfig() pathprobe.Config {
	return pathprobe.Config{Target: t.Address, Count: PathCount, Interval: PathRound, Timeout: t.Timeout}
}

// unknownKey is a key the config does not have; the caller places it at
// the key rather than at its value.
type unknownKey struct{ known string }

var errUnknownKey = unknownKey{}

func (unknownKey) Error() string        { return "unknown key" }
func (unknownKey) Is(target error) bool { _, ok := target.(unknownKey); return ok }

type cparser struct {
	file string
	toml unstable.Parser
	seen map[string]bool
}

// passive reads a key of the [passive] section.
func (p *cparser) passive(c *PassiveConfig, key string, v *unstable.Node) error {
	list, err := strList(v)
	if err != nil {
		return err
	}
	switch key {
	case "devices":
		c.Devices = list
	case "ports":
		c.Ports = nil
		for _, s := range list {
			ps, err := passive.ParsePorts(s)
			if err != nil {
				return err
			}
			c.Ports = append(c.Ports, ps...)
		}
		if len(c.Ports) > 64 {
			return fmt.Errorf("%d ports: at most 64 (each is a set of series)", len(c.Ports))
		}
	case "first_bytes":
		c.FirstBytes = nil
		for _, s := range list {
			n, err := passive.ParseBytes(s)
			if err != nil {
				return err
			}
			c.FirstBytes = append(c.FirstBytes, n)
		}
	case "dscp":
		if c.DSCP, err = passive.ParseDSCP(list); err != nil {
			return err
		}
	default:
		return unknownKey{known: "(known in [passive]: devices, ports, first_bytes, dscp)"}
	}
	return nil
}

// strList reads an array of strings.
func strList(v *unstable.Node) ([]string, error) {
	if v.Kind != unstable.Array {
		return nil, fmt.Errorf("want an array of strings, got %s", kindName(v.Kind))
	}
	var out []string
	it := v.Children()
	for it.Next() {
		s, err := str(it.Node())
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func (p *cparser) pos(r unstable.Range, def Pos) Pos {
	if r.Length == 0 && r.Offset == 0 {
		return def
	}
	s := p.toml.Shape(r)
	return Pos{File: p.file, Line: s.Start.Line, Col: s.Start.Column}
}

func (p *cparser) key(e *unstable.Node) ([]string, Pos) {
	var parts []string
	pos := Pos{File: p.file}
	it := e.Key()
	for it.Next() {
		n := it.Node()
		if len(parts) == 0 {
			pos = p.pos(n.Raw, pos)
		}
		parts = append(parts, string(n.Data))
	}
	return parts, pos
}

func (p *cparser) top(c *Config, key string, v *unstable.Node, pos Pos) error {
	switch key {
	case "listen":
		s, err := str(v)
		if err != nil {
			return err
		}
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%q: want host:port (127.0.0.1:9431)", s)
		}
		c.Listen = s
	case "doctor_interval":
		d, err := duration(v)
		if err != nil {
			return err
		}
		if d != 0 && d < time.Minute {
			return fmt.Errorf("%s: at least 1m (the doctor reads the whole host), or 0s for never", d)
		}
		c.DoctorInterval = d
	case "journal":
		s, err := str(v)
		if err != nil {
			return err
		}
		c.Journal = s
	case "autorate_dir":
		s, err := str(v)
		if err != nil {
			return err
		}
		if s == "" {
			return fmt.Errorf("empty: leave the key out for %s", autorate.RunDir)
		}
		c.AutorateDir = s
	default:
		return unknownKey{"(known: listen, doctor_interval, journal, autorate_dir, [[target]])"}
	}
	return nil
}

func (p *cparser) target(t *Target, key string, v *unstable.Node, pos Pos) error {
	var err error
	switch key {
	case "name":
		if t.Name, err = str(v); err == nil && !nameRE.MatchString(t.Name) {
			err = fmt.Errorf("%q: want 1-64 letters, digits, '_', '.', ':' or '-'", t.Name)
		}
	case "kind":
		if t.Kind, err = str(v); err == nil && !contains(Kinds, t.Kind) {
			err = fmt.Errorf("%q: want one of %s", t.Kind, strings.Join(Kinds, ", "))
		}
	case "address":
		t.Address, err = str(v)
	case "interval":
		if rp, ok := t.keys["rate"]; ok {
			return fmt.Errorf("rate is already set at line %d: give interval or rate, not both", rp.Line)
		}
		t.Interval, err = duration(v)
	case "rate":
		// The same schedule said the other way: 20 = a probe every 50ms.
		if ip, ok := t.keys["interval"]; ok {
			return fmt.Errorf("interval is already set at line %d: give interval or rate, not both", ip.Line)
		}
		var hz float64
		if hz, err = number(v); err == nil {
			if err = checkRate(hz, string(v.Data)); err != nil {
				return err
			}
			t.Interval = time.Duration(float64(time.Second) / hz)
			t.keys["interval"] = pos // the interval's checks point here
		}
	case "timeout":
		t.Timeout, err = duration(v)
	case "slo_p99":
		if t.SLO, err = duration(v); err == nil && t.SLO <= 0 {
			err = fmt.Errorf("%s: must be positive", t.SLO)
		}
	case "size":
		t.Size, err = integer(v)
	case "response":
		t.Response, err = integer(v)
	case "dscp":
		var s string
		if v.Kind == unstable.Integer {
			var n int
			n, err = integer(v)
			s = strconv.Itoa(n)
		} else {
			s, err = str(v)
		}
		if err == nil {
			t.DSCP, err = probe.ParseDSCP(s)
		}
	case "key_file":
		t.KeyFile, err = str(v)
	case "labels":
		t.Labels, err = p.labels(v, pos)
	default:
		return unknownKey{"in [[target]] (known: name, kind, address, interval, rate, size, response, dscp, timeout, key_file, slo_p99, labels)"}
	}
	return err
}

// checkRate refuses a rate (probes per second, as written: text) that
// makes no interval the watches accept. It checks before dividing: TOML's
// inf made an interval of 0, which read as unset (the 1 s default), and a
// NaN or a rate below 1e-9 an interval past time.Duration's range.
func checkRate(hz float64, text string) error {
	most := float64(time.Second) / float64(probe.MinWatchInterval)
	least := float64(time.Second) / float64(probe.MaxWatchInterval)
	switch {
	case math.IsNaN(hz) || math.IsInf(hz, 0):
		return fmt.Errorf("%s: want probes per second, a finite number more than 0", text)
	case hz <= 0:
		return fmt.Errorf("%s: want probes per second, more than 0", text)
	case hz > most:
		return fmt.Errorf("%s: at most %g probes per second (an interval of %s)", text, most, probe.MinWatchInterval)
	case hz < least:
		return fmt.Errorf("%s: at least %.4g probes per second (an interval of %s)", text, least, probe.MaxWatchInterval)
	}
	return nil
}

func (p *cparser) labels(v *unstable.Node, pos Pos) (map[string]string, error) {
	if v.Kind != unstable.InlineTable {
		return nil, fmt.Errorf("want an inline table { region = \"hk\" }")
	}
	out := map[string]string{}
	it := v.Children()
	for it.Next() {
		kv := it.Node()
		parts, kpos := p.key(kv)
		name := strings.Join(parts, ".")
		switch {
		case !labelRE.MatchString(name):
			return nil, errAt(kpos, "label %q: want a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)", name)
		case reservedLabels[name] || strings.HasPrefix(name, "__"):
			return nil, errAt(kpos, "label %q: reserved (the monitor sets it)", name)
		}
		if _, dup := out[name]; dup {
			return nil, errAt(kpos, "label %q set twice", name)
		}
		s, err := str(kv.Value())
		if err != nil {
			return nil, errAt(p.pos(kv.Value().Raw, kpos), "label %q: %v", name, err)
		}
		out[name] = s
	}
	if len(out) > 16 {
		return nil, fmt.Errorf("%d labels: at most 16 (each is a series dimension)", len(out))
	}
	return out, nil
}

// LabelNames is the sorted union of the user label names of all targets.
func (c *Config) LabelNames() []string {
	set := map[string]bool{}
	for _, t := range c.Targets {
		for k := range t.Labels {
			set[k] = true
		}
	}
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func str(v *unstable.Node) (string, error) {
	if v.Kind != unstable.String {
		return "", fmt.Errorf("want a string, got %s", kindName(v.Kind))
	}
	return string(v.Data), nil
}

func integer(v *unstable.Node) (int, error) {
	if v.Kind != unstable.Integer {
		return 0, fmt.Errorf("want an integer, got %s", kindName(v.Kind))
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(string(v.Data), "_", ""), 0, 64)
	if err != nil || n < 0 || n > 1<<30 {
		return 0, fmt.Errorf("%s: want 0..%d", v.Data, 1<<30)
	}
	return int(n), nil
}

func number(v *unstable.Node) (float64, error) {
	if v.Kind != unstable.Integer && v.Kind != unstable.Float {
		return 0, fmt.Errorf("want a number (probes per second), got %s", kindName(v.Kind))
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(string(v.Data), "_", ""), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want a number", v.Data)
	}
	return f, nil
}

func duration(v *unstable.Node) (time.Duration, error) {
	s, err := str(v)
	if err != nil {
		return 0, fmt.Errorf("want a duration string like \"50ms\": %v", err)
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration like \"50ms\" or \"10m\"", s)
	}
	return d, nil
}

func kindName(k unstable.Kind) string {
	switch k {
	case unstable.String:
		return "a string"
	case unstable.Integer:
		return "an integer"
	case unstable.Float:
		return "a float"
	case unstable.Bool:
		return "a boolean"
	case unstable.Array:
		return "an array"
	case unstable.InlineTable:
		return "a table"
	}
	return strings.ToLower(k.String())
}
