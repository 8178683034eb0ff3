// Package dashboard builds lowlat's fleet Grafana dashboard,
// deploy/grafana/lowlat.json, from Go with grafana-foundation-sdk, so the
// JSON is typed by Grafana's own schema and regenerated rather than edited.
//
// Every panel reads the monitor's raw series (internal/monitor) and the
// classic histogram buckets: the dashboard works on a Prometheus without
// lowlat's recording rules and without the native-histograms feature flag
// (Debian's 2.42 has neither by default). Queries lists each panel's PromQL
// so tests can run all of them against a real Prometheus.
package dashboard

//go:generate go run ./gen ../../deploy/grafana/lowlat.json

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// UID is the dashboard's Grafana uid: stable, so an import replaces the
// previous version instead of adding a copy.
const UID = "lowlat-fleet"

// Query is one PromQL query of one panel, as Grafana sends it before
// template variables are substituted.
type Query struct {
	Panel  string // the panel's title
	RefID  string // A, B, ...
	Expr   string
	Legend string
	// Instant is set for table panels, which show the latest value.
	Instant bool
	// Row is the title of the row the panel is in.
	Row string
	// Group is the side of the canary comparison the query reads, canary
	// or control; empty for a query of neither or of both.
	Group string
}

// Variable names, referenced by the queries.
const (
	VarDatasource = "datasource"
	VarJob        = "job"
	VarInstance   = "instance"
	VarTarget     = "target"
	// The canary comparison's hosts, as the canary playbook selects them
	// for 'lowlat canary judge': the label whose values are the hosts
	// (the judge's --host-label), and a regex of its values for each group
	// (host_label=~"canary_instances").
	VarHostLabel        = "host_label"
	VarCanaryInstances  = "canary_instances"
	VarControlInstances = "control_instances"
)

// Selectors shared by the panels.
const (
	hostSel  = `job=~"$job", instance=~"$instance"`
	probeSel = hostSel + `, target=~"$target"`
	rate     = "[$__rate_interval]"
)

// CanaryRow is the title of the row that compares the canary hosts with
// the control hosts.
const CanaryRow = "Canary against control"

// host is the label that names a host in the canary row, as the judge's
// --host-label does.
const host = "$" + VarHostLabel

// group is one side of the canary comparison.
type group struct {
	name     string // canary or control, as the legends and Query.Group say
	variable string // the textbox that holds the regex of its hosts
	color    string // the Grafana colour its hosts' lines are shades of
}

var groups = []group{
	{name: "canary", variable: VarCanaryInstances, color: "orange"},
	{name: "control", variable: VarControlInstances, color: "blue"},
}

// sel selects the group's hosts as the judge's selector does,
// host_label=~"REGEX"; neither job nor instance narrows it, so the panels
// hold the hosts the judge compared. A series without the host label is no
// host's (the judge skips it too): the regex alone would take in every
// such series where it matches "" (empty, .*) and pool them as one.
func (g group) sel() string {
	return host + `=~"$` + g.variable + `", ` + host + `!=""`
}

// versus makes a canary-row panel's queries: expr over each group's
// selector, the canary's first, each legend led by the group's name.
func versus(expr func(sel string) string, legend string) []Query {
	var pairs []string
	for _, g := range groups {
		pairs = append(pairs, expr(g.sel()), g.name+" "+legend)
	}
	qs := q(pairs...)
	for i := range qs {
		qs[i].Group = groups[i].name
	}
	return qs
}

// hostsIn counts the hosts that sel selects by the monitors' build info,
// which every monitor exports whatever it measures.
func hostsIn(sel string) string {
	return `count by (` + host + `) (lowlat_build_info{` + sel + `})`
}

