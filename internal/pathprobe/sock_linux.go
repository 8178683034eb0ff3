package pathprobe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// payloadLen is a probe's payload: magic, run nonce, probe number, TTL, a
// spare byte, and (ICMP) the word that keeps the checksum constant.
const payloadLen = 16

var magic = [4]byte{'l', 'l', 'p', 'p'}

func encodePayload(b []byte, nonce, probe uint32, ttl int) {
	copy(b, magic[:])
	binary.BigEndian.PutUint32(b[4:], nonce)
	binary.BigEndian.PutUint32(b[8:], probe)
	b[12] = byte(ttl)
}

// findPayload finds a probe's payload in b (an ICMP error quotes the
// original datagram's payload; an echo reply carries it after its header).
func findPayload(b []byte, nonce uint32) (probe uint32, ok bool) {
	for i := 0; i+13 <= len(b); i++ {
		if b[i] == magic[0] && [4]byte(b[i:i+4]) == magic && binary.BigEndian.Uint32(b[i+4:]) == nonce {
			return binary.BigEndian.Uint32(b[i+8:]), true
		}
	}
	return 0, false
}

// event is one thing a probe socket read: a router's or the destination's
// ICMP, or the destination's own reply (an echo reply).
type event struct {
	probe   uint32
	matched bool
	from    netip.Addr
	rx      time.Time
	// icmpType/icmpCode of the ICMP message (v4 numbering: 11 time
	// exceeded, 3 unreachable; v6 mapped to those), 0/0 for an echo reply.
	icmpType, icmpCode uint8
	// echoSeq is the echo sequence an RFC 792 router quoted (8 bytes of
	// the original ICMP message, no payload).
	echoSeq    uint16
	hasEchoSeq bool
}

// sock is a probe socket: UDP or ICMP echo (a ping socket), non-blocking
// and on the runtime's poller, with IP_RECVERR and kernel receive times.
type sock struct {
	f     *os.File
	rc    syscall.RawConn
	fd    int
	v6    bool
	proto string
	flow  int
	dst   unix.Sockaddr
	nonce uint32
	// timestamps says SO_TIMESTAMPNS took.
	timestamps bool
	// raw is a raw ICMP socket (root, where ping sockets are not allowed):
	// it sees every ICMP message, and builds its own echo header.
	raw bool
	// label is the IPv6 flow label every UDP probe carries (oob, a
	// control message, says so per send); 0: the kernel's.
	label uint32
	oob   []byte
}

// openSock opens the probe socket for proto toward dst, bound to the flow
// ID (the source port, or the echo identifier of a ping socket), trying the
// next IDs when one is taken.
func openSock(proto string, dst netip.Addr, port, flow int, nonce uint32) (*sock, error) {
	s := &sock{v6: dst.Is6(), proto: proto, nonce: nonce}
	fam := unix.AF_INET
	if s.v6 {
		fam = unix.AF_INET6
		s.dst = &unix.SockaddrInet6{Addr: dst.As16(), Port: port}
	} else {
		s.dst = &unix.SockaddrInet4{Addr: dst.As4(), Port: port}
	}
	typ, p := unix.SOCK_DGRAM, unix.IPPROTO_UDP
	if proto == ICMP {
		p = unix.IPPROTO_ICMP
		if s.v6 {
			p = unix.IPPROTO_ICMPV6
		}
	}
	fd, err := unix.Socket(fam, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, p)
	if err != nil && proto == ICMP && (errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM)) {
		// No ping socket for this group: a raw one, as root.
		var rerr error
		fd, rerr = unix.Socket(fam, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, p)
		if rerr != nil {
			r, _ := os.ReadFile("/proc/sys/net/ipv4/ping_group_range")
			return nil, fmt.Errorf("%w: ICMP echo needs an unprivileged ping socket (net.ipv4.ping_group_range is %q and excludes this user's group) or root for a raw one: use --proto udp or run as root",
				ErrPermission, strings.Join(strings.Fields(string(r)), " "))
		}
		s.raw, err = true, nil
	}
	if err != nil {
		return nil, fmt.Errorf("probe socket: %w", err)
	}
	s.fd = fd
	if s.raw {
		// Raw: every ICMP message arrives on the socket itself (no error
		// queue needed); the flow is the echo identifier we write.
		s.timestamps = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
		s.flow = 1 + (flow-1)%65535
		s.f = os.NewFile(uintptr(fd), "path probe")
		if s.rc, err = s.f.SyscallConn(); err != nil {
			s.f.Close()
			return nil, err
		}
		return s, nil
	}
	fail := func(what string, err error) (*sock, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("probe socket: %s: %w", what, err)
	}
	if s.v6 {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVERR, 1)
	} else {
		err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_RECVERR, 1)
	}
	if err != nil {
		return fail("IP_RECVERR", err)
	}
	s.timestamps = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) == nil
	var bindErr error
	for i := range 64 {
		id := 1 + (flow-1+i)%65535
		var sa unix.Sockaddr = &unix.SockaddrInet4{Port: id}
		if s.v6 {
			sa = &unix.SockaddrInet6{Port: id}
		}
		if bindErr = unix.Bind(fd, sa); bindErr == nil {
			s.flow = id
			break
		}
		if !errors.Is(bindErr, unix.EADDRINUSE) {
			break
		}
	}
	if bindErr != nil {
		return fail(fmt.Sprintf("bind flow %d", flow), bindErr)
	}
	if proto == UDP && s.v6 {
		// Without a lease the kernel's label stays: a hash of the 5-tuple.
		if s.label, _ = pickFlowLabel(fd, dst, s.flow); s.label != 0 {
			s.oob = flowInfoCmsg(s.label)
		}
	}
	if proto == ICMP {
		// A ping socket's identifier is its bound "port", unless the
		// kernel chose another.
		if sa, err := unix.Getsockname(fd); err == nil {
			switch a := sa.(type) {
			case *unix.SockaddrInet4:
				s.flow = a.Port
			case *unix.SockaddrInet6:
				s.flow = a.Port
			}
		}
	}
	s.f = os.NewFile(uintptr(fd), "path probe")
	s.rc, err = s.f.SyscallConn()
	if err != nil {
		s.f.Close()
		return nil, err
	}
	return s, nil
}

