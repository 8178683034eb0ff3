package lab

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// cakeAutorateTools are the host programs cake-autorate runs (busybox gives
// the guest its awk, sed, grep and the rest), with the Debian package of each.
var cakeAutorateTools = [][2]string{{"bash", "bash"}, {"fping", "fping"}, {"tc", "iproute2"}}

// checkPeer says, before anything is built, what a peer variant lacks: the
// checkout, or a program it runs. It returns the host paths of those
// programs (cakeAutorateTools), which lab vm copies into the guest.
func checkPeer(a *AutorateRun, dir string) ([]string, error) {
	if a.Peer != PeerCakeAutorate {
		return nil, fmt.Errorf("unknown peer %q", a.Peer)
	}
	if dir == "" {
		return nil, errors.New("cake-autorate runs from a checkout of github.com/lynxthecat/cake-autorate: name its directory with --cake-autorate DIR")
	}
	if _, err := os.Stat(filepath.Join(dir, "cake-autorate.sh")); err != nil {
		return nil, fmt.Errorf("--cake-autorate %s: no cake-autorate.sh there", dir)
	}
	if _, err := os.Stat("/etc/protocols"); err != nil {
		return nil, errors.New("cake-autorate's fping needs /etc/protocols (apt-get install netbase)")
	}
	var paths []string
	for _, t := range cakeAutorateTools {
		p, err := exec.LookPath(t[0])
		if err != nil {
			return nil, fmt.Errorf("cake-autorate runs %s: not found (apt-get install %s)", t[0], t[1])
		}
		paths = append(paths, p)
	}
	return paths, nil
}

// cakeAutorateConfig is the configuration file (bash, config.X.sh) that runs
// cake-autorate on the lab's client uplink as lowlat autorate runs there:
// the same shaper, bounds and starting rate, and the same probe budget
// (lowlat's 20 Hz to a lone reflector: one fping every 50 ms to the server,
// which answers ICMP echo). Everything else is cake-autorate's default unless
// the variant sets it (PeerConfig). The download is not shaped: its
// interface is the namespace's loopback (it must name one apart from the
// upload's), whose counters stay near zero.
func cakeAutorateConfig(a *AutorateRun, baseBits uint64, logDir string) (string, error) {
	kbps := func(name, s string) (uint64, error) {
		b, err := qdisc.ParseRate(s)
		if err != nil {
			return 0, fmt.Errorf("cake-autorate's %s: %w", name, err)
		}
		return b / 1000, nil
	}
	lo, err := kbps("min", a.Min)
	if err != nil {
		return "", err
	}
	hi, err := kbps("max", a.Max)
	if err != nil {
		return "", err
	}
	base := baseBits / 1000
	if base < lo || base > hi {
		return "", fmt.Errorf("cake-autorate: the shaper's rate %d kbit/s is outside %s..%s", base, a.Min, a.Max)
	}
	var b strings.Builder
	set := func(k string, v any) { fmt.Fprintf(&b, "%s=%v\n", k, v) }
	b.WriteString("#!/bin/bash\n# Written by lowlat lab for a side-by-side run; not lowlat's configuration.\n")
	set("dl_if", "lo")
	set("ul_if", ClientIf)
	set("adjust_dl_shaper_rate", 0)
	set("adjust_ul_shaper_rate", 1)
	// The download's rates only scale what it reads of loopback, but it
	// also adds loopback's MTU time at them (64 KiB) to how often it reads
	// its counters (ten times both MTU times): at the uplink's rates that
	// was every 3 s instead of 200 ms, and each rise waited for it.
	for _, k := range []string{"min", "base", "max"} {
		set(k+"_dl_shaper_rate_kbps", 1000000)
	}
	set("min_ul_shaper_rate_kbps", lo)
	set("base_ul_shaper_rate_kbps", base)
	set("max_ul_shaper_rate_kbps", hi)
	// Its default (2000 kbit/s) must not exceed the minimum; a tenth of the
	// base is what lowlat takes as idle.
	set("connection_active_thr_kbps", max(base/10, 1))
	set("pinger_method", "fping")
	set("reflectors", "("+ServerAddr+")")
	set("no_pingers", 1)
	set("randomize_reflectors", 0)
	set("reflector_ping_interval_s", "0.05")
	set("log_file_path_override", logDir)
	set("output_cake_changes", 1)
	for _, k := range slices.Sorted(maps.Keys(a.PeerConfig)) {
		set(k, a.PeerConfig[k])
	}
	return b.String(), nil
}

// cakeAutorateSummary counts cake-autorate's rate changes on the uplink
// (its SHAPER lines; it logs one for the download it leaves alone too) and
// keeps the log without its DEBUG and DATA lines.
func cakeAutorateSummary(lines []string) map[string]any {
	n := 0
	var kept []string
	for _, l := range lines {
		if strings.HasPrefix(l, "SHAPER;") && strings.Contains(l, " dev "+ClientIf+" ") {
			n++
		}
		if !strings.HasPrefix(l, "DEBUG;") && !strings.HasPrefix(l, "DATA") {
			kept = append(kept, l)
		}
	}
	return map[string]any{"adjustments": map[string]int{"changes": n}, "log": kept}
}