// canaryPanels is the canary row: each host of each group its own series,
// never a group's hosts pooled, since the judge compares hosts, each host
// one number; in a quantile pooled over a group one bad host hides among
// the rest.
func canaryPanels() []panel {
	probe := func(metric string) func(string) string {
		return func(sel string) string {
			return quantile("0.99", metric, sel+`, target=~"$target"`, host+", target")
		}
	}
	own := func(metric, by string) func(string) string {
		return func(sel string) string { return quantile("0.99", metric, sel, host+", "+by) }
	}
	hosts := versus(func(sel string) string { return `count(` + hostsIn(sel) + `)` }, "hosts")
	hosts = append(hosts, Query{RefID: string(rune('A' + len(hosts))), Legend: "in both groups",
		Expr: `count(` + hostsIn(groups[0].sel()) + ` and ` + hostsIn(groups[1].sel()) + `) or vector(0)`})
	perHost := "{{" + host + "}}"
	return []panel{
		{title: "RTT p99 per host and target: canary against control", unit: "s", w: 9, h: 9,
			desc: "Each host's own p99 to each target, one line a host and target: canary hosts in shades of orange, control hosts in blue. " +
				"The groups are the hosts whose $host_label matches the regexes in canary_instances and control_instances, as the canary playbook prints them. " +
				"'lowlat canary judge' reduces each host to one number and compares the hosts (its targets summed unless its selectors name one); it gives the verdict, this shows the hosts it compared.",
			queries: versus(probe("lowlat_probe_rtt_seconds"), perHost+" {{target}}")},
		{title: "Loss per host and target: canary against control", unit: "percentunit", w: 9, h: 9,
			desc:    "Each host's lost over sent probes to each target: canary hosts in shades of orange, control hosts in blue.",
			queries: versus(func(sel string) string { return lossRatio(sel+`, target=~"$target"`, host+", target") }, perHost+" {{target}}")},
		{title: "Hosts per group", w: 6, h: 9, kind: statKind,
			desc:    "Hosts are the unit of the comparison: a group of one host is not a population. A host in both groups makes the judge's verdict inconclusive.",
			queries: hosts},
		{title: "Egress queueing p99 per host and device: canary against control", unit: "s", w: 12, h: 8,
			desc:    "The hosts' own packets ([passive] in the monitor's config): time in each device's queueing layer, one line a host and device; canary in orange, control in blue.",
			queries: versus(own("lowlat_host_egress_queue_seconds", "device"), perHost+" egress {{device}}")},
		{title: "TCP RTT p99 per host and port: canary against control", unit: "s", w: 12, h: 8,
			desc:    "The kernel's RTT samples of the hosts' real ACKs ([passive]), one line a host and port; canary in orange, control in blue.",
			queries: versus(own("lowlat_tcp_rtt_seconds", "port"), perHost+" tcp rtt {{port}}")},
	}
}

// quantile is histogram_quantile over the classic buckets of metric,
// summed by the labels of by and le.
func quantile(q, metric, sel, by string) string {
	return fmt.Sprintf(`histogram_quantile(%s, sum by (%s, le) (rate(%s_bucket{%s}%s)))`, q, by, metric, sel, rate)
}

// lossRatio is lost over sent probes, summed by the labels of by.
func lossRatio(sel, by string) string {
	return fmt.Sprintf(`sum by (%[1]s) (rate(lowlat_probe_lost_total{%[2]s}%[3]s)) / sum by (%[1]s) (rate(lowlat_probe_sent_total{%[2]s}%[3]s))`, by, sel, rate)
}

type kind int

const (
	timeSeries kind = iota
	tableKind
	statKind
)

type panel struct {
	title, desc, unit string
	kind              kind
	w, h              uint32
	queries           []Query
}

type row struct {
	title string
	// repeat names the variable a collapsed row is repeated for.
	repeat string
	panels []panel
}

// q makes the queries of a panel, RefIDs A, B, ... in order; each pair is
// (expr, legend).
func q(pairs ...string) []Query {
	var qs []Query
	for i := 0; i+1 < len(pairs); i += 2 {
		qs = append(qs, Query{RefID: string(rune('A' + i/2)), Expr: pairs[i], Legend: pairs[i+1]})
	}
	return qs
}

func instant(qs []Query) []Query {
	for i := range qs {
		qs[i].Instant = true
	}
	return qs
}

// quantiles are the p50, p90 and p99 of metric, summed by by.
func quantiles(metric, sel, by, legend string, ps ...string) []Query {
	var pairs []string
	for _, p := range ps {
		pairs = append(pairs, quantile("0."+p, metric, sel, by), legend+" p"+p)
	}
	return q(pairs...)
}

