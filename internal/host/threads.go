package host

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ThreadStat is what /proc/PID/task/TID/stat says about one thread.
type ThreadStat struct {
	PID, TID int
	Comm     string
	// Ticks is utime + stime, in USER_HZ clock ticks (1/100 s on Linux).
	Ticks uint64
	// CPU is the processor it last ran on (-1 when unreadable).
	CPU int
	// Kernel marks a kernel thread (PF_KTHREAD).
	Kernel bool
}

// UserHZ is the clock tick of /proc's CPU times on Linux.
const UserHZ = 100

// ReadThreads reads the stat of every thread below the proc root (usually
// "/proc"), keyed by thread id. Threads and processes that exit meanwhile are
// skipped; an unreadable proc root is an error.
func ReadThreads(proc string) (map[int]ThreadStat, error) {
	pids, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("threads: %w", err)
	}
	out := map[int]ThreadStat{}
	for _, p := range pids {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		task := filepath.Join(proc, p.Name(), "task")
		tids, err := os.ReadDir(task)
		if err != nil {
			continue // exited
		}
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile(filepath.Join(task, t.Name(), "stat"))
			if err != nil {
				continue
			}
			if st, ok := ParseThreadStat(b); ok {
				st.PID, st.TID = pid, tid
				out[tid] = st
			}
		}
	}
	return out, nil
}

// ParseThreadStat reads proc(5)'s stat line: the comm is in parentheses and
// may hold spaces and parentheses, so fields are counted after the last ')'.
func ParseThreadStat(b []byte) (ThreadStat, bool) {
	open, close := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || close < open {
		return ThreadStat{}, false
	}
	st := ThreadStat{Comm: string(b[open+1 : close])}
	f := strings.Fields(string(b[close+1:]))
	// f[0] is field 3 (state): flags is field 9, utime 14, stime 15,
	// processor 39.
	if len(f) < 37 {
		return ThreadStat{}, false
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	stime, _ := strconv.ParseUint(f[12], 10, 64)
	cpu, err := strconv.Atoi(f[36])
	if err != nil {
		cpu = -1
	}
	st.Kernel = flags&0x00200000 != 0
	st.Ticks, st.CPU = ut+stime, cpu
	return st, true
}
