package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }}
	err := Main(context.Background(), args, env)
	return out.String(), errb.String(), err
}

func TestLabList(t *testing.T) {
	out, _, err := runCLI(t, "lab", "list")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"bufferbloat-uplink", "nagle-small-messages", "first-frame", "game-egress", "cross-border-jitter", "path-hops", "capped-uplink-varying", "[needs netem]"} {
		if !strings.Contains(out, s) {
			t.Errorf("list lacks %q:\n%s", s, out)
		}
	}
	out, _, err = runCLI(t, "lab", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var items []struct {
		Name     string
		Runbook  string
		Variants []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(out), &items); err != nil || len(items) != 7 {
		t.Fatalf("list --json: %v (%d items)\n%s", err, len(items), out)
	}
}

func TestLabUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"lab"}, 2, ""},
		{[]string{"lab", "frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"lab", "run"}, 2, "missing scenario NAME"},
		{[]string{"lab", "run", "nope"}, 2, `unknown scenario "nope" (known: bufferbloat-uplink, capped-uplink-varying, cross-border-jitter, first-frame, game-egress, nagle-small-messages, path-hops)`},
		{[]string{"lab", "run", "first-frame", "--variant", "x"}, 2, `scenario first-frame has no variant "x" (it has: baseline, initcwnd-40, sockops-initcwnd-40, initcwnd-40+tfo, bbr, live-edge)`},
		{[]string{"lab", "run", "first-frame", "--id", "Bad/Id"}, 2, "run id"},
		{[]string{"lab", "run", "first-frame", "--scale", "10"}, 2, "--scale 10"},
		{[]string{"lab", "vm", "nope"}, 2, "unknown scenario"},
		{[]string{"lab", "vm", "first-frame", "--modules", "/x"}, 2, "--modules goes with --kernel"},
		{[]string{"lab", "vm", "first-frame", "--timeout", "5s"}, 2, "want at least 1m"},
		{[]string{"lab", "report"}, 2, "missing result FILE"},
		{[]string{"lab", "report", "/nonexistent.json"}, 2, "/nonexistent.json"}, // a named file that is not there: bad input
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, _, err := runCLI(t, tt.args...)
			if code := exitCode(err); code != tt.code {
				t.Fatalf("exit %d (%v), want %d", code, err, tt.code)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("error is more than one line: %q", err)
			}
		})
	}
}

// lab report re-renders saved results (here real lab vm runs) as text,
// JSON and HTML; the exit status says whether every expectation held.
func TestLabReport(t *testing.T) {
	files, _ := filepath.Glob("../lab/testdata/results/*.json")
	if len(files) == 0 {
		t.Fatal("no result fixtures")
	}
	html := filepath.Join(t.TempDir(), "r.html")
	out, _, err := runCLI(t, append([]string{"lab", "report", "--html", html}, files...)...)
	if code := exitCode(err); code != 0 && code != 1 {
		t.Fatalf("exit %d: %v", code, err)
	}
	for _, want := range []string{"SCENARIO", "VARIANT", "BEFORE", "AFTER", "EXPECTATION", "VERDICT", "bufferbloat-uplink (runbook 003)"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q", want)
		}
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("<svg ")) || bytes.Contains(b, []byte("<script")) {
		t.Error("HTML without charts, or with a script")
	}
	out, _, _ = runCLI(t, append([]string{"lab", "report", "--json"}, files...)...)
	var rs []map[string]any
	if err := json.Unmarshal([]byte(out), &rs); err != nil || len(rs) != len(files) {
		t.Fatalf("--json: %v", err)
	}
}

func TestLabLines(t *testing.T) {
	var b bytes.Buffer
	l := &labLines{w: &b}
	l.Write([]byte("[    1.0] kernel noise\nlab: first-frame [1/5] baseline: meas"))
	l.Write([]byte("ure\nother\nlowlat: lab run: boom\n"))
	if got, want := b.String(), "vm lab: first-frame [1/5] baseline: measure\nvm lowlat: lab run: boom\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
