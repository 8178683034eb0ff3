// Package resident lets a long-running lowlat process give back the pages
// of its own executable that it does not use.
//
// lowlat is one binary for every command, so most of its 16 MB of code and
// read-only data belongs to commands a daemon such as 'lowlat monitor'
// never runs. The kernel maps file pages around each fault (fault-around,
// readahead, large folios), so without help nearly all of it stays
// resident: on a 6.18 kernel with 8 MB readahead, 13 MB of the monitor's
// RSS was its executable. Release marks the executable's read-only
// mappings random-access (no readahead on later faults) and asks the
// kernel to page them out; what the process then runs faults back in a
// page at a time, and RSS settles at the working set.
package resident

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one read-only mapping of the executable.
type Mapping struct {
	Start, End uintptr
	Perms      string
}

// Release pages out the executable's read-only mappings after marking
// them random-access. It returns how many bytes of mappings it advised.
// Kernels before 5.4 have no MADV_PAGEOUT; there it only sets
// MADV_RANDOM and reports the error, which callers may ignore: nothing
// is lost, memory just stays as it was.
func Release() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("resident: read /proc/self/exe: %w", err)
	}
	ms, err := mappings("/proc/self/maps", exe)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, m := range ms {
		if err := madvise(m, unix.MADV_RANDOM); err != nil {
			return n, err
		}
		if err := madvise(m, unix.MADV_PAGEOUT); err != nil {
			return n, err
		}
		n += int64(m.End - m.Start)
	}
	return n, nil
}

func madvise(m Mapping, advice int) error {
	// The raw call, not unix.Madvise: these addresses are not Go memory,
	// and a []byte over them would have to be made with unsafe.
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, m.Start, m.End-m.Start, uintptr(advice)); e != 0 {
		return fmt.Errorf("resident: madvise %#x-%#x (%s) advice %d: %w", m.Start, m.End, m.Perms, advice, e)
	}
	return nil
}

// mappings returns the read-only (not writable) mappings of path in a
// /proc/PID/maps file.
func mappings(maps, path string) ([]Mapping, error) {
	f, err := os.Open(maps)
	if err != nil {
		return nil, fmt.Errorf("resident: %w", err)
	}
	defer f.Close()
	var out []Mapping
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// start-end perms offset dev inode pathname
		fs := strings.Fields(sc.Text())
		if len(fs) < 6 || strings.Join(fs[5:], " ") != path || strings.Contains(fs[1], "w") {
			continue
		}
		lo, hi, ok := strings.Cut(fs[0], "-")
		if !ok {
			return nil, fmt.Errorf("resident: %s: bad range %q", maps, fs[0])
		}
		s, err1 := strconv.ParseUint(lo, 16, 64)
		e, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			return nil, fmt.Errorf("resident: %s: bad range %q", maps, fs[0])
		}
		out = append(out, Mapping{Start: uintptr(s), End: uintptr(e), Perms: fs[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("resident: read %s: %w", maps, err)
	}
	return out, nil
}
