//go:build linux

package probe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// enableRxTimestamps asks the kernel to attach its receive time (CLOCK_REALTIME,
// taken when the packet reached the socket layer) to every datagram, and the
// TOS / traffic class byte it arrived with (IP_RECVTOS, IPV6_RECVTCLASS), so a
// reflector can answer each probe with the marking it came with.
func enableRxTimestamps(rc syscall.RawConn) error {
	var serr error
	err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
		enableRecvTOS(int(fd))
	})
	if err != nil {
		return err
	}
	return serr
}

// enableRecvTOS turns on both IPv4 and IPv6 TOS reporting; on an AF_INET
// socket the IPv6 option fails, on a dual-stack AF_INET6 socket both apply
// (IPv4 packets report IP_TOS).
func enableRecvTOS(fd int) bool {
	v4 := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1) == nil
	v6 := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1) == nil
	return v4 || v6
}

// oobSize is enough control-message space for one SCM_TIMESTAMPNS and one
// IP_TOS or IPV6_TCLASS (with room to spare).
var oobSize = unix.CmsgSpace(16) + 2*unix.CmsgSpace(4)

// rxMeta is what the kernel said about a received packet.
type rxMeta struct {
	ts     int64 // wall-clock ns, when hasTS
	hasTS  bool
	tos    uint8 // the TOS / traffic class byte (DSCP << 2 | ECN), when hasTOS
	hasTOS bool
}

// parseRxTimestamp extracts SCM_TIMESTAMPNS from control messages without
// allocating. It returns wall-clock nanoseconds, or false when absent.
func parseRxTimestamp(oob []byte) (int64, bool) {
	m := parseRxMeta(oob)
	return m.ts, m.hasTS
}

// parseRxMeta reads the control messages of one recvmsg without allocating:
// SCM_TIMESTAMPNS, IP_TOS (1 byte) and IPV6_TCLASS (an int). Malformed
// messages end the walk; what was read before them stands.
func parseRxMeta(oob []byte) rxMeta {
	const hdr = unix.SizeofCmsghdr
	var m rxMeta
	for len(oob) >= hdr {
		// struct cmsghdr { size_t len; int level; int type; } in host byte order.
		var l int
		if hdr == 16 {
			l = int(binary.NativeEndian.Uint64(oob))
		} else {
			l = int(binary.NativeEndian.Uint32(oob))
		}
		level := int32(binary.NativeEndian.Uint32(oob[hdr-8:]))
		typ := int32(binary.NativeEndian.Uint32(oob[hdr-4:]))
		if l < hdr || l > len(oob) {
			return m
		}
		switch {
		case level == unix.SOL_SOCKET && typ == unix.SCM_TIMESTAMPNS && l >= hdr+16:
			var sec, nsec int64
			if hdr == 16 {
				sec = int64(binary.NativeEndian.Uint64(oob[hdr:]))
				nsec = int64(binary.NativeEndian.Uint64(oob[hdr+8:]))
			} else {
				sec = int64(int32(binary.NativeEndian.Uint32(oob[hdr:])))
				nsec = int64(int32(binary.NativeEndian.Uint32(oob[hdr+4:])))
			}
			m.ts, m.hasTS = sec*1e9+nsec, true
		case level == unix.IPPROTO_IP && typ == unix.IP_TOS && l >= hdr+1:
			m.tos, m.hasTOS = oob[hdr], true
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_TCLASS && l >= hdr+4:
			m.tos, m.hasTOS = uint8(binary.NativeEndian.Uint32(oob[hdr:])), true
		}
		next := unix.CmsgSpace(l - hdr)
		if next > len(oob) {
			break
		}
		oob = oob[next:]
	}
	return m
}

