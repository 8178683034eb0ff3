package monitor

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
)

const rulesDir = "../../deploy/prometheus"

// The shipped rules pass promtool's checks and their unit tests
// (lowlat.rules.test.yml: every recording rule's value, every alert firing
// and not, a target that dies and comes back).
func TestRulesPromtool(t *testing.T) {
	promtool := needPromtool(t)
	for _, args := range [][]string{
		{"check", "rules", "lowlat.rules.yml"},
		{"test", "rules", "lowlat.rules.test.yml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "SUCCESS") {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// Every lowlat_ series the rules read is one the monitor exports: a
// renamed metric breaks this test, not an operator's alerting.
func TestRulesReadExportedSeries(t *testing.T) {
	b, err := os.ReadFile(rulesDir + "/lowlat.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	addr := reflector(t)
	if os.Geteuid() != 0 {
		t.Skip("the [passive] series the rules read need BPF: run as root")
	}
	// [passive] on loopback, a port nothing uses: the series exist from
	// the start, empty.
	cfg, err := ParseConfig("t.toml", []byte(fmt.Sprintf("[[target]]\nname = \"a\"\nkind = \"udp\"\naddress = %q\ninterval = \"20ms\"\nslo_p99 = \"5ms\"\n"+
		"[passive]\ndevices = [\"lo\"]\nports = [\"tcp/1\", \"udp/1\"]\nfirst_bytes = [\"1MB\"]\n", addr)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.AutorateDir = writeAutorateStates(t) // LowlatAutorateAtMin reads its series
	r := start(t, cfg, Options{Doctor: fakeDoctor, Status: fakeStatus})
	defer r.stop()
	// The doctor's series appear after its first run: a fixed 300 ms lost
	// that race on a loaded machine (lowlat_finding missing in a clean-clone
	// run). Scrape until they are there, or fail below.
	fams, _ := scrape(t, r.addr)
	for deadline := time.Now().Add(15 * time.Second); fams["lowlat_doctor_last_run_timestamp_seconds"] == nil && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		fams, _ = scrape(t, r.addr)
	}

	var used []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.Contains(line, "record:") || strings.Contains(line, "summary:") || strings.Contains(line, "description:") {
			continue
		}
		// Not the middle of a recording rule's name (target:lowlat_...:p99_5m).
		for _, sub := range regexp.MustCompile(`(?:^|[^:a-z0-9_])(lowlat_[a-z0-9_]+)`).FindAllStringSubmatch(line, -1) {
			m := sub[1]
			if !seen[m] {
				seen[m] = true
				used = append(used, m)
			}
		}
	}
	sort.Strings(used)
	if len(used) < 8 {
		t.Fatalf("found only %v in the rules", used)
	}
	for _, name := range used {
		base := strings.TrimSuffix(name, "_bucket")
		if fams[name] == nil && (base == name || fams[base] == nil) {
			t.Errorf("the rules read %s; the monitor does not export it", name)
		}
	}
	// Series of the client library the rules read too (the doctor's
	// staleness counts from the start when it never finished a run).
	for _, name := range []string{"process_start_time_seconds"} {
		if !strings.Contains(string(b), name) {
			t.Errorf("the rules no longer read %s: take it off this list", name)
		}
		if fams[name] == nil {
			t.Errorf("the rules read %s; the monitor does not export it", name)
		}
	}
}
