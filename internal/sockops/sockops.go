// Package sockops sets TCP options on an application's connections from the
// outside, without changing or restarting the application: runbook 001's
// missing TCP_NODELAY, a per-service initial window without touching routes
// (runbook 004), delayed-ACK and RTO bounds, the congestion control and
// TCP_NOTSENT_LOWAT.
//
// Two mechanisms, one per kind of connection:
//
//   - New connections: a BPF_PROG_TYPE_SOCK_OPS program, built in Go with
//     cilium/ebpf's asm package (no clang, no object file), attached to the
//     root of the cgroup v2 hierarchy. At connection establishment it looks
//     the socket's network namespace and local port up in a map and calls
//     bpf_setsockopt for each option the entry holds. The program and its
//     map are pinned in bpffs, so they outlive the lowlat process that
//     attached them, and later processes find them there.
//   - Connections that already exist: the owner's descriptor is duplicated
//     with pidfd_getfd (Linux 5.6) and the option set on the duplicate, which
//     is the same socket. The previous value is returned, for the journal.
//
// Which options bpf_setsockopt accepts in sock_ops differs between kernels
// (6.0 reused do_tcp_setsockopt and accepts most; older ones a short list).
// Probe finds out on the running kernel by attaching a throwaway program and
// making one loopback connection, never from a version table.
//
// Package sockops decides nothing: the plan package chooses what to set, the
// knob package journals and applies it through this package.
package sockops

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// ErrUnsupported marks what this kernel or host cannot do (no BPF, no cgroup
// v2, an option bpf_setsockopt refuses). Errors of all kinds wrap it.
var ErrUnsupported = errors.New("not supported on this host")

// Option is one TCP option the program can set.
type Option int

const (
	NoDelay Option = iota
	InitCwnd
	DelackMax
	RTOMin
	NotSentLowat
	Congestion
	numOptions
)

// option describes how an Option is set: its name in profiles and knob IDs,
// bpf_setsockopt's optname at SOL_TCP, its field in a map entry.
type option struct {
	name    string
	optname int32
	offset  int16 // of its value in an entry
	// probe is a harmless value for Probe's throwaway connection.
	probe uint32
	doc   string
}

// Kernel constants (include/uapi/linux/tcp.h, include/uapi/linux/bpf.h).
const (
	solTCP           = 6
	tcpNoDelay       = 1
	tcpCongestion    = 13
	tcpNotSentLowat  = 25
	tcpBPFIW         = 1001
	tcpBPFDelackMax  = 1003
	tcpBPFRTOMin     = 1004
	tcpCANameMax     = 16
	opActiveEstab    = 4 // BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB
	opPassiveEstab   = 5 // BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB
	ctxOp            = 0 // offsetof(struct bpf_sock_ops, op)
	ctxLocalPort     = 68
	entrySize        = 24 + tcpCANameMax
	keySize          = 16
	entryMaskOffset  = 0
	congestionOffset = 24
)

var options = [numOptions]option{
	NoDelay:      {"nodelay", tcpNoDelay, 4, 1, "TCP_NODELAY: send small writes at once instead of waiting for an ACK (Nagle)"},
	InitCwnd:     {"initcwnd", tcpBPFIW, 8, 10, "TCP_BPF_IW: the connection's initial congestion window, in segments"},
	DelackMax:    {"delack_max", tcpBPFDelackMax, 12, 40000, "TCP_BPF_DELACK_MAX: the longest delayed-ACK timeout, in microseconds"},
	RTOMin:       {"rto_min", tcpBPFRTOMin, 16, 200000, "TCP_BPF_RTO_MIN: the minimum retransmission timeout, in microseconds"},
	NotSentLowat: {"notsent_lowat", tcpNotSentLowat, 20, 16384, "TCP_NOTSENT_LOWAT: unsent bytes above which the socket stops being writable"},
	Congestion:   {"congestion", tcpCongestion, congestionOffset, 0, "TCP_CONGESTION: the congestion control algorithm"},
}

