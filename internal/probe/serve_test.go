package probe

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"
)

// A connection that Accept returns while Serve is shutting down, after Serve
// has closed the connections it knew of, must be closed too: otherwise its
// handler runs unseen and Serve waits for it (here the 10 s the reflector
// gives a silent connection to send its hello; a peer that asked for a
// source stream would hold Serve for the whole test).
func TestServeClosesConnectionAcceptedDuringShutdown(t *testing.T) {
	r := NewReflector(ReflectorConfig{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := r.Listen(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	accepted, closed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// Hold the accepted connection back until Serve has closed the others.
	r.hookAccepted = func() {
		once.Do(func() {
			close(accepted)
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
			}
		})
	}
	r.hookClosed = func() { close(closed) }
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()

	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the reflector did not accept the connection")
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Serve still waiting 3 s after shutdown began: the connection accepted meanwhile was left running")
	}
	// The late connection was closed, not left open.
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || err == nil || isTimeout(err) {
		t.Errorf("read on the late connection: %d bytes, %v; want it closed by the reflector", n, err)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
