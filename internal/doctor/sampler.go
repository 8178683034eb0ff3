package doctor

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/host"
)

// NICStats reads a NIC's ethtool -S counters (knob's ethtool backend).
type NICStats interface {
	Stats(iface string) (map[string]uint64, error)
}

// LiveSampler watches the running host for doctor's window: ethtool -S of
// each NIC and the CPU time of every thread (/proc/PID/task/TID/stat), read
// at the start and at the end. What it cannot read is in Sample.Errors, by
// source, so a check never takes "could not look" for "nothing seen".
type LiveSampler struct {
	// Proc is the proc root ("/proc").
	Proc string
	// NICs reads ethtool counters; nil when there is no ethtool access
	// (NICErr says why).
	NICs   NICStats
	NICErr error
}

// Sample implements Sampler.
func (s LiveSampler) Sample(ifaces []string, window time.Duration) (*Sample, error) {
	out := &Sample{Window: window, NICDeltas: map[string]map[string]uint64{}, Ksoftirqd: map[int]float64{}, Errors: map[string]string{}}
	before := map[string]map[string]uint64{}
	for _, i := range ifaces {
		if s.NICs == nil {
			out.Errors["ethtool:"+i] = errors.Join(errors.New("no ethtool access"), s.NICErr).Error()
			continue
		}
		st, err := s.NICs.Stats(i)
		if err != nil {
			out.Errors["ethtool:"+i] = err.Error()
			continue
		}
		before[i] = st
	}
	t0 := time.Now()
	threads0, err0 := host.ReadThreads(s.Proc)
	time.Sleep(window)
	threads1, err1 := host.ReadThreads(s.Proc)
	elapsed := time.Since(t0)
	out.Window = elapsed.Round(time.Millisecond)
	for i, b := range before {
		st, err := s.NICs.Stats(i)
		if err != nil {
			out.Errors["ethtool:"+i] = err.Error()
			continue
		}
		d := map[string]uint64{}
		for k, v := range st {
			if v > b[k] {
				d[k] = v - b[k]
			}
		}
		out.NICDeltas[i] = d
	}
	if err := errors.Join(err0, err1); err != nil {
		out.Errors[SourceThreads] = err.Error()
		return out, nil
	}
	secs := elapsed.Seconds()
	for key, t1 := range threads1 {
		t, ok := threads0[key]
		if !ok || t1.Ticks < t.Ticks {
			continue
		}
		share := float64(t1.Ticks-t.Ticks) / host.UserHZ / secs
		if cpu, ok := strings.CutPrefix(t1.Comm, "ksoftirqd/"); ok && t1.Kernel {
			if n, err := strconv.Atoi(cpu); err == nil {
				out.Ksoftirqd[n] = share
			}
			continue
		}
		if t1.Kernel || share == 0 {
			continue
		}
		out.Threads = append(out.Threads, ThreadLoad{PID: t1.PID, TID: t1.TID, Comm: t1.Comm, Share: share, CPU: t1.CPU})
	}
	sort.Slice(out.Threads, func(i, j int) bool { return out.Threads[i].Share > out.Threads[j].Share })
	if len(out.Threads) > 20 {
		out.Threads = out.Threads[:20]
	}
	return out, nil
}

// SourceThreads is the Sample.Errors key of the per-thread CPU times
// (ksoftirqd and application threads).
const SourceThreads = "threads"
