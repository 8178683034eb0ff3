package sockets

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Socket is one TCP socket: the JSON row of 'lowlat sockets --json'.
type Socket struct {
	// PID and Comm are the owning process (the lowest pid when several
	// processes hold the socket, as forked servers do: see Owners). PID is 0
	// when no visible process holds it: a time-wait or orphaned socket, a
	// connection still in an accept queue, or a process this user may not
	// inspect (OptionsError says which).
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// FD is the owner's file descriptor number for the socket.
	FD int `json:"fd,omitempty"`
	// Owners lists every process holding the socket when there is more than one.
	Owners []Owner `json:"owners,omitempty"`
	// Local and Remote are "ADDR:PORT" ("[ADDR]:PORT" for IPv6).
	Local  string `json:"local"`
	Remote string `json:"remote"`
	// State is the TCP state as ss names it: "listen", "established",
	// "time-wait"...
	State  string `json:"state"`
	Family string `json:"family"` // "inet" or "inet6"
	UID    uint32 `json:"uid"`
	Inode  uint64 `json:"inode"`
	// RecvQ and SendQ are ss's Recv-Q and Send-Q: unread and unacknowledged
	// bytes, or for a listener the accept queue length and its limit.
	RecvQ uint32 `json:"recv_q"`
	SendQ uint32 `json:"send_q"`
	// Congestion is the congestion control the kernel reports through
	// inet_diag (known even when Options are not).
	Congestion string `json:"congestion,omitempty"`
	// Options are read from the socket itself; nil when they could not be,
	// with the reason in OptionsError ("unknown (permission: ...)").
	Options      *Options `json:"options"`
	OptionsError string   `json:"options_error"`
	// TCPInfo is the kernel's tcp_info for the socket; nil for sockets that
	// have none (time-wait, request sockets).
	TCPInfo *TCPInfo `json:"tcp_info"`
	// Mem is the socket's memory accounting (INET_DIAG_SKMEMINFO).
	Mem *Mem `json:"mem,omitempty"`
	// Mark is the socket's SO_MARK, which policy routing may choose its
	// route by. The kernel reports it only to a caller with CAP_NET_ADMIN:
	// 0 otherwise, as for a socket without one.
	Mark uint32 `json:"mark,omitempty"`
	// Enforced lists the options lowlat's sock_ops entry for the socket's
	// local port enforces ("nodelay", "initcwnd=40"), filled by 'lowlat
	// sockets'; an option the socket has and Enforced names was set by
	// lowlat, not by the application.
	Enforced []string `json:"enforced_by_lowlat,omitempty"`

	port     uint16 // local port, for filters
	rport    uint16
	stateNum uint8
}

// Owner is one process holding a socket.
type Owner struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	FD   int    `json:"fd"`
}

// Options are the socket options an application sets, as getsockopt returns
// them.
type Options struct {
	NoDelay bool `json:"nodelay"`
	Cork    bool `json:"cork"`
	// QuickAck is the kernel's current acknowledgement mode, not a sticky
	// setting: TCP_QUICKACK reads back as 0 while the connection is in
	// interactive ("pingpong") mode, whatever the application last wrote.
	QuickAck bool `json:"quickack"`
	// SndBuf and RcvBuf are the buffer sizes in bytes. Linux doubles a value
	// set with SO_SNDBUF/SO_RCVBUF (for its bookkeeping overhead), so
	// setsockopt(65536) reads back 131072.
	SndBuf     int    `json:"sndbuf"`
	RcvBuf     int    `json:"rcvbuf"`
	Congestion string `json:"congestion"`
	// NotSentLowat is TCP_NOTSENT_LOWAT; 0 means the socket follows the
	// net.ipv4.tcp_notsent_lowat sysctl.
	NotSentLowat uint32 `json:"notsent_lowat"`
	ReusePort    bool   `json:"reuseport"`
	// FastOpenQLen is the TCP_FASTOPEN queue a listener accepts (0: off).
	FastOpenQLen int `json:"fastopen_qlen"`
	// TOS is IP_TOS for IPv4 sockets and IPV6_TCLASS for IPv6 ones (DSCP <<
	// 2 | ECN).
	TOS      int `json:"tos"`
	Priority int `json:"priority"` // SO_PRIORITY
	// Unsupported names options this kernel refused to report (for example
	// TCP_NOTSENT_LOWAT before 3.12); their fields above are zero.
	Unsupported []string `json:"unsupported,omitempty"`
}

