// Package hosttest loads the fixture hosts in internal/host/testdata/hosts for
// tests of the packages that reason about facts (plan, doctor, irq planning).
package hosttest

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
)

// Names are the fixture hosts, one per shape the runbooks describe.
var Names = []string{"virtio-vm", "epyc-25g", "dual-i40e-nvme", "centos7-3.10"}

// Dir is the fixture tree of the named host.
func Dir(name string) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "hosts", name)
}

// Fixture gathers the named fixture host's facts, failing the test on error.
func Fixture(t testing.TB, name string) *host.Facts {
	t.Helper()
	src, err := host.OpenRoot(Dir(name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := host.Gather(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
