package probe

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The Nagle client's socket is the kernel's: TCP_NODELAY off, addresses and
// deadlines as on a net.TCPConn, errors a dial names.
func TestDialKernelDefaults(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := dialKernelDefaults(context.Background(), ln.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer := <-accepted
	defer peer.Close()
	if c.RemoteAddr().String() != ln.Addr().String() || c.LocalAddr().String() != peer.RemoteAddr().String() {
		t.Errorf("addresses %v -> %v, the listener saw %v -> %v", c.LocalAddr(), c.RemoteAddr(), peer.RemoteAddr(), peer.LocalAddr())
	}
	rc, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nodelay int
	rc.Control(func(fd uintptr) { nodelay, err = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) })
	if err != nil || nodelay != 0 {
		t.Errorf("TCP_NODELAY = %d (%v), want the kernel's default 0", nodelay, err)
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := peer.Read(buf); err != nil || string(buf) != "ping" {
		t.Fatalf("peer read %q, %v", buf, err)
	}
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("read past the deadline: %v, want a timeout", err)
	}

	// Nothing listens on a port just closed: refused, by name.
	free, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := free.Addr().String()
	free.Close()
	if _, err := dialKernelDefaults(context.Background(), addr, 2*time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial %s with nothing listening: %v, want connection refused", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := dialKernelDefaults(ctx, ln.Addr().String(), 2*time.Second); err == nil {
		t.Error("a cancelled dial connected")
	}
}
