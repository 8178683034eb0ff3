//go:build linux

package cli_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/lowlat/lowlat/internal/mssclamp"
	"github.com/lowlat/lowlat/internal/testnet"
)

// mssWorld is a router between a client and a server (testnet.Routed)
// whose uplink up0 lowlat shapes and clamps, driven as 'lowlat' run inside
// the router's namespace with a journal of its own.
type mssWorld struct {
	*world
	r *testnet.Routed
}

func newMSSWorld(t *testing.T) *mssWorld {
	t.Helper()
	if _, err := lowlatBin(); err != nil {
		t.Fatal(err)
	}
	r := testnet.NewRouted(t)
	if err := r.Router.Do(mssclamp.Probe); errors.Is(err, os.ErrPermission) {
		t.Skipf("nftables needs root: %v", err)
	} else if err != nil {
		// Both this host's kernel and the VM's can clamp.
		t.Fatal(err)
	}
	dir := t.TempDir()
	return &mssWorld{world: &world{t: t, ns: r.Router, journal: filepath.Join(dir, "journal"), root: filepath.Join(dir, "root")}, r: r}
}

// state is what a rollback must give back: the router's namespace as
// iproute2 and /proc see it, and its nftables ruleset as the kernel dumps
// it.
func (w *mssWorld) state() string {
	return w.ns.Snapshot(w.t, "up0") + "\n" + w.ns.NFTables(w.t)
}

// clamped checks a forwarded connection from the client and a local one
// from the router: both ends' snd_mss at most clamp when want, all over it
// otherwise (snd_mss leaves out the 12 bytes of timestamps, so a clamp
// shows as clamp - 12).
func (w *mssWorld) clamped(what string, clamp int, want bool) {
	w.t.Helper()
	fwd, local := w.r.Connect(w.t, w.r.Client), w.r.Connect(w.t, w.r.Router)
	w.t.Logf("%s: forwarded connection snd_mss %+v, the router's own %+v (clamp %d)", what, fwd, local, clamp)
	for _, m := range []uint32{fwd.Opener, fwd.Server, local.Opener, local.Server} {
		if (m <= uint32(clamp)) != want {
			w.t.Fatalf("%s: forwarded %+v, local %+v; want every snd_mss %s %d", what, fwd, local, map[bool]string{true: "<=", false: ">"}[want], clamp)
		}
	}
}

