package lab

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestCakeAutorateConfig(t *testing.T) {
	a := &AutorateRun{Peer: PeerCakeAutorate, Min: "500kbit", Max: "4mbit", PeerConfig: map[string]string{"ul_owd_delta_delay_thr_ms": "7.5"}}
	conf, err := cakeAutorateConfig(a, 1_800_000, "/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range strings.Split(conf, "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			if _, dup := got[k]; dup {
				t.Errorf("%s set twice", k)
			}
			got[k] = v
		}
	}
	want := map[string]string{
		"ul_if": ClientIf, "dl_if": "lo", "adjust_ul_shaper_rate": "1", "adjust_dl_shaper_rate": "0",
		"min_ul_shaper_rate_kbps": "500", "base_ul_shaper_rate_kbps": "1800", "max_ul_shaper_rate_kbps": "4000",
		// Loopback's 64 KiB MTU must weigh nothing at the download's rate.
		"min_dl_shaper_rate_kbps":    "1000000",
		"connection_active_thr_kbps": "180",
		"pinger_method":              "fping", "reflectors": "(" + ServerAddr + ")", "no_pingers": "1",
		// lowlat's probe budget: 20 Hz.
		"reflector_ping_interval_s": "0.05",
		"log_file_path_override":    "/tmp/x",
		"ul_owd_delta_delay_thr_ms": "7.5",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if strings.Index(conf, "ul_owd_delta_delay_thr_ms") < strings.Index(conf, "pinger_method") {
		t.Error("the variant's own settings must come last, to override the lab's")
	}
	// cake-autorate refuses an idle threshold over either minimum.
	idle, _ := strconv.Atoi(got["connection_active_thr_kbps"])
	for _, k := range []string{"min_ul_shaper_rate_kbps", "min_dl_shaper_rate_kbps"} {
		if m, _ := strconv.Atoi(got[k]); idle > m || idle < 1 {
			t.Errorf("connection_active_thr_kbps %d against %s %d", idle, k, m)
		}
	}

	for _, tt := range []struct {
		a    AutorateRun
		base uint64
		want string
	}{
		{AutorateRun{Min: "fast", Max: "4mbit"}, 1_800_000, "cake-autorate's min"},
		{AutorateRun{Min: "500kbit", Max: "4mbit"}, 5_000_000, "outside 500kbit..4mbit"},
		{AutorateRun{Min: "500kbit", Max: "4mbit"}, 100_000, "outside 500kbit..4mbit"},
	} {
		if _, err := cakeAutorateConfig(&tt.a, tt.base, "/tmp/x"); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v at %d: %v, want %q", tt.a, tt.base, err, tt.want)
		}
	}
}

