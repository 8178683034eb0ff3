package qdisc

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Spec is one qdisc configuration.
type Spec struct {
	Kind string
	// Opts holds canonical option values by canonical key (see Kinds).
	Opts map[string]string
	// Attrs are attributes of the kernel's TCA_OPTIONS that no option
	// reproduces exactly (an attribute lowlat does not model, or one whose
	// value the options cannot express), kept byte for byte and written back
	// as they are: "attr 10:ff010000" is attribute type 10 (fq's orphan_mask)
	// with its payload in hex. An attribute here replaces whatever the options
	// would encode for that type.
	Attrs []Attr
	// Stab is the size table spec (TCA_STAB's struct tc_sizespec) set with
	// "tc qdisc ... stab overhead N linklayer atm"; nil when there is none.
	Stab []byte
	// Handle is the qdisc's handle as the kernel reported it, 0 when not
	// recorded (a desired value, or one journaled by an older lowlat). A
	// recorded handle is recreated as it was.
	Handle uint32
	// Default marks a qdisc attached by the kernel itself (handle 0:).
	Default bool
	// Unmanaged marks a configuration lowlat can read but cannot recreate (an htb
	// tree of someone else's making, an unknown kind with options). Such a value
	// can be shown and compared but never written or restored.
	Unmanaged bool
	// Leaf is the qdisc under the single class of a lowlat shaper (htb, tbf).
	Leaf *Spec
	// Children are the per-tx-queue qdiscs of mq, in queue order.
	Children []Spec
}

// Attr is one netlink attribute kept verbatim: its type (flag bits included)
// and its payload in the kernel's byte order.
type Attr struct {
	Type uint16
	Data []byte
}

// ptype is the type of an option value.
type ptype int

const (
	tUint ptype = iota
	tInt
	tTime
	tRate
	tSize
	tWord    // one of words' values
	tPercent // "1%" or "0.5%"
	tPriomap // 16 band numbers
	tHex     // bytes in hex, for a group of struct fields kept together
)

// param is one option of a kind: its canonical key, type, the keywords that set
// it ("limit 1000") and the bare words that select a value ("ecn" -> on).
type param struct {
	key     string
	typ     ptype
	aliases []string
	words   map[string]string // bare word -> value
	// fuzzy values are recomputed by the kernel (tbf burst lives in timer ticks),
	// so compare within 1 %.
	fuzzy bool
	// detail options were added when lowlat started to record qdiscs exactly.
	// Values journaled before that never carry them, so they are compared
	// only between two exact values (see Equal) or when a desired value names
	// them.
	detail bool
}

type kind struct {
	params []param
	// leaf is true for classful shapers that take one leaf qdisc.
	leaf bool
	// children is true for mq (one child per tx queue).
	children bool
	// create is false for kinds that cannot be created explicitly (noqueue).
	create bool
}

var onOff = func(on, off string) map[string]string { return map[string]string{on: "on", off: "off"} }

