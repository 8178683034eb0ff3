package report

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A chart of a series with a point at ±Inf draws the finite points and
// ends: the tick loop once ran until memory ran out on +Inf.
func TestChartWithInfinitePoints(t *testing.T) {
	done := make(chan string, 1)
	go func() {
		c := Chart{Title: "t", Series: []Series{{Name: "s", Points: [][2]float64{{0, 1}, {1, math.Inf(1)}, {2, 3}, {math.Inf(-1), 2}}}}}
		done <- c.SVG()
	}()
	select {
	case svg := <-done:
		if !strings.Contains(svg, "<svg") || strings.Contains(svg, "Inf") || strings.Contains(svg, "NaN") {
			t.Errorf("a chart with ±Inf points: %.300s", svg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a chart with a +Inf point did not finish in 10 s")
	}
}