func (s *sock) close() { s.f.Close() }

// send sends probe number probe with the given TTL; the time is taken just
// before the send.
func (s *sock) send(probe uint32, ttl int) (time.Time, error) {
	var err error
	if s.v6 {
		err = unix.SetsockoptInt(s.fd, unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, ttl)
	} else {
		err = unix.SetsockoptInt(s.fd, unix.IPPROTO_IP, unix.IP_TTL, ttl)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("set TTL %d: %w", ttl, err)
	}
	var buf [8 + payloadLen]byte
	msg := buf[8:]
	encodePayload(buf[8:], s.nonce, probe, ttl)
	if s.proto == ICMP {
		// A ping socket fills in the identifier and the checksum; on a
		// raw one they are ours (the kernel computes ICMPv6's).
		buf[0] = 8
		if s.v6 {
			buf[0] = 128
		}
		binary.BigEndian.PutUint16(buf[4:], uint16(s.flow))
		binary.BigEndian.PutUint16(buf[6:], uint16(probe))
		sum := parisSum(s.flow)
		parisPad(buf[:], sum)
		if s.raw && !s.v6 {
			// The padded message sums to the flow's sum: its checksum
			// is the same for every probe, no second pass over it.
			binary.BigEndian.PutUint16(buf[2:], ^sum)
		}
		msg = buf[:]
	}
	// An ICMP error on this socket is also left in sk_err, which fails the
	// next send once (before anything leaves): try again.
	for range 4 {
		t := time.Now()
		if s.oob != nil {
			_, err = unix.SendmsgN(s.fd, msg, s.oob, s.dst, 0)
		} else {
			err = unix.Sendto(s.fd, msg, 0, s.dst)
		}
		if err == nil {
			return t, nil
		}
		if !isICMPErrno(err) {
			break
		}
	}
	return time.Time{}, fmt.Errorf("send TTL %d: %w", ttl, err)
}

