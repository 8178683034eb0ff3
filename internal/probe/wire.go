package probe

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"time"
)

// Wire format, version 1. Everything is big-endian. docs/probe.md has the tables.
//
// UDP: every datagram starts with a 16-byte header
//
//	0  2  magic "LL"
//	2  1  version (1)
//	3  1  type (pktOpen ... pktClosed)
//	4  1  flags (flagAuth: a 32-byte HMAC-SHA256 of everything before it ends the datagram)
//	5  1  code (refusal reason in pktRefused, else 0; see refuse*)
//	6  1  pktReply: 0x80 | the DSCP the probe reached the reflector with
//	      (0: not known); other types: reserved (0)
//	7  1  reserved (0)
//	8  8  session id (0 in pktOpen)
//
// followed by a 32-byte body whose layout depends on the type, zero padding up to
// the datagram's size, and the MAC when flagAuth is set. Replies are written into
// the request's own buffer, so a reply is never larger than the request.
const (
	wireVersion = 1
	magic0      = 'L'
	magic1      = 'L'

	hdrLen     = 16
	bodyLen    = 32
	minUDPLen  = hdrLen + bodyLen // 48
	macLen     = sha256.Size      // 32
	maxUDPSize = 65507            // largest UDP payload over IPv4
)

// UDP packet types.
const (
	pktOpen    = 1 // client asks for a session
	pktOpenOK  = 2 // reflector accepts
	pktRefused = 3 // reflector refuses; code says why, limit says the bound
	pktProbe   = 4 // client probe
	pktReply   = 5 // reflector's echo of a probe
	pktClose   = 6 // client asks for the final counters
	pktClosed  = 7 // reflector's final counters
)

const flagAuth = 0x01

// Refusal codes, shared by UDP (pktRefused) and TCP (status byte).
const (
	refuseNone     = 0
	refuseCapacity = 1 // max-clients reached
	refuseInterval = 2 // interval below the reflector's minimum
	refuseDuration = 3 // test longer than the reflector allows
	refuseSize     = 4 // packet or message larger than the reflector allows
	refuseMode     = 5 // unknown TCP mode
	refusePerIP    = 6 // UDP sessions from this address at max-sessions-per-ip
	refuseConnsIP  = 7 // TCP connections from this address at max-conns-per-ip

	// Refusals of a peer without a key (see ReflectorConfig.AllowLoad).
	// Clients older than these codes print them as "reflector refused
	// (code N, limit L)" and stop: a clean failure, never a hang.
	refuseLoad         = 8  // sink or source, and load not allowed
	refuseOpenSize     = 9  // CRR request or response above OpenResponse, load not allowed
	refuseEcho         = 10 // rr response larger than its request (limit: the request size)
	refuseRate         = 11 // the client's bytes are over the rate (limit: bits/s)
	refuseLoadDuration = 12 // sink or source longer than LoadDuration
)

// RefusedError is returned when the reflector answers but declines the test.
type RefusedError struct {
	Code  int
	Limit uint64
}

func (e *RefusedError) Error() string {
	switch e.Code {
	case refuseCapacity:
		return fmt.Sprintf("reflector refused: at capacity (max-clients %d)", e.Limit)
	case refuseInterval:
		return fmt.Sprintf("reflector refused: interval below its minimum of %s (reflector --min-interval)", fmtDur(int64(e.Limit)))
	case refuseDuration:
		return fmt.Sprintf("reflector refused: test longer than its maximum of %s (reflector --max-duration)", fmtDur(int64(e.Limit)))
	case refuseSize:
		return fmt.Sprintf("reflector refused: size above its maximum of %d bytes (reflector --max-size)", e.Limit)
	case refuseMode:
		return "reflector refused: unknown test mode (reflector too old?)"
	case refusePerIP:
		return fmt.Sprintf("reflector refused: %d UDP sessions already open from this address (reflector --max-sessions-per-ip %d)", e.Limit, e.Limit)
	case refuseConnsIP:
		return fmt.Sprintf("reflector refused: %d TCP connections already open from this address (reflector --max-conns-per-ip %d)", e.Limit, e.Limit)
	case refuseLoad:
		return "reflector refused load: bulk modes need a key or --allow-load on the reflector"
	case refuseOpenSize:
		return fmt.Sprintf("reflector refused: CRR requests and responses above %s are bulk; they need a key or --allow-load on the reflector", fmtBytes(e.Limit))
	case refuseEcho:
		return fmt.Sprintf("reflector refused: without a key an rr response may not be larger than its request (%d bytes)", e.Limit)
	case refuseRate:
		return fmt.Sprintf("reflector refused: this address is over the reflector's rate of %s for peers without a key; lower --rate, or use a key", fmtRate(e.Limit))
	case refuseLoadDuration:
		return fmt.Sprintf("reflector refused load: longer than its maximum of %s for peers without a key (reflector --load-duration)", fmtDurShort(time.Duration(e.Limit)))
	}
	return fmt.Sprintf("reflector refused (code %d, limit %d)", e.Code, e.Limit)
}

