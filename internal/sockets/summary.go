package sockets

import (
	"fmt"
	"sort"
	"strings"
)

// Summary is what doctor needs from a socket audit, condensed per process so
// a capture stays small and carries no client addresses beyond a few
// examples. host.Facts holds it (Facts.Sockets); Summarize builds it.
type Summary struct {
	// Live is true when the audit ran on this host; false when only proxy
	// configuration files were read (a captured tree).
	Live bool `json:"live"`
	// Error is why the audit could not run at all (no inet_diag).
	Error     string           `json:"error,omitempty"`
	Sockets   int              `json:"sockets"`
	Processes []ProcessSummary `json:"processes,omitempty"`
	// Unread counts owned sockets whose options could not be read, by
	// reason ("permission", "process exited"...).
	Unread  map[string]int `json:"unread,omitempty"`
	Proxies []ProxyConfig  `json:"proxies,omitempty"`
	// Warnings are the audit's own (hidden processes, interrupted dumps).
	Warnings []string `json:"warnings,omitempty"`
}

// ProcessSummary is one process's TCP sockets.
type ProcessSummary struct {
	PID  int    `json:"pid"`
	Comm string `json:"comm"`
	// Runtime is the language runtime guessed from the executable: "go",
	// "java", "node", "python", "nginx", "haproxy" or "" (C, C++, unknown).
	Runtime string `json:"runtime,omitempty"`
	// ConfigPath is a proxy's configuration file from its command line.
	ConfigPath string            `json:"config_path,omitempty"`
	Listeners  []ListenerSummary `json:"listeners,omitempty"`
	// Established counts established connections; OptionsKnown those whose
	// options were read; NoDelay those with TCP_NODELAY.
	Established  int `json:"established"`
	OptionsKnown int `json:"options_known"`
	NoDelay      int `json:"nodelay"`
	// SmallWrites counts connections without TCP_NODELAY whose sent
	// segments are small on average: Nagle's algorithm holds such writes
	// back until the previous one is acknowledged.
	SmallWrites int           `json:"small_writes"`
	Examples    []ConnSummary `json:"examples,omitempty"`
	// ByPort counts established connections per local port, with how many
	// have TCP_NODELAY, so proxy listeners can be compared with their
	// connections.
	ByPort []PortSummary `json:"by_port,omitempty"`
}

// ListenerSummary is one listening socket.
type ListenerSummary struct {
	Local        string `json:"local"`
	Port         uint16 `json:"port"`
	FastOpenQLen int    `json:"fastopen_qlen"`
	NoDelay      bool   `json:"nodelay"`
	ReusePort    bool   `json:"reuseport"`
	OptionsError string `json:"options_error,omitempty"`
}

// PortSummary counts a process's established connections on one local port.
type PortSummary struct {
	Port         uint16 `json:"port"`
	Established  int    `json:"established"`
	OptionsKnown int    `json:"options_known"`
	NoDelay      int    `json:"nodelay"`
}

// ConnSummary is one example connection for a finding's evidence.
type ConnSummary struct {
	Local           string  `json:"local"`
	Remote          string  `json:"remote"`
	BytesPerSegment float64 `json:"bytes_per_segment"`
	DataSegsOut     uint32  `json:"data_segs_out"`
	RTTus           uint32  `json:"rtt_us"`
	ATOus           uint32  `json:"ato_us"`
}

// Small-message thresholds: runbook 001's game messages are 64-512 bytes;
// ten segments make an average meaningful.
const (
	SmallSegmentBytes = 512
	MinDataSegments   = 10
	maxExamples       = 3
)

