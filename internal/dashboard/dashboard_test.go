package dashboard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const committed = "../../deploy/grafana/lowlat.json"

// TestCommittedDashboardIsCurrent: the file in deploy/grafana is exactly what
// Build produces, so an edit to the generator cannot ship without it.
func TestCommittedDashboardIsCurrent(t *testing.T) {
	want, err := JSON()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatalf("%v (run 'go generate ./internal/dashboard')", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from what internal/dashboard builds (%d bytes against %d): run 'go generate ./internal/dashboard' and commit it", committed, len(got), len(want))
	}
	if !bytes.HasSuffix(got, []byte("}\n")) {
		t.Errorf("%s does not end in one newline", committed)
	}
}

// file is the part of Grafana's dashboard JSON the checks read.
type file struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Type, Name string
			Multi      bool
			IncludeAll bool
			AllValue   string
			Query      any
			Current    struct {
				Value any
			}
		}
	}
	Panels []filePanel
}

type filePanel struct {
	Type, Title string
	Repeat      string
	Collapsed   bool
	Datasource  struct{ Type, UID string }
	Targets     []struct {
		Expr, RefID string
		Instant     bool
	}
	FieldConfig struct {
		Overrides []struct {
			Matcher struct {
				ID      string
				Options any
			}
			Properties []struct {
				ID    string
				Value any
			}
		}
	}
	Panels []filePanel
}

func decode(t *testing.T) file {
	t.Helper()
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	var f file
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("%s does not decode: %v", committed, err)
	}
	return f
}

func TestDashboardVariables(t *testing.T) {
	f := decode(t)
	if f.UID != UID || f.Title == "" {
		t.Errorf("uid %q title %q", f.UID, f.Title)
	}
	type want struct {
		typ        string
		multiAll   bool
		defaultVal string // of a textbox
	}
	wants := map[string]want{
		VarDatasource: {typ: "datasource"},
		VarJob:        {typ: "query", multiAll: true},
		VarInstance:   {typ: "query", multiAll: true},
		VarTarget:     {typ: "query", multiAll: true},
		VarHostLabel:  {typ: "textbox", defaultVal: "instance"},
		// Empty until the playbook's regexes are pasted: no host is
		// either group's by default.
		VarCanaryInstances:  {typ: "textbox"},
		VarControlInstances: {typ: "textbox"},
	}
	seen := map[string]bool{}
	for _, v := range f.Templating.List {
		w, ok := wants[v.Name]
		if !ok {
			t.Errorf("variable %s: not expected", v.Name)
			continue
		}
		seen[v.Name] = true
		if v.Type != w.typ {
			t.Errorf("variable %s: type %q, want %q", v.Name, v.Type, w.typ)
		}
		if w.multiAll && (!v.Multi || !v.IncludeAll || v.AllValue != ".*") {
			t.Errorf("variable %s: multi %v includeAll %v allValue %q, want multi, All as .*", v.Name, v.Multi, v.IncludeAll, v.AllValue)
		}
		if w.typ == "textbox" && (v.Query != w.defaultVal || v.Current.Value != w.defaultVal) {
			t.Errorf("variable %s: default %v, current %v, want %q", v.Name, v.Query, v.Current.Value, w.defaultVal)
		}
	}
	for n := range wants {
		if !seen[n] {
			t.Errorf("no variable %s", n)
		}
	}
}

