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
		for _, k := range []string{"rtt_us", "jitter_us", "ipdv_us", "pdv_us", "sent", "received", "loss", "duplicates", "reordered", "timestamps", "version", "host", "config", "histograms"} {
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

func TestReflectorCommandShutsDown(t *testing.T) {
	env, _, stderr := testEnv()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runReflector(ctx, env, []string{"--listen", "127.0.0.1:0", "--quiet"}) }()
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
	env, _, _ = testEnv()
	if err := runReflector(context.Background(), env, []string{"--max-clients", "0"}); exitCode(err) != 2 {
		t.Errorf("max-clients 0: %v", err)
	}
}