// tosCmsg writes into b (at least unix.CmsgSpace(4) bytes) a control message
// that sets one datagram's TOS (IPv4, also for IPv4-mapped destinations of a
// dual-stack socket) or traffic class (IPv6), and returns it.
func tosCmsg(b []byte, v6 bool, tos uint8) []byte {
	const hdr = unix.SizeofCmsghdr
	n := unix.CmsgSpace(4)
	b = b[:n]
	clear(b)
	l := unix.CmsgLen(4)
	if hdr == 16 {
		binary.NativeEndian.PutUint64(b, uint64(l))
	} else {
		binary.NativeEndian.PutUint32(b, uint32(l))
	}
	level, typ := int32(unix.IPPROTO_IP), int32(unix.IP_TOS)
	if v6 {
		level, typ = unix.IPPROTO_IPV6, unix.IPV6_TCLASS
	}
	binary.NativeEndian.PutUint32(b[hdr-8:], uint32(level))
	binary.NativeEndian.PutUint32(b[hdr-4:], uint32(typ))
	binary.NativeEndian.PutUint32(b[hdr:], uint32(tos))
	return b
}

// tosCmsgSpace is the room tosCmsg needs.
var tosCmsgSpace = unix.CmsgSpace(4)

// listenControl enables TCP Fast Open on a listener (queue of 1024 pending
// SYN-with-data requests). Whether the kernel accepts data in the SYN still
// depends on net.ipv4.tcp_fastopen having the server bit (0x2).
func listenControl(network, address string, c syscall.RawConn) error {
	if network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, 1024)
	})
	if err != nil {
		return err
	}
	_ = serr // a kernel without TFO still serves plain TCP
	return nil
}

// fastOpenControl sets TCP_FASTOPEN_CONNECT on a client socket before connect:
// the kernel then sends the first write in the SYN when it holds a cookie.
func fastOpenControl(network, address string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN_CONNECT, 1)
	})
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("set TCP_FASTOPEN_CONNECT: %w", serr)
	}
	return nil
}

// tcpiOptSynData is TCPI_OPT_SYN_DATA: the SYN carried data the peer acked.
const tcpiOptSynData = 0x20

// synDataAcked reports whether a client connection's SYN data was accepted.
func synDataAcked(rc syscall.RawConn) bool {
	var ok bool
	_ = rc.Control(func(fd uintptr) {
		ti, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		ok = err == nil && ti.Options&tcpiOptSynData != 0
	})
	return ok
}

// ensureFiles makes sure the process may hold need more descriptors than it
// holds now: it raises the soft RLIMIT_NOFILE up to the hard limit, and the hard
// limit too when the process may (CAP_SYS_RESOURCE). It fails with how many
// connections are possible and why.
func ensureFiles(need int, what string) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("getrlimit NOFILE: %w", err)
	}
	open := countOpenFiles()
	want := uint64(open + need + 64)
	if lim.Cur >= want {
		return nil
	}
	if lim.Max >= want {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err == nil {
			return nil
		}
	} else {
		nl := unix.Rlimit{Cur: want, Max: want}
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &nl); err == nil {
			return nil
		}
		lim.Cur = lim.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	}
	possible := int64(lim.Cur) - int64(open) - 64
	if possible < 0 {
		possible = 0
	}
	return fmt.Errorf("can open at most %d %s (RLIMIT_NOFILE=%d, %d already open; raise it with ulimit -n or run as root)", possible, what, lim.Cur, open)
}

func countOpenFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 16
	}
	return len(ents)
}

// preciseSleeper sleeps on a dedicated OS thread with 1 ns timer slack, so an
// isochronous sender wakes within microseconds of its schedule (the Go runtime's
// timers round to the millisecond when idle). The calling goroutine must stay on
// its thread: call lockThread first.
type preciseSleeper struct{}

// lockThread pins the goroutine to its thread and lowers the thread's timer
// slack. The thread is not unlocked: it exits with the goroutine, so the changed
// slack never leaks to other goroutines.
func lockThread() preciseSleeper {
	runtime.LockOSThread()
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	return preciseSleeper{}
}

// until sleeps until t (by the monotonic clock reading in t).
func (preciseSleeper) until(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := unix.NsecToTimespec(int64(d))
		if err := unix.Nanosleep(&ts, nil); err != nil && !errors.Is(err, unix.EINTR) {
			time.Sleep(d)
			return
		}
	}
}

func isConnRefused(err error) bool { return errors.Is(err, unix.ECONNREFUSED) }

func kernelRelease() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return unix.ByteSliceToString(u.Release[:])
}

