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
	for _, bad := range []string{"", "{}", `a=`, `a="x`, `a=x`, `a=="x"`, `a~"x"`, `{a="x"`, `a="x" b="y"`, `a=~"(x"`, `a=""`, `a!="x",b=~".*"`} {
		if s, err := ParseSelector(bad); err == nil {
			t.Errorf("%q: read as %s, want an error", bad, s)
		}
	}
}

func TestParseMetric(t *testing.T) {
	for in, want := range map[string]string{
		"p99":                        `histogram_quantile(0.99, sum by (instance) (rate(lowlat_probe_rtt_seconds{g="c"}[5s]))) or histogram_quantile(0.99, sum by (instance, le) (rate(lowlat_probe_rtt_seconds_bucket{g="c"}[5s])))`,
		"p999":                       `histogram_quantile(0.999, sum by (instance) (rate(lowlat_probe_rtt_seconds{g="c"}[5s]))) or histogram_quantile(0.999, sum by (instance, le) (rate(lowlat_probe_rtt_seconds_bucket{g="c"}[5s])))`,
		"lowlat_tcp_rtt_seconds:p50": `histogram_quantile(0.5, sum by (instance) (rate(lowlat_tcp_rtt_seconds{g="c"}[5s]))) or histogram_quantile(0.5, sum by (instance, le) (rate(lowlat_tcp_rtt_seconds_bucket{g="c"}[5s])))`,
		"jitter":                     `avg by (instance) (avg_over_time(lowlat_probe_jitter_seconds{g="c"}[5s]))`,
		"loss":                       `sum by (instance) (increase(lowlat_probe_lost_total{g="c"}[5s])) / sum by (instance) (increase(lowlat_probe_sent_total{g="c"}[5s]))`,
	} {
		m, err := ParseMetric(in)
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := m.expr(Selector{{"g", "=", "c"}}, []string{"instance"}, "5s"); got != want {
			t.Errorf("%s:\n got %s\nwant %s", in, got, want)
		}
	}
	for _, bad := range []string{"latency", "p0", "p", "p9x", "lowlat_nosuch_seconds", "lowlat_probe_rtt_seconds:q5", "first_byte_x"} {
		if _, err := ParseMetric(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
