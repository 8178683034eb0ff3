package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// pkgInfo is the part of "go list -json" vmtest uses.
type pkgInfo struct {
	ImportPath   string
	Dir          string
	TestGoFiles  []string
	XTestGoFiles []string
}

func (p pkgInfo) relDir(root string) string {
	rel, err := filepath.Rel(root, p.Dir)
	if err != nil || strings.HasPrefix(rel, "..") {
		return binaryName(p.ImportPath)
	}
	return filepath.ToSlash(rel)
}

// listPackages runs go list -e (so a package that does not compile is still
// listed, and then fails its build visibly).
func listPackages(ctx context.Context, root, tags string, patterns []string) ([]pkgInfo, error) {
	args := append([]string{"list", "-e", "-json=ImportPath,Dir,TestGoFiles,XTestGoFiles", "-tags", tags}, patterns...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %w\n%s", strings.Join(patterns, " "), err, stderr.Bytes())
	}
	var pkgs []pkgInfo
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if excluded[p.ImportPath] {
			continue
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, nil
}

var integrationRE = regexp.MustCompile(`(?m)^func TestIntegration`)

// withIntegrationTests keeps the packages whose test files define a
// TestIntegration… function.
func withIntegrationTests(pkgs []pkgInfo) []pkgInfo {
	var out []pkgInfo
	for _, p := range pkgs {
		for _, f := range append(append([]string(nil), p.TestGoFiles...), p.XTestGoFiles...) {
			b, err := os.ReadFile(filepath.Join(p.Dir, f))
			if err == nil && integrationRE.Match(b) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// binaryName turns an import path into a file name: the path below the
// module with "/" as "_" ("internal_knob").
func binaryName(importPath string) string {
	rel := strings.TrimPrefix(importPath, "github.com/lowlat/lowlat/")
	return strings.NewReplacer("/", "_", ".", "_").Replace(rel)
}

type status int

const (
	statusNotRun status = iota
	statusPass
	statusFail
	statusNoTests
	statusBuildFailed
	statusNoResult
)

// testRun is one package's test binary and what became of it.
type testRun struct {
	pkg      pkgInfo
	name     string
	bin      string
	guestDir string
	status   status
	begun    bool // its BEGIN marker appeared
	detail   string
	exitCode int
	output   string
	passed   []string
	failed   []string
	skipped  []string
}

const (
	beginMarker = "=== vmtest: BEGIN "
	endMarker   = "=== vmtest: END "
)

// guestScript is the busybox sh script that runs each test binary in its
// package's directory and records its exit status in /out/vmtest/results.txt.
func guestScript(runs []*testRun, runRE string, timeout time.Duration) string {
	var b strings.Builder
	b.WriteString("mkdir -p /out/vmtest\n")
	b.WriteString(": > /out/vmtest/results.txt\n")
	for _, r := range runs {
		fmt.Fprintf(&b, "echo %s\n", shellQuote(beginMarker+r.pkg.ImportPath))
		fmt.Fprintf(&b, "cd %s\n", shellQuote(r.guestDir))
		fmt.Fprintf(&b, "%s -test.run %s -test.v -test.timeout %s\n",
			shellQuote("/tests/"+r.name+".test"), shellQuote(runRE), timeout.Round(time.Second))
		b.WriteString("rc=$?\n")
		fmt.Fprintf(&b, "echo %s\" $rc\" >> /out/vmtest/results.txt\n", shellQuote(r.pkg.ImportPath))
		fmt.Fprintf(&b, "echo %s\" exit $rc\"\n", shellQuote(endMarker+r.pkg.ImportPath))
	}
	// The script's own status does not matter: results.txt carries them.
	b.WriteString("exit 0\n")
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

var (
	topResultRE = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+)`)
	noTestsRE   = regexp.MustCompile(`(?m)^testing: warning: no tests to run`)
)

// applyResults reads results.txt ("importpath code" lines) and splits the
// console output by package.
func applyResults(runs []*testRun, results []byte, output []byte) {
	byPkg := map[string]*testRun{}
	for _, r := range runs {
		byPkg[r.pkg.ImportPath] = r
		if r.bin != "" && r.status == statusNotRun {
			r.status = statusNoResult
		}
	}
	var cur *testRun
	var buf strings.Builder
	scanLines(output, func(line string) {
		if rest, ok := strings.CutPrefix(line, beginMarker); ok {
			cur = byPkg[rest]
			if cur != nil {
				cur.begun = true
			}
			buf.Reset()
			return
		}
		if strings.HasPrefix(line, endMarker) {
			if cur != nil {
				cur.output = buf.String()
			}
			cur = nil
			return
		}
		if cur == nil {
			return
		}
		buf.WriteString(line + "\n")
		if m := topResultRE.FindStringSubmatch(line); m != nil {
			switch m[1] {
			case "PASS":
				cur.passed = append(cur.passed, m[2])
			case "FAIL":
				cur.failed = append(cur.failed, m[2])
			case "SKIP":
				cur.skipped = append(cur.skipped, m[2])
			}
		}
	})
	if cur != nil { // the VM stopped in the middle of this package
		cur.output = buf.String()
	}
	scanLines(results, func(line string) {
		f := strings.Fields(line)
		if len(f) != 2 {
			return
		}
		r, ok := byPkg[f[0]]
		if !ok {
			return
		}
		code, err := strconv.Atoi(f[1])
		if err != nil {
			return
		}
		r.exitCode = code
		switch {
		case code != 0:
			r.status = statusFail
		case noTestsRE.MatchString(r.output) && len(r.passed)+len(r.skipped) == 0:
			r.status = statusNoTests
		default:
			r.status = statusPass
		}
	})
}

// printSummary prints one line per package and the closing count line, and
// reports whether anything failed.
func printSummary(w io.Writer, runs []*testRun, elapsed time.Duration) bool {
	var passed, failed, skipped int
	anyFailed := false
	fmt.Fprintln(w, "\nvmtest summary:")
	for _, r := range runs {
		passed += len(r.passed)
		skipped += len(r.skipped)
		counts := fmt.Sprintf("%d passed, %d failed, %d skipped", len(r.passed), len(r.failed), len(r.skipped))
		switch r.status {
		case statusPass:
			fmt.Fprintf(w, "ok       %s (%s)\n", r.pkg.ImportPath, counts)
		case statusNoTests:
			fmt.Fprintf(w, "no tests %s\n", r.pkg.ImportPath)
		case statusFail:
			anyFailed = true
			failed += max(len(r.failed), 1)
			fmt.Fprintf(w, "FAIL     %s (exit %d; %s)", r.pkg.ImportPath, r.exitCode, counts)
			if len(r.failed) > 0 {
				fmt.Fprintf(w, ": %s", strings.Join(r.failed, ", "))
			}
			fmt.Fprintln(w)
		case statusBuildFailed:
			anyFailed = true
			failed++
			fmt.Fprintf(w, "FAIL     %s (test binary did not build)\n", r.pkg.ImportPath)
		case statusNoResult, statusNotRun:
			anyFailed = true
			failed += max(len(r.failed), 1)
			if r.begun {
				fmt.Fprintf(w, "FAIL     %s (no exit status: the VM stopped during its run; %s)\n", r.pkg.ImportPath, counts)
			} else {
				fmt.Fprintf(w, "FAIL     %s (not run: the VM failed before it)\n", r.pkg.ImportPath)
			}
		}
	}
	fmt.Fprintf(w, "vmtest: took %s\n", elapsed.Round(time.Second))
	fmt.Fprintf(w, "vmtest: %d passed, %d failed, %d skipped\n", passed, failed, skipped)
	return anyFailed
}
