// Package gate decides whether a change is kept: it reads a probe result
// into a Summary (every metric the probe reports, each with a confidence
// interval estimated from the run's own samples), parses SLO terms, and
// compares a measurement after a change with the one before it.
//
// The decision (Decide) keeps a change only when every SLO term holds after
// it and no judged metric got worse than the baseline by more than the
// run-to-run noise. Without SLO terms the judged metrics are p50, p99 and
// loss. The CLI's apply --prove and prove, and the lab's fix variants, all
// decide here, so they cannot disagree about what "better" means.
//
// # The noise
//
// "Worse" means the after interval lies wholly on the bad side of the
// before interval: for a lower-is-better metric, after.Lo > before.Hi. Two
// 95 % intervals that do not overlap differ at well below the 5 % level, so
// one unchanged path measured twice rarely looks worse; the intervals come
// from the data, never from a fixed margin:
//
//   - Percentiles (p50 … p999, idle_*, first_byte_*, connect_*): the
//     distribution-free interval of a quantile from order statistics. With n
//     samples, the q-quantile's 95 % interval lies between the samples of
//     rank n·q ∓ 1.96·√(n·q·(1−q)); they are read from the probe's HDR
//     histogram. max is the quantile 1 − 1/n.
//   - mean: mean ± 1.96 · stddev / √n, from the histogram.
//   - jitter (RFC 3550): an exponentially weighted mean of |ΔRTT| with
//     weight 1/16, whose variance is 1/31 of the variance of |ΔRTT|; that
//     variance is the IPDV histogram's.
//   - loss: the Wilson score interval of lost out of sent.
//   - increase_ms (loaded p50 − idle p50): the two percentile intervals
//     combined at their extremes.
//   - rpm: 60000 over the trimmed mean's interval (mean ± 1.96 · sd / √n of
//     the loaded RTTs at or below p95).
//   - transactions_per_sec: the count's Poisson interval, N ± 1.96·√N.
//   - goodput_mbps: the mean of the per-interval goodput samples the load
//     probe records, ± t · sd / √k; a result without samples has no
//     interval, and any drop counts.
//
// Percentiles are also widened to the edges of their HDR buckets (three
// significant digits), so a difference inside one bucket is never "worse".
//
// Sampling intervals assume the samples are independent; a real path (and a
// real host) drifts. Two more terms widen the intervals, each from the run's
// own data:
//
//   - udp and tcp runs (and both phases of load) report their figures per
//     fifth of the run (probe.Batches). A percentile's half-width is at least t ·
//     sd of the blocks: a later run may sit anywhere one block did. The mean
//     and the loss, which are the blocks' average, get the batch-means
//     half-width t · sd / √5.
//   - Every latency is at least ± half the run's median send lag: how late
//     the host woke the prober against its schedule, measured in the same
//     run. A difference below that is the host's timer and scheduling noise.
//
// docs/gate.md has the measured false-"worse" rate and the power.
package gate