// udpSock is a connected, blocking UDP socket driven by raw syscalls on
// dedicated threads: one send and one receive syscall per probe, no netpoller
// wake-ups, no allocation. Receives time out every rcvTimeout so a receiver can
// notice it should stop.
type udpSock struct {
	fd  int
	v6  bool
	msg unix.Msghdr
	iov unix.Iovec
}

const rcvTimeout = 50 * time.Millisecond

func dialUDPSock(dst netip.AddrPort) (*udpSock, error) {
	dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	var (
		s   = &udpSock{v6: dst.Addr().Is6()}
		sa  unix.Sockaddr
		fam = unix.AF_INET
	)
	if s.v6 {
		fam = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(dst.Port()), Addr: dst.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(dst.Port()), Addr: dst.Addr().As4()}
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("udp socket: %w", err)
	}
	s.fd = fd
	tv := unix.NsecToTimeval(int64(rcvTimeout))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20)
	if err := unix.Connect(fd, sa); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) {
			return nil, fmt.Errorf("udp %s: unreachable (%w)", dst, err)
		}
		return nil, fmt.Errorf("udp connect %s: %w", dst, err)
	}
	return s, nil
}

// kernelTimestamps turns on SO_TIMESTAMPNS and reports whether it took.
func (s *udpSock) kernelTimestamps() bool {
	return unix.SetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
}

// recvTOS asks for the TOS / traffic class of each reply (IP_RECVTOS or
// IPV6_RECVTCLASS) and reports whether it took.
func (s *udpSock) recvTOS() bool {
	if s.v6 {
		return unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_RECVTCLASS, 1) == nil
	}
	return unix.SetsockoptInt(s.fd, unix.IPPROTO_IP, unix.IP_RECVTOS, 1) == nil
}

func (s *udpSock) setDSCP(dscp int) error {
	if s.v6 {
		if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_TCLASS, dscp<<2); err != nil {
			return fmt.Errorf("set IPV6_TCLASS %d: %w", dscp<<2, err)
		}
		return nil
	}
	if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_IP, unix.IP_TOS, dscp<<2); err != nil {
		return fmt.Errorf("set IP_TOS %d: %w", dscp<<2, err)
	}
	return nil
}

func (s *udpSock) send(b []byte) error {
	_, err := unix.Write(s.fd, b)
	return err
}

// recv reads one datagram and its control messages. It returns a timeout error
// (errRecvTimeout) every rcvTimeout without traffic. Only one goroutine may call
// it at a time (msg and iov are reused).
func (s *udpSock) recv(b, oob []byte) (n, oobn int, err error) {
	s.iov.Base = &b[0]
	s.iov.SetLen(len(b))
	s.msg.Iov = &s.iov
	s.msg.Iovlen = 1
	s.msg.Name = nil
	s.msg.Namelen = 0
	s.msg.Control = &oob[0]
	s.msg.SetControllen(len(oob))
	r, _, e := unix.Syscall(unix.SYS_RECVMSG, uintptr(s.fd), uintptr(unsafe.Pointer(&s.msg)), 0)
	if e != 0 {
		if e == unix.EAGAIN || e == unix.EINTR {
			return 0, 0, errRecvTimeout
		}
		return 0, 0, e
	}
	return int(r), int(s.msg.Controllen), nil
}

func (s *udpSock) close() { unix.Close(s.fd) }

// RaiseFileLimit lets the process hold n more descriptors (soft RLIMIT_NOFILE
// up to the hard limit, or beyond when privileged). The error says how many are
// possible.
func RaiseFileLimit(n int) error { return ensureFiles(n, "clients") }

// unsentBytes is how many bytes a TCP socket still holds in its send queue,
// unsent or unacknowledged (SIOCOUTQ, every kernel).
func unsentBytes(c net.Conn) (int64, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return int64(n), true
}

// dscpControl marks a dialed socket's packets with dscp (IP_TOS, and
// IPV6_TCLASS on an IPv6 socket).
func dscpControl(dscp int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			if network == "tcp6" || network == "udp6" {
				serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_TCLASS, dscp<<2)
				return
			}
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_TOS, dscp<<2)
		})
		if err != nil {
			return err
		}
		if serr != nil {
			return fmt.Errorf("set dscp %d: %w", dscp, serr)
		}
		return nil
	}
}
