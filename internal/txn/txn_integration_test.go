//go:build linux

package txn_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/lowlat/lowlat/internal/txn"
	"github.com/vishvananda/netlink"
)

func TestMain(m *testing.M) { testnet.Main(m) }

func snapshot(t *testing.T, ns *testnet.NS) string { return ns.Snapshot(t, "v0") }

func setup(t *testing.T) (*testnet.NS, *txn.Engine) {
	ns := testnet.New(t)
	ns.Veth(t, "v0", "v1", nil, 1)
	if err := ns.Do(func() error {
		l, _ := netlink.LinkByName("v0")
		addr, _ := netlink.ParseAddr("10.9.0.1/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("0.0.0.0/0")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.9.0.254")})
	}); err != nil {
		t.Fatal(err)
	}
	return ns, &txn.Engine{JournalPath: filepath.Join(t.TempDir(), "journal"), Sys: knob.Live, BootID: "test-boot"}
}

var changes = []txn.Change{
	{Knob: "qdisc/v0/root", Value: "htb rate 20mbit leaf { pfifo limit 200 }"},
	{Knob: "qdisc/v0/ingress", Value: "tbf rate 20mbit burst 20k latency 20ms"},
	{Knob: "route/default/main/initcwnd", Value: "40"},
	{Knob: "route/10.9.0.0/24/main/initrwnd", Value: "40"},
	{Knob: "sysctl/net.ipv4.tcp_congestion_control", Value: "bbr"},
	{Knob: "sysctl/net.ipv4.tcp_slow_start_after_idle", Value: "0"},
	{Knob: "sysctl/net.ipv4.tcp_rmem", Value: "4096 87380 4194304"},
	{Knob: "sysctl/net.core.somaxconn", Value: "1024"},
}

