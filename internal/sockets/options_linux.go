package sockets

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// optError is why a socket's options could not be read. Reason is the short
// word after "unknown (" that scripts can match: permission, process exited,
// socket closed, unsupported.
type optError struct {
	Reason string
	Detail string
}

func (e *optError) Error() string {
	if e.Detail == "" {
		return "unknown (" + e.Reason + ")"
	}
	return "unknown (" + e.Reason + ": " + e.Detail + ")"
}

// pidfds opens one pidfd per process and remembers failures, so a process
// that cannot be opened costs one syscall, not one per socket.
type pidfds struct {
	open map[int]pidfdEntry
}

type pidfdEntry struct {
	fd  int
	err *optError
}

func newPidfds() *pidfds { return &pidfds{open: map[int]pidfdEntry{}} }

func (p *pidfds) get(pid int) (int, *optError) {
	if e, ok := p.open[pid]; ok {
		return e.fd, e.err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	e := pidfdEntry{fd: fd}
	if err != nil {
		e.fd = -1
		switch {
		case errors.Is(err, unix.ESRCH):
			e.err = &optError{Reason: "process exited", Detail: fmt.Sprintf("pid %d exited during the audit", pid)}
		case errors.Is(err, unix.ENOSYS):
			e.err = &optError{Reason: "unsupported", Detail: "this kernel has no pidfd_open (Linux 5.3) / pidfd_getfd (5.6)"}
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
			e.err = &optError{Reason: "permission", Detail: fmt.Sprintf("pidfd_open pid %d: %v%s", pid, err, permissionHint())}
		default:
			e.err = &optError{Reason: "error", Detail: fmt.Sprintf("pidfd_open pid %d: %v", pid, err)}
		}
	}
	p.open[pid] = e
	return e.fd, e.err
}

func (p *pidfds) close() {
	for _, e := range p.open {
		if e.fd >= 0 {
			unix.Close(e.fd)
		}
	}
}

// readOptions duplicates fd of the process behind pidfd, checks that it is
// still the socket with inode ino (the descriptor may have been closed and
// its number reused since /proc was read), reads the options and closes the
// duplicate.
func readOptions(pidfd, pid, fd int, ino uint64, inet6 bool) (*Options, *optError) {
	nfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		switch {
		case errors.Is(err, unix.EBADF):
			return nil, &optError{Reason: "socket closed", Detail: fmt.Sprintf("pid %d closed fd %d before it could be read", pid, fd)}
		case errors.Is(err, unix.ESRCH):
			return nil, &optError{Reason: "process exited", Detail: fmt.Sprintf("pid %d exited during the audit", pid)}
		case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
			return nil, &optError{Reason: "permission", Detail: fmt.Sprintf("pidfd_getfd pid %d fd %d: %v%s", pid, fd, err, permissionHint())}
		case errors.Is(err, unix.ENOSYS):
			return nil, &optError{Reason: "unsupported", Detail: "this kernel has no pidfd_getfd (Linux 5.6)"}
		}
		return nil, &optError{Reason: "error", Detail: fmt.Sprintf("pidfd_getfd pid %d fd %d: %v", pid, fd, err)}
	}
	defer unix.Close(nfd)
	var st unix.Stat_t
	if err := unix.Fstat(nfd, &st); err != nil {
		return nil, &optError{Reason: "error", Detail: fmt.Sprintf("fstat duplicate of pid %d fd %d: %v", pid, fd, err)}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Ino != ino {
		return nil, &optError{Reason: "socket closed", Detail: fmt.Sprintf("pid %d fd %d now holds another file", pid, fd)}
	}
	return getOptions(nfd, inet6), nil
}

// getOptions reads the options from a socket this process holds.
func getOptions(fd int, inet6 bool) *Options {
	o := &Options{}
	geti := func(level, opt int, name string) int {
		v, err := unix.GetsockoptInt(fd, level, opt)
		if err != nil {
			o.Unsupported = append(o.Unsupported, name)
			return 0
		}
		return v
	}
	o.NoDelay = geti(unix.IPPROTO_TCP, unix.TCP_NODELAY, "nodelay") != 0
	o.Cork = geti(unix.IPPROTO_TCP, unix.TCP_CORK, "cork") != 0
	o.QuickAck = geti(unix.IPPROTO_TCP, unix.TCP_QUICKACK, "quickack") != 0
	o.SndBuf = geti(unix.SOL_SOCKET, unix.SO_SNDBUF, "sndbuf")
	o.RcvBuf = geti(unix.SOL_SOCKET, unix.SO_RCVBUF, "rcvbuf")
	o.NotSentLowat = uint32(geti(unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, "notsent_lowat"))
	o.ReusePort = geti(unix.SOL_SOCKET, unix.SO_REUSEPORT, "reuseport") != 0
	o.FastOpenQLen = geti(unix.IPPROTO_TCP, unix.TCP_FASTOPEN, "fastopen_qlen")
	if inet6 {
		o.TOS = geti(unix.IPPROTO_IPV6, unix.IPV6_TCLASS, "tos")
	} else {
		o.TOS = geti(unix.IPPROTO_IP, unix.IP_TOS, "tos")
	}
	o.Priority = geti(unix.SOL_SOCKET, unix.SO_PRIORITY, "priority")
	var name [16]byte // TCP_CA_NAME_MAX
	if err := getsockoptBytes(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, name[:]); err != nil {
		o.Unsupported = append(o.Unsupported, "congestion")
	} else {
		o.Congestion = cString(name[:])
	}
	return o
}

// getsockoptBytes reads a string option into b without allocating.
func getsockoptBytes(fd, level, opt int, b []byte) error {
	l := uint32(len(b))
	_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), uintptr(level), uintptr(opt),
		uintptr(unsafe.Pointer(&b[0])), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return nil
}

var permissionHint = sync.OnceValue(permissionHintOnce)

// permissionHintOnce says what would grant the permission, including Yama's
// ptrace_scope, which blocks even root at 3.
func permissionHintOnce() string {
	scope := ""
	if b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		scope = strings.TrimSpace(string(b))
	}
	switch {
	case scope == "3":
		return "; Yama ptrace_scope=3 forbids it even to root"
	case os.Geteuid() != 0 && scope != "" && scope != "0":
		return "; needs root or CAP_SYS_PTRACE (Yama ptrace_scope=" + scope + ")"
	case os.Geteuid() != 0:
		return "; needs root or CAP_SYS_PTRACE"
	}
	return ""
}

// pidfdStatus tries pidfd_open and pidfd_getfd on this process, the only
// reliable test (seccomp filters and backports make kernel versions a guess).
func pidfdStatus() string {
	pfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return "unsupported (pidfd_open: " + err.Error() + ")"
	}
	defer unix.Close(pfd)
	fd, err := unix.PidfdGetfd(pfd, pfd, 0)
	if err != nil {
		return "unsupported (pidfd_getfd: " + err.Error() + ")"
	}
	unix.Close(fd)
	if os.Geteuid() != 0 {
		return "own processes only (not root)"
	}
	return "ok"
}