// Decode errors. They are values so the decoder never allocates.
var (
	errShort    = errors.New("packet too short")
	errMagic    = errors.New("bad magic")
	errVersion  = errors.New("unsupported version")
	errType     = errors.New("unknown packet type")
	errAuth     = errors.New("authentication failed")
	errNoAuth   = errors.New("unauthenticated packet")
	errReserved = errors.New("reserved bits set")
)

// packet is a decoded UDP datagram. Which fields mean something depends on Type.
type packet struct {
	Type    uint8
	Flags   uint8
	Code    uint8
	Session uint64

	// pktOpen / pktOpenOK / pktRefused / pktClose / pktClosed
	Nonce uint64
	// pktOpen: requested interval, duration, probe size, DSCP.
	// pktOpenOK: A = idle timeout ns, B = minimum interval ns.
	// pktRefused: A = limit. pktClosed: Received in Seq, duplicates in
	// SrvRecv, probes its rate limit dropped in Throttled (0 from a
	// reflector older than the field: the bytes were reserved, zero).
	A, B      uint64
	Size      uint32
	DSCP      uint8
	Throttled uint32

	// pktProbe / pktReply
	Seq      uint32
	SrvRecv  uint32 // unique probes the reflector had received in this session
	ClientTx int64  // client's send time, wall clock ns (echoed)
	SrvRx    int64  // reflector's receive time, wall clock ns
	SrvProc  int64  // reflector's processing time, ns (rx to just before send)
	// SrvDSCP (pktReply) is dscpKnown | the DSCP the probe arrived with at
	// the reflector, or 0 when the reflector could not tell.
	SrvDSCP uint8
}

// dscpKnown flags SrvDSCP as set.
const dscpKnown = 0x80

// mac computes and checks HMAC-SHA256 tags without allocating after creation.
type mac struct {
	h   hash.Hash
	sum [macLen]byte
}

func newMAC(key []byte) *mac {
	if len(key) == 0 {
		return nil
	}
	return &mac{h: hmac.New(sha256.New, key)}
}

func (m *mac) compute(b []byte) []byte {
	m.h.Reset()
	m.h.Write(b)
	return m.h.Sum(m.sum[:0])
}

// sign writes the tag over b[:len(b)-macLen] into the tail of b.
func (m *mac) sign(b []byte) {
	n := len(b) - macLen
	copy(b[n:], m.compute(b[:n]))
}

// verify reports whether the tail of b is the right tag.
func (m *mac) verify(b []byte) bool {
	n := len(b) - macLen
	if n < 0 {
		return false
	}
	return hmac.Equal(b[n:], m.compute(b[:n]))
}

// minPacket is the smallest datagram for the given authentication.
func minPacket(auth bool) int {
	if auth {
		return minUDPLen + macLen
	}
	return minUDPLen
}