func TestIntegrationApplyStatusRollback(t *testing.T) {
	ns, eng := setup(t)
	ctx := context.Background()
	before := snapshot(t, ns)
	var res *txn.Result
	var rep *txn.StatusReport
	err := ns.Do(func() (err error) {
		if res, err = eng.Apply(ctx, changes, journal.Meta{Profile: "test"}); err != nil {
			return err
		}
		rep, err = eng.Status(ctx, txn.StatusOptions{Recover: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != len(changes) || len(res.Failed) != 0 {
		t.Fatalf("apply result %+v", res)
	}
	if rep.Txn == nil || *rep.Txn != res.Txn || len(rep.Drift) != 0 || rep.Checked != len(changes) {
		t.Fatalf("status right after apply: %+v", rep)
	}
	if snapshot(t, ns) == before {
		t.Fatal("apply changed nothing visible")
	}
	// Drift: something else resets a sysctl behind lowlat's back.
	err = ns.Do(func() error {
		if err := os.WriteFile("/proc/sys/net/core/somaxconn", []byte("4096"), 0); err != nil {
			return err
		}
		rep, err = eng.Status(ctx, txn.StatusOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) != 1 || rep.Drift[0].Knob != "sysctl/net.core.somaxconn" || rep.Drift[0].Live != "4096" || rep.Drift[0].Applied != "1024" {
		t.Fatalf("drift = %+v", rep.Drift)
	}
	err = ns.Do(func() error {
		os.WriteFile("/proc/sys/net/core/somaxconn", []byte("1024"), 0)
		res, err = eng.Rollback(ctx, txn.RollbackOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, ns); after != before {
		t.Errorf("not byte-identical after rollback:\n%s", diffLines(before, after))
	}
	err = ns.Do(func() (err error) {
		rep, err = eng.Status(ctx, txn.StatusOptions{})
		return err
	})
	if err != nil || rep.Txn != nil || len(rep.Drift) != 0 {
		t.Fatalf("status after rollback: %+v, %v", rep, err)
	}
}

// TestIntegrationFailedKnobRollsBackAll makes the fifth write fail (the kernel
// refuses an unknown congestion control) and checks the four before it were
// restored and the error names the knob.
func TestIntegrationFailedKnobRollsBackAll(t *testing.T) {
	ns, eng := setup(t)
	before := snapshot(t, ns)
	bad := append([]txn.Change(nil), changes...)
	bad[4] = txn.Change{Knob: "sysctl/net.ipv4.tcp_congestion_control", Value: "no-such-cc"}
	var err error
	nsErr := ns.Do(func() error {
		_, err = eng.Apply(context.Background(), bad, journal.Meta{})
		return nil
	})
	if nsErr != nil {
		t.Fatal(nsErr)
	}
	var ae *txn.ApplyError
	if !errors.As(err, &ae) || ae.Knob != "sysctl/net.ipv4.tcp_congestion_control" || ae.RolledBack != 5 || !strings.Contains(err.Error(), "no such file") && !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("apply error = %v (%+v)", err, ae)
	}
	if after := snapshot(t, ns); after != before {
		t.Errorf("a failed apply left changes behind:\n%s", diffLines(before, after))
	}
	st := loadState(t, eng.JournalPath)
	if tx := st.Txns[0]; tx.Status != journal.Aborted {
		t.Errorf("journal says %s, want aborted", tx.Status)
	}
}

func TestIntegrationValidationBeforeAnyWrite(t *testing.T) {
	ns, eng := setup(t)
	before := snapshot(t, ns)
	bad := append([]txn.Change(nil), changes...)
	bad = append(bad, txn.Change{Knob: "qdisc/v0/root", Value: "fq_codl"})
	var err error
	ns.Do(func() error { _, err = eng.Apply(context.Background(), bad, journal.Meta{}); return nil })
	if err == nil || !strings.Contains(err.Error(), `unknown qdisc kind "fq_codl"`) {
		t.Fatalf("err = %v", err)
	}
	if after := snapshot(t, ns); after != before {
		t.Error("validation failure changed the host")
	}
	if _, err := os.Stat(eng.JournalPath); err == nil {
		if st := loadState(t, eng.JournalPath); len(st.Txns) != 0 {
			t.Error("a refused apply must not begin a transaction")
		}
	}
}

func loadState(t *testing.T, path string) *journal.State {
	t.Helper()
	st, err := journal.ReadState(path)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func diffLines(a, b string) string { return testnet.DiffLines(a, b) }

// TestIntegrationUnrestorableQdisc: a root qdisc lowlat can read but not
// recreate (a filter on an htb root) is not replaced: the apply is refused
// before anything is written. With Force it is, and the rollback says it left
// the kernel's default instead of claiming an exact restore.
func TestIntegrationUnrestorableQdisc(t *testing.T) {
	ns, eng := setup(t)
	ctx := context.Background()
	for _, args := range [][]string{
		{"qdisc", "add", "dev", "v0", "root", "handle", "5:", "htb", "default", "1"},
		{"class", "add", "dev", "v0", "parent", "5:", "classid", "5:1", "htb", "rate", "1mbit"},
		{"filter", "add", "dev", "v0", "parent", "5:", "protocol", "all", "prio", "1", "u32", "match", "u32", "0", "0", "flowid", "5:1"},
	} {
		if out, err := ns.Command("tc", args...).CombinedOutput(); err != nil {
			t.Fatalf("tc %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	before := snapshot(t, ns)
	changes := []txn.Change{
		{Knob: "sysctl/net.core.somaxconn", Value: "1024"},
		{Knob: "qdisc/v0/root", Value: "tbf rate 20mbit burst 20k latency 20ms"},
	}
	err := ns.Do(func() error {
		_, err := eng.Apply(ctx, changes, journal.Meta{})
		return err
	})
	if !errors.Is(err, txn.ErrUnrestorable) || !strings.Contains(err.Error(), "qdisc/v0/root") || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("apply over an unmanaged root: %v", err)
	}
	if after := snapshot(t, ns); after != before {
		t.Fatalf("a refused apply changed the namespace:\n%s", diffLines(before, after))
	}
	if st := loadState(t, eng.JournalPath); len(st.Txns) != 0 {
		t.Errorf("a refused apply journaled %d transaction(s)", len(st.Txns))
	}
	var rb *txn.Result
	err = ns.Do(func() (err error) {
		if _, err = eng.Apply(ctx, changes, journal.Meta{Force: true}); err != nil {
			return err
		}
		rb, err = eng.Rollback(ctx, txn.RollbackOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rb.Inexact) != 1 || rb.Inexact[0].Knob != "qdisc/v0/root" || !strings.Contains(rb.Inexact[0].Error, "default") || len(rb.Changed) != 1 {
		t.Errorf("rollback after --force: inexact %+v changed %+v", rb.Inexact, rb.Changed)
	}
	if out, _ := ns.Command("tc", "qdisc", "show", "dev", "v0", "root").CombinedOutput(); strings.Contains(string(out), "htb") {
		t.Errorf("after the rollback the root is %s, want the kernel's default", out)
	}
}
