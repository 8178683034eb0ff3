//go:build !linux

package probe

import (
	"context"
	"net"
	"time"
)

// dialKernelDefaults connects with Go's dialer and turns TCP_NODELAY off
// again: elsewhere than Linux there is no sock_ops program to override.
func dialKernelDefaults(ctx context.Context, target string, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	if err := c.(*net.TCPConn).SetNoDelay(false); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
