package cli

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/knob"
)

// liveSampler watches the running host for doctor's window: ethtool -S of
// each NIC and the CPU time of every thread (/proc/PID/task/TID/stat), read
// at the start and the end.
type liveSampler struct{ root string }

// threadStat is what /proc/PID/task/TID/stat says about one thread.
type threadStat struct {
	pid, tid int
	comm     string
	ticks    uint64 // utime + stime
	cpu      int    // processor it last ran on
	kernel   bool   // PF_KTHREAD
}

func (s liveSampler) Sample(ifaces []string, window time.Duration) (*doctor.Sample, error) {
	out := &doctor.Sample{Window: window, NICDeltas: map[string]map[string]uint64{}, Ksoftirqd: map[int]float64{}, Errors: map[string]string{}}
	e, err := knob.EthtoolOf(knob.Live)
	if err != nil {
		return nil, err
	}
	before := map[string]map[string]uint64{}
	for _, i := range ifaces {
		st, err := e.Stats(i)
		if err != nil {
			out.Errors["ethtool:"+i] = err.Error()
			continue
		}
		before[i] = st
	}
	t0 := time.Now()
	threads0 := s.threads()
	time.Sleep(window)
	threads1 := s.threads()
	elapsed := time.Since(t0)
	out.Window = elapsed.Round(time.Millisecond)
	for i, b := range before {
		st, err := e.Stats(i)
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
	const hz = 100 // USER_HZ: /proc reports clock ticks of 1/100 s on Linux
	secs := elapsed.Seconds()
	for key, t1 := range threads1 {
		t, ok := threads0[key]
		if !ok || t1.ticks < t.ticks {
			continue
		}
		share := float64(t1.ticks-t.ticks) / hz / secs
		if cpu, ok := strings.CutPrefix(t1.comm, "ksoftirqd/"); ok && t1.kernel {
			if n, err := strconv.Atoi(cpu); err == nil {
				out.Ksoftirqd[n] = share
			}
			continue
		}
		if t1.kernel || share == 0 {
			continue
		}
		out.Threads = append(out.Threads, doctor.ThreadLoad{PID: t1.pid, TID: t1.tid, Comm: t1.comm, Share: share, CPU: t1.cpu})
	}
	sort.Slice(out.Threads, func(i, j int) bool { return out.Threads[i].Share > out.Threads[j].Share })
	if len(out.Threads) > 20 {
		out.Threads = out.Threads[:20]
	}
	return out, nil
}

// threads reads every thread's stat; threads that exit meanwhile are skipped.
func (s liveSampler) threads() map[int]threadStat {
	out := map[int]threadStat{}
	pids, err := os.ReadDir(s.root)
	if err != nil {
		return out
	}
	for _, p := range pids {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		tids, err := os.ReadDir(fmt.Sprintf("%s/%d/task", s.root, pid))
		if err != nil {
			continue
		}
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(fmt.Sprintf("%s/%d/task/%d/stat", s.root, pid, tid))
			if err != nil {
				continue
			}
			if st, ok := parseThreadStat(b); ok {
				st.pid, st.tid = pid, tid
				out[tid] = st
			}
		}
	}
	return out
}

// parseThreadStat reads proc(5)'s stat line: the comm is in parentheses and
// may hold spaces, so fields are counted after the last ')'.
func parseThreadStat(b []byte) (threadStat, bool) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return threadStat{}, false
	}
	st := threadStat{comm: string(b[open+1 : close])}
	f := strings.Fields(string(b[close+1:]))
	// f[0] is field 3 (state): flags is field 9, utime 14, stime 15,
	// processor 39.
	if len(f) < 37 {
		return threadStat{}, false
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	cpu, err := strconv.Atoi(f[36])
	if err != nil {
		cpu = -1
	}
	st.kernel = flags&0x00200000 != 0
	st.ticks, st.cpu = ut+stime, cpu
	return st, true
}