// TCPInfo is the subset of the kernel's struct tcp_info that explains what a
// connection is doing. Pointer fields are absent when the running kernel's
// tcp_info is too short to carry them (delivery rate needs 4.9, the busy /
// limited times 4.10, bytes_sent 4.19) and are then left out of JSON.
type TCPInfo struct {
	RTTus    uint32 `json:"rtt_us"`
	RTTVarus uint32 `json:"rttvar_us"`
	MinRTTus uint32 `json:"min_rtt_us,omitempty"`
	RTOus    uint32 `json:"rto_us"`
	// ATOus is the delayed-ACK timeout: about 40 ms when this side is holding
	// back ACKs, the other half of a Nagle stall.
	ATOus uint32 `json:"ato_us"`
	Cwnd  uint32 `json:"cwnd"`
	// Ssthresh is nil while the connection is still in its first slow
	// start (the kernel's "infinite" threshold).
	Ssthresh *uint32 `json:"ssthresh"`
	// Retrans is the number of segments retransmitted and not yet
	// acknowledged; TotalRetrans counts every retransmission of the
	// connection's lifetime.
	Retrans      uint32 `json:"retrans"`
	TotalRetrans uint32 `json:"total_retrans"`
	Unacked      uint32 `json:"unacked"`
	Lost         uint32 `json:"lost"`
	SndMSS       uint32 `json:"snd_mss"`
	RcvMSS       uint32 `json:"rcv_mss"`
	// PacingRate and DeliveryRate are in bits per second (the kernel's
	// bytes per second times 8, as ss prints them).
	PacingRate   *uint64 `json:"pacing_rate_bps,omitempty"`
	DeliveryRate *uint64 `json:"delivery_rate_bps,omitempty"`
	// DeliveryRateAppLimited: the rate was measured while the application
	// had nothing to send, so it underestimates the path.
	DeliveryRateAppLimited bool `json:"delivery_rate_app_limited,omitempty"`
	// BusyUs, RwndLimitedUs and SndbufLimitedUs are how long the connection
	// has had data to send, and how much of that it was stopped by the
	// peer's receive window or by its own send buffer.
	BusyUs          *uint64 `json:"busy_us,omitempty"`
	RwndLimitedUs   *uint64 `json:"rwnd_limited_us,omitempty"`
	SndbufLimitedUs *uint64 `json:"sndbuf_limited_us,omitempty"`
	BytesSent       *uint64 `json:"bytes_sent,omitempty"`
	BytesAcked      *uint64 `json:"bytes_acked,omitempty"`
	BytesReceived   *uint64 `json:"bytes_received,omitempty"`
	BytesRetrans    *uint64 `json:"bytes_retrans,omitempty"`
	SegsOut         *uint32 `json:"segs_out,omitempty"`
	SegsIn          *uint32 `json:"segs_in,omitempty"`
	DataSegsOut     *uint32 `json:"data_segs_out,omitempty"`
	DataSegsIn      *uint32 `json:"data_segs_in,omitempty"`
	NotSentBytes    *uint32 `json:"notsent_bytes,omitempty"`
	// LastDataSentMs and LastDataRecvMs are how long ago data last went out
	// and came in.
	LastDataSentMs uint32 `json:"last_data_sent_ms"`
	LastDataRecvMs uint32 `json:"last_data_recv_ms"`
	// Len is the size of the struct the kernel sent (it grows with kernel
	// versions).
	Len int `json:"kernel_struct_len"`
}

