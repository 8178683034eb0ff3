//go:build linux

package cli_test

import (
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/testnet"
)

// runIn runs lowlat from a thread inside ns (the child is in the namespace)
// and returns its stdout, stderr and exit code.
func runIn(t *testing.T, ns *testnet.NS, args ...string) (string, string, int) {
	t.Helper()
	bin, err := lowlatBin()
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr strings.Builder
	code := 0
	err = ns.Do(func() error {
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
			return nil
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), code
}

// TestIntegrationSocketsRequire: the startup self-check of runbook 001 §10:
// exit 1 while a connection on the port lacks TCP_NODELAY, 0 once all have
// it, 3 when nothing matched; and the JSON field names of issue 6.
func TestIntegrationSocketsRequire(t *testing.T) {
	ns := testnet.New(t)
	var ln net.Listener
	var client net.Conn
	var server *net.TCPConn
	err := ns.Do(func() error {
		var err error
		if ln, err = net.Listen("tcp4", "127.0.0.1:4001"); err != nil {
			return err
		}
		if client, err = net.Dial("tcp4", "127.0.0.1:4001"); err != nil {
			return err
		}
		c, err := ln.Accept()
		server = c.(*net.TCPConn)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ln.Close(); client.Close(); server.Close() }()
	pid := strconv.Itoa(os.Getpid())
	if err := server.SetNoDelay(false); err != nil {
		t.Fatal(err)
	}
	out, _, code := runIn(t, ns, "sockets", "--pid", pid, "--require", "nodelay", "--port", "4001")
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "lacks nodelay") || !strings.Contains(out, "1 of 2 sockets checked fail nodelay") {
		t.Fatalf("a Nagle connection: exit %d\n%s", code, out)
	}
	server.SetNoDelay(true)
	out, _, code = runIn(t, ns, "sockets", "--pid", pid, "--require", "nodelay", "--port", "4001")
	if code != 0 || !strings.Contains(out, "OK 2 sockets checked: all have nodelay") {
		t.Fatalf("all NODELAY: exit %d\n%s", code, out)
	}
	if out, _, code = runIn(t, ns, "sockets", "--pid", pid, "--require", "fastopen", "--port", "4001"); code != 1 {
		t.Errorf("listener without TCP_FASTOPEN: exit %d\n%s", code, out)
	}
	if out, _, code = runIn(t, ns, "sockets", "--pid", pid, "--require", "nodelay", "--port", "4999"); code != 3 || !strings.Contains(out, "no socket matched") {
		t.Errorf("nothing on the port: exit %d\n%s", code, out)
	}

	out, _, code = runIn(t, ns, "sockets", "--pid", pid, "--port", "4001", "--json", "--require", "nodelay")
	if code != 0 {
		t.Fatalf("--json: exit %d\n%s", code, out)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]json.RawMessage
	if err := json.Unmarshal(doc["sockets"], &rows); err != nil || len(rows) != 3 {
		t.Fatalf("sockets: %v %d rows", err, len(rows))
	}
	keys := func(m map[string]json.RawMessage) map[string]bool {
		k := map[string]bool{}
		for n := range m {
			k[n] = true
		}
		return k
	}
	for _, r := range rows {
		have := keys(r)
		for _, k := range []string{"pid", "comm", "local", "remote", "state", "options", "options_error", "tcp_info"} {
			if !have[k] {
				t.Errorf("row lacks %q: %s", k, out)
			}
		}
		var opts, ti map[string]json.RawMessage
		json.Unmarshal(r["options"], &opts)
		json.Unmarshal(r["tcp_info"], &ti)
		for _, k := range []string{"nodelay", "cork", "quickack", "sndbuf", "rcvbuf", "congestion", "notsent_lowat", "reuseport", "fastopen_qlen", "tos"} {
			if _, ok := opts[k]; !ok {
				t.Errorf("options lack %q", k)
			}
		}
		for _, k := range []string{"rtt_us", "rttvar_us", "cwnd", "ssthresh", "retrans", "unacked", "delivery_rate_bps", "busy_us", "rwnd_limited_us", "sndbuf_limited_us"} {
			if _, ok := ti[k]; !ok {
				t.Errorf("tcp_info lacks %q", k)
			}
		}
	}
	var req struct {
		Checked int  `json:"checked"`
		OK      bool `json:"ok"`
	}
	if err := json.Unmarshal(doc["require"], &req); err != nil || req.Checked != 2 || !req.OK {
		t.Errorf("require: %+v %v", req, err)
	}
}

// TestIntegrationSocketsBadInput: bad input exits 2 with one line, a pid
// that does not exist included (naming it).
func TestIntegrationSocketsBadInput(t *testing.T) {
	ns := testnet.New(t)
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--port", "70000"}, 2, "--port 70000"},
		{[]string{"--pid", "-3"}, 2, "--pid -3"},
		{[]string{"--state", "sleepy"}, 2, "--state \"sleepy\""},
		{[]string{"--require", "turbo"}, 2, "unknown option \"turbo\""},
		{[]string{"--require", "nodelay", "--no-options"}, 2, "--require needs the options"},
		{[]string{"extra"}, 2, "unexpected argument"},
		{[]string{"--pid", "99999999"}, 2, "pid 99999999: no such process"},
	}
	for _, tt := range tests {
		out, stderr, code := runIn(t, ns, append([]string{"sockets"}, tt.args...)...)
		if code != tt.code || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q", tt.args, code, stderr, out, tt.code, tt.want)
		}
	}
	// --help works and lists the flags.
	out, _, code := runIn(t, ns, "sockets", "--help")
	var flags []string
	for _, f := range []string{"--pid", "--comm", "--port", "--require", "--json"} {
		if !strings.Contains(out, strings.TrimPrefix(f, "-")) {
			flags = append(flags, f)
		}
	}
	sort.Strings(flags)
	if code != 0 || len(flags) > 0 {
		t.Errorf("--help: exit %d, missing %v\n%s", code, flags, out)
	}
}
