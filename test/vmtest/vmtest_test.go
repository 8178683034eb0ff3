package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestBinaryName(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/lowlat/lowlat/internal/knob":   "internal_knob",
		"github.com/lowlat/lowlat/internal/lab/vm": "internal_lab_vm",
		"example.com/x/y.v2":                       "example_com_x_y_v2",
	} {
		if got := binaryName(in); got != want {
			t.Errorf("binaryName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWithIntegrationTests(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	write("a_test.go", "package a\n\nfunc TestIntegrationX(t *testing.T) {}\n")
	write("b_test.go", "package b\n\n// TestIntegrationY is mentioned only in a comment\nfunc TestY(t *testing.T) {}\n")
	pkgs := []pkgInfo{
		{ImportPath: "a", Dir: dir, TestGoFiles: []string{"a_test.go"}},
		{ImportPath: "b", Dir: dir, XTestGoFiles: []string{"b_test.go"}},
		{ImportPath: "c", Dir: dir},
	}
	got := withIntegrationTests(pkgs)
	if len(got) != 1 || got[0].ImportPath != "a" {
		t.Errorf("withIntegrationTests = %+v, want only a", got)
	}
}

func testRuns() []*testRun {
	return []*testRun{
		{pkg: pkgInfo{ImportPath: "m/internal/knob"}, name: "internal_knob", bin: "x", guestDir: "/src/internal/knob"},
		{pkg: pkgInfo{ImportPath: "m/internal/probe"}, name: "internal_probe", bin: "x", guestDir: "/src/internal/probe"},
		{pkg: pkgInfo{ImportPath: "m/internal/qdisc"}, name: "internal_qdisc", bin: "x", guestDir: "/src/internal/qdisc"},
		{pkg: pkgInfo{ImportPath: "m/internal/empty"}, name: "internal_empty", bin: "x", guestDir: "/src/internal/empty"},
		{pkg: pkgInfo{ImportPath: "m/internal/none"}, name: "internal_none", status: statusNoTests},
	}
}

func TestGuestScriptRunsUnderBusybox(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed")
	}
	runs := testRuns()[:2]
	s := guestScript(runs, "^TestIntegration(A|B)$", 90*time.Second)
	for _, want := range []string{
		"cd '/src/internal/knob'",
		"'/tests/internal_knob.test' -test.run '^TestIntegration(A|B)$' -test.v -test.timeout 1m30s",
		"echo 'm/internal/probe'\" $rc\" >> /out/vmtest/results.txt",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("script lacks %q:\n%s", want, s)
		}
	}
	if out, err := exec.Command(bb, "sh", "-n", "-c", s).CombinedOutput(); err != nil {
		t.Errorf("busybox sh -n: %v\n%s", err, out)
	}
}

func TestApplyResultsAndSummary(t *testing.T) {
	runs := testRuns()
	output := strings.Join([]string{
		"=== vmtest: BEGIN m/internal/knob",
		"=== RUN   TestIntegrationA",
		"--- PASS: TestIntegrationA (0.1s)",
		"=== RUN   TestIntegrationB",
		"    --- PASS: TestIntegrationB/sub (0.0s)",
		"--- SKIP: TestIntegrationB (0.0s)",
		"PASS",
		"=== vmtest: END m/internal/knob exit 0",
		"=== vmtest: BEGIN m/internal/empty",
		"testing: warning: no tests to run",
		"PASS",
		"=== vmtest: END m/internal/empty exit 0",
		"=== vmtest: BEGIN m/internal/probe",
		"--- FAIL: TestIntegrationC (1s)",
		"--- PASS: TestIntegrationD (1s)",
		"FAIL",
		"=== vmtest: END m/internal/probe exit 1",
		"=== vmtest: BEGIN m/internal/qdisc",
		"=== RUN   TestIntegrationHang",
		"[   99.0] reboot: Power down",
	}, "\n")
	results := "m/internal/knob 0\nm/internal/empty 0\nm/internal/probe 1\n"
	applyResults(runs, []byte(results), []byte(output))

	want := []struct {
		status                  status
		passed, failed, skipped int
	}{
		{statusPass, 1, 0, 1},
		{statusFail, 1, 1, 0},
		{statusNoResult, 0, 0, 0},
		{statusNoTests, 0, 0, 0},
		{statusNoTests, 0, 0, 0},
	}
	for i, w := range want {
		r := runs[i]
		if r.status != w.status || len(r.passed) != w.passed || len(r.failed) != w.failed || len(r.skipped) != w.skipped {
			t.Errorf("%s: status %d passed %v failed %v skipped %v; want %+v", r.pkg.ImportPath, r.status, r.passed, r.failed, r.skipped, w)
		}
	}
	if !strings.Contains(runs[2].output, "TestIntegrationHang") {
		t.Errorf("interrupted package's output = %q", runs[2].output)
	}

	var buf bytes.Buffer
	if failed := printSummary(&buf, runs, 3*time.Second); !failed {
		t.Error("printSummary reported no failure")
	}
	got := buf.String()
	for _, want := range []string{
		"ok       m/internal/knob (1 passed, 0 failed, 1 skipped)",
		"FAIL     m/internal/probe (exit 1; 1 passed, 1 failed, 0 skipped): TestIntegrationC",
		"FAIL     m/internal/qdisc (no exit status",
		"no tests m/internal/empty",
		"no tests m/internal/none",
		"\nvmtest: 2 passed, 2 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-pkg", "./internal/knob/...,./internal/qdisc", "-pkg", "./cmd/...", "-run", "TestIntegrationX", "-env", "A=1", "-host-bin", "/bin/true"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(o.pkgs, " ") != "./internal/knob/... ./internal/qdisc ./cmd/..." || o.run != "TestIntegrationX" ||
		o.require != DefaultRequire || o.timeout != 20*time.Minute || strings.Join(o.hostBins, " ") != "/bin/true" {
		t.Errorf("options = %+v", o)
	}
	for _, bad := range [][]string{{"-run", "("}, {"-env", "NOEQUALS"}, {"stray"}} {
		if _, err := parseFlags(bad, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
}
