package txn

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// Reapply runs at boot for persisted transactions: sysctls come back through
// /etc/sysctl.d, but qdiscs, routes and sysfs settings do not, so their applied
// values are written again and the boot is recorded. The recorded previous
// values stay those from before lowlat, so a later rollback still restores the
// host as it was.
func (e *Engine) Reapply(ctx context.Context) (*Result, error) {
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if err != nil {
		return nil, err
	}
	defer j.Close()
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	res := &Result{Changed: []Item{}, Failed: []Item{}}
	for _, t := range st.Active() {
		if !t.Meta.Persist || t.Status != journal.Applied || t.InBoot(e.BootID) {
			continue
		}
		res.Txn = t.ID
		for _, in := range t.Intents {
			kind := knob.Kind(in.Knob)
			if kind == "sysctl" || kind == "file" || kind == "link" {
				continue
			}
			k, err := knob.New(e.Sys, in.Knob)
			if err == nil {
				err = k.Write(ctx, in.After)
			}
			if err == nil {
				err = knob.Verify(ctx, k, in.After)
			}
			if err != nil {
				res.Failed = append(res.Failed, Item{Knob: in.Knob, After: in.After, Error: err.Error()})
				continue
			}
			res.Changed = append(res.Changed, Item{Knob: in.Knob, After: in.After})
		}
		if err := j.Append(journal.Record{Type: journal.TypeReapply, Txn: t.ID, BootID: e.BootID, Failed: knobsOf(res.Failed)}); err != nil {
			return nil, err
		}
	}
	if len(res.Failed) > 0 {
		return res, fmt.Errorf("reapply: %d knob(s) failed (first: %s: %s)", len(res.Failed), res.Failed[0].Knob, res.Failed[0].Error)
	}
	return res, nil
}
