//go:build linux

package mssclamp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// hook is one base chain of a clamp table: where it sits and which
// interface field its rules match.
type hook struct {
	chain string
	num   nftables.ChainHook
	// out matches oifname (packets leaving through the interface); else
	// iifname (arriving).
	out bool
}

// hooks are the chains lowlat writes (see the package comment: these two
// cover local and forwarded connections in both directions).
var hooks = []hook{
	{chain: "prerouting", num: unix.NF_INET_PRE_ROUTING},
	{chain: "postrouting", num: unix.NF_INET_POST_ROUTING, out: true},
}

// priority is mangle's (-150): after conntrack and defragmentation, before
// NAT, where iptables' TCPMSS target ran.
const priority = nftables.ChainPriority(-150)

// TCP option kind of the MSS, and where its value sits in the option.
const (
	tcpoptMaxseg   = 2
	maxsegOffset   = 2
	maxsegLen      = 2
	tcpFlagsByte   = 13
	tcpSYN, tcpRST = 0x02, 0x04
)

// families are the rules of each chain: IPv4 with the clamp, IPv6 with the
// clamp for the same frame size.
var families = []struct {
	proto byte
	mss   func(int) int
}{
	{unix.NFPROTO_IPV4, func(n int) int { return n }},
	{unix.NFPROTO_IPV6, IPv6MSS},
}

func be16(n int) []byte { return binary.BigEndian.AppendUint16(nil, uint16(n)) }

// ifname is an interface name as meta iifname/oifname loads it: IFNAMSIZ
// bytes, zero-padded.
func ifname(iface string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, iface)
	return b
}

// ruleExprs is one clamp rule: on TCP SYNs of family proto arriving
// (iifname) or leaving (oifname) through iface whose MSS option is over
// mss, count and set it to mss. Set only when larger: a clamp never raises
// an MSS (which can stall a connection), and the comparison says so in
// the rule rather than leaving it to the kernel (which also checks, since
// the exthdr set came in 4.14).
func ruleExprs(iface string, out bool, proto byte, mss int) []expr.Any {
	key := expr.MetaKeyIIFNAME
	if out {
		key = expr.MetaKeyOIFNAME
	}
	maxseg := func(e expr.Exthdr) *expr.Exthdr {
		e.Op, e.Type, e.Offset, e.Len = expr.ExthdrOpTcpopt, tcpoptMaxseg, maxsegOffset, maxsegLen
		return &e
	}
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{proto}},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(iface)},
		// tcp flags & (syn|rst) == syn: SYNs and SYN-ACKs.
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: tcpFlagsByte, Len: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{tcpSYN | tcpRST}, Xor: []byte{0}},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{tcpSYN}},
		// tcp option maxseg size > mss
		maxseg(expr.Exthdr{DestRegister: 1}),
		&expr.Cmp{Op: expr.CmpOpGt, Register: 1, Data: be16(mss)},
		&expr.Counter{},
		// tcp option maxseg size set mss
		&expr.Immediate{Register: 1, Data: be16(mss)},
		maxseg(expr.Exthdr{SourceRegister: 1}),
	}
}

// tableSpec is the table, chains and rules of a clamp.
type tableSpec struct {
	table  *nftables.Table
	chains []*nftables.Chain
	rules  [][][]expr.Any // per chain, per family
}

func spec(name, iface string, mss int, hs []hook) tableSpec {
	t := &nftables.Table{Name: name, Family: nftables.TableFamilyINet}
	s := tableSpec{table: t}
	accept := nftables.ChainPolicyAccept
	for _, h := range hs {
		s.chains = append(s.chains, &nftables.Chain{Name: h.chain, Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookRef(h.num), Priority: nftables.ChainPriorityRef(priority), Policy: &accept})
		var rs [][]expr.Any
		for _, f := range families {
			rs = append(rs, ruleExprs(iface, h.out, f.proto, f.mss(mss)))
		}
		s.rules = append(s.rules, rs)
	}
	return s
}

// add queues the table's creation on c.
func (s tableSpec) add(c *nftables.Conn) {
	c.AddTable(s.table)
	for i, ch := range s.chains {
		c.AddChain(ch)
		for _, r := range s.rules[i] {
			c.AddRule(&nftables.Rule{Table: s.table, Chain: ch, Exprs: r})
		}
	}
}