// layout is the dashboard: rows of panels, the single source of both Build
// and Queries.
func layout() []row {
	return []row{
		{title: "Probes: round trip, loss and jitter per target", panels: []panel{
			{title: "RTT p50 / p90 / p99 per target", unit: "s", w: 12, h: 9,
				desc:    "Round-trip time of answered probes (crr: connect to the last response byte), from the classic buckets of lowlat_probe_rtt_seconds over the selected hosts; a quantile is interpolated within a bucket's doubling.",
				queries: quantiles("lowlat_probe_rtt_seconds", probeSel, "target", "{{target}}", "50", "90", "99")},
			{title: "Loss per target", unit: "percentunit", w: 12, h: 9,
				desc:    "Probes without a reply within the target's timeout over probes sent, over the selected hosts.",
				queries: q(lossRatio(probeSel, "target"), "{{target}}")},
			{title: "RTT p99 per host and target", unit: "s", w: 12, h: 9,
				desc:    "Each monitor's own p99: one slow host among many shows here, where the per-target quantile above pools it with the rest.",
				queries: quantiles("lowlat_probe_rtt_seconds", probeSel, "instance, target", "{{instance}} {{target}}", "99")},
			{title: "Loss per host and target", unit: "percentunit", w: 12, h: 9,
				desc:    "Each monitor's loss ratio to each target.",
				queries: q(lossRatio(probeSel, "instance, target"), "{{instance}} {{target}}")},
			{title: "Jitter per host and target", unit: "s", w: 8, h: 8,
				desc:    "RFC 3550 interarrival jitter of the round-trip time, as each monitor computes it.",
				queries: q(`max by (instance, target) (lowlat_probe_jitter_seconds{`+probeSel+`})`, "{{instance}} {{target}}")},
			{title: "Loss by direction", unit: "percentunit", w: 8, h: 8,
				desc: "up: the probe never reached the reflector; down: its reply never came back; unknown: icmp, tcp, or the reflector could not say.",
				queries: q(`sum by (target, direction) (rate(lowlat_probe_lost_total{`+probeSel+`}`+rate+`)) / ignoring (direction) group_left sum by (target) (rate(lowlat_probe_sent_total{`+probeSel+`}`+rate+`))`,
					"{{target}} {{direction}}")},
			{title: "crr time to first byte p50 / p99", unit: "s", w: 8, h: 8,
				desc:    "crr targets: connect start to the first response byte.",
				queries: quantiles("lowlat_probe_first_byte_seconds", probeSel, "target", "{{target}}", "50", "99")},
		}},
		{title: CanaryRow, panels: canaryPanels()},
		{title: "Host state: findings, drift, transactions", panels: []panel{
			{title: "Doctor findings", kind: tableKind, w: 12, h: 8,
				desc:    "Doctor findings that hold now, per host ('lowlat doctor' on the host gives the evidence and the fix).",
				queries: instant(q(`lowlat_finding{`+hostSel+`} == 1`, ""))},
			{title: "Knobs drifted", w: 12, h: 8,
				desc:    "Knobs whose live value left the value lowlat applied ('lowlat status' lists them).",
				queries: q(`lowlat_drift_knobs{`+hostSel+`}`, "{{instance}}")},
			{title: "Transactions in force", kind: tableKind, w: 12, h: 8,
				desc:    "lowlat transactions in force per host, with their profile and state.",
				queries: instant(q(`lowlat_transaction_info{`+hostSel+`} == 1`, ""))},
			{title: "Confirm deadlines", kind: tableKind, unit: "s", w: 12, h: 8,
				desc:    "Applies awaiting 'lowlat confirm': seconds until their watchdog rolls them back.",
				queries: instant(q(`lowlat_confirm_deadline_timestamp_seconds{`+hostSel+`} - time()`, ""))},
			{title: "Monitor health", w: 24, h: 6,
				desc: "1 when the monitor could read the journal, load its config and attach its passive measurements; 0 says what is unknown.",
				queries: q(`lowlat_journal_read_successful{`+hostSel+`}`, "{{instance}} journal",
					`lowlat_config_last_reload_successful{`+hostSel+`}`, "{{instance}} config",
					`lowlat_passive_up{`+hostSel+`}`, "{{instance}} passive")},
		}},
		{title: "Real traffic: what each host adds to its users' packets", panels: []panel{
			{title: "Egress queueing p50 / p99 per device", unit: "s", w: 12, h: 8,
				desc:    "lowlat_host_egress_queue_seconds: time in a device's queueing layer, from the kernel; TX queues merged.",
				queries: quantiles("lowlat_host_egress_queue_seconds", hostSel, "instance, device", "{{instance}} {{device}}", "50", "99")},
			{title: "Receive path p50 / p99 per port and stage", unit: "s", w: 12, h: 8,
				desc:    "lowlat_host_receive_seconds: from the kernel's receive timestamp to the stack, TCP's socket, or the application's read.",
				queries: quantiles("lowlat_host_receive_seconds", hostSel, "instance, proto, port, stage", "{{instance}} {{proto}}/{{port}} {{stage}}", "50", "99")},
			{title: "TCP RTT p50 / p99 per port", unit: "s", w: 8, h: 8,
				desc:    "lowlat_tcp_rtt_seconds: the kernel's RTT samples of real ACKs.",
				queries: quantiles("lowlat_tcp_rtt_seconds", hostSel, "instance, port", "{{instance}} {{port}}", "50", "99")},
			{title: "TCP first bytes p50 / p99 per port", unit: "s", w: 8, h: 8,
				desc:    "lowlat_tcp_first_bytes_seconds: from a connection's SYN reaching the host to the ACK of its first N bytes, per listening port.",
				queries: quantiles("lowlat_tcp_first_bytes_seconds", hostSel, "instance, port, bytes", "{{instance}} {{port}} {{bytes}}B", "50", "99")},
			{title: "TCP retransmits per port", unit: "pps", w: 8, h: 8,
				desc:    "Segments a port's connections retransmitted, per second.",
				queries: q(`sum by (instance, port) (rate(lowlat_tcp_retransmits_total{`+hostSel+`}`+rate+`))`, "{{instance}} {{port}}")},
		}},
		{title: "Host $instance", repeat: VarInstance, panels: []panel{
			{title: "RTT p50 / p90 / p99 on $instance", unit: "s", w: 12, h: 8,
				desc:    "One host's probes, per target (the row repeats for each selected instance).",
				queries: quantiles("lowlat_probe_rtt_seconds", probeSel, "target", "{{target}}", "50", "90", "99")},
			{title: "Loss on $instance", unit: "percentunit", w: 12, h: 8,
				desc:    "One host's lost over sent probes, per target.",
				queries: q(lossRatio(probeSel, "target"), "{{target}}")},
		}},
	}
}