func isICMPErrno(err error) bool {
	for _, e := range []error{unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EPROTO, unix.EHOSTDOWN, unix.ENONET, unix.EACCES, unix.EMSGSIZE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// read calls got for every event until the socket's read deadline passes
// or it is closed.
func (s *sock) read(got func(event)) error {
	buf := make([]byte, 1500)
	oob := make([]byte, 512)
	for {
		var rerr error
		err := s.rc.Read(func(fd uintptr) bool {
			for {
				n, oobn, _, from, err := unix.Recvmsg(int(fd), buf, oob, unix.MSG_ERRQUEUE)
				if err == nil {
					if ev, ok := s.parseErr(buf[:n], oob[:oobn]); ok {
						got(ev)
					}
					continue
				}
				if err != unix.EAGAIN && err != unix.EINTR {
					rerr = err
					return true
				}
				n, oobn, _, from, err = unix.Recvmsg(int(fd), buf, oob, 0)
				switch {
				case err == nil:
					if ev, ok := s.parseReply(buf[:n], oob[:oobn], from); ok {
						got(ev)
					}
					continue
				case err == unix.EINTR:
					continue
				case err == unix.EAGAIN:
					return false
				case isICMPErrno(err):
					continue // sk_err, reported by the error queue
				}
				rerr = err
				return true
			}
		})
		if err != nil {
			return err
		}
		if rerr != nil {
			return rerr
		}
	}
}

// parseErr reads an error-queue message: the ICMP's type, code, sender and
// time, and the probe whose quoted payload it carries.
func (s *sock) parseErr(data, oob []byte) (event, bool) {
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return event{}, false
	}
	ev := event{rx: time.Now()}
	found := false
	for _, c := range cms {
		switch {
		case c.Header.Level == unix.SOL_SOCKET && c.Header.Type == unix.SO_TIMESTAMPNS:
			if t, ok := timespec(c.Data); ok {
				ev.rx = t
			}
		case !s.v6 && c.Header.Level == unix.SOL_IP && c.Header.Type == unix.IP_RECVERR,
			s.v6 && c.Header.Level == unix.SOL_IPV6 && c.Header.Type == unix.IPV6_RECVERR:
			if len(c.Data) < int(unsafe.Sizeof(unix.SockExtendedErr{})) {
				continue
			}
			ee := (*unix.SockExtendedErr)(unsafe.Pointer(&c.Data[0]))
			switch ee.Origin {
			case unix.SO_EE_ORIGIN_ICMP:
				ev.icmpType, ev.icmpCode = ee.Type, ee.Code
			case unix.SO_EE_ORIGIN_ICMP6:
				// Mapped to v4's numbers: 3 time exceeded → 11; 1
				// unreachable → 3, port unreachable (4) → 3.
				switch ee.Type {
				case 3:
					ev.icmpType = 11
				case 1:
					ev.icmpType, ev.icmpCode = 3, ee.Code
					if ee.Code == 4 {
						ev.icmpCode = 3
					}
				default:
					ev.icmpType = 255
				}
			default:
				continue // a local error (EMSGSIZE...), not a reply
			}
			off := c.Data[unsafe.Sizeof(unix.SockExtendedErr{}):]
			ev.from = offender(off)
			found = ev.from.IsValid()
		}
	}
	if !found {
		return event{}, false
	}
	ev.probe, ev.matched = findPayload(data, s.nonce)
	if !ev.matched && s.proto == ICMP && len(data) >= 8 {
		ev.echoSeq, ev.hasEchoSeq = binary.BigEndian.Uint16(data[6:]), true
	}
	return ev, true
}

// parseReply reads a datagram the destination sent (an echo reply), or on a
// raw socket any ICMP message: replies and errors about our echoes.
func (s *sock) parseReply(data, oob []byte, from unix.Sockaddr) (event, bool) {
	if s.raw {
		return s.parseRaw(data, oob, from)
	}
	if s.proto != ICMP || len(data) < 8 || (data[0] != 0 && data[0] != 129) {
		return event{}, false
	}
	ev := event{rx: time.Now()}
	ev.rx = rxTime(oob, ev.rx)
	ev.from = sockaddrIP(from)
	ev.probe, ev.matched = findPayload(data[8:], s.nonce)
	if !ev.matched {
		ev.echoSeq, ev.hasEchoSeq = binary.BigEndian.Uint16(data[6:]), true
	}
	return ev, ev.from.IsValid()
}

// offender is the ICMP sender's address after a sock_extended_err.
func offender(b []byte) netip.Addr {
	if len(b) < 2 {
		return netip.Addr{}
	}
	switch binary.NativeEndian.Uint16(b) {
	case unix.AF_INET:
		if len(b) >= 8 {
			return netip.AddrFrom4([4]byte(b[4:8]))
		}
	case unix.AF_INET6:
		if len(b) >= 24 {
			return netip.AddrFrom16([16]byte(b[8:24])).Unmap()
		}
	}
	return netip.Addr{}
}

// rxTime is the kernel's receive time in oob (SO_TIMESTAMPNS), else def.
func rxTime(oob []byte, def time.Time) time.Time {
	cms, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return def
	}
	for _, c := range cms {
		if c.Header.Level == unix.SOL_SOCKET && c.Header.Type == unix.SO_TIMESTAMPNS {
			if t, ok := timespec(c.Data); ok {
				return t
			}
		}
	}
	return def
}

