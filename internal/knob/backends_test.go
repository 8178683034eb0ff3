package knob_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/knob/knobtest"
)

// TestSystemCarriesItsBackends: a System's ethtool and service manager are
// its own fields, so Systems with different fakes work side by side in
// parallel tests, and a copy of a System acts where the original does (it
// lost its fakes when they were kept in a registry keyed by the pointer).
func TestSystemCarriesItsBackends(t *testing.T) {
	newSys := func(rx uint32, unit string) *knob.System {
		return &knob.System{
			Root: t.TempDir(),
			Ethtool: &knobtest.Ethtool{NICs: map[string]*knobtest.NIC{"eth0": {
				Rings: &host.Rings{RxMax: 4096, TxMax: 4096, Rx: rx, Tx: rx},
			}}},
			Services: &knobtest.Services{Systemd: 252, Units: map[string]string{"irqbalance.service": unit}},
		}
	}
	original := newSys(128, "inactive,masked")
	copied := *original
	tests := []struct {
		name    string
		sys     *knob.System
		rx      uint32 // the ring size before, and the base of the sizes written
		service string
	}{
		{"first", newSys(512, "active,enabled"), 512, "active,enabled"},
		{"second", newSys(256, "inactive,disabled"), 256, "inactive,disabled"},
		{"copy", &copied, 128, "inactive,masked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ring, err := knob.New(tt.sys, "ethtool/eth0/ring/rx")
			if err != nil {
				t.Fatal(err)
			}
			svc, err := knob.New(tt.sys, "service/irqbalance.service")
			if err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprint(tt.rx)
			for i := range 50 {
				got, err := ring.Read(ctx)
				if err != nil || got != want {
					t.Fatalf("ring read %d = %q, %v; want %q (this System's fake)", i, got, err, want)
				}
				if got, err := svc.Read(ctx); err != nil || got != tt.service {
					t.Fatalf("service read %d = %q, %v; want %q", i, got, err, tt.service)
				}
				want = fmt.Sprint(tt.rx + uint32(i) + 1)
				if err := ring.Write(ctx, want); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestFileTreeWithoutEthtool: a file tree with no ethtool backend must not
// fall through to the live host's ioctls.
func TestFileTreeWithoutEthtool(t *testing.T) {
	sys := &knob.System{Root: t.TempDir()}
	if e, err := knob.EthtoolOf(sys); err == nil {
		t.Errorf("EthtoolOf(file tree) = %T, want an error", e)
	}
	if e, err := knob.EthtoolOf(knob.Live); err != nil || e == nil {
		t.Errorf("EthtoolOf(Live) = %v, %v; want the live ioctls", e, err)
	}
}
