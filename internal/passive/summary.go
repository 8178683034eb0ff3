package passive

import (
	"math"
	"time"
)

// Row is a series summarized over a window, as watch and the gate show it:
// quantiles in microseconds, volumes per second.
type Row struct {
	Measure Measure `json:"measure"`
	Key     string  `json:"key"`
	Device  string  `json:"device,omitempty"`
	Queue   *int    `json:"queue,omitempty"`
	DSCP    string  `json:"dscp,omitempty"`
	Proto   string  `json:"proto,omitempty"`
	Port    uint16  `json:"port,omitempty"`
	Stage   string  `json:"stage,omitempty"`
	Bytes   uint64  `json:"bytes,omitempty"`
	Cgroup  string  `json:"cgroup,omitempty"`

	Count     uint64  `json:"count"`
	PerSecond float64 `json:"per_second"`
	P50       float64 `json:"p50_us"`
	P90       float64 `json:"p90_us"`
	P99       float64 `json:"p99_us"`
	Max       float64 `json:"max_us"`
	Mean      float64 `json:"mean_us"`

	Retransmits    uint64  `json:"retransmits,omitempty"`
	Conns          uint64  `json:"connections,omitempty"`
	ConnsPerSecond float64 `json:"connections_per_second,omitempty"`
	Unavailable    string  `json:"unavailable,omitempty"`
	Sampled        bool    `json:"sampled,omitempty"`
	// Buckets is the raw histogram: [lower bound ns, count] of each
	// non-empty bucket (Bucket, BucketBounds), so a result can be
	// re-summarized later.
	Buckets [][2]uint64 `json:"buckets,omitempty"`
}

// Summarize turns the values recorded over a window of length d (a
// Snapshot.Sub) into rows, in the session's order.
func Summarize(s Snapshot, d time.Duration) []Row {
	rows := make([]Row, 0, len(s.Series))
	secs := d.Seconds()
	for i := range s.Series {
		ser := &s.Series[i]
		h := &ser.Hist
		r := Row{
			Measure: ser.Measure, Key: ser.Key(), Device: ser.Device, DSCP: ser.DSCP, Proto: ser.Proto, Port: ser.Port,
			Stage: ser.Stage, Bytes: ser.Bytes, Cgroup: ser.Cgroup, Count: h.Count(),
			P50: us(h.Quantile(0.5)), P90: us(h.Quantile(0.9)), P99: us(h.Quantile(0.99)),
			Max: us(h.Max()), Mean: us(h.Mean()),
			Retransmits: ser.Retransmits, Conns: ser.Conns, Unavailable: ser.Unavailable, Sampled: ser.Sampled,
		}
		if ser.Measure == Egress {
			q := ser.Queue
			r.Queue = &q
		}
		if secs > 0 {
			r.PerSecond = round3(float64(r.Count) / secs)
			r.ConnsPerSecond = round3(float64(r.Conns) / secs)
		}
		for b, c := range h.Counts {
			if c > 0 {
				lo, _ := BucketBounds(b)
				r.Buckets = append(r.Buckets, [2]uint64{lo, c})
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// HistOf rebuilds a row's histogram from its Buckets.
func HistOf(r Row) Hist {
	var h Hist
	for _, b := range r.Buckets {
		h.Counts[Bucket(b[0])] += b[1]
	}
	h.SumNs = uint64(r.Mean * 1e3 * float64(r.Count))
	return h
}

func us(d time.Duration) float64 { return round3(float64(d) / 1e3) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
