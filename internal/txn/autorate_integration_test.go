//go:build linux

package txn_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/autorate"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/lowlat/lowlat/internal/txn"
)

// TestIntegrationAutorateStatusRollback: a shaper with an autorate policy.
// A rate the daemon moved within the policy is no drift, one outside it is;
// the rollback removes the policy and stops the daemon (the qdisc row comes
// first, so its restore comes after), and leaves the namespace as it was.
func TestIntegrationAutorateStatusRollback(t *testing.T) {
	ns, eng := setup(t)
	eng.Sys = &knob.System{Root: t.TempDir()} // policy files here; qdiscs in the namespace
	ctx := context.Background()
	before := snapshot(t, ns)
	policy := "iface=v0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"
	changes := []txn.Change{
		{Knob: "qdisc/v0/root", Value: "tbf rate 1800kbit burst 3028 latency 50ms"},
		{Knob: "autorate/v0", Value: policy},
	}
	var rep *txn.StatusReport
	err := ns.Do(func() (err error) {
		if _, err = eng.Apply(ctx, changes, journal.Meta{Profile: "capped-uplink"}); err != nil {
			return err
		}
		rep, err = eng.Status(ctx, txn.StatusOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Drift) != 0 || rep.Checked != 2 {
		t.Fatalf("status right after apply: %+v", rep)
	}
	if b, err := os.ReadFile(filepath.Join(eng.Sys.Root, autorate.PolicyPath("v0"))); err != nil || string(b) != policy+"\n" {
		t.Fatalf("policy file: %q, %v", b, err)
	}

	// moveRate sets the shaper's rate as the daemon does, then reads status.
	moveRate := func(rate string) *txn.StatusReport {
		t.Helper()
		var rep *txn.StatusReport
		err := ns.Do(func() error {
			k, err := knob.New(eng.Sys, "qdisc/v0/root")
			if err != nil {
				return err
			}
			if err := k.Write(ctx, "tbf rate "+rate+" burst 3028 latency 50ms"); err != nil {
				return err
			}
			rep, err = eng.Status(ctx, txn.StatusOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := moveRate("2500kbit"); len(rep.Drift) != 0 {
		t.Errorf("a rate within the policy is drift: %+v", rep.Drift)
	}
	if rep := moveRate("3500kbit"); len(rep.Drift) != 1 || rep.Drift[0].Knob != "qdisc/v0/root" || !strings.Contains(rep.Drift[0].Live, "rate 3500kbit") {
		t.Errorf("a rate beyond the policy: drift %+v", rep.Drift)
	}
	moveRate("2500kbit")

	// The stand-in daemon: its command line names autorate, it exits on
	// SIGTERM (after the moment a real one takes to set the base rate).
	cmd, err := testnet.StartStandIn("lowlat-autorate-test", "slow")
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	pidFile := filepath.Join(eng.Sys.Root, autorate.PIDPath("v0"))
	os.MkdirAll(filepath.Dir(pidFile), 0o755)
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	var res *txn.Result
	err = ns.Do(func() (err error) {
		res, err = eng.Rollback(ctx, txn.RollbackOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 2 || res.Changed[0].Knob != "autorate/v0" || res.Changed[1].Knob != "qdisc/v0/root" {
		t.Errorf("rollback restored %+v; want the policy first, then the qdisc", res.Changed)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("daemon exit: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("the daemon still runs after the rollback")
	}
	if _, err := os.Stat(filepath.Join(eng.Sys.Root, autorate.PolicyPath("v0"))); !os.IsNotExist(err) {
		t.Errorf("policy file after rollback: %v", err)
	}
	if after := snapshot(t, ns); after != before {
		t.Errorf("not byte-identical after rollback:\n%s", diffLines(before, after))
	}
}

// waitCatchesTERM waits until pid has a handler for SIGTERM (sh has set its
// trap).