// Queries returns every panel's queries, in the dashboard's order.
func Queries() []Query {
	var out []Query
	for _, r := range layout() {
		for _, p := range r.panels {
			for _, qq := range p.queries {
				qq.Panel, qq.Row = p.title, r.title
				out = append(out, qq)
			}
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${" + VarDatasource + "}")}

func target(qq Query) *prometheus.DataqueryBuilder {
	b := prometheus.NewDataqueryBuilder().Datasource(datasource).RefId(qq.RefID).Expr(qq.Expr)
	if qq.Instant {
		return b.Instant().Format(prometheus.PromQueryFormatTable)
	}
	b = b.Range()
	if qq.Legend != "" {
		b = b.LegendFormat(qq.Legend)
	}
	return b
}

// hideColumns drops the columns of an instant table that carry nothing:
// the time, the name, and the value of an info metric.
var hideColumns = dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
	"excludeByName": map[string]bool{"Time": true, "__name__": true, "job": true},
}}

// overrider is what grafana-foundation-sdk's panel builders share for
// field overrides.
type overrider[B any] interface {
	OverrideByQuery(refID string, properties []dashboard.DynamicConfigValue) B
}

// groupColors colours each query of a canary group in shades of the
// group's colour, so the canary's hosts read as one family of lines and
// the control's as another.
func groupColors[B overrider[B]](b B, qs []Query) B {
	for _, qq := range qs {
		for _, g := range groups {
			if qq.Group == g.name {
				b = b.OverrideByQuery(qq.RefID, []dashboard.DynamicConfigValue{{Id: "color",
					Value: dashboard.FieldColor{Mode: dashboard.FieldColorModeIdShades, FixedColor: ptr(g.color)}}})
			}
		}
	}
	return b
}

func build(p panel, id uint32) cog.Builder[dashboard.Panel] {
	switch p.kind {
	case tableKind:
		b := table.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Datasource(datasource).
			Span(p.w).Height(p.h).WithTransformation(hideColumns)
		if p.unit != "" {
			b = b.Unit(p.unit)
		}
		for _, qq := range p.queries {
			b = b.WithTarget(target(qq))
		}
		return b
	case statKind:
		b := stat.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Datasource(datasource).
			Span(p.w).Height(p.h)
		for _, qq := range p.queries {
			b = b.WithTarget(target(qq))
		}
		return groupColors(b, p.queries)
	}
	b := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(p.desc).Datasource(datasource).
		Span(p.w).Height(p.h).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).Calcs([]string{"mean", "max", "lastNotNull"}))
	if p.unit != "" {
		b = b.Unit(p.unit)
	}
	if p.unit == "s" || p.unit == "percentunit" || p.unit == "pps" {
		b = b.Min(0)
	}
	for _, qq := range p.queries {
		b = b.WithTarget(target(qq))
	}
	return groupColors(b, p.queries)
}

func textbox(name, label, def, desc string) *dashboard.TextBoxVariableBuilder {
	return dashboard.NewTextBoxVariableBuilder(name).Label(label).Description(desc).
		DefaultValue(dashboard.StringOrMap{String: ptr(def)}).
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: ptr(def)}, Value: dashboard.StringOrArrayOfString{String: ptr(def)}})
}