func TestDashboardPanels(t *testing.T) {
	f := decode(t)
	var panels []filePanel
	repeated := false
	for _, p := range f.Panels {
		if p.Type == "row" {
			if p.Repeat == VarInstance && p.Collapsed && len(p.Panels) > 0 {
				repeated = true
			}
			panels = append(panels, p.Panels...)
			continue
		}
		panels = append(panels, p)
	}
	if !repeated {
		t.Error("no collapsed row repeated per instance (per host on demand)")
	}
	byTitle := map[string][]string{}
	for _, p := range panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %q, want the variable", p.Title, p.Datasource.UID)
		}
		for _, tg := range p.Targets {
			byTitle[p.Title] = append(byTitle[p.Title], tg.Expr)
		}
	}
	// Queries is the same list the file holds.
	n := 0
	for _, qq := range Queries() {
		n++
		found := false
		for _, e := range byTitle[qq.Panel] {
			found = found || e == qq.Expr
		}
		if !found {
			t.Errorf("Queries' %s %s is not in the file's panel", qq.Panel, qq.RefID)
		}
	}
	total := 0
	for _, es := range byTitle {
		total += len(es)
	}
	if n != total {
		t.Errorf("Queries lists %d, the file has %d", n, total)
	}

	// What issue 30 asks the dashboard to show, by the series each reads.
	all := ""
	for _, qq := range Queries() {
		all += qq.Expr + "\n"
	}
	for _, want := range []string{
		"histogram_quantile(0.50, sum by (target, le) (rate(lowlat_probe_rtt_seconds_bucket{",
		"histogram_quantile(0.90, sum by (target, le) (rate(lowlat_probe_rtt_seconds_bucket{",
		"histogram_quantile(0.99, sum by (target, le) (rate(lowlat_probe_rtt_seconds_bucket{",
		"[$__rate_interval]", "lowlat_probe_lost_total", "lowlat_probe_jitter_seconds",
		`$host_label=~"$canary_instances"`, `$host_label=~"$control_instances"`,
		"lowlat_finding{", "lowlat_drift_knobs{", "lowlat_transaction_info{", "lowlat_confirm_deadline_timestamp_seconds{",
		"lowlat_host_egress_queue_seconds_bucket", "lowlat_host_receive_seconds_bucket", "lowlat_tcp_rtt_seconds_bucket", "lowlat_tcp_first_bytes_seconds_bucket",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no query has %s", want)
		}
	}
	// Classic buckets only: a native histogram query needs a feature flag.
	for _, qq := range Queries() {
		if strings.Contains(qq.Expr, "histogram_quantile") && !strings.Contains(qq.Expr, "_bucket{") {
			t.Errorf("%s: %s reads a native histogram", qq.Panel, qq.Expr)
		}
	}
}

