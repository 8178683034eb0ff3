package autorate

import (
	"fmt"
	"testing"
	"time"
)

// The reflectors' vote, for one to four reflectors, one of them bypassing
// the bottleneck (it reads no queue) or noisy (it reads one alone): a
// bypassing reflector hides no queue, and, with three or more, a noisy one
// makes no delay alone.
func TestVoteOfReflectors(t *testing.T) {
	for _, tt := range []struct {
		name string
		over []int // each reflector's delay over its baseline, ms
		want int
	}{
		{"one", []int{40}, 40},
		{"two, one bypassing", []int{0, 40}, 40},
		{"three, one bypassing", []int{40, 0, 40}, 40},
		{"three, one noisy", []int{0, 60, 0}, 0},
		{"four, one bypassing", []int{40, 40, 0, 40}, 40},
		{"four, two bypassing", []int{0, 40, 0, 40}, 40},
		{"four, one noisy", []int{0, 0, 60, 0}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := NewController(policy(), DefaultConfig())
			t0 := time.Unix(1_700_000_000, 0)
			var floor, now []Reading
			for i, o := range tt.over {
				// Clock offsets differ: each reflector has its own baseline.
				base := time.Duration(i*37+20) * time.Millisecond
				name := fmt.Sprintf("owd:r%d:1", i)
				floor = append(floor, Reading{Signal: name, Value: base})
				now = append(now, Reading{Signal: name, Value: base + time.Duration(o)*time.Millisecond})
			}
			c.delay(Input{At: t0, Readings: floor})
			d, by := c.delay(Input{At: t0.Add(200 * time.Millisecond), Readings: now})
			// The baseline rises by a thousandth of a delay over it.
			if want := time.Duration(tt.want) * time.Millisecond; d < want*99/100 || d > want {
				t.Errorf("delays over baseline %v ms: vote %v (%s), want %v", tt.over, d, by, want)
			}
		})
	}
}

// The passive signal decides only when no reflector answered: a reflector
// ranks over it (see Controller.delay).
func TestPassiveDecidesWithoutAReflector(t *testing.T) {
	c := NewController(policy(), DefaultConfig())
	t0 := time.Unix(1_700_000_000, 0)
	c.delay(Input{At: t0, Readings: []Reading{{Signal: "owd:a:1", Value: 20 * time.Millisecond}}})
	passive := Reading{Signal: PassiveSignal, Value: 30 * time.Millisecond, Relative: true}
	d, by := c.delay(Input{At: t0.Add(200 * time.Millisecond), Readings: []Reading{{Signal: "owd:a:1", Value: 22 * time.Millisecond}, passive}})
	if by != "owd:a:1" || d > 2*time.Millisecond {
		t.Errorf("reflector 2 ms over, passive 30: %v from %s, want the reflector's", d, by)
	}
	d, by = c.delay(Input{At: t0.Add(400 * time.Millisecond), Readings: []Reading{passive}})
	if by != PassiveSignal || d != 30*time.Millisecond {
		t.Errorf("no reflector, passive 30: %v from %s, want the passive's", d, by)
	}
}
