//go:build linux

package probe

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TCP Fast Open, end to end, in namespaces of the test's own: the client and
// the reflector sit in two network namespaces joined by a userspace delay line
// (two TUN devices and a goroutine per direction holding each packet for
// oneWay), since this kernel has no netem. net.ipv4.tcp_fastopen is set inside
// the namespaces only (it is per namespace); the host's is never touched.
//
// It checks that repeat connections carry the request in the SYN
// (fastopen_used, the server's TCPFastOpenPassive and the client's
// TCPFastOpenActive counters) and that this saves the round trip it should:
// the first response byte comes one RTT after connect instead of two.
func TestIntegrationCRRFastOpen(t *testing.T) {
	const oneWay = 10 * time.Millisecond
	client, server := testnet.New(t), testnet.New(t)
	cTun := tunEnd(t, client, "lltfo0", "10.77.0.1/24")
	sTun := tunEnd(t, server, "lltfo0", "10.77.0.2/24")
	delayLine(t, cTun, sTun, oneWay)
	delayLine(t, sTun, cTun, oneWay)

	setFastOpen(t, client, 3)
	setFastOpen(t, server, 1) // the kernel default: client side only
	var r *Reflector
	if err := server.Do(func() error {
		r = startReflectorAt(t, ReflectorConfig{}, "10.77.0.2:0")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	cfg := CRRConfig{Target: r.Addr(), Request: 200, Response: 1000, FastOpen: true, Duration: Duration(20 * time.Second)}
	run := func(count int) (*CRRResult, map[string]int64, map[string]int64) {
		t.Helper()
		c := cfg
		c.Count = count
		sBefore, cBefore := netstat(t, server), netstat(t, client)
		var res *CRRResult
		if err := client.Do(func() error {
			var err error
			res, err = CRR(testCtx(t, 20*time.Second), c)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if res.Transactions != int64(count) || res.Errors != 0 {
			t.Fatalf("transactions %d errors %d (%s)", res.Transactions, res.Errors, res.ErrorSample)
		}
		if res.BytesSent != int64(count*c.Request) || res.BytesReceived != int64(count*c.Response) {
			t.Errorf("bytes sent %d received %d, want %d / %d", res.BytesSent, res.BytesReceived, count*c.Request, count*c.Response)
		}
		return res, diffCounters(sBefore, netstat(t, server)), diffCounters(cBefore, netstat(t, client))
	}

	// The reflector's host without the server bit: plain handshakes.
	plain, sd, _ := run(4)
	if plain.FastOpenUsed != 0 || sd["TCPFastOpenPassive"] != 0 {
		t.Errorf("server tcp_fastopen=1: fastopen_used %d, TCPFastOpenPassive +%d; want 0", plain.FastOpenUsed, sd["TCPFastOpenPassive"])
	}

	// With the server bit: the first connection fetches a cookie, every
	// later one sends its request in the SYN.
	setFastOpen(t, server, 3)
	const n = 8
	tfo, sd, cd := run(n)
	t.Logf("server TcpExt %v; client TcpExt %v", sd, cd)
	if tfo.FastOpenUsed < n-1 {
		t.Errorf("fastopen_used = %d of %d, want at least %d (all but the cookie request)", tfo.FastOpenUsed, n, n-1)
	}
	if sd["TCPFastOpenPassive"] < n-1 {
		t.Errorf("server TCPFastOpenPassive +%d, want >= %d", sd["TCPFastOpenPassive"], n-1)
	}
	if cd["TCPFastOpenActive"] < n-1 {
		t.Errorf("client TCPFastOpenActive +%d, want >= %d", cd["TCPFastOpenActive"], n-1)
	}
	if sd["TCPFastOpenPassiveFail"] != 0 {
		t.Errorf("server TCPFastOpenPassiveFail +%d", sd["TCPFastOpenPassiveFail"])
	}

	// A round trip saved. Without TFO the first byte comes after connect
	// (one RTT) and the request (another); with it, after one. The cookie
	// request of the first TFO run is its slowest, so p50 is the measure.
	rtt := float64(2*oneWay) / 1e3 // µs
	t.Logf("first byte p50: plain %.0f µs, fast open %.0f µs (RTT %.0f µs)", plain.FirstByte.P50, tfo.FirstByte.P50, rtt)
	if plain.FirstByte.P50 < 1.9*rtt {
		t.Errorf("plain first byte p50 %.0f µs: below two RTTs (%.0f µs), the delay line is not working", plain.FirstByte.P50, 2*rtt)
	}
	if tfo.FirstByte.P50 > 1.5*rtt {
		t.Errorf("fast open first byte p50 %.0f µs, want about one RTT (%.0f µs)", tfo.FirstByte.P50, rtt)
	}
	if tfo.Connect.P50 > 0.5*rtt {
		t.Errorf("fast open connect p50 %.0f µs: connect should return without a round trip", tfo.Connect.P50)
	}
}

// setFastOpen writes net.ipv4.tcp_fastopen inside ns (the file resolves to
// the namespace of the thread that opens it).
func setFastOpen(t *testing.T, ns *testnet.NS, v int) {
	t.Helper()
	if err := ns.Do(func() error {
		const p = "/proc/sys/net/ipv4/tcp_fastopen"
		if err := os.WriteFile(p, []byte(strconv.Itoa(v)), 0o644); err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if got := strings.TrimSpace(string(b)); got != strconv.Itoa(v) {
			return fmt.Errorf("tcp_fastopen reads %s after writing %d", got, v)
		}
		return nil
	}); err != nil {
		t.Fatalf("netns %s: %v", ns.Name, err)
	}
}

// netstat reads ns's TcpExt counters (/proc/thread-self/net: /proc/net would
// be the process's namespace, not the thread's).
func netstat(t *testing.T, ns *testnet.NS) map[string]int64 {
	t.Helper()
	var m map[string]int64
	if err := ns.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/netstat")
		if err != nil {
			return err
		}
		defer f.Close()
		m, err = parseNetstat(f, "TcpExt:")
		return err
	}); err != nil {
		t.Fatalf("netns %s: netstat: %v", ns.Name, err)
	}
	return m
}

// parseNetstat reads /proc/net/netstat's pairs of header and value lines for
// one prefix.
func parseNetstat(f *os.File, prefix string) (map[string]int64, error) {
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var names []string
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || fields[0] != prefix {
			continue
		}
		if names == nil {
			names = fields[1:]
			continue
		}
		if len(fields)-1 != len(names) {
			return nil, fmt.Errorf("%s: %d names, %d values", prefix, len(names), len(fields)-1)
		}
		m := make(map[string]int64, len(names))
		for i, v := range fields[1:] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", prefix, names[i], err)
			}
			m[names[i]] = n
		}
		return m, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("no %s lines", prefix)
}

