package sockets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
)

// inet_diag wire format (include/uapi/linux/inet_diag.h, sock_diag.h).
const (
	nlmsgHdrLen      = 16
	nlmsgNoop        = 1
	nlmsgError       = 2
	nlmsgDone        = 3
	nlmFRequest      = 0x1
	nlmFDump         = 0x300 // NLM_F_ROOT | NLM_F_MATCH
	nlmFDumpIntr     = 0x10
	sockDiagByFamily = 20
	inetDiagReqV2Len = 56
	inetDiagMsgLen   = 72

	// Extension attribute types, requested as bits 1<<(type-1).
	inetDiagInfo      = 2
	inetDiagCong      = 4
	inetDiagTOS       = 5
	inetDiagTClass    = 6
	inetDiagSkMeminfo = 7
	// inetDiagMark is not requested: the kernel adds it on its own for a
	// caller with CAP_NET_ADMIN.
	inetDiagMark = 15

	afInet     = 2
	afInet6    = 10
	ipprotoTCP = 6

	// allStates selects TCP states 1..12 (bit per state, NEW_SYN_RECV
	// included so request sockets are seen too).
	allStates = 0x1ffe
)

// errDumpInterrupted means the socket table changed during the dump, so the
// kernel could not promise a consistent listing (NLM_F_DUMP_INTR).
var errDumpInterrupted = errors.New("dump interrupted: the socket table changed while it was read")

// diagRequest encodes a SOCK_DIAG_BY_FAMILY dump request for TCP sockets of
// family in the given state bits, asking for tcp_info, congestion control,
// TOS/traffic class and socket memory.
func diagRequest(family uint8, states uint32, seq uint32) []byte {
	b := make([]byte, nlmsgHdrLen+inetDiagReqV2Len)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], sockDiagByFamily)
	ne.PutUint16(b[6:], nlmFRequest|nlmFDump)
	ne.PutUint32(b[8:], seq)
	r := b[nlmsgHdrLen:]
	r[0] = family
	r[1] = ipprotoTCP
	ext := uint8(1<<(inetDiagInfo-1) | 1<<(inetDiagCong-1) | 1<<(inetDiagTOS-1) | 1<<(inetDiagSkMeminfo-1))
	if family == afInet6 {
		ext |= 1 << (inetDiagTClass - 1)
	}
	r[2] = ext
	ne.PutUint32(r[4:], states)
	return b
}

// walkNetlink calls fn for each netlink message in buf. It reports done at
// NLMSG_DONE and turns NLMSG_ERROR into an error. intr is set when any
// message carried NLM_F_DUMP_INTR.
func walkNetlink(buf []byte, seq uint32, fn func(payload []byte) error) (done, intr bool, err error) {
	ne := binary.NativeEndian
	for len(buf) >= nlmsgHdrLen {
		l := int(ne.Uint32(buf[0:]))
		typ := ne.Uint16(buf[4:])
		flags := ne.Uint16(buf[6:])
		mseq := ne.Uint32(buf[8:])
		if l < nlmsgHdrLen || l > len(buf) {
			return false, intr, fmt.Errorf("netlink: message length %d of %d bytes left", l, len(buf))
		}
		payload := buf[nlmsgHdrLen:l]
		if al := (l + 3) &^ 3; al <= len(buf) {
			buf = buf[al:]
		} else {
			buf = buf[l:]
		}
		if mseq != seq {
			continue // a stale reply to an earlier request
		}
		if flags&nlmFDumpIntr != 0 {
			intr = true
		}
		switch typ {
		case nlmsgNoop:
			continue
		case nlmsgDone:
			return true, intr, nil
		case nlmsgError:
			if len(payload) < 4 {
				return false, intr, errors.New("netlink: short error message")
			}
			if e := int32(ne.Uint32(payload)); e != 0 {
				return false, intr, fmt.Errorf("netlink: %w", syscall.Errno(-e))
			}
			return true, intr, nil
		}
		if err := fn(payload); err != nil {
			return false, intr, err
		}
	}
	return false, intr, nil
}

// parseDiagMsg decodes one inet_diag_msg and its attributes into s.
func parseDiagMsg(b []byte, s *Socket) error {
	if len(b) < inetDiagMsgLen {
		return fmt.Errorf("inet_diag: message of %d bytes, want >= %d", len(b), inetDiagMsgLen)
	}
	ne := binary.NativeEndian
	family := b[0]
	s.stateNum = b[1]
	s.State = StateName(b[1])
	s.port = binary.BigEndian.Uint16(b[4:])
	s.rport = binary.BigEndian.Uint16(b[6:])
	var src, dst netip.Addr
	switch family {
	case afInet:
		s.Family = "inet"
		src = netip.AddrFrom4([4]byte(b[8:12]))
		dst = netip.AddrFrom4([4]byte(b[24:28]))
	case afInet6:
		s.Family = "inet6"
		src = netip.AddrFrom16([16]byte(b[8:24]))
		dst = netip.AddrFrom16([16]byte(b[24:40]))
	default:
		return fmt.Errorf("inet_diag: unexpected family %d", family)
	}
	s.Local = formatAddr(src, s.port)
	s.Remote = formatAddr(dst, s.rport)
	s.RecvQ = ne.Uint32(b[56:])
	s.SendQ = ne.Uint32(b[60:])
	s.UID = ne.Uint32(b[64:])
	// idiag_inode is 32 bits on the wire; socket inodes are allocated from a
	// 32-bit counter (get_next_ino), so this is the whole number.
	s.Inode = uint64(ne.Uint32(b[68:]))
	return parseDiagAttrs(b[inetDiagMsgLen:], s)
}

// parseDiagAttrs decodes the rtattr list after an inet_diag_msg.
func parseDiagAttrs(b []byte, s *Socket) error {
	ne := binary.NativeEndian
	for len(b) >= 4 {
		l := int(ne.Uint16(b[0:]))
		typ := ne.Uint16(b[2:])
		if l < 4 || l > len(b) {
			return fmt.Errorf("inet_diag: attribute %d length %d of %d bytes left", typ, l, len(b))
		}
		v := b[4:l]
		switch typ {
		case inetDiagInfo:
			s.TCPInfo = DecodeTCPInfo(v)
		case inetDiagCong:
			s.Congestion = cString(v)
		case inetDiagMark:
			if len(v) >= 4 {
				s.Mark = ne.Uint32(v)
			}
		case inetDiagSkMeminfo:
			if len(v) >= 9*4 {
				s.Mem = &Mem{
					RmemAlloc: ne.Uint32(v[0:]), RcvBuf: ne.Uint32(v[4:]),
					WmemAlloc: ne.Uint32(v[8:]), SndBuf: ne.Uint32(v[12:]),
					WmemQueued: ne.Uint32(v[20:]), Drops: ne.Uint32(v[32:]),
				}
			}
		}
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return nil
}

func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