func labelValues(name, label, query, desc string) *dashboard.QueryVariableBuilder {
	all := dashboard.VariableOption{Selected: ptr(true), Text: dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}}, Value: dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}}}
	return dashboard.NewQueryVariableBuilder(name).Label(label).Description(desc).
		Datasource(datasource).Query(dashboard.StringOrMap{String: ptr(query)}).Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).IncludeAll(true).AllValue(".*").Current(all)
}

// Build returns the dashboard.
func Build() (dashboard.Dashboard, error) {
	b := dashboard.NewDashboardBuilder("lowlat fleet").Uid(UID).
		Description("lowlat monitors across a fleet: probe latency, loss and jitter per target and per host, canary hosts against control hosts, what each host adds to its real traffic, and the state of lowlat's changes. Generated by internal/dashboard; do not edit by hand.").
		Tags([]string{"lowlat", "latency"}).
		Refresh("30s").Time("now-3h", "now").Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(VarDatasource).Label("Prometheus").Type("prometheus")).
		WithVariable(labelValues(VarJob, "job", `label_values(lowlat_build_info, job)`, "Scrape jobs of lowlat monitors.")).
		WithVariable(labelValues(VarInstance, "instance", `label_values(lowlat_build_info{job=~"$job"}, instance)`, "Monitors (hosts); a row per selected host repeats at the bottom.")).
		WithVariable(labelValues(VarTarget, "target", `label_values(lowlat_probe_sent_total{job=~"$job", instance=~"$instance"}, target)`, "Probe targets, by the monitor's target name.")).
		WithVariable(textbox(VarHostLabel, "host label", "instance", "The label whose values are the hosts of the canary comparison: the judge's --host-label (the playbook's lowlat_prometheus_host_label), instance unless you changed it.")).
		WithVariable(textbox(VarCanaryInstances, "canary instances", "", `A regex of the canary hosts' host-label values, as the canary playbook prints it: 10\.0\.0\.1:9431|10\.0\.0\.2:9431 (the regex itself, with one backslash; Grafana doubles it for PromQL's string). Empty: the panels show no canary host.`)).
		WithVariable(textbox(VarControlInstances, "control instances", "", `A regex of the control hosts' host-label values, as the canary playbook prints it. Empty: the panels show no control host.`))
	id := uint32(0)
	for _, r := range layout() {
		id++
		rb := dashboard.NewRowBuilder(r.title).Id(id)
		if r.repeat == "" {
			b = b.WithRow(rb)
		}
		for _, p := range r.panels {
			id++
			if r.repeat == "" {
				b = b.WithPanel(build(p, id))
			} else {
				rb = rb.WithPanel(build(p, id))
			}
		}
		if r.repeat != "" {
			// Collapsed, so its panels ride in the row and Grafana repeats
			// it per selected instance when it is opened.
			b = b.WithRow(rb.Collapsed(true).Repeat(r.repeat))
		}
	}
	d, err := b.Build()
	if err != nil {
		return dashboard.Dashboard{}, fmt.Errorf("build dashboard: %w", err)
	}
	return d, nil
}

// JSON returns the dashboard as the committed file holds it: indented, with
// a trailing newline.
func JSON() ([]byte, error) {
	d, err := Build()
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode dashboard: %w", err)
	}
	return append(out, '\n'), nil
}

// Substitute replaces the dashboard's template variables in expr with the
// values of vars, keyed by name without the '$' ("__rate_interval",
// "instance", ...), as Grafana does before it sends a query: multi-value
// variables take the regex Grafana makes of the selection (".*" for All),
// textboxes the text typed into them, which Substitute escapes as Grafana
// does (textboxEscape). A test can then run the query itself. No
// variable's name is a prefix of another's.
func Substitute(expr string, vars map[string]string) string {
	var pairs []string
	for _, n := range []string{"__rate_interval", VarJob, VarInstance, VarTarget} {
		pairs = append(pairs, "$"+n, vars[n])
	}
	for _, n := range []string{VarHostLabel, VarCanaryInstances, VarControlInstances} {
		pairs = append(pairs, "$"+n, textboxEscape.Replace(vars[n]))
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}

// textboxEscape is what Grafana's Prometheus data source does to a
// single-value variable (a textbox) in a query: each backslash becomes two
// and a ' becomes \\' (interpolateQueryExpr and prometheusRegularEscape in
// @grafana/prometheus, escaping.ts). So the regex 10\.0\.0\.1:9431, typed
// with one backslash, reaches PromQL as the string "10\\.0\\.0\\.1:9431",
// which is that regex again.
var textboxEscape = strings.NewReplacer(`\`, `\\`, `'`, `\\'`)
