package cli

import (
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/txn"
)

// cpuListFlag is a CPU list flag ("12-17,32").
type cpuListFlag struct{ cpus []int }

func (c *cpuListFlag) String() string { return host.FormatCPUList(c.cpus) }
func (c *cpuListFlag) Type() string   { return "cpulist" }

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
