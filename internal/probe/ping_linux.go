//go:build linux

package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// pingSock is an ICMP echo socket, non-blocking and on Go's netpoller
// (through os.File), so a watch's reader costs no thread and no periodic
// wake-up.
type pingSock struct {
	f          *os.File
	rc         syscall.RawConn
	v6         bool
	dgram      bool // an ICMP datagram socket: the kernel owns the identifier
	ipHeader   bool // raw IPv4: replies start with the IP header
	timestamps bool // SO_TIMESTAMPNS took
	dst        unix.Sockaddr
	// closed is set before the file closes: the raw conn's reads then fail
	// with the poller's own "use of closed file", which is not os.ErrClosed.
	closed atomic.Bool
}

func (s *pingSock) kind() string {
	if s.dgram {
		return "dgram"
	}
	return "raw"
}

// openPingSock opens a datagram socket (mode "dgram"), a raw one ("raw"),
// or the first of the two that the host allows (""). id is the identifier
// a raw socket's filter accepts.
func openPingSock(addr netip.Addr, mode string, id uint16) (*pingSock, error) {
	var errs []string
	for _, dgram := range []bool{true, false} {
		if (mode == "dgram" && !dgram) || (mode == "raw" && dgram) {
			continue
		}
		s, err := openPingSockKind(addr, dgram, id)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err.Error())
	}
	return nil, errors.New(strings.Join(errs, "; "))
}

func openPingSockKind(addr netip.Addr, dgram bool, id uint16) (*pingSock, error) {
	s := &pingSock{v6: addr.Is6(), dgram: dgram}
	fam, proto := unix.AF_INET, unix.IPPROTO_ICMP
	if s.v6 {
		fam, proto = unix.AF_INET6, unix.IPPROTO_ICMPV6
		s.dst = &unix.SockaddrInet6{Addr: addr.As16()}
	} else {
		s.dst = &unix.SockaddrInet4{Addr: addr.As4()}
	}
	typ, what := unix.SOCK_RAW, "raw socket"
	if dgram {
		typ, what = unix.SOCK_DGRAM, "datagram socket"
	}
	fd, err := unix.Socket(fam, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		switch {
		case dgram && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)):
			r, _ := os.ReadFile("/proc/sys/net/ipv4/ping_group_range")
			return nil, fmt.Errorf("%s: %v (net.ipv4.ping_group_range is %q)", what, err, strings.Join(strings.Fields(string(r)), " "))
		case !dgram && errors.Is(err, unix.EPERM):
			return nil, fmt.Errorf("%s: %v (needs root or CAP_NET_RAW)", what, err)
		}
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	s.ipHeader = !dgram && !s.v6
	s.timestamps = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if !dgram {
		// A raw socket receives every ICMP message the host gets: let
		// the kernel keep only echo replies with our identifier, so a
		// host pinging many targets does not wake every watch for each.
		if err := attachEchoFilter(fd, s.v6, id); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: filter: %w", what, err)
		}
	}
	s.f = os.NewFile(uintptr(fd), "icmp")
	if s.rc, err = s.f.SyscallConn(); err != nil {
		s.f.Close()
		return nil, err
	}
	return s, nil
}

// attachEchoFilter installs a classic BPF program accepting echo replies
// with identifier id (raw IPv4 messages start with the IP header). The
// program is small enough to write out in opcodes (linux/filter.h).
func attachEchoFilter(fd int, v6 bool, id uint16) error {
	const (
		ldxMSH = 0xb1 // X = 4*([k]&0xf): the IPv4 header length
		ldbInd = 0x50 // A = byte [X+k]
		ldhInd = 0x48 // A = half [X+k]
		ldbAbs = 0x30 // A = byte [k]
		ldhAbs = 0x28 // A = half [k]
		jeqK   = 0x15 // if A == k then jt else jf
		retK   = 0x06 // accept k bytes (0: drop)
	)
	prog := []unix.SockFilter{
		{Code: ldxMSH, K: 0},
		{Code: ldbInd, K: 0},
		{Code: jeqK, K: icmp4EchoReply, Jt: 0, Jf: 3},
		{Code: ldhInd, K: 4},
		{Code: jeqK, K: uint32(id), Jt: 0, Jf: 1},
		{Code: retK, K: 0xffff},
		{Code: retK, K: 0},
	}
	if v6 {
		prog = []unix.SockFilter{
			{Code: ldbAbs, K: 0},
			{Code: jeqK, K: icmp6EchoReply, Jt: 0, Jf: 3},
			{Code: ldhAbs, K: 4},
			{Code: jeqK, K: uint32(id), Jt: 0, Jf: 1},
			{Code: retK, K: 0xffff},
			{Code: retK, K: 0},
		}
	}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

func (s *pingSock) setDSCP(dscp int) error {
	var serr error
	err := s.rc.Control(func(fd uintptr) {
		if s.v6 {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, dscp<<2)
		} else {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, dscp<<2)
		}
	})
	if err == nil {
		err = serr
	}
	if err != nil {
		return fmt.Errorf("set dscp %d: %w", dscp, err)
	}
	return nil
}

func (s *pingSock) send(b []byte) error {
	var serr error
	err := s.rc.Write(func(fd uintptr) bool {
		serr = unix.Sendto(int(fd), b, 0, s.dst)
		return serr != unix.EAGAIN
	})
	if err != nil {
		return err
	}
	return serr
}

// recv reads one message and its control messages, waiting on the
// netpoller; it returns net.ErrClosed (wrapped) once the socket is closed.
func (s *pingSock) recv(b, oob []byte) (n, oobn int, err error) {
	var rerr error
	err = s.rc.Read(func(fd uintptr) bool {
		var msg unix.Msghdr
		var iov unix.Iovec
		iov.Base = &b[0]
		iov.SetLen(len(b))
		msg.Iov = &iov
		msg.Iovlen = 1
		msg.Control = &oob[0]
		msg.SetControllen(len(oob))
		r, _, e := unix.Syscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), 0)
		if e == unix.EAGAIN {
			return false
		}
		if e != 0 {
			rerr = e
			return true
		}
		n, oobn = int(r), int(msg.Controllen)
		return true
	})
	if err != nil {
		return 0, 0, err
	}
	return n, oobn, rerr
}

func (s *pingSock) close() {
	s.closed.Store(true)
	s.f.Close()
}

// isTransientSendErr is a send failure that says something about the path
// (no route, the host unreachable, a full buffer), not about the socket:
// the probe is lost, the watch goes on.
func isTransientSendErr(err error) bool {
	return errors.Is(err, unix.EHOSTUNREACH) || errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.ENOBUFS) ||
		errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.EHOSTDOWN)
}