// decodeUDP parses and authenticates one datagram. With m nil, authenticated
// datagrams are rejected (the reflector has no key to check them); with m set,
// unauthenticated ones are. It never allocates and never panics on any input.
func decodeUDP(b []byte, m *mac) (packet, error) {
	var p packet
	if len(b) < minUDPLen {
		return p, errShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return p, errMagic
	}
	if b[2] != wireVersion {
		return p, errVersion
	}
	p.Type, p.Flags, p.Code = b[3], b[4], b[5]
	if p.Flags&^flagAuth != 0 {
		return p, errReserved
	}
	if p.Type < pktOpen || p.Type > pktClosed {
		return p, errType
	}
	auth := p.Flags&flagAuth != 0
	switch {
	case auth && m == nil:
		return p, errAuth
	case !auth && m != nil:
		return p, errNoAuth
	case auth:
		if len(b) < minUDPLen+macLen || !m.verify(b) {
			return p, errAuth
		}
	}
	be := binary.BigEndian
	p.Session = be.Uint64(b[8:])
	switch p.Type {
	case pktOpen:
		p.Nonce = be.Uint64(b[16:])
		p.A = be.Uint64(b[24:]) // interval
		p.B = be.Uint64(b[32:]) // duration
		p.Size = be.Uint32(b[40:])
		p.DSCP = b[44]
	case pktOpenOK, pktRefused, pktClose:
		p.Nonce = be.Uint64(b[16:])
		p.A = be.Uint64(b[24:])
		p.B = be.Uint64(b[32:])
	case pktClosed:
		p.Nonce = be.Uint64(b[16:])
		p.Seq = be.Uint32(b[24:])
		p.SrvRecv = be.Uint32(b[28:])
		p.Throttled = be.Uint32(b[32:])
	case pktProbe, pktReply:
		p.Seq = be.Uint32(b[16:])
		p.SrvRecv = be.Uint32(b[20:])
		p.ClientTx = int64(be.Uint64(b[24:]))
		p.SrvRx = int64(be.Uint64(b[32:]))
		p.SrvProc = int64(be.Uint64(b[40:]))
		if p.Type == pktReply {
			p.SrvDSCP = b[6]
		}
	}
	return p, nil
}

// putHeader writes the common header into b.
func putHeader(b []byte, typ uint8, auth bool, code uint8, session uint64) {
	b[0], b[1], b[2], b[3] = magic0, magic1, wireVersion, typ
	b[4] = 0
	if auth {
		b[4] = flagAuth
	}
	b[5], b[6], b[7] = code, 0, 0
	binary.BigEndian.PutUint64(b[8:], session)
}

// encodeUDP writes p into b (whose length is the datagram size, padding already
// zero or meaningless) and signs it when m is set. b must be at least
// minPacket(m != nil) long.
func encodeUDP(b []byte, p *packet, m *mac) {
	putHeader(b, p.Type, m != nil, p.Code, p.Session)
	be := binary.BigEndian
	switch p.Type {
	case pktOpen:
		be.PutUint64(b[16:], p.Nonce)
		be.PutUint64(b[24:], p.A)
		be.PutUint64(b[32:], p.B)
		be.PutUint32(b[40:], p.Size)
		b[44], b[45], b[46], b[47] = p.DSCP, 0, 0, 0
	case pktOpenOK, pktRefused, pktClose:
		be.PutUint64(b[16:], p.Nonce)
		be.PutUint64(b[24:], p.A)
		be.PutUint64(b[32:], p.B)
		be.PutUint64(b[40:], 0)
	case pktClosed:
		be.PutUint64(b[16:], p.Nonce)
		be.PutUint32(b[24:], p.Seq)
		be.PutUint32(b[28:], p.SrvRecv)
		be.PutUint32(b[32:], p.Throttled)
		clear(b[36:48])
	case pktProbe, pktReply:
		be.PutUint32(b[16:], p.Seq)
		be.PutUint32(b[20:], p.SrvRecv)
		be.PutUint64(b[24:], uint64(p.ClientTx))
		be.PutUint64(b[32:], uint64(p.SrvRx))
		be.PutUint64(b[40:], uint64(p.SrvProc))
		if p.Type == pktReply {
			b[6] = p.SrvDSCP
		}
	}
	if m != nil {
		m.sign(b)
	}
}