// Kinds is the set of qdisc kinds lowlat can read, write and compare.
var Kinds = map[string]kind{
	"pfifo_fast": {create: true},
	"noqueue":    {},
	"noop":       {},
	"mq":         {children: true, create: true},
	"ingress":    {create: true},
	"clsact":     {create: true},
	"pfifo":      {create: true, params: []param{{key: "limit", typ: tUint}}},
	"bfifo":      {create: true, params: []param{{key: "limit", typ: tSize}}},
	"fq_codel": {create: true, params: []param{
		{key: "limit", typ: tUint},
		{key: "flows", typ: tUint},
		{key: "target", typ: tTime},
		{key: "interval", typ: tTime},
		{key: "quantum", typ: tSize},
		{key: "ecn", typ: tWord, words: onOff("ecn", "noecn")},
		{key: "ce_threshold", typ: tTime},
		{key: "memory_limit", typ: tSize},
		{key: "drop_batch", typ: tUint},
	}},
	"codel": {create: true, params: []param{
		{key: "limit", typ: tUint},
		{key: "target", typ: tTime},
		{key: "interval", typ: tTime},
		{key: "ecn", typ: tWord, words: onOff("ecn", "noecn")},
		{key: "ce_threshold", typ: tTime},
	}},
	"fq": {create: true, params: []param{
		{key: "limit", typ: tUint},
		{key: "flow_limit", typ: tUint},
		{key: "quantum", typ: tSize},
		{key: "initial_quantum", typ: tSize},
		{key: "maxrate", typ: tRate},
		{key: "buckets", typ: tUint},
		{key: "pacing", typ: tWord, words: onOff("pacing", "nopacing")},
		{key: "refill_delay", typ: tTime},
		{key: "low_rate_threshold", typ: tRate},
		{key: "ce_threshold", typ: tTime},
		{key: "horizon", typ: tTime},
		{key: "horizon_drop", typ: tWord, words: onOff("horizon_drop", "horizon_cap"), detail: true},
		{key: "orphan_mask", typ: tUint, detail: true},
		{key: "timer_slack", typ: tTime, detail: true},
	}},
	"cake": {create: true, params: []param{
		{key: "bandwidth", typ: tRate, words: map[string]string{"unlimited": "0bit"}},
		{key: "rtt", typ: tTime},
		{key: "diffserv", typ: tWord, words: map[string]string{"besteffort": "besteffort", "diffserv3": "diffserv3", "diffserv4": "diffserv4", "diffserv8": "diffserv8", "precedence": "precedence"}},
		{key: "flowmode", typ: tWord, words: map[string]string{"flowblind": "flowblind", "srchost": "srchost", "dsthost": "dsthost", "hosts": "hosts", "flows": "flows", "dual-srchost": "dual-srchost", "dual-dsthost": "dual-dsthost", "triple-isolate": "triple-isolate"}},
		{key: "nat", typ: tWord, words: onOff("nat", "nonat")},
		{key: "wash", typ: tWord, words: onOff("wash", "nowash")},
		{key: "split_gso", typ: tWord, words: onOff("split-gso", "no-split-gso")},
		{key: "ack_filter", typ: tWord, words: map[string]string{"ack-filter": "filter", "ack-filter-aggressive": "aggressive", "no-ack-filter": "none"}},
		{key: "ingress", typ: tWord, words: onOff("ingress", "egress")},
		{key: "autorate", typ: tWord, words: onOff("autorate-ingress", "no-autorate-ingress")},
		{key: "overhead", typ: tInt},
		{key: "mpu", typ: tUint},
		{key: "atm", typ: tWord, words: map[string]string{"noatm": "none", "atm": "atm", "ptm": "ptm"}},
		{key: "memlimit", typ: tSize},
		{key: "fwmark", typ: tUint},
	}},
	"tbf": {create: true, leaf: true, params: []param{
		{key: "rate", typ: tRate},
		{key: "burst", typ: tSize, aliases: []string{"buffer", "maxburst"}, fuzzy: true},
		// latency is accepted on input and turned into limit (what the kernel keeps).
		{key: "latency", typ: tTime},
		{key: "limit", typ: tSize, fuzzy: true},
		{key: "peakrate", typ: tRate},
		{key: "mtu", typ: tSize, aliases: []string{"minburst"}},
		{key: "overhead", typ: tUint, detail: true},
		{key: "mpu", typ: tUint, detail: true},
		{key: "linklayer", typ: tWord, words: map[string]string{"atm": "atm", "ethernet": "ethernet"}, detail: true},
	}},
	"htb": {create: true, leaf: true, params: []param{
		{key: "rate", typ: tRate},
		{key: "ceil", typ: tRate},
		{key: "burst", typ: tSize, fuzzy: true},
		{key: "cburst", typ: tSize, fuzzy: true},
		{key: "quantum", typ: tSize},
		{key: "r2q", typ: tUint},
		{key: "prio", typ: tUint, detail: true},
		{key: "overhead", typ: tUint, detail: true},
		{key: "mpu", typ: tUint, detail: true},
		{key: "linklayer", typ: tWord, words: map[string]string{"atm": "atm", "ethernet": "ethernet"}, detail: true},
		{key: "direct_qlen", typ: tUint, detail: true},
		// default is the class unclassified packets go to (lowlat's shaper
		// uses 1); shown for htb trees lowlat did not make.
		{key: "default", typ: tUint, detail: true},
		// parms is the class's parameter block verbatim, recorded when the
		// options above cannot reproduce it (see decodeHTBClass).
		{key: "parms", typ: tHex, detail: true},
	}},
	"netem": {create: true, params: []param{
		{key: "delay", typ: tTime, aliases: []string{"latency"}},
		{key: "jitter", typ: tTime},
		{key: "loss", typ: tPercent},
		{key: "duplicate", typ: tPercent},
		{key: "corrupt", typ: tPercent},
		{key: "reorder", typ: tPercent},
		{key: "rate", typ: tRate},
		{key: "limit", typ: tUint},
		{key: "gap", typ: tUint, detail: true},
		{key: "ecn", typ: tWord, words: map[string]string{"ecn": "on"}, detail: true},
	}},
	"prio": {create: true, params: []param{
		{key: "bands", typ: tUint},
		{key: "priomap", typ: tPriomap},
	}},
	"sfq": {create: true, params: []param{
		{key: "perturb", typ: tUint},
		{key: "quantum", typ: tSize},
		{key: "limit", typ: tUint},
		{key: "divisor", typ: tUint},
		{key: "flows", typ: tUint, detail: true},
		{key: "depth", typ: tUint, detail: true},
		{key: "headdrop", typ: tWord, words: map[string]string{"headdrop": "on"}, detail: true},
		// red is sfq's RED configuration as the kernel reports it (qth_min,
		// qth_max, Wlog, Plog, Scell_log, flags, max_P), kept together
		// because tc computes it from inputs (avpkt, burst) it does not keep.
		{key: "red", typ: tHex, detail: true},
	}},
}

