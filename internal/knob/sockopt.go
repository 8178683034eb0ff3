package knob

import "github.com/lowlat/lowlat/internal/sockops"

// Detached is the value of a sockopt knob whose entry is pinned while its
// program is not attached: nothing enforces it on new connections.
const Detached = "<detached>"

// BPFFSMounted is the value of a bpffs knob whose bpffs is mounted.
const BPFFSMounted = "mounted"

// SockoptIDs returns the knob IDs that enforce opt on sel's connections:
// the sock_ops program's entry for new ones and, for options an open
// connection can take, the connections that exist. Apply order: the entry
// first, so a connection accepted while the open ones are being set is
// covered by one or the other.
func SockoptIDs(sel sockops.Selector, opt sockops.Option) []string {
	ids := []string{"sockopt/" + sel.String() + "/" + opt.String()}
	if opt.Live() {
		ids = append(ids, "socket/"+sel.String()+"/"+opt.String())
	}
	return ids
}