// SmallWrites reports whether a connection without TCP_NODELAY has been
// sending small segments: the pattern that meets Nagle's algorithm.
func SmallWrites(s *Socket) bool {
	if s.Options == nil || s.Options.NoDelay || s.TCPInfo == nil || s.TCPInfo.DataSegsOut == nil {
		return false
	}
	if *s.TCPInfo.DataSegsOut < MinDataSegments {
		return false
	}
	bps := s.TCPInfo.BytesPerSegment()
	limit := float64(SmallSegmentBytes)
	if mss := float64(s.TCPInfo.SndMSS); mss > 0 && mss/2 < limit {
		limit = mss / 2
	}
	return bps > 0 && bps < limit
}

// Summarize condenses an audit per owning process.
func Summarize(r *Report) *Summary {
	sum := &Summary{Live: true, Sockets: len(r.Sockets), Warnings: r.Warnings}
	byPID := map[int]*ProcessSummary{}
	ports := map[int]map[uint16]*PortSummary{}
	for i := range r.Sockets {
		s := &r.Sockets[i]
		if s.PID == 0 {
			continue
		}
		p := byPID[s.PID]
		if p == nil {
			p = &ProcessSummary{PID: s.PID, Comm: s.Comm}
			byPID[s.PID] = p
			ports[s.PID] = map[uint16]*PortSummary{}
		}
		if s.Options == nil && s.OptionsError != "" {
			if sum.Unread == nil {
				sum.Unread = map[string]int{}
			}
			sum.Unread[reasonOf(s.OptionsError)]++
		}
		switch {
		case s.Listener():
			l := ListenerSummary{Local: s.Local, Port: s.port, OptionsError: s.OptionsError}
			if o := s.Options; o != nil {
				l.FastOpenQLen, l.NoDelay, l.ReusePort = o.FastOpenQLen, o.NoDelay, o.ReusePort
			}
			p.Listeners = append(p.Listeners, l)
		case s.Established():
			p.Established++
			ps := ports[s.PID][s.port]
			if ps == nil {
				ps = &PortSummary{Port: s.port}
				ports[s.PID][s.port] = ps
			}
			ps.Established++
			if s.Options != nil {
				p.OptionsKnown++
				ps.OptionsKnown++
				if s.Options.NoDelay {
					p.NoDelay++
					ps.NoDelay++
				}
			}
			if SmallWrites(s) {
				p.SmallWrites++
				if len(p.Examples) < maxExamples {
					p.Examples = append(p.Examples, ConnSummary{
						Local: s.Local, Remote: s.Remote,
						BytesPerSegment: float64(int(s.TCPInfo.BytesPerSegment()*10)) / 10,
						DataSegsOut:     *s.TCPInfo.DataSegsOut,
						RTTus:           s.TCPInfo.RTTus, ATOus: s.TCPInfo.ATOus,
					})
				}
			}
		}
	}
	for pid, p := range byPID {
		for _, ps := range ports[pid] {
			p.ByPort = append(p.ByPort, *ps)
		}
		sort.Slice(p.ByPort, func(i, j int) bool { return p.ByPort[i].Port < p.ByPort[j].Port })
		sort.Slice(p.Listeners, func(i, j int) bool { return p.Listeners[i].Local < p.Listeners[j].Local })
		sum.Processes = append(sum.Processes, *p)
	}
	sort.Slice(sum.Processes, func(i, j int) bool { return sum.Processes[i].PID < sum.Processes[j].PID })
	return sum
}

// reasonOf extracts "permission" from "unknown (permission: ...)".
func reasonOf(e string) string {
	r := strings.TrimPrefix(e, "unknown (")
	if i := strings.IndexAny(r, ":)"); i >= 0 {
		r = r[:i]
	}
	return r
}

// Process returns the summary of pid, or nil.
func (s *Summary) Process(pid int) *ProcessSummary {
	if s == nil {
		return nil
	}
	for i := range s.Processes {
		if s.Processes[i].PID == pid {
			return &s.Processes[i]
		}
	}
	return nil
}

// UnreadText says how many sockets' options could not be read and why, or "".
func (s *Summary) UnreadText() string {
	if s == nil || len(s.Unread) == 0 {
		return ""
	}
	var parts []string
	for r, n := range s.Unread {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
