package probe

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/version"
)

// Meta is the context every result carries (CONVENTIONS habit 7): what ran, by
// which build, on which host, when. It is embedded, so its fields sit at the top
// level of a result's JSON next to the metrics.
type Meta struct {
	// Type is "udp", "tcp", "crr" or "load"; compare refuses to mix types.
	Type    string    `json:"type"`
	Version string    `json:"version"`
	Target  string    `json:"target"`
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Host    HostInfo  `json:"host"`
}

func newMeta(typ, target string, start time.Time) Meta {
	return Meta{Type: typ, Version: version.String(), Target: target, Start: start.UTC(), End: time.Now().UTC(), Host: ReadHostInfo()}
}

// HostInfo is the few host facts that change what a latency figure means.
// Fields that cannot be read stay empty; reading them never fails a run.
type HostInfo struct {
	Hostname      string `json:"hostname,omitempty"`
	Kernel        string `json:"kernel,omitempty"`
	NumCPU        int    `json:"num_cpu"`
	CongestionCtl string `json:"tcp_congestion_control,omitempty"`
	DefaultQdisc  string `json:"default_qdisc,omitempty"`
}

// ReadHostInfo reads the host facts of the machine (and network namespace: the
// /proc/sys/net files are per namespace) it runs in.
func ReadHostInfo() HostInfo {
	h := HostInfo{NumCPU: runtime.NumCPU(), Kernel: kernelRelease()}
	h.Hostname, _ = os.Hostname()
	h.CongestionCtl = readTrim("/proc/sys/net/ipv4/tcp_congestion_control")
	h.DefaultQdisc = readTrim("/proc/sys/net/core/default_qdisc")
	return h
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Duration is a time.Duration that reads and writes JSON as "10ms".
type Duration time.Duration

// MarshalJSON writes the duration as Go's duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads a duration string (or a number of nanoseconds).
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// Limits that keep a run sane. Each refusal names the limit it hit.
const (
	MaxDuration    = 24 * time.Hour // longer runs need Force
	MinInterval    = 100 * time.Microsecond
	MaxInterval    = time.Minute
	MaxConnections = 1_000_000
	MaxMessage     = 65507         // UDP payload and TCP rr message limit
	MaxResponse    = 1 << 30       // CRR response bytes
	maxProbes      = 1_000_000_000 // one bit each in the received bitset
)

func checkDuration(what string, d time.Duration, force bool) error {
	if d <= 0 {
		return fmt.Errorf("%s %s: must be positive", what, d)
	}
	if d > MaxDuration && !force {
		return fmt.Errorf("%s %s: longer than %s (use --force to run it anyway)", what, d, MaxDuration)
	}
	return nil
}

// ConfigError is a configuration the probe refuses before touching the network
// (absurd or out-of-range parameters). The CLI reports it as a usage error.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func configErr(err error) error {
	if err == nil {
		return nil
	}
	return &ConfigError{err}
}

// DecodeResult reads a result as 'lowlat probe ... -o FILE' writes it into
// its type (*UDPResult, *TCPResult, *CRRResult, *LoadResult or *ICMPResult), chosen by
// its "type" field.
func DecodeResult(b []byte) (any, error) {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("not a probe result: %w", err)
	}
	var res any
	switch head.Type {
	case "udp":
		res = new(UDPResult)
	case "tcp":
		res = new(TCPResult)
	case "crr":
		res = new(CRRResult)
	case "load":
		res = new(LoadResult)
	case "icmp":
		res = new(ICMPResult)
	default:
		return nil, fmt.Errorf("not a probe result (type %q)", head.Type)
	}
	if err := json.Unmarshal(b, res); err != nil {
		return nil, fmt.Errorf("%s result: %w", head.Type, err)
	}
	return res, nil
}

// Kind is a result's probe type ("udp", "tcp", "crr", "load", "icmp"), "" for
// anything else.
func Kind(res any) string {
	switch r := res.(type) {
	case *UDPResult:
		return r.Type
	case *TCPResult:
		return r.Type
	case *CRRResult:
		return r.Type
	case *LoadResult:
		return r.Type
	case *ICMPResult:
		return r.Type
	}
	return ""
}

// ConfigDiff compares the configuration a result was measured with (a
// *UDPResult, *TCPResult, *CRRResult, *LoadResult or *ICMPResult) with cfg,
// a configuration of the same kind as a caller would run it (UDPConfig,
// TCPConfig, CRRConfig, LoadConfig or ICMPConfig, not yet normalized). It returns one
// "field: A in the result, B now" per difference, target included: a
// baseline measured otherwise is no baseline for cfg.
func ConfigDiff(res any, cfg any) ([]string, error) {
	var had any
	switch r := res.(type) {
	case *UDPResult:
		had = r.Config
	case *TCPResult:
		had = r.Config
	case *CRRResult:
		had = r.Config
	case *LoadResult:
		had = r.Config
	case *ICMPResult:
		had = r.Config
	default:
		return nil, fmt.Errorf("not a probe result: %T", res)
	}
	if fmt.Sprintf("%T", had) != fmt.Sprintf("%T", cfg) {
		return nil, fmt.Errorf("a %s result has no %T", Kind(res), cfg)
	}
	cfg, err := Normalized(cfg)
	if err != nil {
		return nil, err
	}
	a, err := fields(had)
	if err != nil {
		return nil, err
	}
	b, err := fields(cfg)
	if err != nil {
		return nil, err
	}
	var out []string
	keys := make([]string, 0, len(a))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a[k] != b[k] {
			out = append(out, fmt.Sprintf("%s: %s in the result, %s now", k, orNone(a[k]), orNone(b[k])))
		}
	}
	return out, nil
}

// Normalized is cfg (a UDPConfig, TCPConfig, CRRConfig or LoadConfig) with
// its defaults filled in, as the probe runs it and its result records it.
func Normalized(cfg any) (any, error) {
	var err error
	switch c := cfg.(type) {
	case UDPConfig:
		err = c.normalize()
		cfg = c
	case TCPConfig:
		err = c.normalize()
		cfg = c
	case CRRConfig:
		err = c.normalize()
		cfg = c
	case LoadConfig:
		err = c.normalize()
		cfg = c
	case ICMPConfig:
		err = c.normalize()
		cfg = c
	default:
		return nil, fmt.Errorf("not a probe configuration: %T", cfg)
	}
	return cfg, err
}

// fields is a configuration's JSON fields, each value as its JSON text.
func fields(cfg any) (map[string]string, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
