package sockets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Audit lists the TCP sockets of the calling thread's network namespace that
// pass cfg.Filter, with their owners, options and tcp_info. It fails only
// when the kernel's socket dump itself fails or ctx ends; everything that
// goes wrong for one process or socket is said in that row (OptionsError)
// or in Report.Warnings.
func Audit(ctx context.Context, cfg Config) (*Report, error) {
	start := time.Now()
	proc := cfg.Proc
	if proc == "" {
		proc = "/proc"
	}
	f := cfg.Filter
	if f.PID != 0 {
		if _, err := os.Stat(proc + "/" + strconv.Itoa(f.PID)); err != nil {
			return nil, fmt.Errorf("pid %d: %w", f.PID, ErrNoProcess)
		}
	}
	rep := &Report{Sockets: []Socket{}}
	// The dump must run on the caller's goroutine: the netlink socket belongs
	// to the network namespace of the thread that opens it.
	var rows []Socket
	for _, fam := range []uint8{afInet, afInet6} {
		var n int
		var err error
		rows, n, err = dumpTCP(fam, f.matchAddr, rows)
		rep.Stats.Dumped += n
		switch {
		case errors.Is(err, errDumpInterrupted):
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%s sockets: %v (%d retries); the listing may miss sockets opened or closed meanwhile", familyName(fam), err, dumpRetries))
		case err != nil && fam == afInet6:
			rep.Warnings = append(rep.Warnings, "IPv6 sockets not listed: "+err.Error())
		case err != nil:
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}

	want := make(map[uint64]struct{}, len(rows))
	for i := range rows {
		if rows[i].Inode != 0 {
			want[rows[i].Inode] = struct{}{}
		}
	}
	ps := &procScan{}
	if len(want) > 0 {
		ps = scanProc(proc, want, &f)
	}
	rep.Stats.Processes = ps.processes
	rep.Stats.Descriptor = ps.descriptor
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	euid := uint32(os.Geteuid())
	hiddenUIDs := map[uint32][]int{}
	for pid, uid := range ps.hidden {
		hiddenUIDs[uid] = append(hiddenUIDs[uid], pid)
	}
	out := rows[:0]
	for i := range rows {
		s := rows[i]
		if !attach(&s, ps, &f) {
			if f.byProcess() {
				// A process matching the filter whose descriptors are hidden may
				// own this socket: list it, unattributed, rather than drop it.
				pids := hiddenUIDs[s.UID]
				if len(pids) == 0 || s.Inode == 0 {
					continue
				}
			}
			s.OptionsError = ownerless(&s, euid).Error()
		}
		out = append(out, s)
	}
	rows = out
	rep.Warnings = append(rep.Warnings, hiddenWarnings(ps, euid, &f)...)

	if !cfg.NoOptions {
		rep.Stats.Pidfd = pidfdStatus()
		rep.Stats.Options = readAllOptions(ctx, rows, cfg.Workers)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	} else {
		for i := range rows {
			if rows[i].PID != 0 && rows[i].OptionsError == "" {
				rows[i].OptionsError = "unknown (not read: options disabled)"
			}
		}
		rep.Stats.Pidfd = "not used"
	}
	SortSockets(rows)
	rep.Sockets = rows
	rep.Stats.Listed = len(rows)
	rep.Stats.ElapsedUs = time.Since(start).Microseconds()
	return rep, nil
}

// ErrNoProcess is returned by Audit when Filter.PID names no process.
var ErrNoProcess = errors.New("no such process")

func familyName(f uint8) string {
	if f == afInet6 {
		return "IPv6"
	}
	return "IPv4"
}

// attach sets the socket's owner from the /proc scan, honouring a process
// filter (the first matching holder becomes the owner). It reports whether
// the socket has an owner that passes the filter.
func attach(s *Socket, ps *procScan, f *Filter) bool {
	refs := ps.owners[s.Inode]
	if len(refs) == 0 || s.Inode == 0 {
		return false
	}
	slices.SortFunc(refs, func(a, b fdRef) int {
		if a.pid != b.pid {
			return a.pid - b.pid
		}
		return a.fd - b.fd
	})
	primary := -1
	for i, r := range refs {
		if f.wantsOwner(r.pid, ps.comms[r.pid]) {
			primary = i
			break
		}
	}
	if primary < 0 {
		return false
	}
	r := refs[primary]
	s.PID, s.FD, s.Comm = r.pid, r.fd, ps.comms[r.pid]
	if len(refs) > 1 {
		s.Owners = make([]Owner, len(refs))
		for i, r := range refs {
			s.Owners[i] = Owner{PID: r.pid, Comm: ps.comms[r.pid], FD: r.fd}
		}
	}
	return true
}

// ownerless says why a socket has no owner.
func ownerless(s *Socket, euid uint32) *optError {
	switch {
	case s.stateNum == stateTimeWait:
		return &optError{Reason: "time-wait", Detail: "closed by the application; the kernel keeps it to absorb late segments"}
	case s.stateNum == stateNewSynRecv || s.State == "syn-recv":
		return &optError{Reason: "handshake in progress", Detail: "no process holds it yet"}
	case s.Inode == 0:
		return &optError{Reason: "orphaned", Detail: "closed by the application, the kernel is finishing it"}
	case euid != 0 && s.UID != euid:
		return &optError{Reason: "permission", Detail: fmt.Sprintf("owned by uid %d; only root may see which process holds it", s.UID)}
	}
	return &optError{Reason: "no owner", Detail: "waiting in an accept queue, or held by a process that exited or lives in another PID namespace"}
}

// hiddenWarnings explains processes whose descriptors could not be read.
func hiddenWarnings(ps *procScan, euid uint32, f *Filter) []string {
	if len(ps.hidden) == 0 {
		return nil
	}
	if f.byProcess() {
		var out []string
		pids := make([]int, 0, len(ps.hidden))
		for pid := range ps.hidden {
			pids = append(pids, pid)
		}
		slices.Sort(pids)
		for _, pid := range pids {
			out = append(out, fmt.Sprintf("pid %d (uid %d): cannot read /proc/%d/fd as uid %d (permission): its sockets are listed without owner or options; run as root", pid, ps.hidden[pid], pid, euid))
		}
		return out
	}
	return []string{fmt.Sprintf("%d processes of other users hide their descriptors from uid %d: their sockets are listed without owner or options; run as root", len(ps.hidden), euid)}
}

// readAllOptions reads the options of every owned socket, in parallel
// workers that each keep their own pidfds. It returns how many were read.
func readAllOptions(ctx context.Context, rows []Socket, workers int) int {
	var idx []int
	for i := range rows {
		if rows[i].PID != 0 {
			idx = append(idx, i)
		}
	}
	if workers <= 0 {
		workers = min(runtime.NumCPU(), 4)
	}
	const chunk = 128
	workers = max(1, min(workers, (len(idx)+chunk-1)/chunk))
	var next, read atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pf := newPidfds()
			defer pf.close()
			for ctx.Err() == nil {
				lo := int(next.Add(chunk)) - chunk
				if lo >= len(idx) {
					return
				}
				for _, i := range idx[lo:min(lo+chunk, len(idx))] {
					if readOne(&rows[i], pf) {
						read.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	return int(read.Load())
}

// readOne reads one socket's options through its owner, falling back to the
// other holders when the owner exited or closed it meanwhile.
func readOne(s *Socket, pf *pidfds) bool {
	refs := []Owner{{PID: s.PID, FD: s.FD}}
	for _, o := range s.Owners {
		if o.PID != s.PID || o.FD != s.FD {
			refs = append(refs, o)
		}
	}
	var last *optError
	for _, r := range refs {
		pfd, oe := pf.get(r.PID)
		if oe == nil {
			var o *Options
			o, oe = readOptions(pfd, r.PID, r.FD, s.Inode, s.Family == "inet6")
			if oe == nil {
				s.Options = o
				s.OptionsError = ""
				return true
			}
		}
		last = oe
		if oe.Reason != "process exited" && oe.Reason != "socket closed" {
			break // the other holders would fail the same way
		}
	}
	s.OptionsError = last.Error()
	return false
}
