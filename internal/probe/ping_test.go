package probe

import (
	"testing"
)

func TestEchoRoundTrip(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := make([]byte, 8+56)
		encodeEcho(b, v6, echo{ID: 0x1234, Seq: 7, Token: 0xfeedface, N: 1 << 40})
		if !v6 && checksum(b) != 0 {
			t.Errorf("v4 checksum does not verify: %#x", checksum(b))
		}
		// The host answers with the reply type (and, for v4, a new checksum).
		if v6 {
			b[0] = icmp6EchoReply
		} else {
			b[0] = icmp4EchoReply
		}
		e, err := decodeEcho(b, v6, false)
		if err != nil || e.ID != 0x1234 || e.Seq != 7 || e.Token != 0xfeedface || e.N != 1<<40 {
			t.Errorf("v6=%v: %+v %v", v6, e, err)
		}
		// A request (our own, on a raw socket) is not a reply.
		encodeEcho(b, v6, echo{})
		if _, err := decodeEcho(b, v6, false); err == nil {
			t.Errorf("v6=%v: request decoded as a reply", v6)
		}
	}
}

func TestDecodeEchoIPv4Header(t *testing.T) {
	msg := make([]byte, 8+16)
	encodeEcho(msg, false, echo{ID: 9, Token: 5, N: 3})
	msg[0] = icmp4EchoReply
	for _, ihl := range []int{5, 6} { // with and without IP options
		b := append(make([]byte, ihl*4), msg...)
		b[0] = 0x40 | byte(ihl)
		e, err := decodeEcho(b, false, true)
		if err != nil || e.ID != 9 || e.N != 3 || e.Token != 5 {
			t.Errorf("ihl %d: %+v %v", ihl, e, err)
		}
	}
	for name, b := range map[string][]byte{
		"short":      {0x45, 0},
		"not ipv4":   append([]byte{0x60}, make([]byte, 60)...),
		"bad ihl":    append([]byte{0x41}, make([]byte, 60)...),
		"truncated":  append([]byte{0x45}, make([]byte, 25)...),
		"other type": append(append([]byte{0x45}, make([]byte, 19)...), append([]byte{3, 1}, make([]byte, 30)...)...),
	} {
		if _, err := decodeEcho(b, false, true); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func TestChecksum(t *testing.T) {
	// RFC 1071's example bytes: sum 0xddf2, checksum its complement.
	if got := checksum([]byte{0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7}); got != ^uint16(0xddf2) {
		t.Errorf("checksum %#x", got)
	}
	if got := checksum([]byte{0xff}); got != ^uint16(0xff00) {
		t.Errorf("odd length: %#x", got)
	}
}

func TestICMPConfigErrors(t *testing.T) {
	for _, c := range []ICMPConfig{
		{Target: "h", Interval: Duration(MinWatchInterval / 2)},
		{Target: "h", Size: 8},
		{Target: "h", DSCP: 64},
		{Target: "h", Socket: "packet"},
		{Target: "h", Interval: Duration(2e9), Duration: Duration(1e9)},
	} {
		if err := c.normalize(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
