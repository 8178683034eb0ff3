//go:build linux

// Package testnet gives privileged tests a throwaway network namespace: code can
// run inside it on a locked OS thread, and programs can be started inside it
// with their own /sys (like "ip netns exec", without needing iproute2, so the
// same tests run in the stock-kernel VM). Everything is removed by t.Cleanup,
// also when the test fails.
package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/lowlat/lowlat/internal/nsthread"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace tests create, so a crashed run's
// leftovers can be found and removed.
const Prefix = "lowlat-t-"

// NS is one named network namespace.
type NS struct {
	Name   string
	handle netns.NsHandle
}

// New creates a namespace with lo up, or skips the test when the process may not
// create namespaces (not root). Any other failure fails the test.
// prepareOnce makes /run/netns a shared mount point before this test
// binary names its first namespace, so an 'ip netns add' in a test running
// beside it cannot cover (and so strand) the namespaces it has made.
var prepareOnce = sync.OnceValue(nsthread.PrepareRunDir)

func New(t testing.TB) *NS {
	t.Helper()
	b := make([]byte, 4)
	rand.Read(b)
	name := Prefix + hex.EncodeToString(b)
	var h netns.NsHandle
	err := prepareOnce()
	if err == nil {
		err = nsthread.OnNewThread(func() error {
			var err error
			h, err = netns.NewNamed(name)
			return err
		})
	}
	if errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission) {
		t.Skipf("creating a network namespace needs root: %v", err)
	}
	if err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
	n := &NS{Name: name, handle: h}
	t.Cleanup(func() {
		h.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	if err := n.Do(func() error {
		// IPv6 link-local addresses appear asynchronously after a link comes up
		// (address generation, DAD); a before/after comparison would see them
		// arrive. Tests add the IPv6 addresses they need themselves.
		for _, f := range []string{"/proc/sys/net/ipv6/conf/default/addr_gen_mode", "/proc/sys/net/ipv6/conf/default/accept_dad"} {
			v := "1"
			if strings.HasSuffix(f, "accept_dad") {
				v = "0"
			}
			if err := os.WriteFile(f, []byte(v), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatalf("netns %s: bring lo up: %v", name, err)
	}
	return n
}

// Do runs f inside the namespace, on a thread of its own that is thrown away
// afterwards. Sockets (netlink included) that f opens belong to the
// namespace.
func (n *NS) Do(f func() error) error {
	return nsthread.OnNewThread(func() error {
		if err := nsthread.NS(n.handle).Join(); err != nil {
			return fmt.Errorf("netns %s: %w", n.Name, err)
		}
		return f()
	})
}

// Veth creates a veth pair a (inside n) and b (inside peer, or n when nil), both
// up, with the given tx queue counts (0 = kernel default).
func (n *NS) Veth(t testing.TB, a, b string, peer *NS, txQueues int) {
	t.Helper()
	err := n.Do(func() error {
		la := netlink.LinkAttrs{Name: a, NumTxQueues: txQueues, NumRxQueues: txQueues, TxQLen: 1000}
		v := &netlink.Veth{LinkAttrs: la, PeerName: b, PeerNumTxQueues: txQueuesOr1(txQueues), PeerNumRxQueues: txQueuesOr1(txQueues)}
		if peer != nil {
			v.PeerNamespace = netlink.NsFd(peer.handle)
		}
		if err := netlink.LinkAdd(v); err != nil {
			return fmt.Errorf("add veth %s/%s: %w", a, b, err)
		}
		l, err := netlink.LinkByName(a)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	})
	if err != nil {
		t.Fatal(err)
	}
	target := n
	if peer != nil {
		target = peer
	}
	if err := target.Do(func() error {
		l, err := netlink.LinkByName(b)
		if err != nil {
			return err
		}
		return netlink.LinkSetUp(l)
	}); err != nil {
		t.Fatalf("veth peer %s up: %v", b, err)
	}
}

func txQueuesOr1(n int) uint32 {
	if n <= 0 {
		return 1
	}
	return uint32(n)
}

// execEnv is the environment variable that turns a test binary into the
// namespace-entering helper (see Main).
const execEnv = "LOWLAT_TESTNET_EXEC"

// Command returns a command that runs inside the namespace with /sys remounted
// for it. The test binary re-executes itself as the helper, so TestMain must
// call Main.
func (n *NS) Command(name string, args ...string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(self, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), execEnv+"="+n.Name)
	return cmd
}

// Main must be called from TestMain of packages that use Command: when the
// binary was started as the helper it enters the namespace and execs the
// target program instead of running tests. cleanups run after the tests.
func Main(m *testing.M, cleanups ...func()) {
	if mode := os.Getenv(standInEnv); mode != "" {
		standInMain(mode)
	}
	if name := os.Getenv(execEnv); name != "" {
		os.Unsetenv(execEnv)
		if err := enterAndExec(name, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "testnet:", err)
			os.Exit(127)
		}
	}
	if arg := os.Getenv(nagleClientEnv); arg != "" {
		if err := nagleClientMain(arg); err != nil {
			fmt.Fprintln(os.Stderr, "testnet: Nagle client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	for _, c := range cleanups {
		c()
	}
	removeBinary()
	os.Exit(code)
}

func enterAndExec(name string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("no program to run")
	}
	// Mount and network namespaces belong to the thread: stay on it up to
	// the exec.
	runtime.LockOSThread()
	h, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", name, err)
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "none", unix.MS_SLAVE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if err := nsthread.NS(h).Join(); err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	// The host's bpffs and cgroup2 mounts live under /sys too: hold on to
	// them, so a program under test finds the host's (sock_ops pins must
	// outlive this mount namespace), as it would run with nsenter --net.
	keep, err := hostSysMounts()
	if err != nil {
		return err
	}
	// sysfs shows the devices of the namespace that mounted it: mount one
	// on /sys so /sys/class/net lists the namespace's interfaces, as ip
	// netns exec does. It covers the host's /sys rather than replacing it:
	// the mounts held above must stay in this namespace to be bound again.
	if err := unix.Mount(name, "/sys", "sysfs", 0, ""); err != nil {
		return fmt.Errorf("mount sysfs: %w", err)
	}
	for _, m := range keep {
		if err := unix.Mount(fmt.Sprintf("/proc/self/fd/%d", m.fd), m.target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind the host's %s on %s: %w", m.fstype, m.target, err)
		}
		unix.Close(m.fd)
	}
	path := argv[0]
	if !strings.Contains(path, "/") {
		if p, err := exec.LookPath(path); err == nil {
			path = p
		}
	}
	return syscall.Exec(path, argv, os.Environ())
}

// sysMount is a host mount under /sys carried into a namespace's new /sys.
type sysMount struct {
	fstype, target string
	fd             int
}

// hostSysMounts opens the first bpffs and cgroup2 mounts under /sys, to be
// bound at /sys/fs/bpf and /sys/fs/cgroup (directories every sysfs has).
func hostSysMounts() ([]sysMount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	targets := map[string]string{"bpf": "/sys/fs/bpf", "cgroup2": "/sys/fs/cgroup"}
	var out []sysMount
	for _, line := range strings.Split(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if !ok || len(pf) < 5 || len(qf) < 1 || !strings.HasPrefix(pf[4], "/sys/") {
			continue
		}
		target, want := targets[qf[0]]
		if !want {
			continue
		}
		delete(targets, qf[0])
		fd, err := unix.Open(pf[4], unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", pf[4], err)
		}
		out = append(out, sysMount{fstype: qf[0], target: target, fd: fd})
	}
	return out, nil
}
