package testnet

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// HeavyEnv turns on the heavy tests: those that open ten thousand sockets or
// watch the whole machine's CPU. "make test" sets it (the Makefile's unit
// target); a plain "go test ./..." leaves them out, so a quick run stays
// quick and does not depend on the machine being otherwise idle.
const HeavyEnv = "LOWLAT_HEAVY_TESTS"

// Heavy skips a heavy test unless HeavyEnv is set; what says what makes it
// heavy.
func Heavy(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(HeavyEnv) == "" {
		t.Skipf("heavy test (%s): runs under make test, or with %s=1", what, HeavyEnv)
	}
}

// CheckHeavy runs the named test of the current test binary again, in a
// child process without HeavyEnv, and fails unless the test skipped there:
// it proves a heavy test stays out of a plain "go test".
func CheckHeavy(t *testing.T, name string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(name)+"$", "-test.v", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, HeavyEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run %s without %s: %v\n%s", name, HeavyEnv, err, out)
	}
	if !strings.Contains(string(out), "--- SKIP: "+name+" ") {
		t.Errorf("%s ran without %s (a plain go test must leave it out):\n%s", name, HeavyEnv, out)
	}
}