// conn is a connection in the calling thread's network namespace (each
// operation opens its own netlink socket there).
func conn() (*nftables.Conn, error) { return nftables.New() }

// Write makes iface's clamp mss: its table, replaced as a whole in one
// atomic batch when it exists (the kernel commits the batch entirely or
// not at all).
func Write(iface string, mss int) error {
	return write(iface, mss, hooks)
}

func write(iface string, mss int, hs []hook) error {
	if mss < MinMSS || mss > MaxMSS {
		return fmt.Errorf("mss clamp %s: %d bytes is outside %d..%d", iface, mss, MinMSS, MaxMSS)
	}
	c, err := conn()
	if err != nil {
		return opErr("write", iface, err)
	}
	exists, err := tableExists(c, Table(iface))
	if err != nil {
		return opErr("write", iface, err)
	}
	s := spec(Table(iface), iface, mss, hs)
	if exists {
		c.DelTable(s.table)
	}
	s.add(c)
	if err := c.Flush(); err != nil {
		return opErr(fmt.Sprintf("write %d bytes", mss), iface, explain(err))
	}
	return nil
}

// Remove deletes iface's clamp table; none is no error.
func Remove(iface string) error {
	c, err := conn()
	if err != nil {
		return opErr("remove", iface, err)
	}
	exists, err := tableExists(c, Table(iface))
	if err != nil || !exists {
		return opErr("remove", iface, err)
	}
	c.DelTable(&nftables.Table{Name: Table(iface), Family: nftables.TableFamilyINet})
	if err := c.Flush(); err != nil && !errors.Is(err, unix.ENOENT) {
		return opErr("remove", iface, explain(err))
	}
	return nil
}

func opErr(op, iface string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("mss clamp %s: %s table inet %s: %w", iface, op, Table(iface), err)
}

func tableExists(c *nftables.Conn, name string) (bool, error) {
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, explain(err)
	}
	for _, t := range ts {
		if t.Name == name {
			return true, nil
		}
	}
	return false, nil
}

// Read returns what iface's clamp table holds.
func Read(iface string) (State, error) {
	all, err := List()
	if err != nil {
		return State{}, opErr("read", iface, err)
	}
	return all[iface], nil
}

// List returns the state of every clamp table in this network namespace,
// by interface.
func List() (map[string]State, error) {
	c, err := conn()
	if err != nil {
		return nil, explain(err)
	}
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list inet tables: %w", explain(err))
	}
	out := map[string]State{}
	var chains []*nftables.Chain
	listed := false
	for _, t := range ts {
		iface, ok := strings.CutPrefix(t.Name, TablePrefix)
		if !ok || iface == "" {
			continue
		}
		if !listed {
			if chains, err = c.ListChainsOfTableFamily(nftables.TableFamilyINet); err != nil {
				return nil, fmt.Errorf("list inet chains: %w", explain(err))
			}
			listed = true
		}
		rules, err := dumpRules(t.Name)
		if err != nil {
			return nil, fmt.Errorf("list the rules of table inet %s: %w", t.Name, explain(err))
		}
		out[iface] = decode(t, iface, chains, rules)
	}
	return out, nil
}

// rawRule is a rule as dumped: its chain and its expressions by name, each
// decoded when it is one a clamp uses (nil otherwise).
type rawRule struct {
	chain string
	names []string
	exprs []expr.Any
}

// dumpRules lists the rules of inet table over netlink. nftables' own rule
// listing skips the expressions it cannot decode, which would hide a
// foreign expression added to a clamp rule; this keeps every one by name.
func dumpRules(table string) ([]rawRule, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{{Type: unix.NFTA_RULE_TABLE, Data: append([]byte(table), 0)}})
	if err != nil {
		return nil, err
	}
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{
			Type:  netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETRULE),
			Flags: netlink.Request | netlink.Dump,
		},
		Data: append([]byte{unix.NFPROTO_INET, unix.NFNETLINK_V0, 0, 0}, attrs...),
	})
	if err != nil {
		return nil, err
	}
	var out []rawRule
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		r, inTable, err := decodeRule(m.Data[4:], table)
		if err != nil {
			return nil, err
		}
		if inTable {
			out = append(out, r)
		}
	}
	return out, nil
}

