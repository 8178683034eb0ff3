package probe

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Comparison lists every metric of two results of the same type side by side.
type Comparison struct {
	Type   string       `json:"type"`
	Before string       `json:"before"` // the results' start times, to tell them apart
	After  string       `json:"after"`
	Rows   []CompareRow `json:"metrics"`
	// ConfigChanges lists configuration keys whose values differ, so a
	// comparison of unlike runs is visible as such.
	ConfigChanges []ConfigChange `json:"config_changes,omitempty"`
}

// CompareRow is one metric. Change is After − Before; ChangePct is relative to
// Before (absent when Before is 0). Better says which direction is good:
// "lower", "higher" or "" when neither.
type CompareRow struct {
	Metric    string   `json:"metric"`
	Before    *float64 `json:"before"`
	After     *float64 `json:"after"`
	Change    *float64 `json:"change"`
	ChangePct *float64 `json:"change_pct"`
	Better    string   `json:"better,omitempty"`
	// Text holds non-numeric values (the load grade, timestamps source).
	BeforeText string `json:"before_text,omitempty"`
	AfterText  string `json:"after_text,omitempty"`
}

// ConfigChange is one configuration value that differs between the runs.
type ConfigChange struct {
	Key    string `json:"key"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// skipped top-level keys: context, not metrics.
var compareSkip = map[string]bool{"type": true, "version": true, "target": true, "start": true, "end": true, "host": true, "config": true, "histograms": true, "error_sample": true, "diagnosis": true}

// Compare reads two JSON results (any type lowlat writes, both the same) and
// pairs their metrics.
func Compare(before, after []byte) (*Comparison, error) {
	var a, b map[string]any
	if err := json.Unmarshal(before, &a); err != nil {
		return nil, fmt.Errorf("before: not a lowlat result: %w", err)
	}
	if err := json.Unmarshal(after, &b); err != nil {
		return nil, fmt.Errorf("after: not a lowlat result: %w", err)
	}
	ta, _ := a["type"].(string)
	tb, _ := b["type"].(string)
	if ta == "" || tb == "" {
		return nil, fmt.Errorf("not a lowlat probe result (no \"type\" field)")
	}
	if ta != tb {
		return nil, fmt.Errorf("cannot compare a %s result with a %s result", ta, tb)
	}
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", a, fa, compareSkip)
	flatten("", b, fb, compareSkip)
	keys := unionKeys(fa, fb)
	cmp := &Comparison{Type: ta}
	cmp.Before, _ = a["start"].(string)
	cmp.After, _ = b["start"].(string)
	for _, k := range keys {
		row := CompareRow{Metric: k, Better: better(k)}
		va, oka := fa[k].(float64)
		vb, okb := fb[k].(float64)
		if oka {
			row.Before = &va
		} else if s, ok := fa[k].(string); ok {
			row.BeforeText = s
		}
		if okb {
			row.After = &vb
		} else if s, ok := fb[k].(string); ok {
			row.AfterText = s
		}
		if oka && okb {
			d := round3(vb - va)
			row.Change = &d
			if va != 0 {
				p := round3(100 * (vb - va) / math.Abs(va))
				row.ChangePct = &p
			}
		}
		if row.Before == nil && row.After == nil && row.BeforeText == "" && row.AfterText == "" {
			continue
		}
		cmp.Rows = append(cmp.Rows, row)
	}
	ca, cb := map[string]any{}, map[string]any{}
	if m, ok := a["config"].(map[string]any); ok {
		flatten("", m, ca, nil)
	}
	if m, ok := b["config"].(map[string]any); ok {
		flatten("", m, cb, nil)
	}
	for _, k := range unionKeys(ca, cb) {
		x, y := fmt.Sprint(ca[k]), fmt.Sprint(cb[k])
		if x != y {
			cmp.ConfigChanges = append(cmp.ConfigChanges, ConfigChange{Key: k, Before: x, After: y})
		}
	}
	return cmp, nil
}

func flatten(prefix string, m map[string]any, out map[string]any, skip map[string]bool) {
	for k, v := range m {
		if prefix == "" && skip[k] {
			continue
		}
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		switch v := v.(type) {
		case map[string]any:
			flatten(key, v, out, nil)
		case float64, string, bool:
			out[key] = v
		}
	}
}

func unionKeys(a, b map[string]any) []string {
	seen := map[string]bool{}
	var keys []string
	for _, m := range []map[string]any{a, b} {
		for k := range m {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// better says which direction of a metric is an improvement.
func better(metric string) string {
	m := strings.ToLower(metric)
	if strings.HasSuffix(m, ".count") || m == "sent" {
		return ""
	}
	for _, s := range []string{"rpm", "goodput", "transactions", "received", "requests", "connections", "fastopen_used", "bytes"} {
		if strings.Contains(m, s) {
			return "higher"
		}
	}
	for _, s := range []string{"_us", "_ms", "loss", "errors", "duplicates", "reordered", "jitter", "pdv"} {
		if strings.Contains(m, s) {
			return "lower"
		}
	}
	return ""
}