// Known reports whether lowlat knows the kind.
func Known(k string) bool { _, ok := Kinds[k]; return ok }

// Creatable reports whether a qdisc of kind k can be created explicitly.
func Creatable(k string) bool { return Kinds[k].create }

// Opt returns an option value and whether it is set.
func (s Spec) Opt(key string) (string, bool) {
	v, ok := s.Opts[key]
	return v, ok
}

// String renders the canonical text form. Identical consecutive children are
// compressed ("64*{ fq_codel }") so a 64-queue NIC stays readable.
func (s Spec) String() string {
	var b strings.Builder
	s.write(&b)
	return b.String()
}

func (s Spec) write(b *strings.Builder) {
	b.WriteString(s.Kind)
	k := Kinds[s.Kind]
	seen := map[string]bool{}
	for _, p := range k.params {
		v, ok := s.Opts[p.key]
		if !ok {
			continue
		}
		seen[p.key] = true
		b.WriteByte(' ')
		if w := wordFor(p, v); w != "" {
			b.WriteString(w)
			continue
		}
		b.WriteString(p.key)
		b.WriteByte(' ')
		b.WriteString(v)
	}
	// Options of unknown kinds (read from the kernel) keep a stable order.
	var extra []string
	for key := range s.Opts {
		if !seen[key] {
			extra = append(extra, key)
		}
	}
	sort.Strings(extra)
	for _, key := range extra {
		fmt.Fprintf(b, " %s %s", key, s.Opts[key])
	}
	for _, a := range sortedAttrs(s.Attrs) {
		fmt.Fprintf(b, " attr %d:%s", a.Type, hex.EncodeToString(a.Data))
	}
	if s.Stab != nil {
		fmt.Fprintf(b, " stab %s", hex.EncodeToString(s.Stab))
	}
	if s.Handle != 0 {
		b.WriteString(" handle ")
		b.WriteString(FormatHandle(s.Handle))
	}
	if s.Default {
		b.WriteString(" @default")
	}
	if s.Unmanaged {
		b.WriteString(" @unmanaged")
	}
	if s.Leaf != nil {
		b.WriteString(" leaf { ")
		s.Leaf.write(b)
		b.WriteString(" }")
	}
	if len(s.Children) > 0 {
		b.WriteString(" children { ")
		for i := 0; i < len(s.Children); {
			j := i + 1
			for j < len(s.Children) && s.Children[j].String() == s.Children[i].String() {
				j++
			}
			if i > 0 {
				b.WriteString("; ")
			}
			if j-i > 1 {
				fmt.Fprintf(b, "%d*", j-i)
			}
			s.Children[i].write(b)
			i = j
		}
		b.WriteString(" }")
	}
}

func wordFor(p param, v string) string {
	for w, val := range p.words {
		if val == v {
			// Rates with a word (cake unlimited) still print as a value unless 0.
			if p.typ == tRate && v != "0bit" {
				return ""
			}
			return w
		}
	}
	return ""
}