// TestIntegrationMSSClamp: capped-uplink with clamp-mss=auto on a router's
// uplink clamps both a forwarded connection and the router's own, in both
// directions, at the clamp the plan computed from the shaper's rate; status
// sees the table deleted behind lowlat's back, reassert puts it back, and
// a rollback leaves the router's namespace and its nftables ruleset exactly
// as before, another program's table included. Bad input changes nothing.
func TestIntegrationMSSClamp(t *testing.T) {
	w := newMSSWorld(t)
	w.ns.AddForeignTable(t, nil)
	before := w.state()
	// The shaper at 90 % of 2 Mbit/s: 900-byte frames take 4 ms.
	const clamp = 900 - mssclamp.FrameOverhead
	args := []string{"--profile", "capped-uplink", "--set", "rate=2mbit", "--set", "clamp-mss=auto", "--iface", "up0"}
	w.clamped("before", clamp, false)

	// Bad input: one line naming the thing, exit 2, nothing changed or
	// journaled.
	for _, bad := range []struct{ set, want string }{
		{"clamp-mss=500", "--set clamp-mss=500: clamp 500 bytes: want 536 to 65495"},
		{"clamp-mss=sometimes", "--set clamp-mss=sometimes: clamp \"sometimes\": want auto, off or a byte count"},
		{"mss.clamp=auto target=1h", "--set mss.clamp=auto target=1h: target \"1h\""},
	} {
		r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=2mbit", "--set", bad.set, "--iface", "up0")
		if r.code != 2 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("apply --set %s: exit %d, stderr %q; want exit 2 and one line with %q", bad.set, r.code, r.stderr, bad.want)
		}
	}
	if _, err := os.Stat(w.journal); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("bad input journaled: %v", err)
	}
	if s := w.state(); s != before {
		t.Fatalf("bad input changed the router:\n%s", testnet.DiffLines(before, s))
	}

	// The plan says what auto chose, and why.
	var pl struct {
		Changes []struct{ Knob, Current, Desired, Action, Note string } `json:"changes"`
	}
	if err := json.Unmarshal([]byte(w.mustRun(append([]string{"plan", "--json"}, args...)...).stdout), &pl); err != nil {
		t.Fatal(err)
	}
	var row string
	for _, c := range pl.Changes {
		if c.Knob == "mss/up0" {
			row = fmt.Sprintf("%s %s -> %s: %s", c.Action, c.Current, c.Desired, c.Note)
		}
	}
	if want := fmt.Sprintf("set <absent> -> %d: auto: 900-byte frames take 4.0 ms at 1800kbit (the shaper's rate)", clamp); !strings.HasPrefix(row, want) {
		t.Fatalf("plan row mss/up0: %q, want %q...", row, want)
	}

	var res applyJSON
	if err := json.Unmarshal([]byte(w.mustRun(append([]string{"apply", "--yes", "--json"}, args...)...).stdout), &res); err != nil {
		t.Fatal(err)
	}
	k := mssIndex(t, res)
	if res.Changed[k].Before != "<absent>" || res.Changed[k].After != fmt.Sprint(clamp) {
		t.Fatalf("apply: %+v", res.Changed[k])
	}
	w.clamped("applied", clamp, true)
	if r := w.run(nil, "status"); r.code != 0 {
		t.Fatalf("status after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Someone flushes the ruleset's lowlat part: drift, in words; reassert
	// (a firewall reload is what the timer is there for) puts it back.
	dropTable(t, w.ns, mssclamp.Table("up0"))
	if r := w.run(nil, "status"); r.code != 3 || !strings.Contains(r.stdout, fmt.Sprintf("mss clamp up0: applied %d bytes, now off", clamp)) {
		t.Fatalf("status with the table gone: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	w.clamped("table deleted", clamp, false)
	if r := w.run(nil, "reassert"); r.code != 0 || !strings.Contains(r.stdout, "mss/up0") {
		t.Fatalf("reassert: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := w.run(nil, "status"); r.code != 0 {
		t.Fatalf("status after reassert: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	w.clamped("reasserted", clamp, true)

	w.mustRun("rollback")
	if after := w.state(); after != before {
		t.Fatalf("not as before after rollback:\n%s", testnet.DiffLines(before, after))
	}
	w.clamped("rolled back", clamp, false)
}

// TestIntegrationMSSClampCrash: an apply killed just before and just after
// writing the clamp, and a rollback killed just after removing it, are
// finished by the next rollback, to the ruleset as it was.
func TestIntegrationMSSClampCrash(t *testing.T) {
	w := newMSSWorld(t)
	w.ns.AddForeignTable(t, nil)
	before := w.state()
	args := []string{"apply", "--yes", "--profile", "capped-uplink", "--set", "rate=2mbit", "--set", "clamp-mss=1200", "--iface", "up0"}
	var res applyJSON
	if err := json.Unmarshal([]byte(w.mustRun(append(args, "--json")...).stdout), &res); err != nil {
		t.Fatal(err)
	}
	w.mustRun("rollback")
	k := mssIndex(t, res) + 1
	for _, point := range []string{fmt.Sprintf("intent:%d", k), fmt.Sprintf("write:%d", k)} {
		r := w.run([]string{"LOWLAT_TEST_CRASH=" + point}, args...)
		if !r.killed {
			t.Fatalf("%s: apply not killed (exit %d): %s", point, r.code, r.stderr)
		}
		if point[0] == 'w' {
			w.clamped("killed after the write", 1200, true)
		}
		if rb := w.run(nil, "rollback"); rb.code != 0 {
			t.Fatalf("%s: rollback: exit %d\n%s%s", point, rb.code, rb.stdout, rb.stderr)
		}
		if after := w.state(); after != before {
			t.Fatalf("%s: not restored:\n%s", point, testnet.DiffLines(before, after))
		}
	}
	// A rollback restores newest first: the clamp comes back after the
	// rows after it.
	restore := len(res.Changed) - k + 1
	w.mustRun(args...)
	if r := w.run([]string{fmt.Sprintf("LOWLAT_TEST_CRASH=restore:%d", restore)}, "rollback"); !r.killed {
		t.Fatalf("restore:%d: rollback not killed (exit %d) %s", restore, r.code, r.stderr)
	}
	if again := w.run(nil, "rollback"); again.code != 0 || !strings.Contains(again.stdout, "recovered interrupted transaction") {
		t.Fatalf("second rollback: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}
	if after := w.state(); after != before {
		t.Fatalf("restore:%d: not restored:\n%s", restore, testnet.DiffLines(before, after))
	}
}

// TestIntegrationMSSClampUnmanaged: a table of lowlat's name that lowlat
// did not write as it is (here, by hand, with a chain of its own) is not
// replaced without --force: its rollback could not give it back.
func TestIntegrationMSSClampUnmanaged(t *testing.T) {
	w := newMSSWorld(t)
	if err := w.ns.Do(func() error {
		c, _ := nftables.New()
		tb := c.AddTable(&nftables.Table{Name: mssclamp.Table("up0"), Family: nftables.TableFamilyINet})
		c.AddChain(&nftables.Chain{Name: "mine", Table: tb})
		return c.Flush()
	}); err != nil {
		t.Fatal(err)
	}
	before := w.state()
	r := w.run(nil, "apply", "--yes", "--profile", "capped-uplink", "--set", "rate=2mbit", "--set", "clamp-mss=auto", "--iface", "up0")
	if r.code == 0 || !strings.Contains(r.stderr, "mss/up0") || !strings.Contains(r.stderr, "--force") {
		t.Fatalf("apply over an unmanaged table: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if after := w.state(); after != before {
		t.Fatalf("a refused apply changed the router:\n%s", testnet.DiffLines(before, after))
	}
}

// mssIndex is the position of mss/up0 among an apply's changes.
func mssIndex(t *testing.T, res applyJSON) int {
	t.Helper()
	for i, c := range res.Changed {
		if c.Knob == "mss/up0" {
			return i
		}
	}
	t.Fatalf("the apply changed no mss/up0: %+v", res.Changed)
	return -1
}

func dropTable(t *testing.T, ns *testnet.NS, name string) {
	t.Helper()
	if err := ns.Do(func() error {
		c, _ := nftables.New()
		c.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamilyINet})
		return c.Flush()
	}); err != nil {
		t.Fatal(err)
	}
}
