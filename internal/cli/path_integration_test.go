//go:build linux

package cli_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// lowlat probe path and doctor --path through the command line: the JSON a
// script reads, the finding, and bad input as one line with nothing run.
func TestIntegrationProbePath(t *testing.T) {
	w := newWorld(t)
	var res struct {
		Reached bool   `json:"reached"`
		Socket  string `json:"socket"`
		Hops    []struct {
			Index       int                `json:"index"`
			Address     string             `json:"address"`
			Sent        int                `json:"sent"`
			Received    int                `json:"received"`
			RTT         map[string]float64 `json:"rtt_us"`
			Added       map[string]float64 `json:"added_us"`
			Destination bool               `json:"destination"`
			Histogram   []map[string]any   `json:"histogram"`
		} `json:"hops"`
		Verdict struct {
			Hop  int    `json:"hop"`
			Kind string `json:"kind"`
		} `json:"verdict"`
	}
	r := w.mustRun("probe", "path", "127.0.0.1", "--count", "3", "--interval", "50ms", "--json")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("probe path --json: %v\n%s", err, r.stdout)
	}
	// The verdict on a one-hop path is pathprobe's to test; here it is one
	// of the two it can be.
	if !res.Reached || len(res.Hops) != 1 || res.Hops[0].Address != "127.0.0.1" || !res.Hops[0].Destination || res.Hops[0].Received != 3 ||
		res.Hops[0].RTT["p50"] <= 0 || len(res.Hops[0].Histogram) == 0 || (res.Verdict.Kind != "none" && res.Verdict.Kind != "delay") || res.Socket != "recverr" {
		t.Errorf("probe path to loopback: %s", r.stdout)
	}
	r = w.mustRun("probe", "path", "127.0.0.1", "--count", "2", "--interval", "50ms")
	for _, want := range []string{"HOP", "127.0.0.1", "destination", "verdict: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the table has no %q:\n%s", want, r.stdout)
		}
	}
	var doc struct {
		Findings []struct {
			ID       string            `json:"id"`
			Summary  string            `json:"summary"`
			Evidence map[string]string `json:"evidence"`
		} `json:"findings"`
	}
	r = w.mustRun("doctor", "--path", "127.0.0.1", "--sample", "0", "--json")
	json.Unmarshal([]byte(r.stdout), &doc)
	found := false
	for _, f := range doc.Findings {
		if f.ID == "path" {
			found = strings.Contains(f.Summary, "path to 127.0.0.1") && strings.Contains(f.Evidence["hop 01"], "127.0.0.1")
		}
	}
	if !found {
		t.Errorf("doctor --path: no path finding with the hop as evidence:\n%s", r.stdout)
	}

	bin, _ := lowlatBin()
	nobody := func(args ...string) *exec.Cmd {
		return w.ns.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
	}
	// Without a ping socket for its group and without root, ICMP is one
	// line naming the sysctl; UDP needs neither.
	if err := w.ns.Do(func() error { return os.WriteFile("/proc/sys/net/ipv4/ping_group_range", []byte("1 0"), 0) }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		code int
		want string
	}{
		{"unresolvable", exec.Command(bin, "probe", "path", "no-such-host.invalid"), 2, "cannot resolve no-such-host.invalid"},
		{"max-hops overflow", exec.Command(bin, "probe", "path", "127.0.0.1", "--max-hops", "256"), 2, "--max-hops 256: a TTL is 1..255"},
		{"zero count", exec.Command(bin, "probe", "path", "127.0.0.1", "--count", "0"), 2, "--count must be positive"},
		{"unknown proto", exec.Command(bin, "probe", "path", "127.0.0.1", "--proto", "sctp"), 2, `unknown --proto "sctp"`},
		{"icmp with a port", exec.Command(bin, "probe", "path", "127.0.0.1:80", "--proto", "icmp"), 2, "ICMP has no port"},
		{"doctor from a capture", exec.Command(bin, "doctor", "--path", "127.0.0.1", "--root", "/nonexistent"), 2, "not from a capture"},
		{"not root, no ping socket", nobody("probe", "path", "127.0.0.1", "--proto", "icmp", "--count", "1"), 1, "ping_group_range"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errb strings.Builder
			c.cmd.Stdout, c.cmd.Stderr = &out, &errb
			err := c.cmd.Run()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			msg := strings.TrimSpace(errb.String())
			if code != c.code || strings.Count(msg, "\n") > 0 || !strings.Contains(msg, c.want) || out.Len() != 0 {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit %d, one line with %q, nothing on stdout", code, msg, out.String(), c.code, c.want)
			}
		})
	}
	cmd := nobody("probe", "path", "127.0.0.1", "--count", "2", "--interval", "50ms", "--json")
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), `"reached": true`) {
		t.Errorf("UDP as nobody: %v\n%s", err, out)
	}
}