func decodeRule(b []byte, table string) (rawRule, bool, error) {
	var r rawRule
	var tbl string
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return r, false, err
	}
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_RULE_TABLE:
			tbl = ad.String()
		case unix.NFTA_RULE_CHAIN:
			r.chain = ad.String()
		case unix.NFTA_RULE_EXPRESSIONS:
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					nad.Nested(func(ead *netlink.AttributeDecoder) error {
						var name string
						var data []byte
						for ead.Next() {
							switch ead.Type() {
							case unix.NFTA_EXPR_NAME:
								name = ead.String()
							case unix.NFTA_EXPR_DATA:
								data = ead.Bytes()
							}
						}
						r.names = append(r.names, name)
						r.exprs = append(r.exprs, decodeExpr(name, data))
						return ead.Err()
					})
				}
				return nad.Err()
			})
		}
	}
	return r, tbl == table, ad.Err()
}

// decodeExpr decodes the expressions a clamp uses; nil for any other.
func decodeExpr(name string, data []byte) expr.Any {
	var e expr.Any
	switch name {
	case "meta":
		e = &expr.Meta{}
	case "cmp":
		e = &expr.Cmp{}
	case "payload":
		e = &expr.Payload{}
	case "bitwise":
		e = &expr.Bitwise{}
	case "exthdr":
		e = &expr.Exthdr{}
	case "counter":
		e = &expr.Counter{}
	case "immediate":
		e = &expr.Immediate{}
	default:
		return nil
	}
	if err := expr.Unmarshal(unix.NFPROTO_INET, data, e); err != nil {
		return nil
	}
	if c, ok := e.(*expr.Counter); ok {
		// Counts are traffic, not configuration.
		c.Bytes, c.Packets = 0, 0
	}
	return e
}

// exprName is the kernel's name of a clamp's expression.
func exprName(e expr.Any) string {
	switch e.(type) {
	case *expr.Meta:
		return "meta"
	case *expr.Cmp:
		return "cmp"
	case *expr.Payload:
		return "payload"
	case *expr.Bitwise:
		return "bitwise"
	case *expr.Exthdr:
		return "exthdr"
	case *expr.Counter:
		return "counter"
	case *expr.Immediate:
		return "immediate"
	}
	return "?"
}

// decode compares table t with what lowlat writes for iface, at the clamp
// its first rule sets, and says how it differs when it does.
func decode(t *nftables.Table, iface string, all []*nftables.Chain, rules []rawRule) State {
	var chains []*nftables.Chain
	for _, c := range all {
		if c.Table != nil && c.Table.Name == t.Name {
			chains = append(chains, c)
		}
	}
	mss := 0
	for _, r := range rules {
		for _, e := range r.exprs {
			if im, ok := e.(*expr.Immediate); ok && len(im.Data) == 2 {
				mss = int(binary.BigEndian.Uint16(im.Data))
			}
		}
		break
	}
	why := differs(t, iface, chains, rules, mss)
	if why != "" {
		return State{Unmanaged: why}
	}
	return State{MSS: mss}
}

func differs(t *nftables.Table, iface string, chains []*nftables.Chain, rules []rawRule, mss int) string {
	if t.Flags != 0 {
		return fmt.Sprintf("the table has flags %#x (dormant, owned...), lowlat writes none", t.Flags)
	}
	if mss < MinMSS || mss > MaxMSS {
		return "no clamp rule lowlat writes: its first rule sets no MSS from 536 to 65495"
	}
	want := spec(t.Name, iface, mss, hooks)
	if len(chains) != len(want.chains) {
		return fmt.Sprintf("%d chains, lowlat writes %d (%s)", len(chains), len(want.chains), chainNames(want.chains))
	}
	byName := map[string]*nftables.Chain{}
	for _, c := range chains {
		byName[c.Name] = c
	}
	for i, w := range want.chains {
		c := byName[w.Name]
		switch {
		case c == nil:
			return fmt.Sprintf("no chain %s", w.Name)
		case c.Hooknum == nil || *c.Hooknum != *w.Hooknum || c.Priority == nil || *c.Priority != *w.Priority:
			return fmt.Sprintf("chain %s: not a base chain at hook %d priority %d", w.Name, *w.Hooknum, *w.Priority)
		case c.Type != w.Type:
			return fmt.Sprintf("chain %s: type %s, lowlat writes %s", w.Name, c.Type, w.Type)
		case c.Policy == nil || *c.Policy != *w.Policy:
			return fmt.Sprintf("chain %s: policy is not accept", w.Name)
		}
		var got []rawRule
		for _, r := range rules {
			if r.chain == w.Name {
				got = append(got, r)
			}
		}
		if len(got) != len(want.rules[i]) {
			return fmt.Sprintf("chain %s: %d rules, lowlat writes %d", w.Name, len(got), len(want.rules[i]))
		}
		for j, r := range got {
			if why := sameRule(r, want.rules[i][j]); why != "" {
				return fmt.Sprintf("chain %s rule %d: %s", w.Name, j+1, why)
			}
		}
	}
	if len(rules) != len(want.chains)*len(families) {
		return fmt.Sprintf("%d rules, lowlat writes %d", len(rules), len(want.chains)*len(families))
	}
	return ""
}

