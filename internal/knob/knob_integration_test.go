//go:build linux

package knob_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"testing"

	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/qdisc"
	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
)

func TestMain(m *testing.M) { testnet.Main(m) }

// routeDump is an independent view of the routing tables (iproute2's JSON),
// used to prove a rollback leaves every route byte-identical.
func routeDump(t *testing.T, ns *testnet.NS) []byte {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skip("ip(8) not installed: cannot cross-check routes")
	}
	out, err := ns.Command(ip, "-d", "-j", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip route: %v", err)
	}
	out6, err := ns.Command(ip, "-6", "-d", "-j", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("ip -6 route: %v", err)
	}
	return append(out, out6...)
}

func TestIntegrationRouteInitcwnd(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "v0", "v1", nil, 1)
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName("v0")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("10.9.0.1/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("0.0.0.0/0")
		// A default route with attributes a careless replace would lose.
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.9.0.254"), Priority: 100, MTU: 1400, Protocol: 4, Table: 254})
	}); err != nil {
		t.Fatal(err)
	}
	before := routeDump(t, ns)
	ctx := context.Background()
	err := ns.Do(func() error {
		k, err := knob.New(knob.Live, "route/default/main/initcwnd")
		if err != nil {
			return err
		}
		if v, err := k.Read(ctx); err != nil || v != "0" {
			t.Errorf("initial initcwnd = %q, %v; want 0 (unset)", v, err)
		}
		if err := k.Write(ctx, "40"); err != nil {
			return err
		}
		if err := knob.Verify(ctx, k, "40"); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	during := routeDump(t, ns)
	if !bytes.Contains(during, []byte(`"initcwnd":40`)) || !bytes.Contains(during, []byte(`"mtu":1400`)) {
		t.Errorf("ip does not show initcwnd 40 with mtu 1400 kept:\n%s", during)
	}
	if err := ns.Do(func() error {
		k, _ := knob.New(knob.Live, "route/default/main/initcwnd")
		return k.Write(ctx, "0")
	}); err != nil {
		t.Fatal(err)
	}
	if after := routeDump(t, ns); !bytes.Equal(before, after) {
		t.Errorf("routes not byte-identical after restore:\nbefore %s\nafter  %s", before, after)
	}
	// A route that does not exist is "not supported", not a crash.
	err = ns.Do(func() error {
		k, _ := knob.New(knob.Live, "route/192.0.2.0/24/main/initcwnd")
		_, err := k.Read(ctx)
		return err
	})
	if !errors.Is(err, knob.ErrNotSupported) {
		t.Errorf("missing route: %v, want ErrNotSupported", err)
	}
}

func TestIntegrationIngressIFB(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "v0", "v1", nil, 1)
	ctx := context.Background()
	shaper := "htb rate 10mbit leaf { pfifo limit 100 }"
	var during string
	err := ns.Do(func() error {
		k, err := knob.New(knob.Live, "qdisc/v0/ingress")
		if err != nil {
			return err
		}
		if v, err := k.Read(ctx); err != nil || v != knob.Absent {
			t.Errorf("initial ingress = %q, %v", v, err)
		}
		if err := k.Write(ctx, shaper); err != nil {
			return err
		}
		if err := knob.Verify(ctx, k, shaper); err != nil {
			return err
		}
		during, _ = k.Read(ctx)
		ifb, err := netlink.LinkByName("ifb4v0")
		if err != nil {
			return err
		}
		if ifb.Attrs().Flags&net.FlagUp == 0 {
			t.Error("IFB device is not up: redirected traffic would be dropped")
		}
		// Changing only the shaper keeps the redirect and swaps the IFB's qdisc.
		if err := k.Write(ctx, "tbf rate 5mbit burst 10k latency 50ms"); err != nil {
			return err
		}
		if err := knob.Verify(ctx, k, "tbf rate 5mbit burst 10k latency 50ms"); err != nil {
			return err
		}
		if err := k.Write(ctx, knob.Absent); err != nil {
			return err
		}
		if v, _ := k.Read(ctx); v != knob.Absent {
			t.Errorf("after teardown ingress = %q", v)
		}
		if _, err := netlink.LinkByName("ifb4v0"); err == nil {
			t.Error("IFB device left behind")
		}
		l, _ := netlink.LinkByName("v0")
		entries, err := qdisc.Dump(l.Attrs().Index)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if e.Parent == qdisc.HandleIngress {
				t.Errorf("ingress qdisc left behind: %+v", e)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ingress during: %s", during)
}

func TestIntegrationIngressRefusesForeign(t *testing.T) {
	ns := testnet.New(t)
	ns.Veth(t, "v0", "v1", nil, 1)
	err := ns.Do(func() error {
		l, _ := netlink.LinkByName("v0")
		if err := netlink.QdiscAdd(&netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: l.Attrs().Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}); err != nil {
			return err
		}
		k, _ := knob.New(knob.Live, "qdisc/v0/ingress")
		v, err := k.Read(context.Background())
		if err != nil {
			return err
		}
		if v != "ingress @unmanaged" {
			t.Errorf("foreign ingress reads %q", v)
		}
		if err := k.Write(context.Background(), "pfifo limit 10"); err == nil {
			t.Error("replacing a foreign ingress setup was allowed")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
