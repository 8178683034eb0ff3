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
}

// Variable names, referenced by the queries.
const (
	VarDatasource = "datasource"
	VarJob        = "job"
	VarInstance   = "instance"
	VarTarget     = "target"
	VarGroupLabel = "group_label"
	VarCanary     = "canary"
	VarControl    = "control"
)

// Selectors shared by the panels.
const (
	hostSel  = `job=~"$job", instance=~"$instance"`
	probeSel = hostSel + `, target=~"$target"`
	rate     = "[$__rate_interval]"
)

// groupSel selects one group of hosts (canary or control) by the label the
// group_label variable names; the instance variable does not narrow it, so
// the comparison always holds the whole group.
func groupSel(group string) string {
	return `job=~"$job", $group_label="$` + group + `"`
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
		{title: "Canary against control", panels: []panel{
			{title: "RTT p99: canary against control", unit: "s", w: 9, h: 9,
				desc: "The p99 of each group's probes pooled, per target; the groups are the hosts whose $group_label label is $canary and $control (set in Prometheus's scrape config). 'lowlat canary judge' gives the verdict; this shows it.",
				queries: q(quantile("0.99", "lowlat_probe_rtt_seconds", groupSel(VarCanary)+`, target=~"$target"`, "target"), "$canary {{target}}",
					quantile("0.99", "lowlat_probe_rtt_seconds", groupSel(VarControl)+`, target=~"$target"`, "target"), "$control {{target}}")},
			{title: "Loss: canary against control", unit: "percentunit", w: 9, h: 9,
				desc: "Each group's lost over sent probes, per target.",
				queries: q(lossRatio(groupSel(VarCanary)+`, target=~"$target"`, "target"), "$canary {{target}}",
					lossRatio(groupSel(VarControl)+`, target=~"$target"`, "target"), "$control {{target}}")},
			{title: "Hosts per group", w: 6, h: 9, kind: statKind,
				desc: "Hosts are the unit of the comparison: a group of one host is not a population.",
				queries: q(`count(count by (instance) (lowlat_build_info{`+groupSel(VarCanary)+`}))`, "$canary",
					`count(count by (instance) (lowlat_build_info{`+groupSel(VarControl)+`}))`, "$control")},
			{title: "Real traffic p99: canary against control", unit: "s", w: 24, h: 8,
				desc: "The hosts' own packets ([passive] in the monitor's config): egress queueing and the kernel's TCP RTT samples, p99 per group.",
				queries: q(quantile("0.99", "lowlat_host_egress_queue_seconds", groupSel(VarCanary), "device"), "$canary egress {{device}}",
					quantile("0.99", "lowlat_host_egress_queue_seconds", groupSel(VarControl), "device"), "$control egress {{device}}",
					quantile("0.99", "lowlat_tcp_rtt_seconds", groupSel(VarCanary), "port"), "$canary tcp rtt {{port}}",
					quantile("0.99", "lowlat_tcp_rtt_seconds", groupSel(VarControl), "port"), "$control tcp rtt {{port}}")},
		}},
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
				qq.Panel = p.title
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
		return b
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
	return b
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
		WithVariable(textbox(VarGroupLabel, "group label", "group", "The label that puts a host in the canary or the control group (added in Prometheus's scrape config).")).
		WithVariable(textbox(VarCanary, "canary", "canary", "The group label's value on canary hosts.")).
		WithVariable(textbox(VarControl, "control", "control", "The group label's value on control hosts."))
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
// "instance", ...), as Grafana does before it sends a query; multi-value
// variables take a regex (".*" for All). A test can then run the query
// itself. No variable's name is a prefix of another's.
func Substitute(expr string, vars map[string]string) string {
	var pairs []string
	for _, n := range []string{"__rate_interval", VarJob, VarInstance, VarTarget, VarGroupLabel, VarCanary, VarControl} {
		pairs = append(pairs, "$"+n, vars[n])
	}
	return strings.NewReplacer(pairs...).Replace(expr)
}
