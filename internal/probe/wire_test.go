package probe

import (
	"bytes"
	"net"
	"testing"
	"time"
)

func TestUDPCodecRoundTrip(t *testing.T) {
	key := newMAC([]byte("k"))
	cases := []struct {
		name string
		p    packet
		size int
		m    *mac
	}{
		{"open", packet{Type: pktOpen, Nonce: 7, A: uint64(time.Millisecond), B: uint64(time.Second), Size: 64, DSCP: 46}, 48, nil},
		{"open keyed", packet{Type: pktOpen, Nonce: 7, A: 1, B: 2, Size: 80}, 80, key},
		{"ok", packet{Type: pktOpenOK, Session: 99, Nonce: 7, A: 3, B: 4}, 48, nil},
		{"refused", packet{Type: pktRefused, Code: refuseCapacity, Nonce: 7, A: 100}, 48, nil},
		{"probe", packet{Type: pktProbe, Session: 1 << 60, Seq: 1<<32 - 1, ClientTx: -5, SrvRx: 1 << 62}, 1500, nil},
		{"reply keyed", packet{Type: pktReply, Session: 3, Seq: 9, SrvRecv: 8, ClientTx: 1, SrvRx: 2, SrvProc: 3}, 200, key},
		{"reply dscp", packet{Type: pktReply, Session: 3, Seq: 9, SrvDSCP: dscpKnown | 46}, 48, nil},
		{"close", packet{Type: pktClose, Session: 3, Nonce: 1}, 48, nil},
		{"closed", packet{Type: pktClosed, Session: 3, Nonce: 1, Seq: 10, SrvRecv: 2, Throttled: 7}, 48, key},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if tt.m != nil && tt.size < 80 {
				tt.size = 80
			}
			b := make([]byte, tt.size)
			want := tt.p
			if tt.m != nil {
				want.Flags = flagAuth
			}
			encodeUDP(b, &tt.p, tt.m)
			got, err := decodeUDP(b, tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("(-want +got)\n-%+v\n+%+v", want, got)
			}
		})
	}
}

