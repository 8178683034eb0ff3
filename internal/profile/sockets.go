package profile

import (
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/lowlat/lowlat/internal/sockops"
)

// socketsBlock is one [[sockets]] block: the connections it selects and the
// options enforced on them.
//
//	[[sockets]]
//	match = "port:7000"
//	nodelay = true
//	initcwnd = 40
//	why = "the gateway answers in two writes"
//
// Each option becomes a setting "sockets.port:7000/nodelay", which a user
// profile overrides or skips like any other, and --set can give.
type socketsBlock struct {
	pos      Pos
	match    string
	matchPos Pos
	why      string
	source   string
	opts     []socketsOpt
}

type socketsOpt struct {
	opt   sockops.Option
	value string
	pos   Pos
}

var socketsFields = map[string]bool{"match": true, "why": true, "source": true}

func (p *parser) socketsKey(parts []string, pos Pos, v *unstable.Node) error {
	b := p.sock
	vpos := p.valuePos(v, pos)
	name := strings.Join(parts, ".")
	if len(parts) == 1 && socketsFields[name] {
		s, err := p.str(v, vpos, name)
		if err != nil {
			return err
		}
		switch name {
		case "match":
			if b.match != "" {
				return errAt(pos, "duplicate key \"match\" in [[sockets]]")
			}
			if _, err := sockops.ParseSelector(s); err != nil {
				return errAt(vpos, "%s", err)
			}
			b.match, b.matchPos = s, vpos
		case "why":
			b.why = s
		case "source":
			b.source = s
		}
		return nil
	}
	opt, err := sockops.ParseOption(name)
	if err != nil {
		return errAt(pos, "[[sockets]]: %s (or match, why, source)", err)
	}
	for _, o := range b.opts {
		if o.opt == opt {
			return errAt(pos, "duplicate key %q in [[sockets]] (first set at line %d)", name, o.pos.Line)
		}
	}
	var val string
	if v != nil && v.Kind == unstable.Bool {
		val = string(v.Data)
	} else if val, err = p.scalar(v, vpos, name); err != nil {
		return err
	}
	if err := opt.CheckValue(val); err != nil {
		return errAt(vpos, "%s", err)
	}
	b.opts = append(b.opts, socketsOpt{opt: opt, value: opt.Canon(val), pos: pos})
	return nil
}

// endSockets turns the block being read into settings.
func (p *parser) endSockets() error {
	b := p.sock
	if b == nil {
		return nil
	}
	p.sock = nil
	if b.match == "" {
		return errAt(b.pos, "[[sockets]] needs match = \"port:N\"")
	}
	if len(b.opts) == 0 {
		return errAt(b.pos, "[[sockets]] for %s sets no option (known: %s)", b.match, optionNames())
	}
	sel, _ := sockops.ParseSelector(b.match)
	if p.byKey == nil {
		p.byKey = map[string]*Setting{}
	}
	for _, o := range b.opts {
		name := sel.String() + "/" + o.opt.String()
		key := "sockets." + name
		if prev, dup := p.byKey[key]; dup {
			return errAt(o.pos, "%s is set twice (first at line %d)", key, prev.Pos.Line)
		}
		why := b.why
		if why == "" {
			why = o.opt.Doc()
		}
		p.byKey[key] = &Setting{Key: key, Section: "sockets", Name: name, Value: o.value, Why: why, Source: b.source, Pos: o.pos}
		p.order = append(p.order, key)
	}
	return nil
}

func optionNames() string {
	var names []string
	for _, o := range sockops.Options() {
		names = append(names, o.String())
	}
	return strings.Join(names, ", ")
}
