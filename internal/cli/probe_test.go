package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
)

func testEnv() (*Env, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	return &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }}, &out, &errb
}

func startTestReflector(t *testing.T, key string) string {
	t.Helper()
	r := probe.NewReflector(probe.ReflectorConfig{MinInterval: time.Millisecond, Key: []byte(key)})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Listen(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r.Addr()
}

func exitCode(err error) int {
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestProbeBadInput(t *testing.T) {
	addr := startTestReflector(t, "")
	kaddr := startTestReflector(t, "right")
	dir := t.TempDir()
	out := filepath.Join(dir, "r.json")
	cases := []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"udp", addr, "--interval", "0"}, 2, "interval 0s: must be at least 100µs"},
		{[]string{"udp", addr, "--size", "70000"}, 2, "size 70000: must be at most 65507"},
		{[]string{"udp", addr, "--duration", "25h"}, 2, "longer than 24h0m0s (use --force"},
		{[]string{"udp", addr, "--dscp", "XX"}, 2, "dscp \"XX\""},
		{[]string{"load", addr, "--dscp", "64"}, 2, "dscp \"64\""},
		{[]string{"tcp", addr, "--connections", "10000000"}, 2, "connections 10000000: must be 1..1000000"},
		{[]string{"tcp", addr, "--rate", "0"}, 2, "rate 0"},
		{[]string{"tcp", addr, "--size", "70000"}, 2, "size 70000"},
		{[]string{"crr", addr, "--request", "10"}, 2, "request 10: must be 40.."},
		{[]string{"udp"}, 2, "missing HOST:PORT"},
		{[]string{"bogus"}, 2, "unknown kind"},
		{[]string{"udp", "127.0.0.1:1", "--duration", "1s", "-o", out}, 1, "connection refused"},
		{[]string{"tcp", "127.0.0.1:1", "--duration", "1s", "-o", out}, 1, "connection refused"},
		{[]string{"udp", "no-such-host.invalid:7431", "--duration", "1s", "-o", out}, 1, "resolve"},
		{[]string{"udp", addr, "--key", "wrong", "--duration", "1s", "-o", out}, 1, "no replies: wrong key or unreachable"},
		{[]string{"tcp", kaddr, "--key", "wrong", "--duration", "1s", "-o", out}, 1, "no replies: wrong key or unreachable"},
		{[]string{"tcp", kaddr, "--duration", "1s", "-o", out}, 1, "no replies: wrong key or unreachable"},
		{[]string{"crr", kaddr, "--key", "wrong", "--count", "2", "-o", out}, 1, "no replies: wrong key or unreachable"},
		{[]string{"crr", kaddr, "--key", "wrong", "--count", "4", "--parallel", "2", "-o", out}, 1, "no replies: wrong key or unreachable"},
		{[]string{"udp", addr, "--interval", "10us"}, 2, "interval 10µs: must be at least 100µs"},
		{[]string{"tcp", addr, "--duration", "25h"}, 2, "longer than 24h0m0s (use --force"},
		{[]string{"tcp", addr, "--pattern", "bogus"}, 2, "pattern \"bogus\""},
		{[]string{"crr", addr, "--parallel", "1000"}, 2, "parallel 1000: must be 1..256"},
		{[]string{"crr", addr, "--parallel", "0"}, 2, "parallel 0: must be 1..256"},
		{[]string{"crr", addr, "--response", "2000000000"}, 2, "response 2000000000: must be 16..1073741824"},
		{[]string{"load", addr, "--flows", "1000"}, 2, "flows 1000: must be 1..256"},
		{[]string{"load", addr, "--duration", "24h", "--idle", "1h"}, 2, "longer than 24h0m0s (use --force"},
		{[]string{"icmp", "127.0.0.1", "--interval", "1ms"}, 2, "probe icmp: interval 1ms: must be at least 10ms"},
		{[]string{"icmp", "127.0.0.1", "--socket", "packet"}, 2, `--socket "packet": want auto, dgram or raw`},
		{[]string{"icmp", "127.0.0.1", "--size", "8"}, 2, "size 8: must be 16..65499"},
		{[]string{"icmp", "127.0.0.1", "--dscp", "64"}, 2, `dscp "64"`},
		{[]string{"icmp"}, 2, "missing HOST"},
		{[]string{"icmp", "no-such-host.invalid", "--duration", "1s", "-o", out}, 1, "icmp no-such-host.invalid: resolve"},
	}
	for _, tt := range cases {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			env, stdout, _ := testEnv()
			err := runProbe(context.Background(), env, tt.args)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit %d, want %d (err %v)", got, tt.code, err)
			}
			if err == nil || !strings.Contains(err.Error(), tt.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line containing %q", err, tt.msg)
			}
			if stdout.Len() != 0 {
				t.Errorf("wrote to stdout on failure: %q", stdout.String())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("-o file exists after a failed run")
			}
		})
	}
}

