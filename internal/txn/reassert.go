package txn

import (
	"context"
	"errors"

	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
)

// ReassertItem is one knob a re-assertion found moved.
type ReassertItem struct {
	Knob    string `json:"knob"`
	Applied string `json:"applied"`
	Live    string `json:"live"`
	// Moved says it in words ("irq 45 eth0-TxRx-3: applied cpu 4, now cpu 0").
	Moved string `json:"moved,omitempty"`
	Error string `json:"error,omitempty"`
}

// ReassertResult is what a re-assertion looked at and did.
type ReassertResult struct {
	Checked int            `json:"checked"`
	Moved   []ReassertItem `json:"moved"`
	Failed  []ReassertItem `json:"failed"`
	// Skipped says why nothing was looked at this round.
	Skipped string `json:"skipped,omitempty"`
	// Notes say what settling the journal did first.
	Notes []string `json:"notes,omitempty"`
}

// Reassert writes back the applied value of every contested knob (interrupt
// affinity, queue steering, NIC settings, a service, a sock_ops entry whose
// program a service restart detached, an MSS clamp a firewall reload
// deleted: knob.Contested) that is in force in
// this boot and moved. A knob a reboot put back is not in force:
// a non-persisted interrupt setting applied before the reboot stays as the
// reboot left it, and a persisted one is lowlat-boot.service's to re-apply.
// The journal is settled first, like every command that may write it.
// Reassert holds the journal lock, so it never runs during an apply or
// rollback, and records nothing itself: the values from before lowlat stay
// the ones a rollback restores.
func (e *Engine) Reassert(ctx context.Context) (*ReassertResult, error) {
	res := &ReassertResult{Moved: []ReassertItem{}, Failed: []ReassertItem{}}
	j, err := journal.Open(e.JournalPath, journal.ReadWrite)
	if errors.Is(err, journal.ErrLocked) {
		res.Skipped = "an apply or rollback holds the journal; the next round will look"
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	defer j.Close()
	settled, err := e.settle(ctx, j)
	if settled != nil {
		res.Notes = settled.Notes
	}
	if err != nil {
		return res, err
	}
	st, err := j.Load()
	if err != nil {
		return nil, err
	}
	applied := map[string]string{}
	var order []string
	for _, t := range st.Active() {
		if t.Status != journal.Applied || t.PendingConfirm() && !t.InBoot(e.BootID) {
			continue
		}
		for _, in := range t.Intents {
			if !knob.Contested(in.Knob) || !e.inForce(t, in) {
				continue
			}
			if _, seen := applied[in.Knob]; !seen {
				order = append(order, in.Knob)
			}
			applied[in.Knob] = in.After
		}
	}
	for _, id := range order {
		want := applied[id]
		k, err := knob.New(e.Sys, id)
		if err != nil {
			res.Failed = append(res.Failed, ReassertItem{Knob: id, Applied: want, Error: err.Error()})
			continue
		}
		live, err := k.Read(ctx)
		res.Checked++
		if err == nil && k.Satisfied(live, want) {
			continue
		}
		it := ReassertItem{Knob: id, Applied: want, Live: live, Moved: knob.Describe(id, want, live)}
		if err == nil {
			err = k.Write(ctx, want)
		}
		if err == nil {
			err = knob.Verify(ctx, k, want)
		}
		if err != nil {
			it.Error = err.Error()
			res.Failed = append(res.Failed, it)
		}
		res.Moved = append(res.Moved, it)
	}
	return res, nil
}