// canaryRow returns the panels of the file's canary row.
func canaryRow(t *testing.T, f file) []filePanel {
	t.Helper()
	var out []filePanel
	in := false
	for _, p := range f.Panels {
		if p.Type == "row" {
			in = p.Title == CanaryRow
			if in {
				out = append(out, p.Panels...) // were it collapsed
			}
			continue
		}
		if in {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no row %q with panels", CanaryRow)
	}
	return out
}

var (
	// selector is a vector selector's matchers.
	selector = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*\{([^}]*)\}`)
	// aggregation is an aggregation operator and its grouping, if any.
	aggregation = regexp.MustCompile(`\b(sum|avg|min|max|count|count_values|group|stddev|stdvar|topk|bottomk|quantile|limitk|limit_ratio)\s*(?:(by|without)\s*\(([^)]*)\))?\s*\(`)
)

// TestCanaryRowPerHost: the canary row shows what the judge compares,
// hosts. Every query of it selects its hosts by one group's regex of the
// host label, as the canary playbook hands them to the judge, and nothing
// else narrows them (not job, not the instance variable); every
// aggregation keeps the host label, so no quantile or loss pools a group's
// hosts, except a count of hosts; each panel holds both groups, in two
// colour families.
func TestCanaryRowPerHost(t *testing.T) {
	groupMatcher := map[string]string{
		"canary":  host + `=~"$` + VarCanaryInstances + `"`,
		"control": host + `=~"$` + VarControlInstances + `"`,
	}
	for _, p := range canaryRow(t, decode(t)) {
		color := map[string]string{} // RefID: the override's fixed colour
		for _, o := range p.FieldConfig.Overrides {
			for _, pr := range o.Properties {
				if v, ok := pr.Value.(map[string]any); ok && o.Matcher.ID == "byFrameRefID" && pr.ID == "color" && v["mode"] == "shades" {
					color[fmt.Sprint(o.Matcher.Options)], _ = v["fixedColor"].(string)
				}
			}
		}
		groupColor := map[string]string{}
		for _, tg := range p.Targets {
			sels := selector.FindAllStringSubmatch(tg.Expr, -1)
			if len(sels) == 0 {
				t.Errorf("%s %s: no selector in %s", p.Title, tg.RefID, tg.Expr)
			}
			reads := map[string]bool{}
			for _, m := range sels {
				var g string
				hosts := false // a series without the host label is no host's
				for _, matcher := range strings.Split(m[1], ", ") {
					switch {
					case matcher == groupMatcher["canary"]:
						g = "canary"
					case matcher == groupMatcher["control"]:
						g = "control"
					case matcher == host+`!=""`:
						hosts = true
					case matcher == `target=~"$target"`:
					default:
						t.Errorf("%s %s: %s narrows the group (want only the group's %s and target): %s", p.Title, tg.RefID, matcher, host, tg.Expr)
					}
				}
				if g == "" {
					t.Errorf("%s %s: %s selects no group by its regex of %s", p.Title, tg.RefID, m[0], host)
				}
				if !hosts {
					t.Errorf("%s %s: %s takes series without %s (where the regex matches \"\")", p.Title, tg.RefID, m[0], host)
				}
				reads[g] = true
			}
			if len(reads) == 1 && !reads[""] {
				for g := range reads {
					if groupColor[g] == "" {
						groupColor[g] = color[tg.RefID]
					}
					if color[tg.RefID] == "" || color[tg.RefID] != groupColor[g] {
						t.Errorf("%s %s: %s in colour %q, want the %s group's shades (%q)", p.Title, tg.RefID, g, color[tg.RefID], g, groupColor[g])
					}
				}
			}
			for _, a := range aggregation.FindAllStringSubmatchIndex(tg.Expr, -1) {
				op, mode := tg.Expr[a[2]:a[3]], ""
				if a[4] >= 0 {
					mode = tg.Expr[a[4]:a[5]]
				}
				switch {
				case mode == "by" && slices.Contains(strings.Split(tg.Expr[a[6]:a[7]], ", "), host):
				case mode == "" && op == "count" && strings.HasPrefix(tg.Expr[a[1]:], "count by ("+host+") ("):
					// counts hosts
				default:
					t.Errorf("%s %s: %s pools the group's hosts (want %s in every grouping): %s", p.Title, tg.RefID, tg.Expr[a[0]:a[1]], host, tg.Expr)
				}
			}
		}
		if groupColor["canary"] == "" || groupColor["control"] == "" || groupColor["canary"] == groupColor["control"] {
			t.Errorf("%s: colours %v, want both groups, each in its own", p.Title, groupColor)
		}
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"__rate_interval": "1m", "instance": ".*", "target": "r|s", "job": "lowlat",
		"host_label": "instance", "canary_instances": `10\.0\.0\.1:9431|10\.0\.0\.2:9431`, "control_instances": `web-3:9431`}
	got := Substitute(`rate(x{$host_label=~"$canary_instances", instance=~"$instance"}[$__rate_interval]) or y{$host_label=~"$control_instances", target=~"$target", job=~"$job"}`, vars)
	want := `rate(x{instance=~"10\\.0\\.0\\.1:9431|10\\.0\\.0\\.2:9431", instance=~".*"}[1m]) or y{instance=~"web-3:9431", target=~"r|s", job=~"lowlat"}`
	if got != want {
		t.Errorf("Substitute:\n got %s\nwant %s", got, want)
	}
	for _, qq := range Queries() {
		s := Substitute(qq.Expr, vars)
		if strings.Contains(s, "$") {
			t.Errorf("%s: a variable left in %s", qq.Panel, s)
		}
	}
}

// TestInstancesRegexReachesPromQL: the regex typed into canary_instances,
// with one backslash, as the playbook prints it, is the regex PromQL
// matches once Grafana has put it in the query's string: it matches each
// of the instances it was made of, whole, and no other.
func TestInstancesRegexReachesPromQL(t *testing.T) {
	for _, tt := range []struct {
		name      string
		instances []string
		others    []string
	}{
		{"addresses", []string{"10.0.0.1:9431", "10.0.0.2:9431"}, []string{"10.0.0.12:9431", "10.0.0.1:94310", "10a0.0.1:9431", "110.0.0.1:9431"}},
		{"names", []string{"edge-1.example:9431"}, []string{"edge-10.example:9431", "edge-1xexample:9431"}},
		{"ipv6", []string{"[2001:db8::1]:9431"}, []string{"[2001:db8::11]:9431", "2001:db8::1:9431"}},
		{"one quote", []string{"it's:9431"}, []string{"its:9431"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var res []string
			for _, in := range tt.instances {
				res = append(res, regexp.QuoteMeta(in))
			}
			typed := strings.Join(res, "|")
			expr := Substitute(`x{$host_label=~"$canary_instances"}`, map[string]string{"host_label": "instance", "canary_instances": typed})
			lit := strings.TrimSuffix(strings.TrimPrefix(expr, `x{instance=~`), `}`)
			// PromQL's double-quoted strings take Go's escapes.
			re, err := strconv.Unquote(lit)
			if err != nil {
				t.Fatalf("%s: not a PromQL string: %v", expr, err)
			}
			// A ' arrives as \', which RE2 reads as ' too.
			if re != strings.ReplaceAll(typed, "'", `\'`) {
				t.Errorf("PromQL reads the regex %s, want %s as typed", re, typed)
			}
			// Prometheus anchors a label regex.
			anchored := regexp.MustCompile("^(?:" + re + ")$")
			for _, in := range tt.instances {
				if !anchored.MatchString(in) {
					t.Errorf("%s does not match %s", re, in)
				}
			}
			for _, o := range tt.others {
				if anchored.MatchString(o) {
					t.Errorf("%s matches %s, not one of %v", re, o, tt.instances)
				}
			}
		})
	}
}
