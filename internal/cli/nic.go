package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/txn"
)

// cpuListFlag is a CPU list flag ("12-17,32").
type cpuListFlag struct{ cpus []int }

func (c *cpuListFlag) String() string { return host.FormatCPUList(c.cpus) }

func (c *cpuListFlag) Set(v string) error {
	l, err := host.ParseCPUList(v)
	if err != nil {
		return err
	}
	if len(l) == 0 {
		return fmt.Errorf("empty CPU list")
	}
	c.cpus = append(c.cpus, l...)
	return nil
}

// applyWritable applies changes as one transaction; when the host refuses a
// knob outright (knob.ErrNotWritable: EOPNOTSUPP or EPERM from a driver, a
// feature ethtool shows as [fixed], a kernel-managed interrupt, a service
// without systemd), that knob is left out and the rest applied again. Every
// attempt is a whole transaction: the refused one already rolled itself back,
// so nothing is ever half-applied, and the journal keeps the attempt with its
// reason. Any other failure (a read-back that differs from an accepted write,
// a device that vanished) ends the apply.
func applyWritable(ctx context.Context, eng *txn.Engine, changes []txn.Change, meta journal.Meta) (*txn.Result, []txn.Item, error) {
	var dropped []txn.Item
	for attempt := 0; len(changes) > 0 && attempt <= len(changes)+1; attempt++ {
		res, err := eng.Apply(ctx, changes, meta)
		if err == nil {
			return res, dropped, nil
		}
		var ae *txn.ApplyError
		if !errors.As(err, &ae) || ae.Knob == "" || len(ae.RollbackFailed) > 0 || !errors.Is(ae.Err, knob.ErrNotWritable) {
			return nil, dropped, err
		}
		dropped = append(dropped, txn.Item{Knob: ae.Knob, Error: ae.Err.Error()})
		var rest []txn.Change
		for _, c := range changes {
			if c.Knob != ae.Knob {
				rest = append(rest, c)
			}
		}
		changes = rest
	}
	return &txn.Result{Changed: []txn.Item{}, Failed: []txn.Item{}}, dropped, nil
}

// notWritableNotes says which knobs were left out.
func notWritableNotes(dropped []txn.Item) []string {
	var out []string
	for _, d := range dropped {
		out = append(out, fmt.Sprintf("%s: not writable here, left as it is (%s)", d.Knob, d.Error))
	}
	return out
}

// driftWords says what moved in human terms, one line per drifted knob that
// has such words.
func driftWords(drift []txn.Drift) []string {
	var out []string
	for _, d := range drift {
		if strings.HasPrefix(d.Live, "error: ") {
			continue
		}
		if w := knob.Describe(d.Knob, d.Applied, d.Live); w != "" {
			out = append(out, w)
		}
	}
	return out
}
