package dashboard

import (
	"bytes"
	"encoding/json"
	"os"
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
		defaultVal string
	}
	wants := map[string]want{
		VarDatasource: {typ: "datasource"},
		VarJob:        {typ: "query", multiAll: true},
		VarInstance:   {typ: "query", multiAll: true},
		VarTarget:     {typ: "query", multiAll: true},
		VarGroupLabel: {typ: "textbox", defaultVal: "group"},
		VarCanary:     {typ: "textbox", defaultVal: "canary"},
		VarControl:    {typ: "textbox", defaultVal: "control"},
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
		if w.defaultVal != "" && (v.Query != w.defaultVal || v.Current.Value != w.defaultVal) {
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
		`$group_label="$canary"`, `$group_label="$control"`,
		"lowlat_finding{", "lowlat_drift_knobs{", "lowlat_transaction_info{", "lowlat_confirm_deadline_timestamp_seconds{",
		"lowlat_host_egress_queue_seconds_bucket", "lowlat_host_receive_seconds_bucket", "lowlat_tcp_rtt_seconds_bucket", "lowlat_tcp_first_bytes_seconds_bucket",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no query has %s", want)
		}
	}
	// The overlay: one panel holds both groups.
	for _, title := range []string{"RTT p99: canary against control", "Loss: canary against control"} {
		es := strings.Join(byTitle[title], "\n")
		if !strings.Contains(es, `$group_label="$canary"`) || !strings.Contains(es, `$group_label="$control"`) {
			t.Errorf("panel %q does not overlay both groups: %s", title, es)
		}
	}
	// Classic buckets only: a native histogram query needs a feature flag.
	for _, qq := range Queries() {
		if strings.Contains(qq.Expr, "histogram_quantile") && !strings.Contains(qq.Expr, "_bucket{") {
			t.Errorf("%s: %s reads a native histogram", qq.Panel, qq.Expr)
		}
	}
}

func TestSubstitute(t *testing.T) {
	got := Substitute(`rate(x{$group_label="$canary", instance=~"$instance"}[$__rate_interval]) or y{$group_label="$control", target=~"$target", job=~"$job"}`,
		map[string]string{"__rate_interval": "1m", "instance": ".*", "group_label": "group", "canary": "canary", "control": "control", "target": "r|s", "job": "lowlat"})
	want := `rate(x{group="canary", instance=~".*"}[1m]) or y{group="control", target=~"r|s", job=~"lowlat"}`
	if got != want {
		t.Errorf("Substitute:\n got %s\nwant %s", got, want)
	}
	for _, qq := range Queries() {
		s := Substitute(qq.Expr, map[string]string{"__rate_interval": "1m", "instance": ".*", "group_label": "group", "canary": "canary", "control": "control", "target": ".*", "job": ".*"})
		if strings.Contains(s, "$") {
			t.Errorf("%s: a variable left in %s", qq.Panel, s)
		}
	}
}
