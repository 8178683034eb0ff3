//go:build !linux

package probe

import (
	"context"
	"io"
	"net"
	"time"
)

// tcpStream is the portable fallback: reads through net.Conn with userspace
// timestamps only (see stream_linux.go).
type tcpStream struct {
	c        net.Conn
	raw      bool
	kernelTS bool
}

func newTCPStream(ctx context.Context, c net.Conn, raw, timestamps bool) (*tcpStream, error) {
	return &tcpStream{c: c, raw: raw}, nil
}

func (s *tcpStream) write(b []byte, deadline time.Time) error {
	if s.raw {
		_ = s.c.SetWriteDeadline(deadline)
	}
	_, err := s.c.Write(b)
	return err
}

func (s *tcpStream) readFull(b []byte, deadline time.Time) (int64, error) {
	if s.raw {
		_ = s.c.SetReadDeadline(deadline)
	}
	_, err := io.ReadFull(s.c, b)
	return 0, err
}