func TestProbeUDPJSONAndCompare(t *testing.T) {
	addr := startTestReflector(t, "k")
	dir := t.TempDir()
	var files []string
	for i, iv := range []string{"5ms", "2ms"} {
		env, stdout, _ := testEnv()
		env.Getenv = func(k string) string {
			if k == "LOWLAT_KEY" {
				return "k"
			}
			return ""
		}
		f := filepath.Join(dir, []string{"a.json", "b.json"}[i])
		if err := runProbe(context.Background(), env, []string{"udp", addr, "--interval", iv, "--duration", "300ms", "--json", "-o", f}); err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
			t.Fatalf("stdout is not JSON: %v", err)
		}
		disk, _ := os.ReadFile(f)
		if !bytes.Equal(disk, stdout.Bytes()) {
			t.Error("-o file differs from --json output")
		}
		for _, k := range []string{"rtt_us", "jitter_us", "ipdv_us", "pdv_us", "sent", "received", "loss", "duplicates", "reordered", "timestamps", "dscp", "version", "host", "config", "histograms"} {
			if _, ok := m[k]; !ok {
				t.Errorf("JSON lacks %q", k)
			}
		}
		files = append(files, f)
	}
	env, stdout, _ := testEnv()
	if err := runProbe(context.Background(), env, []string{"compare", files[0], files[1]}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"METRIC", "rtt_us.p50", "sent", "configuration differs", "interval: 5ms -> 2ms"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout.String())
		}
	}
	env, stdout, _ = testEnv()
	if err := runProbe(context.Background(), env, []string{"compare", "--json", files[0], files[1]}); err != nil {
		t.Fatal(err)
	}
	var cmp probe.Comparison
	if err := json.Unmarshal(stdout.Bytes(), &cmp); err != nil || cmp.Type != "udp" || len(cmp.Rows) == 0 {
		t.Errorf("compare --json: %v %+v", err, cmp)
	}
}

