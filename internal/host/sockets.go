package host

import (
	"context"
	"fmt"

	"github.com/lowlat/lowlat/internal/sockets"
)

// gatherSockets fills Facts.Sockets. On the live host it audits every TCP
// socket of the current network namespace (internal/sockets) and reads the
// proxy configurations of running nginx/HAProxy processes; for a captured
// tree it reads only the proxy configuration files the tree holds, and
// leaves the field nil when there are none (fixtures stay as they are).
// Sockets whose options only root may read are recorded as an unreadable
// source, "sockets:options", like any other fact this user cannot see.
func gatherSockets(ctx context.Context, f *Facts, src Source) {
	if !src.Live && !src.Root.Live() {
		if px := sockets.ReadProxies(src.Root, nil); len(px) > 0 {
			f.Sockets = &sockets.Summary{Proxies: px}
		}
		return
	}
	sum := sockets.Collect(ctx, src.Root)
	f.Sockets = sum
	if sum.Error != "" {
		f.Errors = append(f.Errors, FactError{Source: "sockets", Err: sum.Error})
	}
	for _, reason := range []string{"permission", "unsupported"} {
		if n := sum.Unread[reason]; n > 0 {
			f.Errors = append(f.Errors, FactError{Source: "sockets:options", Err: fmt.Sprintf("options of %d sockets unreadable (%s): run as root on a 5.6+ kernel", n, reason)})
		}
	}
}