func (o Option) String() string {
	if o < 0 || o >= numOptions {
		return fmt.Sprintf("option(%d)", int(o))
	}
	return options[o].name
}

// Doc says what the option does, for plan rows.
func (o Option) Doc() string { return options[o].doc }

// Options lists every option, in the order the program sets them.
func Options() []Option {
	out := make([]Option, numOptions)
	for i := range out {
		out[i] = Option(i)
	}
	return out
}

// ParseOption finds an option by its name.
func ParseOption(name string) (Option, error) {
	for i, o := range options {
		if o.name == name {
			return Option(i), nil
		}
	}
	names := make([]string, 0, numOptions)
	for _, o := range options {
		names = append(names, o.name)
	}
	return 0, fmt.Errorf("unknown socket option %q (known: %s)", name, strings.Join(names, ", "))
}

// CheckValue checks a value for o the way the kernel would before anything
// is attached: a number in range, or a congestion control name that fits.
func (o Option) CheckValue(v string) error {
	if o == Congestion {
		if v == "" || len(v) >= tcpCANameMax || strings.ContainsAny(v, " \t\n/=") {
			return fmt.Errorf("%s: %q is not a congestion control name", o, v)
		}
		return nil
	}
	n, err := strconv.ParseUint(v, 10, 32)
	if o == NoDelay {
		if v == "true" || v == "false" {
			return nil
		}
		if err != nil || n > 1 {
			return fmt.Errorf("%s: want true or false, not %q", o, v)
		}
		return nil
	}
	if err != nil || n == 0 || n > 1<<31-1 {
		return fmt.Errorf("%s: want a positive integer, not %q", o, v)
	}
	if o == InitCwnd && n > 1000 {
		return fmt.Errorf("%s: %d segments is not a window a kernel accepts (at most 1000 here)", o, n)
	}
	return nil
}

// Live says whether o can be set on a connection that already exists:
// TCP_NODELAY, TCP_CONGESTION and TCP_NOTSENT_LOWAT can, through
// setsockopt. An initial window means nothing once data has flowed, and the
// delayed-ACK and RTO bounds exist only as bpf_setsockopt options.
func (o Option) Live() bool {
	return o == NoDelay || o == Congestion || o == NotSentLowat
}

// Canon returns the canonical text of a checked value ("1" for true).
func (o Option) Canon(v string) string {
	switch {
	case o == NoDelay && v == "true":
		return "1"
	case o == NoDelay && v == "false":
		return "0"
	}
	return v
}

// Selector says which connections an entry applies to: exactly one field
// is set.
type Selector struct {
	// Port is the connections' local port: every connection a server
	// accepts on a listening port.
	Port uint16
	// Cgroup is a cgroup v2 directory below the hierarchy's root
	// ("/workloads/gateway"): the outbound connections its processes make.
	Cgroup string
	// Service is a systemd service ("gateway.service"), found on the host
	// by its cgroup: the outbound connections its processes make.
	Service string
}

// Outbound reports whether the selector is a process's (cgroup, service):
// its program attaches at that cgroup and acts on the connections the
// processes open, not on those they accept.
func (s Selector) Outbound() bool { return s.Port == 0 }

// ParseSelector parses "port:N", "cgroup:/PATH" or "service:NAME.service".
func ParseSelector(s string) (Selector, error) {
	kind, arg, ok := strings.Cut(s, ":")
	if !ok {
		return Selector{}, fmt.Errorf("socket selector %q: want port:N, cgroup:/PATH or service:NAME.service", s)
	}
	switch kind {
	case "port":
		n, err := strconv.ParseUint(arg, 10, 16)
		if err != nil || n == 0 {
			return Selector{}, fmt.Errorf("socket selector %q: %q is not a port (1-65535)", s, arg)
		}
		return Selector{Port: uint16(n)}, nil
	case "cgroup":
		if arg == "/" {
			return Selector{}, fmt.Errorf("socket selector %q: the root cgroup holds every process on the host; select a service's cgroup, or the server's port:N", s)
		}
		if !strings.HasPrefix(arg, "/") || path.Clean(arg) != arg || strings.Contains(arg, "/..") || strings.ContainsAny(arg, " \t\n") {
			return Selector{}, fmt.Errorf("socket selector %q: want an absolute cgroup path below the hierarchy's root (cgroup:/system.slice/gw.service)", s)
		}
		return Selector{Cgroup: arg}, nil
	case "service":
		if !strings.HasSuffix(arg, ".service") || len(arg) == len(".service") || strings.ContainsAny(arg, "/ \t\n") {
			return Selector{}, fmt.Errorf("socket selector %q: want a systemd service name (service:gateway.service)", s)
		}
		return Selector{Service: arg}, nil
	}
	return Selector{}, fmt.Errorf("socket selector %q: unknown kind %q (known: port, cgroup, service)", s, kind)
}