// probe udp --dscp EF: the reply marking comes back in the result, in JSON and
// in the summary (runbook 000's EF marking, proved end to end).
func TestProbeUDPDSCP(t *testing.T) {
	addr := startTestReflector(t, "")
	env, stdout, _ := testEnv()
	if err := runProbe(context.Background(), env, []string{"udp", addr, "--dscp", "EF", "--interval", "5ms", "--duration", "200ms", "--json"}); err != nil {
		t.Fatal(err)
	}
	var r struct {
		DSCP map[string]any `json:"dscp"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.DSCP["sent"] != "EF" || r.DSCP["received"] != "EF" || r.DSCP["reflector_received"] != "EF" || r.DSCP["changed"] != 0.0 {
		t.Errorf("dscp = %v, want EF all the way", r.DSCP)
	}
	env, stdout, _ = testEnv()
	if err := runProbe(context.Background(), env, []string{"udp", addr, "--dscp", "AF41", "--interval", "5ms", "--duration", "100ms"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "dscp sent AF41, at the reflector AF41, on replies AF41") {
		t.Errorf("summary lacks the dscp line:\n%s", stdout)
	}
}

// probe load --dscp EF marks the UDP probes of both phases, and the loaded
// phase's marking comes back in the result.
func TestProbeLoadDSCP(t *testing.T) {
	addr := startTestReflector(t, "k") // a key: load is bulk
	env, stdout, _ := testEnv()
	if err := runProbe(context.Background(), env, []string{"load", addr, "--key", "k", "--dscp", "EF", "--flows", "1", "--idle", "200ms", "--duration", "400ms", "--interval", "10ms"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "dscp sent EF, at the reflector EF, on replies EF") {
		t.Errorf("load summary lacks the dscp line:\n%s", stdout)
	}
}

func TestProbeTCPAndCRRJSON(t *testing.T) {
	addr := startTestReflector(t, "")
	for _, tc := range []struct {
		args []string
		keys []string
	}{
		{[]string{"tcp", addr, "--connections", "2", "--rate", "200", "--duration", "300ms", "--json"},
			[]string{"rtt_us", "service_us", "timestamps", "connections", "requests", "errors", "connect_us", "send_lag_us", "version", "host", "config", "histograms"}},
		{[]string{"crr", addr, "--count", "6", "--parallel", "3", "--request", "100", "--response", "5000", "--json"},
			[]string{"connect_us", "first_byte_us", "last_byte_us", "transactions_per_sec", "errors", "bytes_sent", "bytes_received", "version", "host", "config", "histograms"}},
	} {
		env, stdout, _ := testEnv()
		if err := runProbe(context.Background(), env, tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var m map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &m); err != nil {
			t.Fatalf("%v: stdout is not JSON: %v", tc.args, err)
		}
		for _, k := range tc.keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s JSON lacks %q", tc.args[0], k)
			}
		}
		switch tc.args[0] {
		case "tcp":
			if m["timestamps"] != "kernel" {
				t.Errorf("tcp timestamps = %v, want kernel", m["timestamps"])
			}
		case "crr":
			cfg, _ := m["config"].(map[string]any)
			if cfg["parallel"] != 3.0 || m["bytes_sent"] != 600.0 || m["bytes_received"] != 30000.0 {
				t.Errorf("crr: parallel %v, bytes %v / %v", cfg["parallel"], m["bytes_sent"], m["bytes_received"])
			}
		}
	}
}

func TestReflectorCommandShutsDown(t *testing.T) {
	env, _, stderr := testEnv()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Main(ctx, []string{"reflector", "--listen", "127.0.0.1:0", "--quiet"}, env) }()
	time.Sleep(200 * time.Millisecond)
	cancel() // what SIGTERM does through main's signal context
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reflector did not stop on cancel")
	}
	if !strings.Contains(stderr.String(), "listening on 127.0.0.1:") || !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("stderr: %q", stderr.String())
	}
	for _, args := range [][]string{{"--max-clients", "0"}, {"--max-sessions-per-ip", "-1"}, {"--max-conns-per-ip", "-2"}} {
		env, _, _ = testEnv()
		if err := Main(context.Background(), append([]string{"reflector"}, args...), env); exitCode(err) != 2 {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// probe icmp gives the JSON fields of probe udp that ICMP can fill, and
// says that its loss has no direction.
func TestProbeICMPJSON(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("raw ICMP needs root where ping_group_range forbids datagram sockets")
	}
	env, stdout, _ := testEnv()
	if err := runProbe(context.Background(), env, []string{"icmp", "127.0.0.1", "--interval", "10ms", "--duration", "200ms", "--json"}); err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "rtt_us", "jitter_us", "ipdv_us", "pdv_us", "sent", "received", "loss", "timestamps", "send_lag_us", "histograms", "config", "address", "socket"} {
		if _, ok := res[k]; !ok {
			t.Errorf("no %q in %s", k, stdout)
		}
	}
	loss, _ := res["loss"].(map[string]any)
	if res["type"] != "icmp" || res["sent"] != 20.0 || res["received"] != 20.0 || loss["split"] != "none" || res["timestamps"] != "kernel" {
		t.Errorf("%s", stdout)
	}
	env, stdout, _ = testEnv()
	if err := runProbe(context.Background(), env, []string{"icmp", "127.0.0.1", "--interval", "10ms", "--duration", "100ms"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "loss 0 (0.00%)") || !strings.Contains(stdout.String(), "ICMP cannot tell a request lost on the way out from a reply lost on the way back") {
		t.Errorf("human output:\n%s", stdout)
	}
}
