// Command canary prints the canary judge's power table (docs/canary.md):
// the share of synthetic fleets (internal/canary) it fails, by canary and
// control hosts and the canary's p99 increase or extra loss, with each
// host's day before the change known (a difference in differences) and
// without; and the A/A figures per verdict: how often the same fleet,
// judged on p99, jitter and loss together, fails or goes marginal, passes,
// or is inconclusive (its upper bound past 3x the tolerance). Each metric is
// tested at 5 % / -family (the judge's default: three metrics, 1.67 %).
//
//	go run ./bench/canary [-runs 1000] [-family 3] [-host-spread 0.15] [-step-noise 0.2] [-steps 24]
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"

	"github.com/lowlat/lowlat/internal/canary"
)

func main() {
	runs := flag.Int("runs", 1000, "fleets drawn per cell")
	family := flag.Int("family", 3, "metrics judged together (each at 5 % / family)")
	spread := flag.Float64("host-spread", 0.15, "σ of the log of a host's level (the noise between hosts)")
	noise := flag.Float64("step-noise", 0.2, "σ of the log of a step's p99 around its host's level")
	steps := flag.Int("steps", 24, "steps in the window (hours of a 24h window)")
	flag.Parse()
	rules := canary.DefaultRules
	rules.Family = *family
	p99 := canary.Metric{Name: "p99", Scale: canary.Ratio, Tolerance: 0.05}
	jitter := canary.Metric{Name: "jitter", Scale: canary.Ratio, Tolerance: 0.05}
	loss := canary.Metric{Name: "loss", Scale: canary.Points, Tolerance: 0.005}
	groups := [][2]int{{2, 4}, {2, 8}, {3, 6}, {4, 8}, {8, 16}}
	lat := func(g [2]int, e float64, baseline bool) canary.Synthetic {
		return canary.Synthetic{Canary: g[0], Control: g[1], Steps: *steps, HostSpread: *spread, StepNoise: *noise, Effect: e, Baseline: baseline}
	}
	// 200 probes a host and step (a monitor's 20 a second over 10 s), 0.2 %
	// lost around each host's rate, hosts' rates spread by e^0.5.
	lossOf := func(g [2]int, e float64, baseline bool) canary.SyntheticLoss {
		return canary.SyntheticLoss{Canary: g[0], Control: g[1], Steps: *steps, Probes: 200, Rate: 0.002, HostSpread: 0.5, Effect: e, Baseline: baseline}
	}
	fmt.Printf("fail share of %d fleets; %d steps, each metric at %.2f %% one-sided (5 %% / %d)\n", *runs, *steps, 5.0/float64(*family), *family)
	fmt.Printf("p99: hosts spread %.0f %%, a step's p99 %.0f %% around its host's; tolerance +5 %%, a pass needs the upper end under +15 %%\n", 100**spread, 100**noise)
	table := func(title string, cols []string, cell func(g [2]int, i int) float64) {
		fmt.Printf("\n%s\n%-16s", title, "canary/control")
		for _, c := range cols {
			fmt.Printf(" %8s", c)
		}
		fmt.Println()
		for _, g := range groups {
			fmt.Printf("%-16s", fmt.Sprintf("%d/%d", g[0], g[1]))
			for i := range cols {
				fmt.Printf(" %7.1f%%", 100*cell(g, i))
			}
			fmt.Println()
		}
	}
	effects := []float64{0.05, 0.10, 0.20, 0.50}
	points := []float64{0.005, 0.01, 0.02, 0.05}
	for _, baseline := range []bool{true, false} {
		table(fmt.Sprintf("p99, baseline (each host's day before known): %v", baseline), []string{"+5%", "+10%", "+20%", "+50%"}, func(g [2]int, i int) float64 {
			return canary.Share(lat(g, effects[i], baseline), p99, rules, canary.Fail, *runs, uint64(100+i))
		})
		table(fmt.Sprintf("loss (200 probes a step at 0.2 %%), baseline: %v", baseline), []string{"+0.5pt", "+1pt", "+2pt", "+5pt"}, func(g [2]int, i int) float64 {
			return canary.Share(lossOf(g, points[i], baseline), loss, rules, canary.Fail, *runs, uint64(200+i))
		})
	}
	// A/A per verdict: p99, jitter and loss together, as the judge's
	// default judges them.
	for _, baseline := range []bool{true, false} {
		fmt.Printf("\nA/A (no effect), p99 + jitter + loss judged together, baseline %v: fail or marginal / pass / inconclusive\n", baseline)
		for _, g := range groups {
			rng := rand.New(rand.NewPCG(99, uint64(g[0]*100+g[1])))
			var alarm, pass, inc int
			for range *runs {
				var rs []canary.MetricResult
				for _, m := range []canary.Metric{p99, jitter, loss} {
					var c, ctl []canary.Host
					if m.Scale == canary.Points {
						c, ctl = lossOf(g, 0, baseline).Draw(rng)
					} else {
						c, ctl = lat(g, 0, baseline).Draw(rng)
					}
					rs = append(rs, canary.JudgeMetric(m, c, ctl, rules))
				}
				switch canary.Combine([]canary.Metric{p99, jitter, loss}, rs, nil, nil).Class {
				case canary.Fail, canary.Marginal:
					alarm++
				case canary.Pass:
					pass++
				default:
					inc++
				}
			}
			n := float64(*runs) / 100
			fmt.Printf("%-16s %7.1f%% / %5.1f%% / %5.1f%%\n", fmt.Sprintf("%d/%d", g[0], g[1]), float64(alarm)/n, float64(pass)/n, float64(inc)/n)
		}
	}
}
