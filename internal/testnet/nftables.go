//go:build linux

package testnet

import (
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// NFTables lists the namespace's whole nftables ruleset, every family, as
// the kernel dumps it over netlink: one line per table, chain, rule, set
// and object, its message in hex, sorted. It decodes nothing (no library's
// idea of what it means, no nft binary), so two equal listings are the same
// ruleset byte for byte: handles, expressions, counters included (tests
// keep traffic off the counters they compare), but for the ruleset's
// generation.
func (n *NS) NFTables(t testing.TB) string {
	t.Helper()
	var lines []string
	err := n.Do(func() error {
		c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
		if err != nil {
			return err
		}
		defer c.Close()
		for _, k := range []struct {
			name string
			msg  int
		}{{"table", unix.NFT_MSG_GETTABLE}, {"chain", unix.NFT_MSG_GETCHAIN}, {"rule", unix.NFT_MSG_GETRULE},
			{"set", unix.NFT_MSG_GETSET}, {"obj", unix.NFT_MSG_GETOBJ}, {"flowtable", unix.NFT_MSG_GETFLOWTABLE}} {
			msgs, err := c.Execute(netlink.Message{
				Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | k.msg), Flags: netlink.Request | netlink.Dump},
				Data:   []byte{unix.NFPROTO_UNSPEC, unix.NFNETLINK_V0, 0, 0},
			})
			if err != nil {
				return fmt.Errorf("dump nftables %ss: %w", k.name, err)
			}
			for _, m := range msgs {
				// nfgenmsg's res_id is the ruleset's generation, which
				// every change anywhere moves: not this object's state.
				if len(m.Data) >= 4 {
					m.Data[2], m.Data[3] = 0, 0
				}
				lines = append(lines, k.name+" "+hex.EncodeToString(m.Data))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("netns %s: %v", n.Name, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// AddForeignTable adds a table that is not lowlat's, as a firewall would:
// `inet filter` with a forward chain dropping UDP to port 9, plus the tables
// extra makes (added to the same batch). The clamp's tests check that
// lowlat's writes and rollbacks leave it exactly as it was.
func (n *NS) AddForeignTable(t testing.TB, extra func(*nftables.Conn)) {
	t.Helper()
	if err := n.Do(func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		tb := c.AddTable(&nftables.Table{Name: "filter", Family: nftables.TableFamilyINet})
		accept := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Name: "forward", Table: tb, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter, Policy: &accept})
		c.AddRule(&nftables.Rule{Table: tb, Chain: ch, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 9}},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}})
		if extra != nil {
			extra(c)
		}
		return c.Flush()
	}); err != nil {
		t.Fatalf("add a foreign nftables table: %v", err)
	}
}
