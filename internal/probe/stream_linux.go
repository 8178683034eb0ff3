//go:build linux

package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tcpStream carries a TCP probe's requests and replies on one connection and
// reports when each reply's last byte reached the socket, by the kernel's clock
// (SO_TIMESTAMPNS works on TCP as well: recvmsg returns the receive time of the
// last segment it consumed). The client's own wake-up and scheduling delay after
// the reply arrived therefore stays out of the service time, as it does for the
// UDP probe.
//
// Reads and writes on the (non-blocking) socket are raw system calls that do
// not enter the runtime's syscall state: entering it wakes the runtime's
// sysmon thread whenever the process was idle, one more context switch (and a
// CPU taken from the peer on a small machine) per request. Only poll(2), which
// blocks, goes through the runtime.
//
// A stream runs in one of two modes:
//
//   - raw: syscalls straight from the caller's locked OS thread, the socket
//     polled with poll(2). No netpoller, no hand-off between threads: a locked
//     goroutine that parks on the netpoller costs over three context switches per
//     request (its thread sleeps, another thread polls, wakes it and sleeps).
//   - netpoller: reads through syscall.RawConn.Read, so thousands of
//     connections share a few threads; deadlines are the conn's.
//
// Only one goroutine may use a stream at a time.
type tcpStream struct {
	c        net.Conn
	rc       syscall.RawConn
	raw      bool
	kernelTS bool
	ctx      context.Context

	msg unix.Msghdr
	iov unix.Iovec
	oob []byte
	pfd [1]unix.PollFd

	// State of the read or write in progress, for readFn and writeFn (made
	// once: a closure per call would allocate).
	buf     []byte
	got     int
	rx      int64
	rerr    error
	wbuf    []byte
	werr    error
	readFn  func(fd uintptr) bool
	writeFn func(fd uintptr) bool
}

// pollSlice bounds one poll(2) in raw mode, so cancellation is noticed.
const pollSlice = 100 * time.Millisecond

// newTCPStream wraps c. With timestamps, replies carry the kernel's receive
// time; raw selects raw mode (the caller must hold a locked thread).
func newTCPStream(ctx context.Context, c net.Conn, raw, timestamps bool) (*tcpStream, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("tcp stream: %T has no file descriptor", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("tcp stream: %w", err)
	}
	s := &tcpStream{c: c, rc: rc, raw: raw, ctx: ctx, oob: make([]byte, oobSize)}
	if timestamps {
		if err := rc.Control(func(fd uintptr) {
			s.kernelTS = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
		}); err != nil {
			return nil, fmt.Errorf("tcp stream: %w", err)
		}
	}
	s.readFn = func(fd uintptr) bool {
		for s.got < len(s.buf) {
			n, ts, err := s.recv(int(fd), s.buf[s.got:])
			switch {
			case err == unix.EAGAIN:
				return false // wait for readability
			case err == unix.EINTR:
				continue
			case err != nil:
				s.rerr = err
				return true
			case n == 0:
				s.rerr = io.EOF
				return true
			}
			s.got += n
			if ts != 0 {
				s.rx = ts
			}
		}
		return true
	}
	s.writeFn = func(fd uintptr) bool {
		for len(s.wbuf) > 0 {
			r, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&s.wbuf[0])), uintptr(len(s.wbuf)))
			switch {
			case e == unix.EAGAIN:
				return false // wait for room
			case e == unix.EINTR:
				continue
			case e != 0:
				s.werr = e
				return true
			}
			s.wbuf = s.wbuf[r:]
		}
		return true
	}
	return s, nil
}

// recv is one non-blocking recvmsg with room for the timestamp.
func (s *tcpStream) recv(fd int, b []byte) (int, int64, error) {
	s.iov.Base = &b[0]
	s.iov.SetLen(len(b))
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Control = &s.oob[0]
	s.msg.SetControllen(len(s.oob))
	r, _, e := unix.RawSyscall(unix.SYS_RECVMSG, uintptr(fd), uintptr(unsafe.Pointer(&s.msg)), unix.MSG_DONTWAIT)
	if e != 0 {
		return 0, 0, e
	}
	var ts int64
	if s.msg.Controllen > 0 {
		ts, _ = parseRxTimestamp(s.oob[:s.msg.Controllen])
	}
	return int(r), ts, nil
}

// wait polls fd for events until deadline (raw mode), in slices so that a
// cancelled context is noticed.
func (s *tcpStream) wait(fd int, events int16, deadline time.Time) error {
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		if err := s.ctx.Err(); err != nil {
			return err
		}
		ms := int((min(left, pollSlice) + time.Millisecond - 1) / time.Millisecond)
		s.pfd[0] = unix.PollFd{Fd: int32(fd), Events: events}
		n, err := unix.Poll(s.pfd[:], ms)
		if err != nil && err != unix.EINTR {
			return fmt.Errorf("poll: %w", err)
		}
		if n > 0 {
			return nil
		}
	}
}

// write sends all of b. In raw mode deadline bounds it; in netpoller mode the
// conn's own write deadline does.
func (s *tcpStream) write(b []byte, deadline time.Time) error {
	if len(b) == 0 {
		return nil
	}
	s.wbuf, s.werr = b, nil
	if !s.raw {
		if err := s.rc.Write(s.writeFn); err != nil {
			return err
		}
		return s.werr
	}
	err := s.rc.Control(func(fd uintptr) {
		for !s.writeFn(fd) {
			if err := s.wait(int(fd), unix.POLLOUT, deadline); err != nil {
				s.werr = err
				return
			}
		}
	})
	if err != nil {
		return err
	}
	return s.werr
}

// readFull fills b and returns the kernel's receive time of its last byte
// (wall-clock ns), or 0 when the kernel gave none.
func (s *tcpStream) readFull(b []byte, deadline time.Time) (int64, error) {
	s.buf, s.got, s.rx, s.rerr = b, 0, 0, nil
	if !s.raw {
		if err := s.rc.Read(s.readFn); err != nil {
			return 0, err
		}
		if s.rerr == io.EOF && s.got > 0 {
			s.rerr = io.ErrUnexpectedEOF
		}
		return s.rx, s.rerr
	}
	err := s.rc.Control(func(fd uintptr) {
		for !s.readFn(fd) {
			if err := s.wait(int(fd), unix.POLLIN, deadline); err != nil {
				s.rerr = err
				return
			}
		}
	})
	if err != nil {
		return 0, err
	}
	if errors.Is(s.rerr, io.EOF) && s.got > 0 {
		s.rerr = io.ErrUnexpectedEOF
	}
	return s.rx, s.rerr
}
