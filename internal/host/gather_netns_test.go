//go:build linux

package host_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/testnet"
)

// TestIntegrationGatherInsideNamespace gathers facts on a thread moved into a
// network namespace (as the lab does) and checks every part, the sysctl walk
// on its helper goroutine included, reads that namespace and not the host's.
func TestIntegrationGatherInsideNamespace(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "nsv0", "nsv1", nil, 1)
	host0, err := os.ReadFile("/proc/sys/net/ipv4/tcp_fin_timeout")
	if err != nil {
		t.Fatal(err)
	}
	var f *host.Facts
	err = ns.Do(func() error {
		if err := os.WriteFile("/proc/sys/net/ipv4/tcp_fin_timeout", []byte("33"), 0); err != nil {
			return err
		}
		src, err := host.OpenRoot("")
		if err != nil {
			return err
		}
		f, err = host.Gather(context.Background(), src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Sysctls["net.ipv4.tcp_fin_timeout"]; got != "33" {
		t.Errorf("tcp_fin_timeout = %q, want the namespace's 33 (the host has %s)", got, host0)
	}
	if f.Netns != "other" {
		t.Errorf("Netns = %q, want other", f.Netns)
	}
	if f.Interface("nsv0") == nil || f.Interface("eth0") != nil {
		t.Errorf("interfaces are not the namespace's: %v", f.Interfaces)
	}
}

// TestIntegrationEthtoolFollowsCaller: the ethtool reader of a live Source
// asks the namespace of the thread it is called on, every time, and keeps no
// socket open (an open socket pins its namespace after the namespace is
// deleted). A reader first used in the host's namespace and then on a thread
// inside a test namespace must see the namespace's veth, not miss it as
// "no such device" in the host's.
func TestIntegrationEthtoolFollowsCaller(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "nsv0", "nsv1", nil, 1)
	src, err := host.OpenRoot("")
	if err != nil {
		t.Fatal(err)
	}
	sockets := openSockets(t)
	if _, err := host.Gather(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	var f *host.Facts
	if err := ns.Do(func() error {
		inside, err := host.OpenRoot("")
		if err != nil {
			return err
		}
		inside.Ethtool = src.Ethtool
		f, err = host.Gather(context.Background(), inside)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ifc := f.Interface("nsv0")
	if ifc == nil || ifc.Ethtool == nil || ifc.Ethtool.Driver != "veth" {
		t.Errorf("nsv0 in the namespace: %+v, want ethtool facts with driver veth", ifc)
	}
	if after := openSockets(t); after > sockets {
		t.Errorf("%d sockets open after gathering, %d before: the ethtool reader keeps one", after, sockets)
	}
}

// openSockets counts the process's open socket descriptors.
func openSockets(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}
