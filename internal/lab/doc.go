// Package lab answers "does this actually help?" on the user's own machine:
// it builds a small network in network namespaces (client ↔ provider ↔
// server), reproduces a runbook's problem there, measures it with the probe
// library, applies lowlat's fix with the same engine "lowlat apply" uses
// (profile → plan.Make on facts gathered inside the namespace → txn.Engine),
// measures again, rolls the fix back, and reports before/after figures with a
// verdict for each expectation.
//
// Safety: everything lives in namespaces named NSPrefix+"<run>-<role>" that
// are registered in a state file (StateDir) before they are created, so
// Clean removes what any earlier run left behind, even one killed with
// SIGKILL. Veth pairs are created inside the namespaces (never on the host),
// every address and qdisc is inside them, and settings that are host-wide
// rather than per namespace (sysfs, non-net sysctls, net.core.default_qdisc)
// are never applied: the plan rows say so.
//
// Where the kernel lacks a feature a scenario needs (netem, fq_codel, cake),
// the scenario says exactly what is missing, runs the variant it can and
// marks it; a variant that cannot run is a failed expectation, never a
// silent pass. RunInVM runs any scenario in a stock Debian kernel under qemu
// (package vm), where every feature exists.
package lab
