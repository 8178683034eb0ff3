//go:build linux

package probe

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/lowlat/lowlat/internal/testnet"
)

// pingWorld is a client and a host namespace joined by a veth, with IPv4
// and IPv6 addresses.
func pingWorld(t *testing.T) (client, host *testnet.NS) {
	t.Helper()
	client, host = testnet.New(t), testnet.New(t)
	client.Veth(t, "pc0", "ph0", host, 1)
	for _, x := range []struct {
		ns    *testnet.NS
		dev   string
		addrs []string
	}{{client, "pc0", []string{"10.81.0.1/24", "fd81::1/64"}}, {host, "ph0", []string{"10.81.0.2/24", "fd81::2/64"}}} {
		if err := x.ns.Do(func() error {
			l, err := netlink.LinkByName(x.dev)
			if err != nil {
				return err
			}
			for _, a := range x.addrs {
				addr, _ := netlink.ParseAddr(a)
				addr.Flags = unix.IFA_F_NODAD
				if err := netlink.AddrAdd(l, addr); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return client, host
}

func sysctlIn(t *testing.T, ns *testnet.NS, path, value string) {
	t.Helper()
	if err := ns.Do(func() error { return os.WriteFile(path, []byte(value), 0) }); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationICMP pings over IPv4 and IPv6 with each kind of socket:
// a datagram socket where ping_group_range allows it (it is per network
// namespace), a raw one otherwise, and auto picking between them.
func TestIntegrationICMP(t *testing.T) {
	client, _ := pingWorld(t)
	for _, tt := range []struct {
		name, target, socket, groups, want string
	}{
		{"v4 raw", "10.81.0.2", "raw", "1 0", "raw"},
		{"v6 raw", "fd81::2", "raw", "1 0", "raw"},
		{"v4 dgram", "10.81.0.2", "dgram", "0 2147483647", "dgram"},
		{"v6 dgram", "fd81::2", "dgram", "0 2147483647", "dgram"},
		{"auto allowed", "10.81.0.2", "", "0 2147483647", "dgram"},
		{"auto refused", "fd81::2", "", "1 0", "raw"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sysctlIn(t, client, "/proc/sys/net/ipv4/ping_group_range", tt.groups)
			var res *ICMPResult
			err := client.Do(func() error {
				var err error
				res, err = ICMP(testCtx(t, 10*time.Second), ICMPConfig{Target: tt.target, Interval: Duration(10 * time.Millisecond), Duration: Duration(300 * time.Millisecond), Socket: tt.socket})
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if res.Socket != tt.want || res.Sent != 30 || res.Received != 30 || res.Loss.Lost != 0 || res.Loss.Split != "none" || res.Timestamps != "kernel" || res.Address != tt.target {
				t.Errorf("%+v", res)
			}
			if res.RTT.P50 <= 0 || res.RTT.P50 > 5000 {
				t.Errorf("p50 %.1f µs across a veth", res.RTT.P50)
			}
		})
	}
	// A datagram socket that the range forbids says so, with the range.
	sysctlIn(t, client, "/proc/sys/net/ipv4/ping_group_range", "1 0")
	err := client.Do(func() error {
		_, err := ICMP(testCtx(t, 5*time.Second), ICMPConfig{Target: "10.81.0.2", Interval: Duration(10 * time.Millisecond), Duration: Duration(50 * time.Millisecond), Socket: "dgram"})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), `datagram socket: permission denied (net.ipv4.ping_group_range is "1 0")`) {
		t.Errorf("forbidden dgram: %v", err)
	}
}

// TestIntegrationWatchICMPLoss: a host that stops answering echoes shows as
// loss at the probing rate, a failing state, then replies and a healthy
// state once it answers again; a one-shot probe of a silent host fails
// with "no replies".
func TestIntegrationWatchICMPLoss(t *testing.T) {
	client, host := pingWorld(t)
	for _, fam := range []struct{ target, ignore string }{
		{"10.81.0.2", "/proc/sys/net/ipv4/icmp_echo_ignore_all"},
		{"fd81::2", "/proc/sys/net/ipv6/icmp/echo_ignore_all"},
	} {
		t.Run(fam.target, func(t *testing.T) {
			var tl tally
			cfg := WatchConfig{Target: fam.target, Interval: 20 * time.Millisecond, Timeout: 200 * time.Millisecond, State: tl.state}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- client.Do(func() error { return WatchICMP(ctx, cfg, tl.sink) }) }()
			time.Sleep(time.Second)
			silent := time.Now()
			sysctlIn(t, host, fam.ignore, "1")
			time.Sleep(time.Second)
			loud := time.Now()
			sysctlIn(t, host, fam.ignore, "0")
			time.Sleep(time.Second)
			end := time.Now()
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			ok, lost, dirs, _ := tl.between(start, silent)
			if ok < 40 || lost > 1 {
				t.Errorf("answering: %d replies, %d lost", ok, lost)
			}
			ok, lost, dirs, _ = tl.between(silent.Add(50*time.Millisecond), loud)
			if ok != 0 || lost < 40 || dirs[LossUnknown] != lost {
				t.Errorf("silent: %d replies, %d lost %v", ok, lost, dirs)
			}
			ok, lost, _, _ = tl.between(loud.Add(50*time.Millisecond), end.Add(-cfg.Timeout))
			if ok < 30 || lost > 1 {
				t.Errorf("answering again: %d replies, %d lost", ok, lost)
			}
			tl.mu.Lock()
			defer tl.mu.Unlock()
			if len(tl.states) != 2 || !strings.HasPrefix(tl.states[0], "true icmp "+fam.target+": no echo replies since") || !strings.HasPrefix(tl.states[1], "false") {
				t.Errorf("states %q", tl.states)
			}
		})
	}
	sysctlIn(t, host, "/proc/sys/net/ipv4/icmp_echo_ignore_all", "1")
	err := client.Do(func() error {
		_, err := ICMP(testCtx(t, 5*time.Second), ICMPConfig{Target: "10.81.0.2", Interval: Duration(10 * time.Millisecond), Duration: Duration(100 * time.Millisecond), Wait: Duration(100 * time.Millisecond)})
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "10 echo requests sent, no replies") {
		t.Errorf("silent host: %v", err)
	}
}
