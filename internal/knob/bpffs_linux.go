package knob

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/lowlat/lowlat/internal/sockops"
)

// bpffs/<dir> is a bpffs mounted on dir ("bpffs/sys/fs/bpf" = "mounted"):
// where sock_ops pins live, mounted by lowlat on a host where nothing had
// mounted one (systemd does on boot; a minimal system may not). Absent:
// none is mounted there. The plan puts it before the sockopt knobs, so a
// rollback unmounts it after their pins are gone. Writing Absent unmounts
// it only when nothing is pinned there: a bpffs holding pins someone else
// made since stays mounted, and the rollback says so (not exact).
type bpffsKnob struct {
	id  string
	dir string
}

func newBPFFS(sys *System, rest string) (Knob, error) {
	if sys != nil && sys.Root != "" {
		return nil, fmt.Errorf("bpffs knobs act on the running host's mounts, not on a file tree: %w", ErrNotSupported)
	}
	dir := filepath.Clean("/" + rest)
	return &bpffsKnob{id: "bpffs" + dir, dir: dir}, nil
}

func (k *bpffsKnob) ID() string { return k.id }

func (k *bpffsKnob) Validate(v string) error {
	if v != BPFFSMounted && v != Absent {
		return fmt.Errorf("want %q or %q, not %q", BPFFSMounted, Absent, v)
	}
	return nil
}

func (k *bpffsKnob) Read(ctx context.Context) (string, error) {
	on, err := sockops.BPFFSMounted(k.dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.id, err)
	}
	if on {
		return BPFFSMounted, nil
	}
	return Absent, nil
}

func (k *bpffsKnob) Write(ctx context.Context, v string) error {
	if err := k.Validate(v); err != nil {
		return fmt.Errorf("%s: %w", k.id, err)
	}
	if v == BPFFSMounted {
		return sockops.MountBPFFS(k.dir)
	}
	return sockops.UnmountBPFFS(k.dir)
}

func (k *bpffsKnob) Satisfied(live, desired string) bool { return live == desired }

// Restorable refuses, at rollback, to give back "not mounted" while the
// bpffs holds pins: unmounting it would take them, and whatever they keep
// attached, with it. (At apply, nothing is mounted, and nothing refused.)
func (k *bpffsKnob) Restorable(v string) error {
	if v != Absent {
		return nil
	}
	return sockops.BPFFSHeld(k.dir)
}

// Fallback keeps the bpffs mounted.
func (k *bpffsKnob) Fallback(string) string { return BPFFSMounted }