// TCP: the client opens every connection with a hello, the reflector answers
// with a status; after that the bytes depend on the mode.
//
// hello (client -> reflector), helloLen bytes, then a MAC over them if flagAuth:
//
//	0  2  magic "LL"
//	2  1  version (1)
//	3  1  mode (modeRR, modeCRR, modeSink, modeSource)
//	4  1  flags (flagAuth, flagServerNagle)
//	5  3  reserved (0)
//	8  4  request size (rr: bytes per request; crr: total request bytes incl. hello)
//	12 4  response size (rr: bytes per response; crr: total response bytes incl. status)
//	16 8  nonce (random; authenticated hellos are refused if a nonce repeats)
//	24 8  duration ns (how long the test will run; bounded by --max-duration)
//	32 8  reserved (0)
//
// status (reflector -> client), statusLen bytes:
//
//	0  2  magic "LL"
//	2  1  version
//	3  1  code (0 ok, else a refusal code)
//	4  4  sink and source accepted: the reflector's rate cap for this
//	      client and direction in kbit/s (0: none); else reserved (0).
//	      Older clients ignore these bytes.
//	8  8  ok: the reflector's idle timeout in ns; refusal: the limit
const (
	helloLen  = 40
	statusLen = 16

	modeRR     = 1 // request/response echo, persistent connection
	modeCRR    = 2 // one request, one response of a given size, close
	modeSink   = 3 // client uploads; reflector counts and reports bytes
	modeSource = 4 // reflector sends until the duration ends or the client closes

	flagServerNagle = 0x02 // leave Nagle on for the reflector's side of the connection
)

type hello struct {
	Mode     uint8
	Flags    uint8
	ReqSize  uint32
	RespSize uint32
	Nonce    uint64
	Duration int64
}

// helloSize is the hello's length on the wire.
func helloSize(auth bool) int {
	if auth {
		return helloLen + macLen
	}
	return helloLen
}

func encodeHello(b []byte, h *hello, m *mac) []byte {
	b = b[:helloSize(m != nil)]
	be := binary.BigEndian
	b[0], b[1], b[2], b[3] = magic0, magic1, wireVersion, h.Mode
	b[4] = h.Flags &^ flagAuth
	if m != nil {
		b[4] |= flagAuth
	}
	b[5], b[6], b[7] = 0, 0, 0
	be.PutUint32(b[8:], h.ReqSize)
	be.PutUint32(b[12:], h.RespSize)
	be.PutUint64(b[16:], h.Nonce)
	be.PutUint64(b[24:], uint64(h.Duration))
	be.PutUint64(b[32:], 0)
	if m != nil {
		m.sign(b)
	}
	return b
}

// decodeHelloHeader checks the fixed part of a hello; it reports whether a MAC
// follows. The caller reads the MAC and calls verifyHello.
func decodeHelloHeader(b []byte) (hello, bool, error) {
	var h hello
	if len(b) < helloLen {
		return h, false, errShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return h, false, errMagic
	}
	if b[2] != wireVersion {
		return h, false, errVersion
	}
	if b[5]|b[6]|b[7] != 0 || b[4]&^(flagAuth|flagServerNagle) != 0 {
		return h, false, errReserved
	}
	be := binary.BigEndian
	h.Mode = b[3]
	h.Flags = b[4]
	h.ReqSize = be.Uint32(b[8:])
	h.RespSize = be.Uint32(b[12:])
	h.Nonce = be.Uint64(b[16:])
	h.Duration = int64(be.Uint64(b[24:]))
	if h.Duration < 0 {
		return h, false, errReserved
	}
	return h, h.Flags&flagAuth != 0, nil
}

func encodeStatus(b []byte, code uint8, value uint64) []byte {
	b = b[:statusLen]
	b[0], b[1], b[2], b[3] = magic0, magic1, wireVersion, code
	clear(b[4:8])
	binary.BigEndian.PutUint64(b[8:], value)
	return b
}

// putStatusCap writes a sink or source status's rate cap (kbit/s).
func putStatusCap(b []byte, kbit uint32) []byte {
	binary.BigEndian.PutUint32(b[4:], kbit)
	return b
}

// statusCap reads it back.
func statusCap(b []byte) uint32 { return binary.BigEndian.Uint32(b[4:]) }

func decodeStatus(b []byte) (code uint8, value uint64, err error) {
	if len(b) < statusLen {
		return 0, 0, errShort
	}
	if b[0] != magic0 || b[1] != magic1 {
		return 0, 0, errMagic
	}
	if b[2] != wireVersion {
		return 0, 0, errVersion
	}
	return b[3], binary.BigEndian.Uint64(b[8:]), nil
}
