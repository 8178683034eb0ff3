package sockops

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/sockets"
)

// Conn is one established connection a selector matches, in the caller's
// network namespace, and the process holding it.
type Conn struct {
	Inode  uint64 `json:"inode"`
	PID    int    `json:"pid"`
	FD     int    `json:"fd"`
	Comm   string `json:"comm"`
	Local  string `json:"local"`
	Remote string `json:"remote"`
}

func (c Conn) String() string {
	return fmt.Sprintf("%s→%s (%s[%d] fd %d)", c.Local, c.Remote, c.Comm, c.PID, c.FD)
}

// Conns lists the established connections sel matches: for a port, those
// whose local port it is; for a cgroup or service, those its processes
// opened (owned by one of them, on a local port none of them listens on).
// A connection no visible process holds (an accept queue's, or one whose
// owner this user may not inspect) has PID 0 and cannot be set.
func Conns(ctx context.Context, sel Selector) ([]Conn, error) {
	if sel.Outbound() {
		return outboundConns(ctx, sel)
	}
	rep, err := sockets.Audit(ctx, sockets.Config{
		Filter:    sockets.Filter{Port: sel.Port, States: []string{"established"}},
		NoOptions: true,
	})
	if err != nil {
		return nil, fmt.Errorf("sock_ops %s: list connections: %w", sel, err)
	}
	var out []Conn
	for _, s := range rep.Sockets {
		if LocalPort(s.Local) != sel.Port {
			continue // matched on the remote port
		}
		out = append(out, conn(s))
	}
	return out, nil
}

func conn(s sockets.Socket) Conn {
	return Conn{Inode: s.Inode, PID: s.PID, FD: s.FD, Comm: s.Comm, Local: s.Local, Remote: s.Remote}
}

func outboundConns(ctx context.Context, sel Selector) ([]Conn, error) {
	dir, err := CgroupOf(sel)
	if err != nil {
		return nil, fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	pids, err := cgroupPIDs(dir)
	if err != nil {
		return nil, fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	rep, err := sockets.Audit(ctx, sockets.Config{
		Filter:    sockets.Filter{States: []string{"established", "listen"}},
		NoOptions: true,
	})
	if err != nil {
		return nil, fmt.Errorf("sock_ops %s: list connections: %w", sel, err)
	}
	listens := map[uint16]bool{}
	for _, s := range rep.Sockets {
		if s.State == "listen" && pids[s.PID] {
			listens[LocalPort(s.Local)] = true
		}
	}
	var out []Conn
	for _, s := range rep.Sockets {
		if s.State == "established" && pids[s.PID] && !listens[LocalPort(s.Local)] {
			out = append(out, conn(s))
		}
	}
	return out, nil
}

// LocalPort is the port of an "ADDR:PORT" or "[ADDR]:PORT" as the socket
// audit writes them.
func LocalPort(addr string) uint16 {
	i := strings.LastIndexByte(addr, ':')
	n, _ := strconv.ParseUint(addr[i+1:], 10, 16)
	return uint16(n)
}

// ErrGone marks a connection that closed (or whose process exited) since it
// was listed: nothing to set, nothing to restore.
var ErrGone = errors.New("connection closed")

// ReadConn reads o on c.
func ReadConn(c Conn, o Option) (string, error) {
	var v string
	err := withConn(c, func(fd int) (err error) {
		v, err = getOpt(fd, o)
		return err
	})
	return v, err
}

// SetConn sets o to v on c and returns the value it had.
func SetConn(c Conn, o Option, v string) (prev string, err error) {
	if !o.Live() {
		return "", fmt.Errorf("%s on %s: only new connections can have it: %w", o, c, ErrUnsupported)
	}
	if err := o.CheckValue(v); err != nil {
		return "", err
	}
	err = withConn(c, func(fd int) error {
		var err error
		if prev, err = getOpt(fd, o); err != nil {
			return err
		}
		return setOpt(fd, o, o.Canon(v))
	})
	if err != nil {
		return "", fmt.Errorf("set %s=%s on %s: %w", o, v, c, err)
	}
	return prev, nil
}

// withConn duplicates c's descriptor from its owner (pidfd_getfd, Linux
// 5.6), checks that it is still the same socket, and calls fn with the
// duplicate, which shares the socket: an option set on it is set for the
// application.
func withConn(c Conn, fn func(fd int) error) error {
	if c.PID == 0 {
		return fmt.Errorf("%s: no visible process holds it", c)
	}
	pidfd, err := unix.PidfdOpen(c.PID, 0)
	if errors.Is(err, unix.ESRCH) {
		return ErrGone
	}
	if err != nil {
		return fmt.Errorf("pidfd_open %d: %w", c.PID, err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, c.FD, 0)
	switch {
	case errors.Is(err, unix.EBADF), errors.Is(err, unix.ESRCH):
		return ErrGone
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("this kernel has no pidfd_getfd (Linux 5.6): %w", ErrUnsupported)
	case err != nil:
		return fmt.Errorf("pidfd_getfd pid %d fd %d: %w", c.PID, c.FD, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("fstat duplicate of pid %d fd %d: %w", c.PID, c.FD, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK || st.Ino != c.Inode {
		return ErrGone // the number now holds another file
	}
	return fn(fd)
}

func getOpt(fd int, o Option) (string, error) {
	if o == Congestion {
		v, err := unix.GetsockoptString(fd, solTCP, tcpCongestion)
		return strings.TrimRight(v, "\x00"), err
	}
	n, err := unix.GetsockoptInt(fd, solTCP, int(options[o].optname))
	if o == NoDelay && n != 0 {
		n = 1
	}
	return strconv.Itoa(n), err
}

func setOpt(fd int, o Option, v string) error {
	if o == Congestion {
		return unix.SetsockoptString(fd, solTCP, tcpCongestion, v)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return err
	}
	return unix.SetsockoptInt(fd, solTCP, int(options[o].optname), n)
}