func diffCounters(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if x := v - before[k]; x != 0 && strings.Contains(k, "FastOpen") {
			d[k] = x
		}
	}
	return d
}

// tunEnd creates a TUN device in ns with the address cidr, up, and returns its
// file (readable and writable from any thread). It is closed by t.Cleanup.
func tunEnd(t *testing.T, ns *testnet.NS, name, cidr string) *os.File {
	t.Helper()
	var f *os.File
	err := ns.Do(func() error {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("open /dev/net/tun: %w", err)
		}
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			unix.Close(fd)
			return err
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			return fmt.Errorf("TUNSETIFF %s: %w", name, err)
		}
		f = os.NewFile(uintptr(fd), "tun:"+name) // non-blocking: the runtime polls it
		link, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		addr, err := netlink.ParseAddr(cidr)
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("add %s to %s: %w", cidr, name, err)
		}
		return netlink.LinkSetUp(link)
	})
	if f != nil {
		t.Cleanup(func() { f.Close() })
	}
	if err != nil {
		t.Fatalf("netns %s: %v", ns.Name, err)
	}
	return f
}

// delayLine copies every packet read from src to dst d later, in order, until
// src is closed. Its goroutines end with the test.
func delayLine(t *testing.T, src, dst *os.File, d time.Duration) {
	type pkt struct {
		due  time.Time
		data []byte
	}
	ch := make(chan pkt, 4096)
	done := make(chan struct{}, 2)
	go func() {
		defer func() { done <- struct{}{} }()
		defer close(ch)
		buf := make([]byte, 65536)
		for {
			n, err := src.Read(buf)
			if err != nil {
				if !errors.Is(err, os.ErrClosed) && !errors.Is(err, net.ErrClosed) {
					t.Logf("delay line read: %v", err)
				}
				return
			}
			select {
			case ch <- pkt{time.Now().Add(d), append([]byte(nil), buf[:n]...)}:
			default: // a full line drops, as a link would
			}
		}
	}()
	go func() {
		defer func() { done <- struct{}{} }()
		for p := range ch {
			if w := time.Until(p.due); w > 0 {
				time.Sleep(w)
			}
			_, _ = dst.Write(p.data)
		}
	}()
	t.Cleanup(func() {
		src.Close() // ends the reader, which ends the writer
		for range 2 {
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Error("delay line did not stop")
				return
			}
		}
	})
}
