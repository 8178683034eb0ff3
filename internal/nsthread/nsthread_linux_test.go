//go:build linux

package nsthread

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestJoinReturnsSetnsError: a setns(2) that fails is an error from Join, and
// the thread stays where it was. A regular file is no namespace: setns refuses
// it with EINVAL, for root and everyone else.
func TestJoinReturnsSetnsError(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "not-a-namespace"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = OnNewThread(func() error {
		if err := NS(f.Fd()).Join(); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Join(regular file) = %v, want the setns error EINVAL", err)
		}
		own, err := Current()
		if err != nil {
			return err
		}
		defer own.Close()
		if same, err := own.isCurrent(); err != nil || !same {
			t.Errorf("after a failed Join the thread moved (same namespace: %v, %v)", same, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestJoinOwnNamespace: joining the namespace a thread is already in needs no
// setns(2), so it works without privilege, and leaves the goroutine unlocked.
func TestJoinOwnNamespace(t *testing.T) {
	own, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	done := make(chan error)
	go func() { done <- own.Join() }()
	if err := <-done; err != nil {
		t.Errorf("Join(own namespace) = %v", err)
	}
}

// TestIntegrationJoin creates a namespace on a thread of its own, then has
// another goroutine join it: that goroutine sees only the namespace's
// loopback, and the test's own thread never left the host's namespace.
func TestIntegrationJoin(t *testing.T) {
	host, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	var ns NS
	err = OnNewThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return err
		}
		ns, err = Current()
		return err
	})
	if errors.Is(err, unix.EPERM) {
		t.Skipf("creating a network namespace needs root: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	err = OnNewThread(func() error {
		if err := ns.Join(); err != nil {
			return err
		}
		if same, err := ns.isCurrent(); err != nil || !same {
			t.Errorf("after Join the thread is not in the namespace (%v, %v)", same, err)
		}
		ifs, err := net.Interfaces()
		if err != nil {
			return err
		}
		if len(ifs) != 1 || ifs[0].Name != "lo" {
			t.Errorf("interfaces in the new namespace: %v, want only lo", ifs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := OnNewThread(func() error {
		if same, err := host.isCurrent(); err != nil || !same {
			t.Errorf("a fresh thread is not in the host's namespace (%v, %v): a namespace leaked", same, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
