package sockets

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// BenchmarkDiagDump compares lowlat's own NETLINK_SOCK_DIAG reader with
// vishvananda/netlink's SocketDiagTCPInfo on the same population of
// established sockets (LOWLAT_BENCH_CONNS connections, default 5000, both
// ends held here), and times a whole Audit. bench/sockets/run.sh runs it.
func BenchmarkDiagDump(b *testing.B) {
	conns := 5000
	if v, err := strconv.Atoi(os.Getenv("LOWLAT_BENCH_CONNS")); err == nil && v > 0 {
		conns = v
	}
	ns := testnet.New(b)
	var keep []net.Conn
	err := ns.Do(func() error {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		for i := 0; i < conns; i++ {
			c, err := net.Dial("tcp4", ln.Addr().String())
			if err != nil {
				return err
			}
			s, err := ln.Accept()
			if err != nil {
				return err
			}
			keep = append(keep, c, s)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		for _, c := range keep {
			c.Close()
		}
	}()
	keepAll := func(*Socket) bool { return true }
	b.Run("lowlat", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var n int
			ns.Do(func() error {
				var rows []Socket
				for _, fam := range []uint8{afInet, afInet6} {
					rows, _, err = dumpTCP(fam, keepAll, rows)
				}
				n = len(rows)
				return err
			})
			if err != nil || n < 2*conns {
				b.Fatalf("%d sockets, %v", n, err)
			}
		}
	})
	b.Run("vishvananda", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var n int
			ns.Do(func() error {
				for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
					r, err := netlink.SocketDiagTCPInfo(fam)
					if err != nil {
						return err
					}
					n += len(r)
				}
				return nil
			})
			if n < 2*conns {
				b.Fatalf("%d sockets", n)
			}
		}
	})
	b.Run("audit", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var rep *Report
			ns.Do(func() error {
				rep, err = Audit(context.Background(), Config{})
				return err
			})
			if err != nil || rep.Stats.Options < 2*conns {
				b.Fatalf("%v %+v", err, rep.Stats)
			}
		}
	})
}
