//go:build linux

package packages

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// The canary playbook's failure paths (issue 39, point 1): every way the
// play can stop leaves the canary hosts with nothing of lowlat's in force
// and the rest untouched. TestFleetCanaryJudge runs them on its fleet.

// refused checks that a play was stopped before anything changed: it
// failed saying want, never reached the play that tunes the canary, and no
// host's journal (as before the play) or namespace (as before any play)
// changed.
func refused(t *testing.T, hosts []*fleetHost, before map[string]string, out string, code int, want string) {
	t.Helper()
	if code == 0 || !strings.Contains(out, want) {
		t.Errorf("exit %d, want the play refused saying %q:\n%s", code, want, tail(out))
	}
	if strings.Contains(out, "PLAY [Tune the canary batch") {
		t.Errorf("the play went on to tune the canary:\n%s", tail(out))
	}
	stats := recap(out)
	for _, h := range hosts {
		if b, _ := os.ReadFile(h.journal); string(b) != before[h.name] || stats[h.name].Changed != 0 {
			t.Errorf("%s: changed (recap %+v)", h.name, stats[h.name])
		}
		if got := h.snapshot(t); got != h.before {
			t.Errorf("%s: namespace changed:\n%s", h.name, testnet.DiffLines(h.before, got))
		}
	}
}

// statusOf is what the test reads of a host's lowlat status --json.
type statusOf struct {
	Active []struct {
		ID        string     `json:"id"`
		ConfirmBy *time.Time `json:"confirm_by"`
		Confirmed bool       `json:"confirmed"`
	} `json:"active"`
}

func hostStatus(t *testing.T, h *fleetHost) (statusOf, string) {
	t.Helper()
	o, _ := runCmd(t, h.ns.Command(exe, "status", "--json", "--journal", h.journal))
	var st statusOf
	json.Unmarshal([]byte(o), &st)
	return st, o
}

// awaiting returns the deadline of host h's one transaction awaiting
// confirmation, failing the test when it has none.
func awaiting(t *testing.T, h *fleetHost) time.Time {
	t.Helper()
	st, o := hostStatus(t, h)
	if len(st.Active) != 1 || st.Active[0].ConfirmBy == nil || st.Active[0].Confirmed {
		t.Fatalf("%s: want one transaction awaiting confirmation:\n%s", h.name, o)
	}
	return *st.Active[0].ConfirmBy
}

// deadmanRolledBack waits (until 20 s past deadline) for host h's own
// dead-man switch: nothing in force, not before the deadline, the journal
// saying so, the namespace as before any play.
func deadmanRolledBack(t *testing.T, h *fleetHost, deadline time.Time) {
	t.Helper()
	for {
		st, o := hostStatus(t, h)
		if o != "" && len(st.Active) == 0 {
			break
		}
		if time.Now().After(deadline.Add(20 * time.Second)) {
			t.Fatalf("%s: still in force 20 s after its deadline:\n%s", h.name, o)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if time.Now().Before(deadline) {
		t.Errorf("%s: rolled back before its deadline %v: by whom?", h.name, deadline)
	}
	if b, _ := os.ReadFile(h.journal); !strings.Contains(string(b), "not confirmed by") {
		t.Errorf("%s: its journal does not say that the dead-man switch rolled it back", h.name)
	}
	if got := h.snapshot(t); got != h.before {
		t.Errorf("%s: not restored by its dead-man switch:\n%s", h.name, testnet.DiffLines(h.before, got))
	}
}

// extraVar is one -e of a play with a value as is (quotes, spaces), as JSON.
func extraVar(name, value string) []string {
	b, _ := json.Marshal(map[string]string{name: value})
	return []string{"-e", string(b)}
}
