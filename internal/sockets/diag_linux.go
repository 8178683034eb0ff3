package sockets

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// dumpBufSize is the receive buffer for one read: the kernel fills at most
// about 32 KB per dump round, a larger buffer only costs memory.
const dumpBufSize = 64 << 10

// dumpRetries bounds how often an interrupted dump (the socket table changed
// under it) is restarted before its last result is used with a warning.
const dumpRetries = 3

// dumpTCP lists every TCP socket of family in the calling thread's network
// namespace. keep decides, on the decoded address part, whether a socket is
// kept (filters run before sockets accumulate). A dump the kernel marks
// interrupted is retried; if it keeps changing, the last listing is returned
// with errDumpInterrupted.
func dumpTCP(family uint8, keep func(*Socket) bool, out []Socket) ([]Socket, int, error) {
	var lastErr error
	base := len(out)
	for try := 0; try < dumpRetries; try++ {
		out = out[:base]
		var n int
		var intr bool
		var err error
		out, n, intr, err = dumpOnce(family, keep, out)
		if err != nil {
			return out[:base], 0, err
		}
		if !intr {
			return out, n, nil
		}
		lastErr = errDumpInterrupted
		if try == dumpRetries-1 {
			return out, n, lastErr
		}
	}
	return out, 0, lastErr
}

func dumpOnce(family uint8, keep func(*Socket) bool, out []Socket) ([]Socket, int, bool, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return out, 0, false, fmt.Errorf("inet_diag: open netlink socket: %w", os.NewSyscallError("socket", err))
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return out, 0, false, fmt.Errorf("inet_diag: bind: %w", err)
	}
	const seq = 1
	if err := unix.Sendto(fd, diagRequest(family, allStates, seq), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return out, 0, false, fmt.Errorf("inet_diag: send dump request (family %d): %w", family, err)
	}
	buf := make([]byte, dumpBufSize)
	var n int
	var intr bool
	each := func(p []byte) error {
		out = append(out, Socket{})
		s := &out[len(out)-1]
		if err := parseDiagMsg(p, s); err != nil {
			out = out[:len(out)-1]
			return err
		}
		n++
		if !keep(s) {
			out = out[:len(out)-1]
		}
		return nil
	}
	for {
		m, err := unix.Read(fd, buf)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return out, n, intr, fmt.Errorf("inet_diag: read dump (family %d): %w", family, err)
		}
		if m == 0 {
			return out, n, intr, errors.New("inet_diag: netlink socket closed during dump")
		}
		done, in, err := walkNetlink(buf[:m], seq, each)
		intr = intr || in
		if errors.Is(err, unix.ENOENT) {
			return out, n, intr, fmt.Errorf("inet_diag: dump (family %d): the kernel has no TCP socket diagnostics (modprobe tcp_diag; Debian builds inet_diag and tcp_diag as modules): %w", family, err)
		}
		if err != nil {
			return out, n, intr, fmt.Errorf("inet_diag: dump (family %d): %w", family, err)
		}
		if done {
			return out, n, intr, nil
		}
	}
}