// Mem is a socket's memory accounting in bytes.
type Mem struct {
	RmemAlloc  uint32 `json:"rmem_alloc"`
	RcvBuf     uint32 `json:"rcvbuf"`
	WmemAlloc  uint32 `json:"wmem_alloc"`
	SndBuf     uint32 `json:"sndbuf"`
	WmemQueued uint32 `json:"wmem_queued"`
	Drops      uint32 `json:"drops"`
}

// Report is the result of an audit: the JSON document of
// 'lowlat sockets --json'.
type Report struct {
	Sockets []Socket `json:"sockets"`
	// Warnings say what could not be read for the whole audit (a process
	// whose descriptors are hidden from this user, an interrupted dump).
	Warnings []string `json:"warnings,omitempty"`
	Stats    Stats    `json:"stats"`
}

// Stats describe the audit itself.
type Stats struct {
	Dumped     int   `json:"dumped"`      // sockets in the inet_diag dump
	Listed     int   `json:"listed"`      // rows after filters
	Processes  int   `json:"processes"`   // processes scanned in /proc
	Descriptor int   `json:"descriptors"` // socket descriptors found
	Options    int   `json:"options_read"`
	ElapsedUs  int64 `json:"elapsed_us"`
	// Pidfd says whether this kernel and this user can duplicate another
	// process's descriptors.
	Pidfd string `json:"pidfd"`
}

// Filter selects sockets. Zero values match everything.
type Filter struct {
	PID  int
	Comm string
	// Port matches the local or the remote port.
	Port uint16
	// States, when set, keeps only these states (ss names).
	States []string
}

// Config tunes an audit.
type Config struct {
	Filter Filter
	// NoOptions skips the pidfd/getsockopt step (tcp_info only).
	NoOptions bool
	// Proc is the procfs mount to scan; "" means /proc.
	Proc string
	// Workers reading options in parallel; 0 means one per CPU (at most 4).
	Workers int
}

// stateNames are the kernel's TCP states (include/net/tcp_states.h) as ss
// prints them.
var stateNames = [...]string{
	0:  "unknown",
	1:  "established",
	2:  "syn-sent",
	3:  "syn-recv",
	4:  "fin-wait-1",
	5:  "fin-wait-2",
	6:  "time-wait",
	7:  "close",
	8:  "close-wait",
	9:  "last-ack",
	10: "listen",
	11: "closing",
	12: "syn-recv", // TCP_NEW_SYN_RECV: a request socket
}

// Kernel TCP state numbers used by the audit.
const (
	stateEstablished = 1
	stateTimeWait    = 6
	stateListen      = 10
	stateNewSynRecv  = 12
)

// StateName returns ss's name for kernel TCP state s.
func StateName(s uint8) string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state-" + strconv.Itoa(int(s))
}

// ValidState reports whether name is a state Filter.States accepts.
func ValidState(name string) bool {
	for _, s := range stateNames[1:] {
		if s == name {
			return true
		}
	}
	return false
}

