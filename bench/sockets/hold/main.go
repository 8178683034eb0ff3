// Command hold opens N TCP connections to its own listener on 127.0.0.1 (2N
// established sockets in this process), prints "ready" and holds them until
// its standard input closes: the socket population for bench/sockets/run.sh.
// A fraction of the connections exchange small messages first, so tcp_info
// has moving counters, and every other client has TCP_NODELAY turned off.
package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"os"
)

func main() {
	n := flag.Int("n", 5000, "connections (2n established sockets)")
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp4", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hold:", err)
		os.Exit(1)
	}
	conns := make([]net.Conn, 0, 2**n)
	buf := make([]byte, 64)
	for i := 0; i < *n; i++ {
		c, err := net.Dial("tcp4", ln.Addr().String())
		if err != nil {
			fmt.Fprintf(os.Stderr, "hold: connection %d: %v\n", i, err)
			os.Exit(1)
		}
		s, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, "hold:", err)
			os.Exit(1)
		}
		if i%2 == 1 {
			c.(*net.TCPConn).SetNoDelay(false)
		}
		if i%10 == 0 {
			c.Write(buf)
			io.ReadFull(s, buf)
			s.Write(buf)
			io.ReadFull(c, buf)
		}
		conns = append(conns, c, s)
	}
	fmt.Printf("ready %d\n", len(conns))
	io.Copy(io.Discard, os.Stdin)
}
