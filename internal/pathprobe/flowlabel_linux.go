package pathprobe

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// IPv6 flow labels. Balancers that follow RFC 6438 hash the flow label
// with the addresses, so a run keeps one path only if every probe carries
// one label. Left to Linux, a socket's label is the kernel's choice
// (net.ipv6.auto_flowlabels): random per TCP socket, and lowlat's TCP
// probes are a socket each; for UDP a hash of the 5-tuple whose key
// changes per boot. So a run leases its own from the kernel's flow label
// manager: the flow ID, as constant as the ports across runs to one
// target, or the next free one 0x10000 up.
const (
	sysIPv6FlowInfo     = 11 // IPV6_FLOWINFO, as a control message: this send's label
	sysIPv6FlowLabelMgr = 32 // IPV6_FLOWLABEL_MGR
	sysIPv6FlowInfoSend = 33 // IPV6_FLOWINFO_SEND: connect's address carries the label
	flActionGet         = 0  // IPV6_FL_A_GET
	flFlagCreate        = 1  // IPV6_FL_F_CREATE
	flShareUser         = 3  // IPV6_FL_S_USER: every socket of this user may hold it
	// flowLabelTries: labels stay in 0..0x7ffff, the half the manager
	// hands out when net.ipv6.flowlabel_state_ranges is on.
	flowLabelTries = 8
)

// flowLabelFor is a flow's try'th label.
func flowLabelFor(flow, try int) uint32 { return uint32(flow&0xffff | try<<16) }

// leaseFlowLabel leases label on the IPv6 socket fd (struct
// in6_flowlabel_req), shared with this user's other sockets so that a TCP
// run's next probe, a new socket, takes it again while it lingers.
func leaseFlowLabel(fd int, dst netip.Addr, label uint32) error {
	var req [32]byte
	d := dst.As16()
	copy(req[:16], d[:])
	binary.BigEndian.PutUint32(req[16:], label)
	req[20], req[21] = flActionGet, flShareUser
	binary.NativeEndian.PutUint16(req[22:], flFlagCreate)
	return unix.SetsockoptString(fd, unix.IPPROTO_IPV6, sysIPv6FlowLabelMgr, string(req[:]))
}

// pickFlowLabel leases flow's label on fd, or the first of its other tries
// the kernel gives; 0 and the last error when none (another user holds
// them all, or the kernel refuses).
func pickFlowLabel(fd int, dst netip.Addr, flow int) (uint32, error) {
	var err error
	for try := range flowLabelTries {
		l := flowLabelFor(flow, try)
		if l == 0 {
			continue // 0 is "no label"
		}
		if err = leaseFlowLabel(fd, dst, l); err == nil {
			return l, nil
		}
		if !errors.Is(err, unix.EPERM) && !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return 0, err
}

// flowInfoCmsg is the control message that sends a datagram with label.
func flowInfoCmsg(label uint32) []byte {
	b := make([]byte, unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.IPPROTO_IPV6, sysIPv6FlowInfo
	h.SetLen(unix.CmsgLen(4))
	binary.BigEndian.PutUint32(b[unix.CmsgLen(0):], label)
	return b
}

// connectLabelled connects the IPv6 socket fd to dst:port with label in
// the address's flow information (IPV6_FLOWINFO_SEND on), which x/sys's
// Connect cannot carry.
func connectLabelled(fd int, dst netip.Addr, port int, label uint32) error {
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, sysIPv6FlowInfoSend, 1); err != nil {
		return err
	}
	sa := unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: dst.As16()}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], uint16(port))
	binary.BigEndian.PutUint32((*[4]byte)(unsafe.Pointer(&sa.Flowinfo))[:], label)
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&sa)), unix.SizeofSockaddrInet6)
	if e != 0 {
		return e
	}
	return nil
}
