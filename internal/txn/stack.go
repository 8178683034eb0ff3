package txn

import (
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// What a reboot leaves of a stack of transactions is decided knob by knob,
// across every transaction that changed the knob, never one transaction at
// a time (docs/safety.md, "Reboots"):
//
// Each intent on a knob recorded as its previous value what the knob read
// when its transaction was applied. That value came from the newest earlier
// intent on the knob that was in force then (its parent), or from the host
// itself when none was. An intent is in force in a boot when its knob
// survives a reboot (a file, a disabled service), when its transaction was
// applied or re-applied in that boot, or when its transaction is persisted
// (/etc/sysctl.d and lowlat boot bring it back in every boot).
//
// The live value comes from the newest intent in force now (the top). The
// top, its parent, its parent's parent and so on are the path: rolling them
// back newest first walks the knob back to the value it had before the
// oldest of them, which is the value the host had before lowlat as far as
// this boot is concerned. Every other intent on the knob was put back by a
// reboot, and nothing re-applies it: it is lost, and a rollback must not
// write it. With no top at all, every intent on the knob is lost.
//
// So an unpersisted change under a persisted one is still on the path (the
// persisted transaction's previous value is the unpersisted one's, and its
// rollback brings that back), while an unpersisted change that a reboot
// undid before the next apply read the knob is not (that apply recorded the
// boot value, not the lost change).

// layer is one intent in a knob's stack.
type layer struct {
	t  *journal.Txn
	in journal.Intent
}

// stacks gathers, knob by knob, the intents of the applied transactions in
// st, oldest first. A transaction awaiting a confirmation that can no longer
// come (orphaned) is left out: its own rollback settles it.
func (e *Engine) stacks(st *journal.State) (map[string][]layer, []string) {
	byKnob := map[string][]layer{}
	var order []string
	for _, t := range st.Txns {
		if t.Status != journal.Applied || e.orphaned(t) != "" {
			continue
		}
		for _, in := range t.Intents {
			if _, seen := byKnob[in.Knob]; !seen {
				order = append(order, in.Knob)
			}
			byKnob[in.Knob] = append(byKnob[in.Knob], layer{t, in})
		}
	}
	return byKnob, order
}

// inForceIn reports whether l was in force in boot b ("" is any boot: a
// journal from before boot ids were recorded).
func (l layer) inForceIn(b string) bool {
	return l.t.Meta.Persist || l.t.InBoot(b) || knob.SurvivesReboot(l.in.Knob, l.in.After)
}

// pathOf returns the indexes of the layers on the path from the top (the
// newest layer in force in boot now) down, newest first; nil when no layer
// is in force.
func pathOf(s []layer, now string) []int {
	top := -1
	for i := len(s) - 1; i >= 0; i-- {
		if s[i].inForceIn(now) {
			top = i
			break
		}
	}
	var out []int
	for i := top; i >= 0; {
		out = append(out, i)
		applied := s[i].t.Meta.BootID
		next := -1
		for j := i - 1; j >= 0; j-- {
			if s[j].inForceIn(applied) {
				next = j
				break
			}
		}
		i = next
	}
	return out
}

// lost returns, by transaction id, the knobs of applied transactions that a
// reboot put back and nothing re-applies: the layers off their knob's path.
// Without a boot id nothing is lost (no reboot can be told).
func (e *Engine) lost(st *journal.State) map[string][]string {
	if e.BootID == "" {
		return nil
	}
	byKnob, order := e.stacks(st)
	out := map[string][]string{}
	for _, k := range order {
		s := byKnob[k]
		on := make([]bool, len(s))
		for _, i := range pathOf(s, e.BootID) {
			on[i] = true
		}
		for i, l := range s {
			if !on[i] {
				out[l.t.ID] = append(out[l.t.ID], k)
			}
		}
	}
	return out
}

// tops returns, by knob, the transaction whose value is live in this boot
// (or is to be: a persisted one lowlat boot has not re-applied yet).
func (e *Engine) tops(st *journal.State) map[string]*journal.Txn {
	byKnob, _ := e.stacks(st)
	out := map[string]*journal.Txn{}
	for k, s := range byKnob {
		if p := pathOf(s, e.BootID); len(p) > 0 {
			out[k] = s[p[0]].t
		}
	}
	return out
}