// Parse parses the text form. It validates every keyword and value against the
// kind's schema, so a typo in a profile is an error, not a silently ignored option.
func Parse(text string) (Spec, error) {
	p := &parser{toks: tokenize(text)}
	s, err := p.spec()
	if err != nil {
		return Spec{}, err
	}
	if !p.done() {
		return Spec{}, fmt.Errorf("qdisc %q: unexpected %q", text, p.peek())
	}
	return s, nil
}

func tokenize(s string) []string {
	var toks []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case r == '{' || r == '}' || r == ';' || r == '*':
			flush()
			toks = append(toks, string(r))
		case r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == ',':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

type parser struct {
	toks []string
	i    int
}

func (p *parser) done() bool   { return p.i >= len(p.toks) }
func (p *parser) peek() string { return p.toks[p.i] }
func (p *parser) next() string { t := p.toks[p.i]; p.i++; return t }

func (p *parser) spec() (Spec, error) {
	if p.done() {
		return Spec{}, fmt.Errorf("empty qdisc spec")
	}
	name := p.next()
	k, ok := Kinds[name]
	if !ok {
		return Spec{}, fmt.Errorf("unknown qdisc kind %q (known: %s)", name, strings.Join(kindNames(), ", "))
	}
	s := Spec{Kind: name, Opts: map[string]string{}}
	for !p.done() {
		t := p.peek()
		if t == "}" || t == ";" {
			break
		}
		p.next()
		switch t {
		case "@default":
			s.Default = true
			continue
		case "@unmanaged":
			s.Unmanaged = true
			continue
		case "attr", "stab", "handle":
			if p.done() {
				return Spec{}, fmt.Errorf("%s: %s needs a value", name, t)
			}
			if err := s.setExact(t, p.next()); err != nil {
				return Spec{}, fmt.Errorf("%s: %w", name, err)
			}
			continue
		case "leaf":
			if !k.leaf {
				return Spec{}, fmt.Errorf("%s: takes no leaf qdisc", name)
			}
			leaf, err := p.block()
			if err != nil {
				return Spec{}, fmt.Errorf("%s leaf: %w", name, err)
			}
			s.Leaf = &leaf
			continue
		case "children":
			if !k.children {
				return Spec{}, fmt.Errorf("%s: takes no children", name)
			}
			ch, err := p.children()
			if err != nil {
				return Spec{}, fmt.Errorf("%s children: %w", name, err)
			}
			s.Children = ch
			continue
		}
		if err := p.option(name, k, t, s.Opts); err != nil {
			return Spec{}, err
		}
	}
	if len(s.Opts) == 0 {
		s.Opts = nil
	}
	return s, nil
}

// setExact parses the value of one of the keywords that only values read from
// the kernel carry: "attr TYPE:HEX", "stab HEX", "handle MAJOR:".
func (s *Spec) setExact(keyword, v string) error {
	switch keyword {
	case "attr":
		typ, data, ok := strings.Cut(v, ":")
		t, err := strconv.ParseUint(typ, 10, 16)
		if !ok || err != nil {
			return fmt.Errorf("bad attr %q (want TYPE:HEX, e.g. 10:ff010000)", v)
		}
		b, err := hex.DecodeString(data)
		if err != nil {
			return fmt.Errorf("bad attr %q: %v", v, err)
		}
		for _, a := range s.Attrs {
			if a.Type == uint16(t) {
				return fmt.Errorf("attr %d given twice", t)
			}
		}
		s.Attrs = append(s.Attrs, Attr{Type: uint16(t), Data: b})
	case "stab":
		b, err := hex.DecodeString(v)
		if err != nil || len(b) == 0 {
			return fmt.Errorf("bad stab %q (want the size table spec in hex)", v)
		}
		s.Stab = b
	case "handle":
		h, err := ParseHandle(v)
		if err != nil || h == 0 || h&0xffff != 0 || h >= HandleIngress&0xffff0000 {
			return fmt.Errorf("bad handle %q (want a qdisc handle such as 8001:)", v)
		}
		s.Handle = h
	}
	return nil
}

func sortedAttrs(attrs []Attr) []Attr {
	out := slices.Clone(attrs)
	slices.SortStableFunc(out, func(a, b Attr) int { return int(a.Type) - int(b.Type) })
	return out
}

func (p *parser) block() (Spec, error) {
	if p.done() || p.next() != "{" {
		return Spec{}, fmt.Errorf("want { after keyword")
	}
	s, err := p.spec()
	if err != nil {
		return Spec{}, err
	}
	if p.done() || p.next() != "}" {
		return Spec{}, fmt.Errorf("want }")
	}
	return s, nil
}

func (p *parser) children() ([]Spec, error) {
	if p.done() || p.next() != "{" {
		return nil, fmt.Errorf("want {")
	}
	var out []Spec
	for {
		n := 1
		if p.i+1 < len(p.toks) && p.toks[p.i+1] == "*" {
			v, err := strconv.Atoi(p.peek())
			if err != nil || v < 1 || v > 4096 {
				return nil, fmt.Errorf("bad repeat %q", p.peek())
			}
			n = v
			p.i += 2
		}
		var s Spec
		var err error
		if !p.done() && p.peek() == "{" {
			s, err = p.block()
		} else {
			s, err = p.spec()
		}
		if err != nil {
			return nil, err
		}
		for range n {
			out = append(out, s)
		}
		if p.done() {
			return nil, fmt.Errorf("want }")
		}
		switch p.next() {
		case ";":
			continue
		case "}":
			return out, nil
		default:
			return nil, fmt.Errorf("want ; or }")
		}
	}
}

func (p *parser) option(kindName string, k kind, tok string, opts map[string]string) error {
	for _, pr := range k.params {
		if v, ok := pr.words[tok]; ok {
			opts[pr.key] = v
			return nil
		}
	}
	var pr *param
	for i := range k.params {
		if k.params[i].key == tok || contains(k.params[i].aliases, tok) {
			pr = &k.params[i]
			break
		}
	}
	if pr == nil {
		return fmt.Errorf("%s: unknown option %q (known: %s)", kindName, tok, strings.Join(paramNames(k), ", "))
	}
	if p.done() {
		return fmt.Errorf("%s: %s needs a value", kindName, tok)
	}
	// netem accepts tc's positional form: delay TIME [JITTER].
	if kindName == "netem" && pr.key == "delay" {
		v, err := canon(pr.typ, p.next())
		if err != nil {
			return fmt.Errorf("%s %s: %w", kindName, tok, err)
		}
		opts["delay"] = v
		if !p.done() {
			if j, err := canon(tTime, p.peek()); err == nil {
				opts["jitter"] = j
				p.next()
			}
		}
		return nil
	}
	if kindName == "netem" && (pr.key == "loss") && !p.done() && p.peek() == "random" {
		p.next()
		if p.done() {
			return fmt.Errorf("netem loss random needs a percentage")
		}
	}
	if pr.typ == tPriomap {
		var nums []string
		for len(nums) < 16 && !p.done() {
			if _, err := strconv.ParseUint(p.peek(), 10, 8); err != nil {
				break
			}
			nums = append(nums, p.next())
		}
		if len(nums) != 16 {
			return fmt.Errorf("%s: priomap needs 16 band numbers, got %d", kindName, len(nums))
		}
		opts[pr.key] = strings.Join(nums, " ")
		return nil
	}
	raw := p.next()
	if w, ok := pr.words[raw]; ok {
		opts[pr.key] = w
		return nil
	}
	v, err := canon(pr.typ, raw)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kindName, tok, err)
	}
	if pr.typ == tWord {
		return fmt.Errorf("%s %s: bad value %q", kindName, tok, raw)
	}
	opts[pr.key] = v
	return nil
}

