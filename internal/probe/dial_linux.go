package probe

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// dialKernelDefaults connects to target with a socket whose options nobody
// touches after connect: Go's net package turns TCP_NODELAY on for every TCP
// connection it makes, and clearing it again (SetNoDelay(false)) would be
// one more setsockopt, which also overrides an option that lowlat's sock_ops
// program set when the connection was established. The connection is what a
// C program that never calls setsockopt has: Nagle on, unless the kernel was
// told otherwise. It is an *os.File on the non-blocking socket, with the
// addresses net.Conn wants; deadlines and the raw descriptor work as for a
// net.TCPConn.
func dialKernelDefaults(ctx context.Context, target string, timeout time.Duration) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	host, service, err := net.SplitHostPort(target)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: fmt.Errorf("resolve %s: %w", target, err)}
	}
	port, err := net.DefaultResolver.LookupPort(ctx, "tcp", service)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: err}
	}
	raddr := &net.TCPAddr{IP: addrs[0].Unmap().AsSlice(), Port: port}
	family, sa := unix.AF_INET, unix.Sockaddr(nil)
	if a := addrs[0].Unmap(); a.Is4() {
		sa = &unix.SockaddrInet4{Port: port, Addr: a.As4()}
	} else {
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: port, Addr: a.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raddr, Err: os.NewSyscallError("socket", err)}
	}
	if err := unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raddr, Err: os.NewSyscallError("connect", err)}
	}
	// A non-blocking descriptor goes to the runtime's poller, so the wait
	// for the handshake below and later reads and writes honour deadlines.
	f := os.NewFile(uintptr(fd), "tcp "+target)
	dl, _ := ctx.Deadline()
	_ = f.SetWriteDeadline(dl)
	stop := context.AfterFunc(ctx, func() { f.SetWriteDeadline(time.Now()) })
	defer stop()
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	var soErr error
	werr := rc.Write(func(fd uintptr) bool {
		// Writable means the handshake ended; SO_ERROR says how.
		n, err := unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		switch {
		case err != nil:
			soErr = err
		case n != 0:
			soErr = unix.Errno(n)
		}
		return true
	})
	if werr == nil && soErr != nil {
		werr = os.NewSyscallError("connect", soErr)
	}
	if werr != nil {
		f.Close()
		return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: raddr, Err: werr}
	}
	_ = f.SetWriteDeadline(time.Time{})
	c := &fileConn{File: f, remote: raddr}
	if lsa, err := unix.Getsockname(fd); err == nil {
		c.local = sockaddrTCP(lsa)
	}
	return c, nil
}

// fileConn is a connected TCP socket as an *os.File, made a net.Conn.
type fileConn struct {
	*os.File
	local, remote net.Addr
}

func (c *fileConn) LocalAddr() net.Addr  { return c.local }
func (c *fileConn) RemoteAddr() net.Addr { return c.remote }

func sockaddrTCP(sa unix.Sockaddr) *net.TCPAddr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	case *unix.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	}
	return nil
}