func (s Selector) String() string {
	switch {
	case s.Cgroup != "":
		return "cgroup:" + s.Cgroup
	case s.Service != "":
		return "service:" + s.Service
	}
	return "port:" + strconv.Itoa(int(s.Port))
}

// SplitSetting splits "<selector>/<option>" (a knob's target, a profile
// setting's name) at its last slash: a cgroup path has slashes of its own.
func SplitSetting(name string) (Selector, Option, error) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return Selector{}, 0, fmt.Errorf("socket setting %q: want SELECTOR/OPTION (port:7000/nodelay)", name)
	}
	sel, err := ParseSelector(name[:i])
	if err != nil {
		return Selector{}, 0, err
	}
	opt, err := ParseOption(name[i+1:])
	if err != nil {
		return Selector{}, 0, err
	}
	return sel, opt, nil
}

// Entry is what the program sets on one selector's connections: a value per
// option, absent options untouched.
type Entry map[Option]string

func (e Entry) String() string {
	keys := make([]string, 0, len(e))
	for o, v := range e {
		keys = append(keys, o.String()+"="+v)
	}
	sort.Strings(keys)
	return strings.Join(keys, " ")
}

// marshal encodes e as the map's value: a mask of the options present, then
// each value at its offset.
func (e Entry) marshal() ([]byte, error) {
	b := make([]byte, entrySize)
	var mask uint32
	for o, v := range e {
		if err := o.CheckValue(v); err != nil {
			return nil, err
		}
		mask |= 1 << uint(o)
		if o == Congestion {
			copy(b[congestionOffset:], v)
			continue
		}
		n, _ := strconv.ParseUint(o.Canon(v), 10, 32)
		putU32(b[options[o].offset:], uint32(n))
	}
	putU32(b[entryMaskOffset:], mask)
	return b, nil
}

func unmarshalEntry(b []byte) (Entry, error) {
	if len(b) != entrySize {
		return nil, fmt.Errorf("map entry of %d bytes, want %d", len(b), entrySize)
	}
	mask := getU32(b[entryMaskOffset:])
	e := Entry{}
	for i := Option(0); i < numOptions; i++ {
		if mask&(1<<uint(i)) == 0 {
			continue
		}
		if i == Congestion {
			name := b[congestionOffset : congestionOffset+tcpCANameMax]
			if n := strings.IndexByte(string(name), 0); n >= 0 {
				name = name[:n]
			}
			e[i] = string(name)
			continue
		}
		e[i] = strconv.FormatUint(uint64(getU32(b[options[i].offset:])), 10)
	}
	return e, nil
}

// key is the map's key: the network namespace's cookie (0 when the kernel
// cannot tell namespaces apart in sock_ops), the local port.
func key(netns uint64, port uint16) []byte {
	b := make([]byte, keySize)
	putU64(b, netns)
	putU32(b[8:], uint32(port))
	return b
}

// BPF maps hold the host's byte order.
func putU32(b []byte, v uint32) { binary.NativeEndian.PutUint32(b, v) }
func getU32(b []byte) uint32    { return binary.NativeEndian.Uint32(b) }
func putU64(b []byte, v uint64) { binary.NativeEndian.PutUint64(b, v) }
func getU64(b []byte) uint64    { return binary.NativeEndian.Uint64(b) }
