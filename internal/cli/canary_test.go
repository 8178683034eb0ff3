package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCanaryJudgeBadInput: each bad command line is one line naming what
// is wrong, exit 2, and not one request reaches Prometheus.
func TestCanaryJudgeBadInput(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, "no", 500)
	}))
	defer srv.Close()
	ok := []string{"--prometheus", srv.URL, "--canary", `group="canary"`, "--control", `group="control"`, "--window", "1h"}
	with := func(flag, value string) []string {
		args := append([]string{}, ok...)
		for i := 0; i < len(args); i += 2 {
			if args[i] == flag {
				args[i+1] = value
				return args
			}
		}
		return append(args, flag, value)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"malformed selector", with("--canary", `group="canary`), "--canary"},
		{"selector without quotes", with("--canary", `group=canary`), "must be quoted"},
		{"bad regex", with("--control", `instance=~"(a"`), "--control"},
		{"not a label", with("--canary", `9x="a"`), "not a label name"},
		{"empty group", with("--canary", ""), "--canary is required"},
		{"empty braces", with("--control", "{}"), "empty selector"},
		{"matches everything", with("--canary", `group=~".*"`), "every matcher matches the empty string"},
		{"the same group twice", with("--control", `{group="canary"}`), "select the same series"},
		{"unknown metric", with("--metric", "p99,latency"), `unknown metric "latency"`},
		{"unknown histogram", with("--metric", "lowlat_nosuch_seconds"), "not one of lowlat's histograms"},
		{"bad quantile", with("--metric", "p0"), "not a quantile"},
		{"metric twice", with("--metric", "p99,p99"), "named twice"},
		{"bad URL", with("--prometheus", "prom:9090"), "--prometheus"},
		{"URL with a query", with("--prometheus", srv.URL+"?x=1"), "--prometheus"},
		{"no URL", with("--prometheus", ""), "--prometheus is required"},
		{"no window", with("--window", "0s"), "--window is required"},
		{"too few steps", with("--step", "20m"), "at least 6"},
		{"fractional step", with("--step", "1500ms"), "whole seconds"},
		// The default step of a window that 24 does not divide is whole
		// seconds: the error is the metric's, not the step's.
		{"unknown metric, odd window", append(with("--window", "70s"), "--metric", "latency"), `unknown metric "latency"`},
		{"bad SLO", with("--slo", "p99<=8"), "--slo"},
		{"SLO on a metric the judge lacks", with("--slo", "goodput_mbps>=5mbit"), "--slo term"},
		{"bad end", with("--end", "yesterday"), "--end"},
		{"bad host label", with("--host-label", "a-b"), "--host-label"},
		{"html in no directory", with("--html", "/nonexistent/dir/x.html"), "--html"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			err := Main(context.Background(), append([]string{"canary", "judge"}, c.args...), &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }})
			if code := exitCode(err); code != ExitUsage {
				t.Fatalf("exit %d (%v), want %d", code, err, ExitUsage)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") || !strings.Contains(msg, c.want) {
				t.Errorf("error %q: want one line containing %q", msg, c.want)
			}
			if out.Len() > 0 {
				t.Errorf("printed %q on a usage error", out.String())
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("bad command lines sent %d requests to Prometheus", n)
	}
	// The good command line does query (so the count above can fail), and
	// Prometheus answering errors is inconclusive, not a usage error.
	var out bytes.Buffer
	err := Main(context.Background(), append([]string{"canary", "judge", "--json"}, ok...), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if code := exitCode(err); code != ExitCanaryInconclusive || hits.Load() == 0 || !strings.Contains(out.String(), `"verdict": "inconclusive"`) {
		t.Errorf("a Prometheus that answers 500: exit %d, %d requests:\n%s", code, hits.Load(), out.String())
	}
	// A Prometheus that is not there (its port closed): inconclusive too,
	// saying so.
	l, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	out.Reset()
	err = Main(context.Background(), append([]string{"canary", "judge"}, with("--prometheus", gone)...), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }})
	if code := exitCode(err); code != ExitCanaryInconclusive || !strings.Contains(out.String(), "connection refused") || !strings.Contains(out.String(), "INCONCLUSIVE") {
		t.Errorf("an unreachable Prometheus: exit %d:\n%s", code, out.String())
	}
}