func sameRule(r rawRule, want []expr.Any) string {
	if len(r.names) != len(want) {
		return fmt.Sprintf("%d expressions (%s), lowlat writes %d", len(r.names), strings.Join(r.names, " "), len(want))
	}
	for k, w := range want {
		if r.names[k] != exprName(w) {
			return fmt.Sprintf("expression %d is %s, lowlat writes %s", k+1, r.names[k], exprName(w))
		}
		if !sameExpr(r.exprs[k], w) {
			return fmt.Sprintf("expression %d (%s) differs from lowlat's", k+1, r.names[k])
		}
	}
	return ""
}

// sameExpr compares a dumped expression with one lowlat writes. Empty and
// nil byte slices are the same.
func sameExpr(got, want expr.Any) bool {
	if got == nil {
		return false
	}
	if g, ok := got.(*expr.Bitwise); ok {
		w, ok := want.(*expr.Bitwise)
		return ok && g.SourceRegister == w.SourceRegister && g.DestRegister == w.DestRegister && g.Len == w.Len &&
			bytes.Equal(g.Mask, w.Mask) && bytes.Equal(g.Xor, w.Xor)
	}
	return reflect.DeepEqual(got, want)
}

func chainNames(cs []*nftables.Chain) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return strings.Join(out, ", ")
}

// probeTable is the table Probe creates and deletes in the same batch; it
// does not start with TablePrefix, so it is never taken for a clamp.
const probeTable = "lowlat_probe_mss"

// Probe says whether this kernel can clamp here, by trying: a batch that
// creates a clamp's table, chains and rules under a name of its own and
// deletes it again. The kernel checks every message and commits the batch
// whole or not at all, so nothing is left either way. The error names
// what is missing (ErrNotSupported) or that it needs CAP_NET_ADMIN
// (os.ErrPermission).
func Probe() error {
	c, err := conn()
	if err != nil {
		return probeErr("open nfnetlink", err)
	}
	t := &nftables.Table{Name: probeTable, Family: nftables.TableFamilyINet}
	c.AddTable(t)
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		return probeErr("create an inet table (nf_tables with its inet family: CONFIG_NF_TABLES, CONFIG_NF_TABLES_INET, Linux 3.14)", err)
	}
	full := spec(probeTable, "lo", MinMSS, hooks)
	full.add(c)
	c.DelTable(t)
	err = c.Flush()
	if err == nil {
		return nil
	}
	// Tell a kernel that cannot match TCP options from one that matches
	// them but cannot rewrite them (4.10 to 4.13).
	match := spec(probeTable, "lo", MinMSS, hooks)
	for i := range match.rules {
		for j, r := range match.rules[i] {
			match.rules[i][j] = r[:len(r)-2]
		}
	}
	match.add(c)
	c.DelTable(t)
	if merr := c.Flush(); merr != nil {
		return probeErr("match TCP options with nf_tables (the exthdr expression's tcp option, Linux 4.10)", merr)
	}
	return probeErr("rewrite TCP options with nf_tables (the exthdr set, Linux 4.14)", err)
}

func probeErr(what string, err error) error {
	err = explain(err)
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("mss clamp: %s: %w", what, err)
	}
	return fmt.Errorf("mss clamp: this kernel cannot %s: %w (%v)", what, ErrNotSupported, err)
}

// explain makes a permission error say what it needs.
func explain(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w (nftables needs CAP_NET_ADMIN)", os.ErrPermission)
	}
	return err
}
