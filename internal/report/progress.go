package report

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Progress draws a one-line progress bar on a terminal. It is a no-op when not
// enabled, so callers create one unconditionally and let the CLI decide (a bar only
// on a TTY, and only for runs longer than two seconds).
type Progress struct {
	w       io.Writer
	enabled bool
	label   string
	total   time.Duration
	start   time.Time

	stop chan struct{}
	done chan struct{}
}

// NewProgress returns a bar for a run of the given total duration. It draws only
// when enabled is true and total exceeds two seconds.
func NewProgress(w io.Writer, enabled bool, label string, total time.Duration) *Progress {
	return &Progress{w: w, enabled: enabled && total > 2*time.Second, label: label, total: total}
}

// Start begins redrawing every 200 ms until Stop.
func (p *Progress) Start() {
	if !p.enabled {
		return
	}
	p.start = time.Now()
	p.stop = make(chan struct{})
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			p.draw()
			select {
			case <-p.stop:
				fmt.Fprint(p.w, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	}()
}

// Stop erases the bar. Safe to call when never started.
func (p *Progress) Stop() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.stop = nil
}

func (p *Progress) draw() {
	const width = 30
	el := time.Since(p.start)
	frac := float64(el) / float64(p.total)
	frac = min(max(frac, 0), 1)
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r\x1b[K%s [%s%s] %3.0f%% ", p.label,
		strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100)
}