// sockaddrIP is a datagram's sender address.
func sockaddrIP(sa unix.Sockaddr) netip.Addr {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrFrom4(a.Addr)
	case *unix.SockaddrInet6:
		return netip.AddrFrom16(a.Addr).Unmap()
	}
	return netip.Addr{}
}

func timespec(b []byte) (time.Time, bool) {
	if len(b) < 16 {
		return time.Time{}, false
	}
	sec := int64(binary.NativeEndian.Uint64(b))
	nsec := int64(binary.NativeEndian.Uint64(b[8:]))
	if sec == 0 && nsec == 0 {
		return time.Time{}, false
	}
	return time.Unix(sec, nsec), true
}

// parseRaw reads an ICMP message from a raw socket: an echo reply carrying
// our identifier, or a time exceeded or unreachable quoting one of our
// echoes. IPv4's come with their IP header.
func (s *sock) parseRaw(data, oob []byte, from unix.Sockaddr) (event, bool) {
	icmp := data
	if !s.v6 {
		if len(data) < 20 {
			return event{}, false
		}
		icmp = data[int(data[0]&0x0f)*4:]
	}
	if len(icmp) < 8 {
		return event{}, false
	}
	ev := event{rx: time.Now(), icmpType: icmp[0], icmpCode: icmp[1]}
	if s.v6 {
		switch icmp[0] {
		case 129:
			ev.icmpType = 0
		case 3:
			ev.icmpType = 11
		case 1:
			ev.icmpType = 3
			if icmp[1] == 4 {
				ev.icmpCode = 3
			}
		default:
			return event{}, false
		}
	}
	echo := icmp // the echo the message is about
	switch ev.icmpType {
	case 0:
	case 11, 3:
		inner := icmp[8:]
		if s.v6 {
			if len(inner) < 40 || inner[6] != unix.IPPROTO_ICMPV6 {
				return event{}, false
			}
			echo = inner[40:]
		} else {
			if len(inner) < 20 || inner[9] != unix.IPPROTO_ICMP {
				return event{}, false
			}
			echo = inner[int(inner[0]&0x0f)*4:]
		}
		if len(echo) < 8 || (echo[0] != 8 && echo[0] != 128) {
			return event{}, false
		}
	default:
		return event{}, false
	}
	if len(echo) < 8 || binary.BigEndian.Uint16(echo[4:]) != uint16(s.flow) {
		return event{}, false
	}
	ev.rx = rxTime(oob, ev.rx)
	ev.from = sockaddrIP(from)
	ev.probe, ev.matched = findPayload(echo[8:], s.nonce)
	if !ev.matched {
		ev.echoSeq, ev.hasEchoSeq = binary.BigEndian.Uint16(echo[6:]), true
	}
	return ev, ev.from.IsValid()
}

// ICMP echo keeps the flow Paris traceroute's way. Balancers that spread
// ICMP hash the first four bytes of its header, type, code and checksum,
// and some the identifier too; the sequence number and the payload (which
// say which probe it is) change per probe, and with them the checksum. The
// last word of the payload makes up for them, as scamper's icmp-paris does:
// it brings the ones' complement sum of the echo message to one value per
// flow, so every probe of a run, and of every run to the same target (the
// flow ID derives from it), has one checksum. For ICMPv6 the kernel adds
// the pseudo-header, the same for every probe between two addresses.

// parisSum is the sum an echo message of flow is brought to: never 0 or
// 0xffff, which ones' complement arithmetic cannot tell apart.
func parisSum(flow int) uint16 { return uint16(1 + flow%0xfffe) }

// parisPad sets the last word of the echo message msg (its identifier and
// sequence number in place, its checksum field zeroed) so that the message
// sums to sum.
func parisPad(msg []byte, sum uint16) {
	binary.BigEndian.PutUint16(msg[2:], 0)
	binary.BigEndian.PutUint16(msg[len(msg)-2:], 0)
	// sum − s in ones' complement is sum + ^s, with the carry folded back.
	s := ^checksum(msg)
	t := uint32(sum) + uint32(^s)
	t = t>>16 + t&0xffff
	binary.BigEndian.PutUint16(msg[len(msg)-2:], uint16(t))
}

// checksum is the Internet checksum (RFC 1071).
func checksum(b []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}