func TestUDPDecodeRejects(t *testing.T) {
	key := newMAC([]byte("right"))
	good := make([]byte, 80)
	encodeUDP(good, &packet{Type: pktProbe, Session: 1, Seq: 1}, key)
	plain := make([]byte, 48)
	encodeUDP(plain, &packet{Type: pktProbe, Session: 1}, nil)
	mut := func(b []byte, f func([]byte)) []byte { c := bytes.Clone(b); f(c); return c }
	cases := []struct {
		name string
		b    []byte
		m    *mac
		want error
	}{
		{"empty", nil, nil, errShort},
		{"truncated", plain[:47], nil, errShort},
		{"magic", mut(plain, func(b []byte) { b[0] = 'X' }), nil, errMagic},
		{"version", mut(plain, func(b []byte) { b[2] = 2 }), nil, errVersion},
		{"type 0", mut(plain, func(b []byte) { b[3] = 0 }), nil, errType},
		{"type 8", mut(plain, func(b []byte) { b[3] = 8 }), nil, errType},
		{"flags", mut(plain, func(b []byte) { b[4] = 0x80 }), nil, errReserved},
		{"unauthenticated to keyed", plain, key, errNoAuth},
		{"authenticated to keyless", good, nil, errAuth},
		{"wrong key", good, newMAC([]byte("wrong")), errAuth},
		{"tampered", mut(good, func(b []byte) { b[17] ^= 1 }), key, errAuth},
		{"tampered mac", mut(good, func(b []byte) { b[79] ^= 1 }), key, errAuth},
		{"auth flag, too short for mac", mut(plain, func(b []byte) { b[4] = flagAuth }), key, errAuth},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := decodeUDP(tt.b, tt.m); err != tt.want {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := decodeUDP(good, key); err != nil {
		t.Errorf("good packet rejected: %v", err)
	}
}

func TestHelloCodec(t *testing.T) {
	key := newMAC([]byte("k"))
	h := hello{Mode: modeCRR, Flags: flagServerNagle, ReqSize: 1000, RespSize: 300000, Nonce: 42, Duration: int64(time.Second)}
	b := encodeHello(make([]byte, helloLen+macLen), &h, key)
	got, auth, err := decodeHelloHeader(b)
	if err != nil || !auth || !key.verify(b) {
		t.Fatalf("decode: %v auth %v", err, auth)
	}
	h.Flags |= flagAuth
	if got != h {
		t.Errorf("(-want +got)\n-%+v\n+%+v", h, got)
	}
	b[9] ^= 1
	if key.verify(b) {
		t.Error("tampered hello verified")
	}
	for _, bad := range [][]byte{nil, b[:39], append([]byte("GET / HTTP/1.1\r\n"), make([]byte, 40)...)} {
		if _, _, err := decodeHelloHeader(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
	code, v, err := decodeStatus(encodeStatus(make([]byte, statusLen), refuseSize, 65507))
	if err != nil || code != refuseSize || v != 65507 {
		t.Errorf("status round trip: %d %d %v", code, v, err)
	}
}

func TestParseRxTimestamp(t *testing.T) {
	if _, ok := parseRxTimestamp(nil); ok {
		t.Error("found a timestamp in nothing")
	}
	if _, ok := parseRxTimestamp([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 35, 0, 0, 0}); ok {
		t.Error("accepted a cmsg whose length overruns the buffer")
	}
}

// The fuzz targets: no input may panic the decoders, and anything the UDP
// decoder accepts must re-encode to the same bytes (no field is half-read).
func FuzzDecodeUDP(f *testing.F) {
	for _, p := range []packet{{Type: pktOpen, Size: 64}, {Type: pktProbe, Session: 1, Seq: 5}, {Type: pktClosed, Seq: 3}, {Type: pktReply, Seq: 2, SrvDSCP: dscpKnown | 34}} {
		b := make([]byte, 48)
		encodeUDP(b, &p, nil)
		f.Add(b, false)
		k := make([]byte, 80)
		encodeUDP(k, &p, newMAC([]byte("fuzz")))
		f.Add(k, true)
	}
	f.Add([]byte("LL\x01"), false)
	f.Fuzz(func(t *testing.T, b []byte, keyed bool) {
		var m *mac
		if keyed {
			m = newMAC([]byte("fuzz"))
		}
		p, err := decodeUDP(b, m)
		if err != nil {
			return
		}
		// Re-encoding over a copy must give back the same body (padding and
		// reserved bytes of the body may differ only where the type ignores them).
		c := bytes.Clone(b)
		encodeUDP(c, &p, m)
		q, err := decodeUDP(c, m)
		if err != nil || q != p {
			t.Fatalf("re-encode changed the packet: %v\n%+v\n%+v", err, p, q)
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	f.Add(encodeHello(make([]byte, helloLen), &hello{Mode: modeRR, ReqSize: 64, RespSize: 64}, nil))
	f.Add(encodeHello(make([]byte, helloLen+macLen), &hello{Mode: modeSink, Duration: 5}, newMAC([]byte("fuzz"))))
	f.Add([]byte("LL\x01\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, auth, err := decodeHelloHeader(b)
		if err != nil {
			return
		}
		if h.Duration < 0 || auth != (h.Flags&flagAuth != 0) {
			t.Fatalf("accepted %+v auth %v", h, auth)
		}
		_, _, _ = decodeStatus(b)
	})
}

// Hostile traffic at a keyed reflector: garbage, truncated and oversized
// datagrams, a replayed probe, a replayed open from another address. None of
// it may crash the reflector or disturb a session running at the same time.
func TestIntegrationReflectorHostile(t *testing.T) {
	key := []byte("s3cret")
	r := startReflector(t, ReflectorConfig{Key: key})
	m := newMAC(key)
	c, err := net.Dial("udp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := func() (packet, bool) {
		buf := make([]byte, 2048)
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			return packet{}, false
		}
		p, err := decodeUDP(buf[:n], m)
		return p, err == nil
	}
	open := make([]byte, 80)
	encodeUDP(open, &packet{Type: pktOpen, Nonce: 77, A: uint64(10 * time.Millisecond), B: uint64(10 * time.Second), Size: 80}, m)
	c.Write(open)
	ok, good := rd()
	if !good || ok.Type != pktOpenOK {
		t.Fatalf("open: %+v %v", ok, good)
	}
	probe := make([]byte, 80)
	encodeUDP(probe, &packet{Type: pktProbe, Session: ok.Session, Seq: 5, ClientTx: 1}, m)
	c.Write(probe)
	if p, good := rd(); !good || p.Type != pktReply || p.SrvRecv != 1 {
		t.Fatalf("first probe: %+v %v", p, good)
	}
	time.Sleep(15 * time.Millisecond)
	c.Write(probe) // replay
	if p, good := rd(); good {
		t.Errorf("replayed probe answered: %+v", p)
	}
	// The same open from another socket (another source port) is a replay too.
	c2, _ := net.Dial("udp", r.Addr())
	defer c2.Close()
	c2.Write(open)
	// Garbage of every kind.
	for _, b := range [][]byte{{}, {'L'}, []byte("LL\x01\x04"), make([]byte, 48), bytes.Repeat([]byte{0xff}, 9000), probe[:79], append(bytes.Clone(probe), 0)} {
		c.Write(b)
	}
	// A session running alongside is untouched.
	res, err := UDP(testCtx(t, 20*time.Second), UDPConfig{Target: r.Addr(), Key: key, Interval: Duration(10 * time.Millisecond), Duration: Duration(500 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Received != res.Sent {
		t.Errorf("concurrent session lost %d of %d", res.Sent-res.Received, res.Sent)
	}
	st := r.Stats()
	if st.UDPReplayed < 2 || st.UDPSessions != 2 {
		t.Errorf("stats %+v: want 2 replays dropped, 2 sessions", st)
	}
}
