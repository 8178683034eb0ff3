// Command canary prints the canary judge's power table: the share of
// synthetic fleets (internal/canary.Synthetic) it fails, by canary and
// control hosts and the canary's p99 increase, with each host's day before
// the change known (a difference in differences) and without; and the A/A
// false-fail rate, and how often A/A passes or is inconclusive (its
// interval too wide to rule out harm). 1,000 fleets a cell.
//
//	go run ./bench/canary [-runs 1000] [-host-spread 0.15] [-step-noise 0.2] [-steps 24]
package main

import (
	"flag"
	"fmt"

	"github.com/lowlat/lowlat/internal/canary"
)

func main() {
	runs := flag.Int("runs", 1000, "fleets drawn per cell")
	spread := flag.Float64("host-spread", 0.15, "σ of the log of a host's level (the noise between hosts)")
	noise := flag.Float64("step-noise", 0.2, "σ of the log of a step's p99 around its host's level")
	steps := flag.Int("steps", 24, "steps in the window (hours of a 24h window)")
	flag.Parse()
	m := canary.Metric{Name: "p99", Scale: canary.Ratio, Tolerance: 0.05}
	effects := []float64{0, 0.05, 0.10, 0.20, 0.50}
	groups := [][2]int{{2, 4}, {2, 8}, {3, 6}, {4, 8}, {8, 16}}
	fmt.Printf("fail share of %d fleets; %d steps, hosts spread %.0f %%, a step's p99 %.0f %% around its host's; tolerance +5 %%\n", *runs, *steps, 100**spread, 100**noise)
	for _, baseline := range []bool{true, false} {
		fmt.Printf("\nbaseline (each host's day before known): %v\n%-16s", baseline, "canary/control")
		for _, e := range effects {
			fmt.Printf(" %8s", fmt.Sprintf("+%.0f%%", 100*e))
		}
		fmt.Println()
		for _, g := range groups {
			fmt.Printf("%-16s", fmt.Sprintf("%d/%d", g[0], g[1]))
			for i, e := range effects {
				f := canary.Synthetic{Canary: g[0], Control: g[1], Steps: *steps, HostSpread: *spread, StepNoise: *noise, Effect: e, Baseline: baseline}
				fmt.Printf(" %7.1f%%", 100*f.Share(m, canary.DefaultRules, canary.Fail, *runs, uint64(100+i)))
			}
			fmt.Println()
		}
	}
	// A/A: how often the same fleet passes, and how often the judge says
	// its data cannot rule out harm past the bound (inconclusive).
	fmt.Printf("\nA/A (no effect): pass / inconclusive\n%-16s %18s %18s\n", "canary/control", "baseline", "no baseline")
	for _, g := range groups {
		fmt.Printf("%-16s", fmt.Sprintf("%d/%d", g[0], g[1]))
		for _, baseline := range []bool{true, false} {
			f := canary.Synthetic{Canary: g[0], Control: g[1], Steps: *steps, HostSpread: *spread, StepNoise: *noise, Baseline: baseline}
			fmt.Printf(" %8.1f%% /%6.1f%%", 100*f.Share(m, canary.DefaultRules, canary.Pass, *runs, 99), 100*f.Share(m, canary.DefaultRules, canary.Inconclusive, *runs, 99))
		}
		fmt.Println()
	}
}
