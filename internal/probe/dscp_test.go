package probe

import (
	"net"
	"sync"
	"testing"
	"time"
)

func TestDSCPNames(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want int
		name string
	}{
		{"EF", 46, "EF"}, {"ef", 46, "EF"}, {"VA", 44, "VA"}, {"CS0", 0, "CS0"}, {"0", 0, "CS0"}, {"CS6", 48, "CS6"},
		{"AF11", 10, "AF11"}, {"AF41", 34, "AF41"}, {"AF43", 38, "AF43"}, {"1", 1, "1"}, {"63", 63, "63"}, {"0x2e", 46, "EF"},
	} {
		got, err := ParseDSCP(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseDSCP(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
		if n := DSCPName(got); n != tt.name {
			t.Errorf("DSCPName(%d) = %q, want %q", got, n, tt.name)
		}
	}
	for _, bad := range []string{"XX", "64", "-1", "AF44", "CS8", "AF51"} {
		if _, err := ParseDSCP(bad); err == nil {
			t.Errorf("ParseDSCP(%q) accepted", bad)
		}
	}
	// Every value names itself back.
	for d := 0; d < 64; d++ {
		if got, err := ParseDSCP(DSCPName(d)); err != nil || got != d {
			t.Errorf("round trip %d: %q -> %d %v", d, DSCPName(d), got, err)
		}
	}
}

func TestParseRxMetaTOS(t *testing.T) {
	b := make([]byte, 2*tosCmsgSpace)
	v4 := tosCmsg(b, false, 0xb8) // EF
	m := parseRxMeta(v4)
	if !m.hasTOS || m.tos != 0xb8 || m.hasTS {
		t.Errorf("IP_TOS as int: %+v", m)
	}
	v6 := tosCmsg(b, true, 0x88) // AF41
	if m := parseRxMeta(v6); !m.hasTOS || m.tos != 0x88 {
		t.Errorf("IPV6_TCLASS: %+v", m)
	}
	// Truncated: no panic, nothing read.
	if m := parseRxMeta(v4[:len(v4)-8]); m.hasTOS {
		t.Errorf("truncated cmsg read: %+v", m)
	}
}

// The reflector answers each probe with the DSCP it arrived with, on one
// socket, for several markings at once; the client reads the marking of the
// replies from the IP header (IP_RECVTOS) and the reflector's view from the
// reply.
func TestIntegrationUDPDSCPMirrored(t *testing.T) {
	for _, tc := range []struct{ listen, target string }{
		{"127.0.0.1", "127.0.0.1"},
		{"::1", "::1"},
		{"::", "127.0.0.1"}, // dual-stack socket, IPv4-mapped peer: IP_TOS both ways
	} {
		t.Run(tc.listen+"/"+tc.target, func(t *testing.T) {
			if tc.listen != "127.0.0.1" {
				if c, err := net.ListenPacket("udp6", "[::1]:0"); err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				} else {
					c.Close()
				}
			}
			r := startReflectorAt(t, ReflectorConfig{}, net.JoinHostPort(tc.listen, "0"))
			_, port, _ := net.SplitHostPort(r.Addr())
			target := net.JoinHostPort(tc.target, port)
			marks := []int{46, 34, 0, 8}
			res := make([]*UDPResult, len(marks))
			errs := make([]error, len(marks))
			var wg sync.WaitGroup
			for i, d := range marks {
				wg.Add(1)
				go func() {
					defer wg.Done()
					res[i], errs[i] = UDP(testCtx(t, 20*time.Second), UDPConfig{Target: target, DSCP: d, Interval: Duration(5 * time.Millisecond), Duration: Duration(300 * time.Millisecond)})
				}()
			}
			wg.Wait()
			for i, d := range marks {
				if errs[i] != nil {
					t.Fatalf("dscp %d: %v", d, errs[i])
				}
				want := DSCPReport{Sent: DSCPName(d), ReflectorReceived: DSCPName(d), Received: DSCPName(d)}
				if res[i].DSCP != want {
					t.Errorf("dscp %s: got %+v, want %+v", DSCPName(d), res[i].DSCP, want)
				}
				if res[i].Received == 0 {
					t.Errorf("dscp %s: no replies", DSCPName(d))
				}
			}
		})
	}
}
