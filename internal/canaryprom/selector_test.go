package canaryprom

import "testing"

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]string{
		`group="canary"`: `group="canary"`,
		`{ instance=~"10.1.0.(1|2):9431" , role!="db", }`: `instance=~"10.1.0.(1|2):9431", role!="db"`,
		`{a='x"y', b!~` + "`c.*`" + `}`:                   `a="x\"y", b!~"c.*"`,
		`a="tab\there"`:                                   `a="tab\there"`,
	} {
		s, err := ParseSelector(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if s.String() != want {
			t.Errorf("%s: %s, want %s", in, s, want)
		}
		again, err := ParseSelector(s.String())
		if err != nil || !again.Equal(s) {
			t.Errorf("%s: written as %s, read back as %v (%v)", in, s, again, err)
		}
	}
	for _, bad := range []string{"", "{}", `a=`, `a="x`, `a=x`, `a=="x"`, `a~"x"`, `{a="x"`, `a="x" b="y"`, `a=~"(x"`, `a=""`, `a!="x",b=~".*"`, `__name__="lowlat_probe_rtt_seconds", a="x"`} {
		if s, err := ParseSelector(bad); err == nil {
			t.Errorf("%q: read as %s, want an error", bad, s)
		}
	}
}

func TestParseMetric(t *testing.T) {
	for in, want := range map[string]string{
		// Per host and target and kind, each side labelled.
		"p99": `label_replace(histogram_quantile(0.99, sum by (instance, target, kind) (rate(lowlat_probe_rtt_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.99, sum by (instance, target, kind, le) (rate(lowlat_probe_rtt_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"p999": `label_replace(histogram_quantile(0.999, sum by (instance, target, kind) (rate(lowlat_probe_rtt_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.999, sum by (instance, target, kind, le) (rate(lowlat_probe_rtt_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"lowlat_tcp_rtt_seconds:p50": `label_replace(histogram_quantile(0.5, sum by (instance, port) (rate(lowlat_tcp_rtt_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.5, sum by (instance, port, le) (rate(lowlat_tcp_rtt_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"lowlat_host_egress_queue_seconds": `label_replace(histogram_quantile(0.99, sum by (instance, device, queue, dscp) (rate(lowlat_host_egress_queue_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.99, sum by (instance, device, queue, dscp, le) (rate(lowlat_host_egress_queue_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"lowlat_host_receive_seconds:p90": `label_replace(histogram_quantile(0.9, sum by (instance, proto, port, stage) (rate(lowlat_host_receive_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.9, sum by (instance, proto, port, stage, le) (rate(lowlat_host_receive_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"lowlat_tcp_first_bytes_seconds": `label_replace(histogram_quantile(0.99, sum by (instance, port, bytes) (rate(lowlat_tcp_first_bytes_seconds{g="c"}[5s]))), "lowlat_judge_side", "native", "", "") or ` +
			`label_replace(histogram_quantile(0.99, sum by (instance, port, bytes, le) (rate(lowlat_tcp_first_bytes_seconds_bucket{g="c"}[5s]))), "lowlat_judge_side", "classic", "", "")`,
		"jitter": `avg by (instance, target, kind) (avg_over_time(lowlat_probe_jitter_seconds{g="c"}[5s]))`,
		// Loss: its counts, summed over direction, each side labelled.
		"loss": `label_replace(sum by (instance, target, kind) (increase(lowlat_probe_lost_total{g="c"}[5s])), "lowlat_judge_side", "lost", "", "") or ` +
			`label_replace(sum by (instance, target, kind) (increase(lowlat_probe_sent_total{g="c"}[5s])), "lowlat_judge_side", "sent", "", "")`,
	} {
		m, err := ParseMetric(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := m.stepExpr(Selector{{"g", "=", "c"}}, append([]string{"instance"}, m.parts...), "5s"); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
	for _, bad := range []string{"latency", "p0", "p", "p9x", "lowlat_nosuch_seconds", "lowlat_probe_rtt_seconds:q5", "first_byte_x"} {
		if _, err := ParseMetric(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// Every histogram has its parts' labels.
	for _, h := range Histograms {
		if len(partLabels[h]) == 0 {
			t.Errorf("%s: no part labels", h)
		}
	}
}