// canon parses raw as typ and returns the canonical text.
func canon(typ ptype, raw string) (string, error) {
	switch typ {
	case tUint:
		v, err := strconv.ParseUint(raw, 10, 32)
		if err != nil {
			return "", fmt.Errorf("bad number %q", raw)
		}
		return strconv.FormatUint(v, 10), nil
	case tInt:
		v, err := strconv.ParseInt(raw, 10, 32)
		if err != nil {
			return "", fmt.Errorf("bad number %q", raw)
		}
		return strconv.FormatInt(v, 10), nil
	case tTime:
		d, err := ParseTime(raw)
		if err != nil {
			return "", err
		}
		return FormatTime(d), nil
	case tRate:
		r, err := ParseRate(raw)
		if err != nil {
			return "", err
		}
		return FormatRate(r), nil
	case tSize:
		v, err := ParseSize(raw)
		if err != nil {
			return "", err
		}
		return FormatSize(v), nil
	case tPercent:
		s := strings.TrimSuffix(raw, "%")
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v > 100 {
			return "", fmt.Errorf("bad percentage %q (want 0%%..100%%)", raw)
		}
		return strconv.FormatFloat(v, 'f', -1, 64) + "%", nil
	case tWord:
		return raw, nil
	case tHex:
		b, err := hex.DecodeString(raw)
		if err != nil || len(b) == 0 {
			return "", fmt.Errorf("bad hex value %q", raw)
		}
		return hex.EncodeToString(b), nil
	}
	return "", fmt.Errorf("bad value %q", raw)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func kindNames() []string {
	var out []string
	for k := range Kinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func paramNames(k kind) []string {
	var out []string
	for _, p := range k.params {
		out = append(out, p.key)
		for w := range p.words {
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// Satisfies reports whether live meets desired: same kind, every option desired
// names has the same value live (options desired leaves out may be anything), and
// the same for the leaf and each child. A desired mq child list of length one
// applies to every live child. A handle, preserved attributes or a size table in
// desired must be the same live.
func Satisfies(live, desired Spec) bool {
	if live.Kind != desired.Kind || live.Unmanaged {
		return false
	}
	if desired.Default && !live.Default {
		return false
	}
	if desired.Handle != 0 && live.Handle != desired.Handle {
		return false
	}
	if desired.Stab != nil && !bytes.Equal(live.Stab, desired.Stab) {
		return false
	}
	for _, a := range desired.Attrs {
		if i := slices.IndexFunc(live.Attrs, func(l Attr) bool { return l.Type == a.Type }); i < 0 || !bytes.Equal(live.Attrs[i].Data, a.Data) {
			return false
		}
	}
	k := Kinds[desired.Kind]
	want := normalize(desired)
	live = normalize(live)
	for key, v := range want.Opts {
		lv, ok := live.Opts[key]
		if !ok {
			return false
		}
		if !sameValue(k, key, lv, v) {
			return false
		}
	}
	if desired.Leaf != nil && (live.Leaf == nil || !Satisfies(*live.Leaf, *desired.Leaf)) {
		return false
	}
	if len(desired.Children) > 0 {
		if len(live.Children) == 0 {
			return false
		}
		if len(desired.Children) != 1 && len(desired.Children) != len(live.Children) {
			return false
		}
		for i, c := range live.Children {
			d := desired.Children[0]
			if len(desired.Children) > 1 {
				d = desired.Children[i]
			}
			if !Satisfies(c, d) {
				return false
			}
		}
	}
	return true
}

// Equal reports whether two specs are the same configuration, including the
// default marker (used to verify a restore).
//
// Two exact values (both read from the kernel by this lowlat: see Exact) are
// equal only when everything they record is: every option, preserved
// attribute, size table and handle, and the same of the leaf and of each
// child. The decoder renders a kernel state in exactly one way, so equal text
// means an equal qdisc. A value journaled by an older lowlat records less; it
// equals a live value that has what it records, the older way: its options
// both ways (times and bursts within the kernel's rounding), and nothing of
// what it could not record.
func Equal(a, b Spec) bool {
	if a.Unmanaged || b.Unmanaged || a.Kind != b.Kind || a.Default != b.Default {
		return false
	}
	if !a.Exact() || !b.Exact() {
		x, y := legacy(a), legacy(b)
		if !Satisfies(x, y) || !Satisfies(y, x) {
			return false
		}
		// Satisfies lets one desired child stand for all; Equal pairs them.
		if len(a.Children) != len(b.Children) || (a.Leaf == nil) != (b.Leaf == nil) {
			return false
		}
		if a.Leaf != nil && !Equal(*a.Leaf, *b.Leaf) {
			return false
		}
		for i := range a.Children {
			if !Equal(a.Children[i], b.Children[i]) {
				return false
			}
		}
		return true
	}
	if a.Handle != b.Handle || !bytes.Equal(a.Stab, b.Stab) || !maps.Equal(normalize(a).Opts, normalize(b).Opts) {
		return false
	}
	x, y := sortedAttrs(a.Attrs), sortedAttrs(b.Attrs)
	if !slices.EqualFunc(x, y, func(p, q Attr) bool { return p.Type == q.Type && bytes.Equal(p.Data, q.Data) }) {
		return false
	}
	if (a.Leaf == nil) != (b.Leaf == nil) || (a.Leaf != nil && !Equal(*a.Leaf, *b.Leaf)) {
		return false
	}
	return slices.EqualFunc(a.Children, b.Children, Equal)
}

// Exact reports whether s was read from the kernel by a lowlat that records
// qdiscs exactly: it carries a handle (every explicitly created qdisc has one),
// preserved attributes, a size table or a detail option. Values journaled by
// older versions carry none of these; values written in profiles neither.
func (s Spec) Exact() bool {
	if s.Handle != 0 || len(s.Attrs) > 0 || s.Stab != nil {
		return true
	}
	for _, p := range Kinds[s.Kind].params {
		if _, ok := s.Opts[p.key]; ok && p.detail {
			return true
		}
	}
	return false
}

// legacy strips s to what an older lowlat recorded, for comparing with a value
// it journaled: no handle, no preserved attributes, no size table, no detail
// option. Leaf and children are compared by Equal separately.
func legacy(s Spec) Spec {
	out := Spec{Kind: s.Kind, Default: s.Default, Unmanaged: s.Unmanaged}
	if len(s.Opts) > 0 {
		out.Opts = map[string]string{}
		for key, v := range s.Opts {
			if !isDetail(s.Kind, key) {
				out.Opts[key] = v
			}
		}
	}
	return out
}

func isDetail(kind, key string) bool {
	for _, p := range Kinds[kind].params {
		if p.key == key {
			return p.detail
		}
	}
	return false
}

// Managed reports whether lowlat can recreate s: neither it nor its leaf nor
// any child is marked unmanaged.
func (s Spec) Managed() bool {
	if s.Unmanaged || (s.Leaf != nil && !s.Leaf.Managed()) {
		return false
	}
	for _, c := range s.Children {
		if !c.Managed() {
			return false
		}
	}
	return true
}

// Normalized is s with its input-only options turned into what the kernel
// keeps (a tbf's latency into its byte limit).
func Normalized(s Spec) Spec { return normalize(s) }

// normalize turns input-only options into what the kernel keeps: tbf latency
// becomes limit = rate*latency + burst (tc's formula).
func normalize(s Spec) Spec {
	if s.Kind != "tbf" {
		return s
	}
	lat, ok := s.Opts["latency"]
	if !ok {
		return s
	}
	out := s
	out.Opts = map[string]string{}
	for k, v := range s.Opts {
		if k != "latency" {
			out.Opts[k] = v
		}
	}
	d, _ := ParseTime(lat)
	rate, _ := ParseRate(s.Opts["rate"])
	burst, _ := ParseSize(s.Opts["burst"])
	out.Opts["limit"] = FormatSize(TbfLimit(rate, burst, d))
	return out
}

// TbfLimit is tc's conversion of a latency into a tbf byte limit.
func TbfLimit(rateBits, burst uint64, latency time.Duration) uint64 {
	return uint64(math.Round(float64(rateBits)/8*latency.Seconds())) + burst
}

func sameValue(k kind, key, a, b string) bool {
	if a == b {
		return true
	}
	for _, p := range k.params {
		if p.key != key {
			continue
		}
		if p.typ == tTime {
			// The kernel keeps times in its own units (codel: 1024 ns, tbf and
			// netem: scheduler ticks), so 5ms comes back as 4999us.
			x, err1 := ParseTime(a)
			y, err2 := ParseTime(b)
			if err1 != nil || err2 != nil {
				return false
			}
			diff := math.Abs(float64(x - y))
			return diff <= float64(2*time.Microsecond) || diff <= 0.001*math.Max(float64(x), float64(y))
		}
		if p.fuzzy {
			x, err1 := ParseSize(a)
			y, err2 := ParseSize(b)
			if err1 != nil || err2 != nil {
				return false
			}
			diff := math.Abs(float64(x) - float64(y))
			return diff <= 2 || diff <= 0.01*math.Max(float64(x), float64(y))
		}
	}
	return false
}

// HasOption reports whether key is a canonical option of kind.
func HasOption(kind, key string) bool {
	for _, p := range Kinds[kind].params {
		if p.key == key {
			return true
		}
	}
	return false
}
