//go:build linux

package qdisc

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// ChangeRoot changes the options of the interface's root qdisc in place,
// as "tc qdisc change" does: the kind must be the one there, and its leaf
// or children stay attached with what they hold. The lab's provider moves
// its cap this way without emptying its buffer (Apply would graft a new
// tree for a tbf with a leaf).
func ChangeRoot(ifindex int, s Spec) error {
	cur, err := Read(ifindex)
	if err != nil {
		return err
	}
	if cur.Root.Kind != s.Kind || cur.RootHandle == 0 || cur.Root.Default {
		return fmt.Errorf("change root qdisc of ifindex %d: it is %s, not a %s of its own", ifindex, cur.Root.Kind, s.Kind)
	}
	root := s
	root.Leaf, root.Children = nil, nil
	if err := modify(unix.RTM_NEWQDISC, 0, ifindex, HandleRoot, cur.RootHandle, &root); err != nil {
		return fmt.Errorf("change root %s of ifindex %d: %w", s.Kind, ifindex, err)
	}
	return nil
}
