// Command blast sends small messages as fast as it can, or receives them,
// for the passive measurements' overhead benchmark (bench/passive/run.sh):
//
//	blast recv udp|tcp ADDR SECS   count what arrives, print the count
//	blast send udp|tcp ADDR SECS   send 64-byte messages, print the count
//
// Both stop by themselves after SECS seconds.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: blast send|recv udp|tcp ADDR SECS")
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
