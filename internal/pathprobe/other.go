//go:build !linux

package pathprobe

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
)

var errOS = fmt.Errorf("%w: probe path needs Linux (IP_RECVERR), not %s", ErrConfig, runtime.GOOS)

func runDatagram(ctx context.Context, cfg *Config, addr netip.Addr, port, flow int) ([]rawHop, int, runOut, error) {
	return nil, 0, runOut{}, errOS
}

func runTCP(ctx context.Context, cfg *Config, addr netip.Addr, port, flow int) ([]rawHop, int, runOut, error) {
	return nil, 0, runOut{}, errOS
}
