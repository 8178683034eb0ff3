// Command blast sends small messages as fast as it can, or receives them,
// for the passive measurements' overhead benchmark (bench/passive/run.sh):
//
//	blast recv udp|tcp ADDR SECS   count what arrives, print the count
//	blast send udp|tcp ADDR SECS   send 64-byte messages, print the count
//	blast empty SECS               attach an empty BPF program to each
//	                               tracepoint watch uses, print each one's
//	                               runs and ns a run (BPF statistics)
//
// All stop by themselves after SECS seconds. The empty programs are the
// floor the statistics put under every program's ns a run on this machine
// (the two clock reads around it and the tracepoint's dispatch to BPF):
// what a hook costs itself is its ns a run above that.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) == 3 && os.Args[1] == "empty" {
		secs, err := strconv.ParseFloat(os.Args[2], 64)
		if err == nil {
			err = empty(time.Duration(secs * float64(time.Second)))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "blast empty:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: blast send|recv udp|tcp ADDR SECS | blast empty SECS")
		os.Exit(2)
	}
	mode, proto, addr := os.Args[1], os.Args[2], os.Args[3]
	secs, err := strconv.ParseFloat(os.Args[4], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "blast: SECS:", err)
		os.Exit(2)
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	n, err := run(mode, proto, addr, end)
	if err != nil {
		fmt.Fprintln(os.Stderr, "blast:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}

func run(mode, proto, addr string, end time.Time) (int64, error) {
	buf := make([]byte, 64)
	var n int64
	switch mode + " " + proto {
	case "send udp", "send tcp":
		c, err := net.Dial(proto, addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetWriteDeadline(end)
		for time.Now().Before(end) {
			for range 256 {
				if _, err := c.Write(buf); err != nil {
					return n, nil // the deadline, or a refusal: done
				}
				n++
			}
		}
		return n, nil
	case "recv udp":
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetReadDeadline(end)
		big := make([]byte, 2048)
		for {
			if _, _, err := c.ReadFrom(big); err != nil {
				return n, nil
			}
			n++
		}
	case "recv tcp":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, err
		}
		defer ln.Close()
		ln.(*net.TCPListener).SetDeadline(end)
		c, err := ln.Accept()
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.SetReadDeadline(end)
		big := make([]byte, 65536)
		for {
			k, err := c.Read(big)
			if err != nil {
				return n, nil
			}
			n += int64(k) / 64
		}
	}
	return 0, fmt.Errorf("unknown mode %q", mode+" "+proto)
}

// empty attaches "return 0" to each tracepoint for d with the kernel's BPF
// statistics on, and prints each program's runs and mean ns a run.
func empty(d time.Duration) error {
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		return fmt.Errorf("enable BPF statistics: %w", err)
	}
	defer stats.Close()
	type hook struct {
		tp   string
		prog *ebpf.Program
	}
	var hooks []hook
	for _, tp := range []string{"net_dev_queue", "net_dev_start_xmit", "netif_receive_skb", "tcp_probe", "skb_copy_datagram_iovec"} {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type:         ebpf.Tracing,
			AttachType:   ebpf.AttachTraceRawTp,
			AttachTo:     tp,
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
			License:      "GPL",
		})
		if err != nil {
			return fmt.Errorf("load an empty program for %s: %w", tp, err)
		}
		defer p.Close()
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach an empty program to %s: %w", tp, err)
		}
		defer l.Close()
		hooks = append(hooks, hook{tp, p})
	}
	time.Sleep(d)
	for _, h := range hooks {
		st, err := h.prog.Stats()
		if err != nil {
			return fmt.Errorf("statistics of %s: %w", h.tp, err)
		}
		ns := 0.0
		if st.RunCount > 0 {
			ns = float64(st.Runtime) / float64(st.RunCount)
		}
		fmt.Printf("%s %d %.0f\n", h.tp, st.RunCount, ns)
	}
	return nil
}
