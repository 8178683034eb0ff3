package sockets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// fdRef is one descriptor holding a socket.
type fdRef struct {
	pid int
	fd  int
}

// procScan is what /proc says about socket owners.
type procScan struct {
	owners map[uint64][]fdRef
	comms  map[int]string
	// hidden are processes whose descriptors this user may not list, with
	// their uid (from /proc/PID/status, which anyone may read).
	hidden     map[int]uint32
	processes  int
	descriptor int
}

// scanProc finds the processes holding the sockets in want (socket inodes).
// Processes that exit while they are read are skipped: their sockets are
// reported without an owner. wantProc, when not nil, is asked first with the
// pid and (lazily read) comm, so a --pid or --comm audit reads only those.
func scanProc(proc string, want map[uint64]struct{}, f *Filter) *procScan {
	ps := &procScan{owners: map[uint64][]fdRef{}, comms: map[int]string{}, hidden: map[int]uint32{}}
	var pids []int
	if f.PID != 0 {
		pids = []int{f.PID}
	} else {
		d, err := os.Open(proc)
		if err != nil {
			return ps
		}
		names, _ := d.Readdirnames(-1)
		d.Close()
		pids = make([]int, 0, len(names))
		for _, n := range names {
			if pid, err := strconv.Atoi(n); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
	}
	linkBuf := make([]byte, 64)
	var names []string
	for _, pid := range pids {
		pidDir := filepath.Join(proc, strconv.Itoa(pid))
		comm := ""
		if f.Comm != "" {
			comm = readComm(pidDir)
			if comm != f.Comm {
				continue
			}
		}
		ps.processes++
		dfd, err := unix.Open(pidDir+"/fd", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
				if uid, ok := readUID(pidDir); ok {
					ps.hidden[pid] = uid
				}
			}
			continue // gone (ENOENT/ESRCH) or hidden
		}
		dir := os.NewFile(uintptr(dfd), pidDir+"/fd")
		names, err = readDirNames(dir, names[:0])
		found := false
		if err == nil {
			for _, name := range names {
				n, err := unix.Readlinkat(dfd, name, linkBuf)
				if err != nil || n >= len(linkBuf) {
					continue // closed since the listing, or not a socket
				}
				ino, ok := socketInode(linkBuf[:n])
				if !ok {
					continue
				}
				ps.descriptor++
				if _, ok := want[ino]; !ok {
					continue
				}
				fd, err := strconv.Atoi(name)
				if err != nil {
					continue
				}
				ps.owners[ino] = append(ps.owners[ino], fdRef{pid: pid, fd: fd})
				found = true
			}
		}
		dir.Close()
		if found {
			if comm == "" {
				comm = readComm(pidDir)
			}
			ps.comms[pid] = comm
		}
	}
	return ps
}

func readDirNames(d *os.File, buf []string) ([]string, error) {
	names, err := d.Readdirnames(-1)
	return append(buf, names...), err
}

// socketInode parses a /proc/PID/fd link target "socket:[12345]".
func socketInode(b []byte) (uint64, bool) {
	const pre = "socket:["
	if len(b) < len(pre)+2 || string(b[:len(pre)]) != pre || b[len(b)-1] != ']' {
		return 0, false
	}
	var v uint64
	for _, c := range b[len(pre) : len(b)-1] {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

func readComm(pidDir string) string {
	b, err := os.ReadFile(pidDir + "/comm")
	if err != nil {
		return ""
	}
	return string(bytes.TrimRight(b, "\n"))
}

// readUID returns the real uid of the process at pidDir.
func readUID(pidDir string) (uint32, bool) {
	b, err := os.ReadFile(pidDir + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if rest, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			f := bytes.Fields(rest)
			if len(f) == 0 {
				return 0, false
			}
			v, err := strconv.ParseUint(string(f[0]), 10, 32)
			return uint32(v), err == nil
		}
	}
	return 0, false
}