func TestCheckPeer(t *testing.T) {
	a := &AutorateRun{Peer: PeerCakeAutorate}
	if _, err := checkPeer(a, ""); err == nil || !strings.Contains(err.Error(), "--cake-autorate DIR") {
		t.Errorf("no checkout: %v", err)
	}
	dir := t.TempDir()
	if _, err := checkPeer(a, dir); err == nil || !strings.Contains(err.Error(), "no cake-autorate.sh") {
		t.Errorf("empty directory: %v", err)
	}
	if _, err := checkPeer(&AutorateRun{Peer: "sqm-autorate"}, dir); err == nil || !strings.Contains(err.Error(), `unknown peer "sqm-autorate"`) {
		t.Errorf("unknown peer: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cake-autorate.sh"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var missing error
	for _, tool := range cakeAutorateTools {
		if _, err := exec.LookPath(tool[0]); err != nil {
			missing = err
		}
	}
	if _, err := checkPeer(a, dir); (err == nil) != (missing == nil) {
		t.Errorf("a checkout: %v, with the programs it runs: %v", err, missing)
	}
}

func TestPeerVariantsRunOnlyWhenNamed(t *testing.T) {
	sc, err := Lookup("capped-uplink-varying")
	if err != nil {
		t.Fatal(err)
	}
	names := func(vs []*Variant) string {
		var n []string
		for _, v := range vs {
			n = append(n, v.Name)
		}
		return strings.Join(n, " ")
	}
	if got, want := names(sc.selected(nil)), "baseline capped-uplink capped-uplink-oracle autorate-reflector autorate-passive"; got != want {
		t.Errorf("no names: %s, want %s", got, want)
	}
	if got, want := names(sc.selected([]string{"cake-autorate-15ms", "autorate-reflector"})), "baseline autorate-reflector cake-autorate-15ms"; got != want {
		t.Errorf("named: %s, want %s", got, want)
	}
	for _, v := range sc.selected([]string{"cake-autorate", "cake-autorate-15ms"})[1:] {
		if !v.OnlyNamed() || v.Fix == nil || v.Autorate.Min != "500kbit" || v.Autorate.Max != "4mbit" {
			t.Errorf("%s: a peer on lowlat's shaper and bounds: %+v", v.Name, v.Autorate)
		}
	}
}

func TestCakeAutorateSummary(t *testing.T) {
	lines := []string{
		"SHAPER; 2026-11-26-18:33:56; 1795718036.317016; tc qdisc change root dev lo cake bandwidth 1800Kbit",
		"SHAPER; 2026-11-26-18:33:56; 1795718036.319190; tc qdisc change root dev " + ClientIf + " cake bandwidth 1800Kbit",
		"DEBUG; 2026-11-26-18:33:56; 1795718036.4; Starting: start_pinger with PID: 201",
		"DATA; 2026-11-26-18:33:57; 1795718037.1; 1795718037.1; 0; 1798; 0; 99",
		"SHAPER; 2026-11-26-18:34:05; 1795718045.411609; tc qdisc change root dev " + ClientIf + " cake bandwidth 1872Kbit",
	}
	s := cakeAutorateSummary(lines)
	if n := s["adjustments"].(map[string]int)["changes"]; n != 2 {
		t.Errorf("%d changes on the uplink, want 2 (the download's line is not one)", n)
	}
	if kept := s["log"].([]string); len(kept) != 3 {
		t.Errorf("log keeps %d lines, want the 3 SHAPER lines: %q", len(kept), kept)
	}
}

func TestGuestScriptNamesTheGuestsCheckout(t *testing.T) {
	s := guestScript("/bin/lowlat", "capped-uplink-varying", VMOptions{Variants: []string{"cake-autorate"}, CakeAutorate: guestCakeAutorate})
	if !strings.Contains(s, "'--variant' 'cake-autorate' '--cake-autorate' '"+guestCakeAutorate+"'") {
		t.Errorf("guest script:\n%s", s)
	}
}

// TestMSSVariants: the MSS clamp's variants run only when named, and each
// is its partner without the clamp plus clamp-mss=auto, required.
func TestMSSVariants(t *testing.T) {
	sc, err := Lookup("capped-uplink-varying")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*Variant{}
	for i := range sc.Variants {
		byName[sc.Variants[i].Name] = &sc.Variants[i]
	}
	got := sc.selected([]string{"capped-uplink-oracle", "capped-uplink-oracle-mss", "autorate-reflector", "autorate-reflector-mss"})
	if len(got) != 5 {
		t.Fatalf("named four: %d variants", len(got))
	}
	for base, mss := range map[string]string{"capped-uplink-oracle": "capped-uplink-oracle-mss", "autorate-reflector": "autorate-reflector-mss"} {
		b, m := byName[base], byName[mss]
		// Named, but no peer: a run checks no cake-autorate checkout for it.
		if m == nil || !m.OnlyNamed() || b.OnlyNamed() || m.Peer() != nil {
			t.Fatalf("%s: %+v", mss, m)
		}
		if m.Fix.Sets["clamp-mss"] != "auto" || !slices.Contains(m.Fix.Require, "mss.clamp") || m.Fix.Sets["rate"] != b.Fix.Sets["rate"] || len(m.Fix.Sets) != len(b.Fix.Sets)+1 {
			t.Errorf("%s: fix %+v, want %s's plus clamp-mss=auto", mss, m.Fix, base)
		}
		if m.FollowCap != b.FollowCap || (m.Autorate == nil) != (b.Autorate == nil) || m.Autorate != nil && m.Autorate.String() != b.Autorate.String() {
			t.Errorf("%s does not run as %s does", mss, base)
		}
	}
}
