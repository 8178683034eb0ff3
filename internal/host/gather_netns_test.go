//go:build linux

package host_test

import (
	"context"
	"os"
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