// States lists the state names Filter.States accepts.
func States() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range stateNames[1:] {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// Listener reports whether the socket is listening.
func (s *Socket) Listener() bool { return s.stateNum == stateListen }

// Established reports whether the socket is an established connection.
func (s *Socket) Established() bool { return s.stateNum == stateEstablished }

// LocalPort returns the socket's local port.
func (s *Socket) LocalPort() uint16 { return s.port }

// RemotePort returns the socket's remote port (0 for listeners).
func (s *Socket) RemotePort() uint16 { return s.rport }

// matchAddr keeps the filter's address-level conditions (state, port).
func (f *Filter) matchAddr(s *Socket) bool {
	if f.Port != 0 && s.port != f.Port && s.rport != f.Port {
		return false
	}
	if len(f.States) > 0 {
		ok := false
		for _, st := range f.States {
			if st == s.State {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// wantsOwner reports whether a process passes the filter's process-level
// conditions.
func (f *Filter) wantsOwner(pid int, comm string) bool {
	if f.PID != 0 && pid != f.PID {
		return false
	}
	if f.Comm != "" && comm != f.Comm {
		return false
	}
	return true
}

// byProcess is Filter's process-level part.
func (f *Filter) byProcess() bool { return f.PID != 0 || f.Comm != "" }

// formatAddr prints an address and port the way ss does.
func formatAddr(a netip.Addr, port uint16) string {
	return netip.AddrPortFrom(a, port).String()
}

// SortSockets orders rows by pid (sockets without an owner last), then state
// (listeners first), then local and remote address, so output is stable.
func SortSockets(ss []Socket) {
	sort.SliceStable(ss, func(i, j int) bool {
		a, b := &ss[i], &ss[j]
		if a.PID != b.PID {
			if a.PID == 0 || b.PID == 0 {
				return b.PID == 0
			}
			return a.PID < b.PID
		}
		if (a.stateNum == stateListen) != (b.stateNum == stateListen) {
			return a.stateNum == stateListen
		}
		if a.port != b.port {
			return a.port < b.port
		}
		if a.Local != b.Local {
			return a.Local < b.Local
		}
		return a.Remote < b.Remote
	})
}

// Option names accepted by Require.
var optionNames = []string{"nodelay", "cork", "quickack", "reuseport", "fastopen", "notsent_lowat"}

// OptionNames lists the options Require can check.
func OptionNames() []string { return append([]string(nil), optionNames...) }

// ErrUnknownOption is returned by ParseRequirement for a name it does not know.
var ErrUnknownOption = errors.New("unknown option")

// Requirement is one option a socket must have ("nodelay", "!cork").
type Requirement struct {
	Name string
	Want bool
}

func (r Requirement) String() string {
	if r.Want {
		return r.Name
	}
	return "!" + r.Name
}

// ParseRequirement parses "nodelay" or "!cork" / "no-cork".
func ParseRequirement(s string) (Requirement, error) {
	r := Requirement{Name: strings.TrimSpace(s), Want: true}
	if n, ok := strings.CutPrefix(r.Name, "!"); ok {
		r.Name, r.Want = n, false
	} else if n, ok := strings.CutPrefix(r.Name, "no-"); ok {
		r.Name, r.Want = n, false
	}
	for _, n := range optionNames {
		if n == r.Name {
			return r, nil
		}
	}
	return Requirement{}, fmt.Errorf("%w %q (want one of %s, or !NAME)", ErrUnknownOption, s, strings.Join(optionNames, ", "))
}

// Applies reports whether r concerns s: connection options (nodelay, cork,
// quickack, notsent_lowat) are checked on connections, fastopen on
// listeners, reuseport on both. A listener without TCP_NODELAY is normal
// when the application sets it on each accepted connection.
func (r Requirement) Applies(s *Socket) bool {
	switch r.Name {
	case "fastopen":
		return s.Listener()
	case "reuseport":
		return true
	}
	return !s.Listener()
}

// Check tells whether s meets r: ok, or why not. A socket whose options are
// unknown does not meet anything: a health check must not pass on what it
// could not see.
func (r Requirement) Check(s *Socket) (ok bool, why string) {
	if s.Options == nil {
		return false, "cannot verify: " + orDefault(s.OptionsError, "options not read")
	}
	o := s.Options
	var have bool
	switch r.Name {
	case "nodelay":
		have = o.NoDelay
	case "cork":
		have = o.Cork
	case "quickack":
		have = o.QuickAck
	case "reuseport":
		have = o.ReusePort
	case "fastopen":
		have = o.FastOpenQLen > 0
	case "notsent_lowat":
		have = o.NotSentLowat > 0
	}
	if have == r.Want {
		return true, ""
	}
	if r.Want {
		return false, "lacks " + r.Name
	}
	return false, "has " + r.Name
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
