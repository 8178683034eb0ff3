package qdisc

// Entry is one qdisc as dumped by the kernel, before the root/children/leaf
// structure is assembled.
type Entry struct {
	Ifindex int
	Handle  uint32
	Parent  uint32
	Spec    Spec // Kind and Opts only
	Stats   Stats
}

// Stats are a qdisc's counters (TCA_STATS2 basic + queue).
type Stats struct {
	Bytes, Packets                             uint64
	Drops, Overlimits, Requeues, Backlog, Qlen uint64
}

// Class is one class of a classful qdisc (htb).
type Class struct {
	Ifindex int
	Handle  uint32
	Parent  uint32
	Kind    string
	Opts    map[string]string
	// Unmanaged marks a class lowlat cannot write back as it is.
	Unmanaged bool
}

// Tree is the assembled qdisc configuration of one interface.
type Tree struct {
	Root    Spec
	Ingress *Spec // nil when no ingress/clsact qdisc
	// RootHandle is the root qdisc's handle (0 for kernel defaults).
	RootHandle uint32
	RootStats  Stats
	// Entries are every qdisc of the interface as dumped (with stats), for callers
	// that report per-child counters.
	Entries []Entry
}

// Assemble builds the interface's Tree from its dumped qdiscs and classes. It is
// pure so it can be tested on recorded dumps. up says whether the link is up:
// the kernel does not dump its builtin noop qdisc, so a missing root means noop
// for a down link and noqueue for an up one.
func Assemble(entries []Entry, classes []Class, up bool) Tree {
	var t Tree
	t.Entries = entries
	var root *Entry
	rootIdx := -1
	for i := range entries {
		e := &entries[i]
		switch e.Parent {
		case HandleRoot:
			root, rootIdx = e, i
		case HandleIngress:
			s := e.Spec
			t.Ingress = &s
		}
	}
	if root == nil {
		k := "noqueue"
		if !up {
			k = "noop"
		}
		t.Root = Spec{Kind: k, Default: true}
		return t
	}
	t.RootHandle = root.Handle
	t.RootStats = root.Stats
	t.Root = root.Spec
	t.Root.Default = root.Handle == 0 && root.Spec.Kind != ""
	t.Root.Handle = root.Handle
	major := root.Handle >> 16

	// Qdiscs hanging below the root (mq children, a shaper's leaf, anything else).
	var below []Entry
	for i, e := range entries {
		if i != rootIdx && e.Parent != HandleRoot && e.Parent != HandleIngress && e.Parent>>16 == major {
			below = append(below, e)
		}
	}
	switch t.Root.Kind {
	case "mq":
		t.Root.Children = mqChildren(below, major)
		if len(t.Root.Children) != len(below) {
			t.Root.Unmanaged = true
		}
	case "htb":
		t.Root = assembleShaper(t.Root, entries, classes, root.Handle)
	case "tbf":
		if leaf := findParent(entries, root.Handle|1); leaf != nil {
			s := leafSpec(entries, *leaf)
			t.Root.Leaf = &s
		}
	default:
		if len(below) > 0 {
			t.Root.Unmanaged = true
		}
	}
	return t
}

func mqChildren(below []Entry, major uint32) []Spec {
	byMinor := map[uint32]Spec{}
	maxMinor := uint32(0)
	for _, e := range below {
		minor := e.Parent & 0xffff
		s := e.Spec
		// The kernel attaches mq's default children with handle 0.
		s.Default = e.Handle == 0
		s.Handle = e.Handle
		byMinor[minor] = s
		maxMinor = max(maxMinor, minor)
	}
	var out []Spec
	for m := uint32(1); m <= maxMinor; m++ {
		s, ok := byMinor[m]
		if !ok {
			return out
		}
		out = append(out, s)
	}
	return out
}

// assembleShaper recognises lowlat's shaper shape: htb with default class 1,
// exactly one class :1 and one leaf qdisc below it. Anything else is someone
// else's tree and marked unmanaged.
func assembleShaper(root Spec, entries []Entry, classes []Class, handle uint32) Spec {
	out := root
	out.Opts = map[string]string{}
	var mine []Class
	for _, c := range classes {
		if c.Handle>>16 == handle>>16 {
			mine = append(mine, c)
		}
	}
	def := root.Opts["default"]
	if len(mine) != 1 || mine[0].Handle != handle|1 || mine[0].Parent != HandleRoot || (def != "" && def != "1") || mine[0].Unmanaged {
		out.Opts = root.Opts
		out.Unmanaged = true
		return out
	}
	for k, v := range mine[0].Opts {
		out.Opts[k] = v
	}
	if r2q, ok := root.Opts["r2q"]; ok && r2q != "10" {
		out.Opts["r2q"] = r2q
	}
	if v, ok := root.Opts["direct_qlen"]; ok {
		out.Opts["direct_qlen"] = v
	}
	if leaf := findParent(entries, handle|1); leaf != nil {
		s := leafSpec(entries, *leaf)
		out.Leaf = &s
	}
	return out
}

// leafSpec is the spec of a shaper's leaf qdisc: its own handle, and unmanaged
// when something hangs below it.
func leafSpec(entries []Entry, leaf Entry) Spec {
	s := leaf.Spec
	s.Default = false
	s.Handle = leaf.Handle
	if hasBelow(entries, leaf.Handle) {
		s.Unmanaged = true
	}
	return s
}

func findParent(entries []Entry, parent uint32) *Entry {
	for i := range entries {
		if entries[i].Parent == parent {
			return &entries[i]
		}
	}
	return nil
}

func hasBelow(entries []Entry, handle uint32) bool {
	if handle == 0 {
		return false
	}
	for _, e := range entries {
		if e.Parent>>16 == handle>>16 && e.Parent != HandleRoot && e.Parent != HandleIngress {
			return true
		}
	}
	return false
}
