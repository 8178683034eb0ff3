package doctor

import (
	"fmt"
	"strconv"

	"github.com/lowlat/lowlat/internal/pathprobe"
)

// PathFinding turns a path measurement (doctor --path HOST) into a finding:
// where along the path delay or loss starts, with every hop's figures as
// evidence. It warns when the verdict names a hop, and says whether that
// hop is this host's own first hop (its queue or its LAN) or further out.
func PathFinding(r *pathprobe.Result) Finding {
	f := Finding{ID: "path", Severity: Info, Evidence: map[string]string{}, Source: runbook000}
	for _, h := range r.Hops {
		key := fmt.Sprintf("hop %02d", h.Index)
		if h.Received == 0 {
			f.Evidence[key] = "no reply"
			continue
		}
		v := fmt.Sprintf("%s p50 %.2f ms p99 %.2f ms loss %.0f %%", h.Address, h.RTT.P50/1000, h.RTT.P99/1000, h.LossPct)
		if h.RateLimited {
			v += " (rate-limited / slow-path reply, not on the forwarding path)"
		}
		f.Evidence[key] = v
	}
	f.Evidence["probes"] = fmt.Sprintf("%s, %d per hop, flow %d", r.Proto, r.Count, r.Flow)
	if !r.Reached {
		f.Evidence["destination"] = "no reply within " + strconv.Itoa(len(r.Hops)) + " hops"
	}
	v := r.Verdict
	switch {
	case v.Hop == 0:
		f.Summary = fmt.Sprintf("path to %s: %s", r.Target, v.Text)
	case v.Hop == 1:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("path to %s: %s", r.Target, v.Text)
		f.Fix = "the first hop already carries it: the queue is on this host or its LAN. Look at the qdisc and NIC findings above; behind a capped uplink, shape below it (profile capped-uplink)"
	default:
		f.Severity = Warn
		f.Summary = fmt.Sprintf("path to %s: %s", r.Target, v.Text)
		f.Fix = fmt.Sprintf("outside this host: hop %d (%s) is where it starts and stays. Take the per-hop figures (lowlat probe path %s --json) to whoever runs that hop, or route around it", v.Hop, v.Address, r.Target)
	}
	if r.JitterFrom > 0 {
		f.Evidence["jitter from"] = "hop " + strconv.Itoa(r.JitterFrom)
	}
	return f
}
