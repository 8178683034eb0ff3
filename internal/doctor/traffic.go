package doctor

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/passive"
)

// TrafficSample is what doctor --sample saw of the host's real traffic in
// the kernel over its window (internal/passive).
type TrafficSample struct {
	Window time.Duration
	Rows   []passive.Row
	// Unavailable are the hooks this kernel refused, with why.
	Unavailable map[string]string
	// Err is why nothing was measured (no BPF, not root).
	Err string
}

// Thresholds of the real-traffic findings: what the host adds at p99,
// judged once a series holds enough values for its p99 to mean something.
const (
	trafficMinValues    = 50
	egressQueueWarn     = 5 * time.Millisecond
	receiveWaitWarn     = time.Millisecond
	applicationReadWarn = 10 * time.Millisecond
)

// TrafficCheck is the id of the real-traffic check.
const TrafficCheck = "traffic"

// TrafficFindings judges a sample: what the host adds to its users' packets
// on the way out (queueing) and on the way in (before the stack or TCP
// takes them, before the application reads them), each with the evidence
// and the fix.
func TrafficFindings(f *host.Facts, s *TrafficSample) []Finding {
	if s == nil {
		return nil
	}
	if s.Err != "" {
		return []Finding{unreadRow(TrafficCheck, "the host's real traffic (doctor --sample measures it with eBPF): "+s.Err, s.Err)}
	}
	var out []Finding
	ms := func(us float64) string { return fmt.Sprintf("%.2f ms", us/1e3) }
	ev := func(r passive.Row) map[string]string {
		return map[string]string{"p50": ms(r.P50), "p99": ms(r.P99), "max": ms(r.Max), "values": fmt.Sprint(r.Count), "window": s.Window.String()}
	}
	// Egress: per device, its queues merged.
	devs := map[string]*passive.Hist{}
	var names []string
	for _, r := range s.Rows {
		if r.Measure != passive.Egress {
			continue
		}
		h := devs[r.Device]
		if h == nil {
			h = &passive.Hist{}
			devs[r.Device] = h
			names = append(names, r.Device)
		}
		x := passive.HistOf(r)
		h.Add(&x)
	}
	sort.Strings(names)
	for _, d := range names {
		h := devs[d]
		rows := passive.Summarize(passive.Snapshot{Series: []passive.Series{{Measure: passive.Egress, Device: d, Hist: *h}}}, s.Window)
		r := rows[0]
		if r.Count < trafficMinValues || time.Duration(r.P99*1e3) < egressQueueWarn {
			continue
		}
		e := ev(r)
		e["device"] = d
		if q := rootQdisc(f, d); q != "" {
			e["root_qdisc"] = q
		}
		out = append(out, Finding{ID: "traffic-egress-queueing", Severity: Warn,
			Summary:  fmt.Sprintf("%s egress adds p99 %s of queueing to real traffic", d, ms(r.P99)),
			Evidence: e,
			Fix:      fmt.Sprintf("an AQM on %s's queues: lowlat apply --profile game-udp (fq_codel), or below a capped uplink --profile capped-uplink --set rate=... (fq's pacing delay counts as queueing here, by design)", d),
			Source:   "eBPF: net_dev_queue to net_dev_start_xmit",
		})
	}
	for _, r := range s.Rows {
		if r.Measure != passive.Receive || r.Count < trafficMinValues {
			continue
		}
		proto := strings.ToUpper(r.Proto)
		e := ev(r)
		e["stage"] = r.Stage
		switch {
		case r.Stage != passive.StageRead && time.Duration(r.P99*1e3) >= receiveWaitWarn:
			where := "the protocol stack takes them"
			if r.Stage == passive.StageSocket {
				where = "TCP processes them on their socket"
			}
			out = append(out, Finding{ID: "traffic-receive-wait", Severity: Warn,
				Summary:  fmt.Sprintf("%s %d waits p99 %s in the host before its socket (arrival until %s)", proto, r.Port, ms(r.P99), where),
				Evidence: e,
				Fix:      "interrupt placement: the NIC's interrupts and RPS on CPUs of its NUMA node that the application does not busy (lowlat apply --profile game-udp: irq placement, irqbalance off)",
				Source:   "eBPF: skb->tstamp to netif_receive_skb / tcp_probe",
			})
		case r.Stage == passive.StageRead && time.Duration(r.P99*1e3) >= applicationReadWarn:
			out = append(out, Finding{ID: "traffic-slow-read", Severity: Warn,
				Summary:  fmt.Sprintf("the application reads %s %d p99 %s after the packets arrive", proto, r.Port, ms(r.P99)),
				Evidence: e,
				Fix:      "the reader waits for a CPU: give its threads CPUs apart from the NIC's interrupts and other busy work (taskset, a cgroup cpuset), or read from more threads (SO_REUSEPORT)",
				Source:   "eBPF: skb->tstamp to the application's read",
			})
		}
	}
	for _, r := range s.Rows {
		if r.Measure == passive.RTT && r.Retransmits > 0 && r.Count > 0 {
			e := ev(r)
			e["retransmits"] = fmt.Sprint(r.Retransmits)
			out = append(out, Finding{ID: "traffic-tcp-retransmits", Severity: Info,
				Summary:  fmt.Sprintf("TCP %d: %d retransmits in %s of real traffic (RTT p50 %s, p99 %s)", r.Port, r.Retransmits, s.Window, ms(r.P50), ms(r.P99)),
				Evidence: e,
				Fix:      "loss on the path or in a queue: lowlat doctor --path HOST says where; an AQM or shaping below the uplink keeps a queue from overflowing",
				Source:   "eBPF: tcp_retransmit_skb",
			})
		}
	}
	return out
}

// rootQdisc names a device's root qdisc from the facts, or "".
func rootQdisc(f *host.Facts, dev string) string {
	if f == nil {
		return ""
	}
	for _, i := range f.Interfaces {
		if i.Name == dev && i.Root != nil {
			return i.Root.Kind
		}
	}
	return ""
}
