//go:build linux

package mssclamp

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/lowlat/lowlat/internal/testnet"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// needNFTables fails the test where nf_tables cannot clamp: both this
// host's kernel and the VM's have it, so its absence is a failure, not a
// skip. Only a caller without CAP_NET_ADMIN skips.
func needNFTables(t *testing.T, ns *testnet.NS) {
	t.Helper()
	err := ns.Do(Probe)
	if errors.Is(err, os.ErrPermission) {
		t.Skipf("nftables needs root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationWriteRead: a clamp reads back as written, is replaced in
// place, reads as unmanaged once changed by hand, and its removal leaves
// the namespace's nftables exactly as before, foreign tables included.
func TestIntegrationWriteRead(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "v0", "v1", nil, 1)
	needNFTables(t, ns)
	// Another lowlat-looking table in another family: not a clamp.
	ns.AddForeignTable(t, func(c *nftables.Conn) {
		c.AddTable(&nftables.Table{Name: Table("v0"), Family: nftables.TableFamilyIPv4})
	})
	before := ns.NFTables(t)

	read := func() State {
		t.Helper()
		var s State
		if err := ns.Do(func() (err error) { s, err = Read("v0"); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	do := func(f func() error) {
		t.Helper()
		if err := ns.Do(f); err != nil {
			t.Fatal(err)
		}
	}
	if s := read(); s.Present() {
		t.Fatalf("before any write: %+v", s)
	}
	do(func() error { return Write("v0", 900) })
	if s := read(); s != (State{MSS: 900}) {
		t.Fatalf("after Write(900): %+v", s)
	}
	do(func() error { return Write("v0", 536) })
	if s := read(); s != (State{MSS: 536}) || s.String() != "536" {
		t.Fatalf("after Write(536) over 900: %+v", s)
	}
	// Another interface's clamp is a table of its own.
	do(func() error { return Write("v1", 1200) })
	var all map[string]State
	do(func() (err error) { all, err = List(); return err })
	if len(all) != 2 || all["v0"].MSS != 536 || all["v1"].MSS != 1200 {
		t.Fatalf("List = %+v", all)
	}
	do(func() error { return Remove("v1") })

	// nft, an independent decoder, reads the rules as an administrator
	// would write them (it leaves out meta l4proto tcp, which tcp flags
	// implies).
	if nft, err := exec.LookPath("nft"); err == nil {
		out, err := ns.Command(nft, "list", "table", "inet", Table("v0")).CombinedOutput()
		if err != nil {
			t.Fatalf("nft list: %v\n%s", err, out)
		}
		for _, want := range []string{
			"type filter hook prerouting priority mangle; policy accept;",
			"type filter hook postrouting priority mangle; policy accept;",
			`meta nfproto ipv4 iifname "v0" tcp flags syn / syn,rst tcp option maxseg size > 536 counter packets 0 bytes 0 tcp option maxseg size set 536`,
			`meta nfproto ipv6 iifname "v0" tcp flags syn / syn,rst tcp option maxseg size > 516 counter packets 0 bytes 0 tcp option maxseg size set 516`,
			`meta nfproto ipv4 oifname "v0" tcp flags syn / syn,rst tcp option maxseg size > 536`,
		} {
			if !strings.Contains(string(out), want) {
				t.Errorf("nft list table inet %s lacks %q:\n%s", Table("v0"), want, out)
			}
		}
	} else {
		t.Logf("no nft binary here: the cross-check with nft's own decoder is left out (%v)", err)
	}

	// Changes made outside lowlat read as unmanaged, saying what.
	changes := []struct {
		name   string
		change func(c *nftables.Conn, tb *nftables.Table)
		want   string
	}{
		{"rule added", func(c *nftables.Conn, tb *nftables.Table) {
			c.AddRule(&nftables.Rule{Table: tb, Chain: &nftables.Chain{Name: "prerouting", Table: tb}, Exprs: []expr.Any{&expr.Counter{}}})
		}, "chain prerouting: 3 rules"},
		{"chain deleted", func(c *nftables.Conn, tb *nftables.Table) {
			c.FlushChain(&nftables.Chain{Name: "postrouting", Table: tb})
			c.DelChain(&nftables.Chain{Name: "postrouting", Table: tb})
		}, "1 chains"},
		{"rule replaced", func(c *nftables.Conn, tb *nftables.Table) {
			ch := &nftables.Chain{Name: "postrouting", Table: tb}
			c.FlushChain(ch)
			for _, e := range [][]expr.Any{ruleExprs("v0", true, unix.NFPROTO_IPV4, 536), ruleExprs("v0", true, unix.NFPROTO_IPV6, 600)} {
				c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: e})
			}
		}, "chain postrouting rule 2: expression 11 (cmp) differs"},
		{"expression lowlat's decoder does not know", func(c *nftables.Conn, tb *nftables.Table) {
			ch := &nftables.Chain{Name: "prerouting", Table: tb}
			c.FlushChain(ch)
			for _, p := range []byte{unix.NFPROTO_IPV4, unix.NFPROTO_IPV6} {
				e := ruleExprs("v0", false, p, IPv6MSSIf(p, 536))
				// rt: an expression nftables' own rule listing drops
				// without a word (it cannot decode it).
				e = append([]expr.Any{&expr.Rt{Key: expr.RtNexthop4, Register: 1}}, e...)
				c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: e})
			}
		}, "15 expressions (rt meta"},
	}
	for _, tc := range changes {
		do(func() error { return Write("v0", 536) })
		do(func() error {
			c, _ := nftables.New()
			tc.change(c, &nftables.Table{Name: Table("v0"), Family: nftables.TableFamilyINet})
			return c.Flush()
		})
		s := read()
		if s.MSS != 0 || !strings.Contains(s.Unmanaged, tc.want) || !strings.HasPrefix(s.String(), UnmanagedPrefix) {
			t.Errorf("%s: read %+v, want unmanaged saying %q", tc.name, s, tc.want)
		}
	}
	// A write replaces an unmanaged table whole.
	do(func() error { return Write("v0", 700) })
	if s := read(); s != (State{MSS: 700}) {
		t.Fatalf("Write over an unmanaged table: %+v", s)
	}
	do(func() error { return Remove("v0") })
	do(func() error { return Remove("v0") }) // none is no error
	if after := ns.NFTables(t); after != before {
		t.Errorf("nftables not as before:\n%s", testnet.DiffLines(before, after))
	}
}

// IPv6MSSIf is the clamp lowlat writes for family p.
func IPv6MSSIf(p byte, mss int) int {
	if p == unix.NFPROTO_IPV6 {
		return IPv6MSS(mss)
	}
	return mss
}

func TestIntegrationWriteBadInput(t *testing.T) {
	ns := testnet.New(t)
	needNFTables(t, ns)
	before := ns.NFTables(t)
	for _, n := range []int{0, 535, MaxMSS + 1} {
		err := ns.Do(func() error { return Write("v0", n) })
		if err == nil || !strings.Contains(err.Error(), "v0") {
			t.Errorf("Write(%d) = %v, want an error naming v0", n, err)
		}
	}
	if after := ns.NFTables(t); after != before {
		t.Errorf("a refused write changed nftables:\n%s", testnet.DiffLines(before, after))
	}
}

// TestIntegrationHooks measures which hook clamps which connection, the
// evidence for the two chains lowlat writes. A chain at one hook matching
// the uplink up0 in one direction clamps some of the four MSSes: the
// client's (a forwarded connection, told by the server's SYN-ACK arriving
// on up0), the router's own (its local connection, likewise), and the
// server's in each (told by the SYN leaving through up0). prerouting on
// arrival and postrouting on departure are the only pair that clamps all
// four; input, forward and output each see one kind of connection only.
func TestIntegrationHooks(t *testing.T) {
	c := testnet.NewRouted(t)
	needNFTables(t, c.Router)
	const clamp = 900
	// Linux's segments carry 12 bytes of timestamps that snd_mss leaves out.
	const clamped = clamp - Timestamps
	free := c.Connect(t, c.Client)
	if free.Opener <= clamped || free.Server <= clamped {
		t.Fatalf("without a clamp the MSSes are %+v: the test cannot tell a clamp", free)
	}
	type seen struct{ Client, Router, ServerOfClient, ServerOfRouter bool }
	cases := []struct {
		hook hook
		want seen
	}{
		{hook{"prerouting", unix.NF_INET_PRE_ROUTING, false}, seen{Client: true, Router: true}},
		{hook{"input", unix.NF_INET_LOCAL_IN, false}, seen{Router: true}},
		{hook{"forward", unix.NF_INET_FORWARD, false}, seen{Client: true}},
		{hook{"forward", unix.NF_INET_FORWARD, true}, seen{ServerOfClient: true}},
		{hook{"output", unix.NF_INET_LOCAL_OUT, true}, seen{ServerOfRouter: true}},
		{hook{"postrouting", unix.NF_INET_POST_ROUTING, true}, seen{ServerOfClient: true, ServerOfRouter: true}},
	}
	var union seen
	for _, tc := range cases {
		if err := c.Router.Do(func() error { return write("up0", clamp, []hook{tc.hook}) }); err != nil {
			t.Fatal(err)
		}
		fwd, local := c.Connect(t, c.Client), c.Connect(t, c.Router)
		got := seen{Client: fwd.Opener <= clamped, Router: local.Opener <= clamped, ServerOfClient: fwd.Server <= clamped, ServerOfRouter: local.Server <= clamped}
		dir := "arriving"
		if tc.hook.out {
			dir = "leaving"
		}
		t.Logf("%s on packets %s through up0: forwarded %+v, local %+v", tc.hook.chain, dir, fwd, local)
		if got != tc.want {
			t.Errorf("%s %s: clamped %+v, want %+v", tc.hook.chain, dir, got, tc.want)
		}
		if tc.hook.chain == "prerouting" || tc.hook.chain == "postrouting" {
			union.Client = union.Client || got.Client
			union.Router = union.Router || got.Router
			union.ServerOfClient = union.ServerOfClient || got.ServerOfClient
			union.ServerOfRouter = union.ServerOfRouter || got.ServerOfRouter
		}
	}
	if union != (seen{true, true, true, true}) {
		t.Errorf("prerouting and postrouting together clamp %+v, not all four", union)
	}
	// And lowlat's table, both chains at once: every MSS at most the clamp.
	if err := c.Router.Do(func() error { return Write("up0", clamp) }); err != nil {
		t.Fatal(err)
	}
	fwd, local := c.Connect(t, c.Client), c.Connect(t, c.Router)
	t.Logf("lowlat's clamp of %d: forwarded %+v, local %+v", clamp, fwd, local)
	for _, m := range []uint32{fwd.Opener, fwd.Server, local.Opener, local.Server} {
		if m > clamped {
			t.Errorf("lowlat's clamp of %d: forwarded %+v, local %+v: some over %d", clamp, fwd, local, clamped)
			break
		}
	}
}
