// Package gate decides whether a change is kept: it reads a probe result
// into a Summary (every metric the probe reports, each with a confidence
// interval estimated from the run's own samples), parses SLO terms, and
// compares a measurement after a change with the one before it.
//
// The decision (Decide) keeps a change only when no judged metric got worse
// than the baseline beyond the run-to-run noise, and every SLO term holds
// after it. The judged metrics are always p50, p99, loss and errors (those
// the probe reports), the SLO's terms added to them (Policy.SLOOnly: the
// SLO's alone). The CLI's apply --prove and prove, and the lab's fix
// variants, all decide here, so they cannot disagree about what "better"
// means.
//
// # The noise comes from the baseline
//
// Each Metric carries its sampling interval (Lo, Hi: what its own samples
// say) and its noise (how far a later run of the same path may land). The
// baseline's Band is its interval widened by its noise; the run after the
// change is judged by its sampling interval alone. "Worse" means the
// after-run's interval lies wholly on the bad side of the baseline's band.
// A run that degrades while it runs (loss that grows, a reflector that dies)
// has a wide spread of its own, and counting that spread as noise would
// excuse exactly the change the gate must catch. Every interval lies inside
// its metric's range.
//
// Sampling intervals:
//
//   - Percentiles (p50 … p999, idle_*, first_byte_*, connect_*): the
//     distribution-free interval of a quantile from order statistics. With n
//     samples, the q-quantile's 95 % interval lies between the samples of
//     rank n·q ∓ 1.96·√(n·q·(1−q)); they are read from the probe's HDR
//     histogram, widened to the edges of their buckets (three significant
//     digits), so a difference inside one bucket is never "worse". max is
//     the quantile 1 − 1/n.
//   - mean: mean ± 1.96 · stddev / √n, from the histogram.
//   - jitter (RFC 3550): an exponentially weighted mean of |ΔRTT| with
//     weight 1/16, whose variance is 1/31 of the variance of |ΔRTT|; that
//     variance is the IPDV histogram's.
//   - loss and errors: the Wilson score interval of lost (failed) out of
//     sent (attempted). Probes the reflector's rate limit dropped are not
//     sent probes here.
//   - increase_ms (loaded p50 − idle p50): the two percentile intervals
//     combined at their extremes.
//   - rpm: 60000 over the trimmed mean's interval (mean ± 1.96 · sd / √n of
//     the loaded RTTs at or below p95).
//   - transactions_per_sec: the count's Poisson interval, N ± 1.96·√N.
//   - goodput_mbps: the mean of the per-interval goodput samples the load
//     probe records, ± t · sd / √k; a result without samples has no
//     interval, and any drop counts.
//
// Noise, from the run's own data:
//
//   - udp and tcp runs (and both phases of load) report their figures per
//     fifth of the run (probe.Batches). A percentile's noise is t · sd of
//     the blocks: a later run may sit anywhere one block did. Of five
//     blocks, the one farthest from their median is left out (t with one
//     degree of freedom less): a stall of the host in one fifth is not where
//     a whole later run lands, and counted in, it widened a fast path's band
//     past a 35-fold rise of its p50. The mean, the loss and the errors, which are the blocks' average, get the
//     batch-means half-width t · sd / √5. A block with no reply counts at
//     100 % loss.
//   - Every latency's noise is at least the run's send lag (how late the
//     host woke the prober against its schedule, measured in the same run):
//     its median for the median and the mean, its p90 for the tail. A
//     difference below that is the host's timer and scheduling noise.
//
// docs/gate.md has the measured false-"worse" rate and the power.
package gate
