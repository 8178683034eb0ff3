//go:build !linux

package host

import "context"

// GatherSockOps: sock_ops is Linux's.
func GatherSockOps(ctx context.Context, f *Facts, selectors ...string) {
	if f.Source == "live" && f.SockOps == nil {
		f.SockOps = &SockOps{Unsupported: "sock_ops is Linux's"}
	}
}
