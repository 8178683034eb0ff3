package sockets

import "encoding/binary"

// Offsets in struct tcp_info (include/uapi/linux/tcp.h). The struct only
// grows at its end, so a field is present exactly when the kernel sent at
// least its end offset; the comments name the kernel that added it.
const (
	tiState        = 0
	tiRetransmits  = 2
	tiFlags        = 7 // delivery_rate_app_limited:1 (4.9)
	tiRTO          = 8
	tiATO          = 12
	tiSndMSS       = 16
	tiRcvMSS       = 20
	tiUnacked      = 24
	tiLost         = 32
	tiRetrans      = 36
	tiLastDataSent = 44
	tiLastDataRecv = 52
	tiRTT          = 68
	tiRTTVar       = 72
	tiSsthresh     = 76
	tiCwnd         = 80
	tiTotalRetrans = 100
	tiBaseLen      = 104 // 3.10 ends here
	tiPacingRate   = 104 // 3.15
	tiBytesAcked   = 120 // 4.1
	tiBytesRecv    = 128 // 4.1
	tiSegsOut      = 136 // 4.2
	tiSegsIn       = 140 // 4.2
	tiNotSent      = 144 // 4.6
	tiMinRTT       = 148 // 4.6
	tiDataSegsIn   = 152 // 4.6
	tiDataSegsOut  = 156 // 4.6
	tiDeliveryRate = 160 // 4.9
	tiBusy         = 168 // 4.10
	tiRwndLimited  = 176 // 4.10
	tiSndbufLimit  = 184 // 4.10
	tiBytesSent    = 200 // 4.19
	tiBytesRetrans = 208 // 4.19
)

// infiniteSsthresh is TCP_INFINITE_SSTHRESH: no loss seen yet.
const infiniteSsthresh = 0x7fffffff

// tcpInfoStore backs a TCPInfo's optional fields.
type tcpInfoStore struct {
	ti  TCPInfo
	u64 [11]uint64
	u32 [8]uint32
}

// DecodeTCPInfo decodes a struct tcp_info of any kernel's length. It returns
// nil when b is shorter than the oldest layout (3.10's 104 bytes): such a
// buffer is not a tcp_info, and a half-decoded one would be garbage.
func DecodeTCPInfo(b []byte) *TCPInfo {
	if len(b) < tiBaseLen {
		return nil
	}
	le := binary.NativeEndian
	u32 := func(off int) uint32 { return le.Uint32(b[off:]) }
	// One allocation per socket: the optional fields point into st, which
	// matters when an audit decodes tens of thousands of them.
	st := &tcpInfoStore{}
	ti := &st.ti
	*ti = TCPInfo{
		RTOus:          u32(tiRTO),
		ATOus:          u32(tiATO),
		SndMSS:         u32(tiSndMSS),
		RcvMSS:         u32(tiRcvMSS),
		Unacked:        u32(tiUnacked),
		Lost:           u32(tiLost),
		Retrans:        u32(tiRetrans),
		LastDataSentMs: u32(tiLastDataSent),
		LastDataRecvMs: u32(tiLastDataRecv),
		RTTus:          u32(tiRTT),
		RTTVarus:       u32(tiRTTVar),
		Cwnd:           u32(tiCwnd),
		TotalRetrans:   u32(tiTotalRetrans),
		Len:            len(b),
	}
	n64, n32 := 0, 0
	opt64 := func(off int) *uint64 {
		if len(b) < off+8 {
			return nil
		}
		p := &st.u64[n64]
		n64++
		*p = le.Uint64(b[off:])
		return p
	}
	opt32 := func(off int) *uint32 {
		if len(b) < off+4 {
			return nil
		}
		p := &st.u32[n32]
		n32++
		*p = le.Uint32(b[off:])
		return p
	}
	if v := u32(tiSsthresh); v < infiniteSsthresh {
		ti.Ssthresh = opt32(tiSsthresh)
	}
	// The kernel reports rates in bytes per second; JSON says bits, as ss does.
	ti.PacingRate = opt64(tiPacingRate)
	if ti.PacingRate != nil {
		if *ti.PacingRate == ^uint64(0) {
			ti.PacingRate = nil // ~0: no pacing rate (not computed yet)
		} else {
			*ti.PacingRate *= 8
		}
	}
	ti.BytesAcked = opt64(tiBytesAcked)
	ti.BytesReceived = opt64(tiBytesRecv)
	ti.SegsOut = opt32(tiSegsOut)
	ti.SegsIn = opt32(tiSegsIn)
	ti.NotSentBytes = opt32(tiNotSent)
	if m := opt32(tiMinRTT); m != nil && *m != ^uint32(0) {
		ti.MinRTTus = *m
	}
	ti.DataSegsIn = opt32(tiDataSegsIn)
	ti.DataSegsOut = opt32(tiDataSegsOut)
	ti.DeliveryRate = opt64(tiDeliveryRate)
	if ti.DeliveryRate != nil {
		*ti.DeliveryRate *= 8
		ti.DeliveryRateAppLimited = b[tiFlags]&1 != 0
	}
	ti.BusyUs = opt64(tiBusy)
	ti.RwndLimitedUs = opt64(tiRwndLimited)
	ti.SndbufLimitedUs = opt64(tiSndbufLimit)
	ti.BytesSent = opt64(tiBytesSent)
	ti.BytesRetrans = opt64(tiBytesRetrans)
	return ti
}

// BytesPerSegment is the average payload of the data segments the socket
// sent, or 0 when the kernel does not count them (before 4.6) or nothing
// was sent. Small values on a socket without TCP_NODELAY are what Nagle's
// algorithm holds back.
func (ti *TCPInfo) BytesPerSegment() float64 {
	if ti == nil || ti.DataSegsOut == nil || *ti.DataSegsOut == 0 {
		return 0
	}
	var bytes uint64
	switch {
	case ti.BytesSent != nil:
		bytes = *ti.BytesSent // retransmissions included, like data_segs_out
	case ti.BytesAcked != nil:
		bytes = *ti.BytesAcked
	default:
		return 0
	}
	return float64(bytes) / float64(*ti.DataSegsOut)
}
