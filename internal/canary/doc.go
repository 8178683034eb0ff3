// Package canary judges a canary the way runbook 000 judged its 5 % of
// players: canary hosts against control hosts, on the fleet's own metrics,
// over hours. It is the statistics, on per-host, per-step values; reading
// them from Prometheus is package canaryprom's.
//
// Hosts are the unit. Kayenta (Spinnaker's judge) pools every interval of
// every host into one sample per group and runs a Mann-Whitney U test on
// the two; with 4 canary hosts and 24 hourly steps that is 96
// "independent" values, most of which are the same few hosts again, so the
// noise between hosts (one host's path is longer than another's) reads as
// an effect. Here each host is reduced to one number a metric, and the
// groups of those numbers are compared:
//
//   - A host's series are compared like with like: one Part per target and
//     kind of probe, per stage, port, device or byte threshold of the
//     real-traffic histograms. A near target doubling under a far one
//     would read 0 % in one histogram summed over both.
//   - A part's number over a window is the mean of its steps on the log
//     scale for times, never trimmed (an hour of harm is harm), and for a
//     ratio of counters (loss) the ratio of the window's sums: lost / sent,
//     never a mean of the steps' ratios, so a burst of loss weighs what it
//     lost.
//   - A host is compared with its own window before where it has one (a
//     difference in differences), which takes the between-host spread out
//     of the comparison. A control host without one is left out; a canary
//     host without one is compared with the fleet's typical window before.
//   - The groups' difference is tested one-sided against the tolerance
//     with the control group's spread (the fleet's noise between hosts,
//     which the canary cannot inflate or deflate: the test is monotonic in
//     harm), and a pass needs the effect's upper bound, with the canary's
//     own spread on the harmful side in its error, under a few times the
//     tolerance. Several metrics are several tests: each is judged at
//     Alpha/Family (Bonferroni), so the verdict's false alarms stay at
//     Alpha.
//
// Data too thin or too degenerate to judge (a group under MinHosts, a
// canary host with gaps or silent at the window's end, every control host
// equal, a quantile that never left one histogram bucket) is
// inconclusive, never pass. The worst metric decides the verdict.
package canary
