//go:build linux

package testnet

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Snapshot records everything a lowlat transaction may touch inside the
// namespace, read with tools independent of lowlat: every readable net.*
// sysctl, and iproute2's JSON for qdiscs, ingress filters, routes and links.
// Two equal snapshots mean the namespace is byte-identical in those respects.
func (n *NS) Snapshot(t testing.TB, devs ...string) string {
	t.Helper()
	var lines []string
	err := n.Do(func() error {
		return filepath.Walk("/proc/sys/net", func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() || info.Mode()&0o444 == 0 {
				return nil
			}
			// Keys and write-only triggers are not state.
			if strings.Contains(p, "stable_secret") || strings.HasSuffix(p, "/flush") || strings.HasSuffix(p, "_key") {
				return nil
			}
			v, err := os.ReadFile(p)
			if err == nil {
				lines = append(lines, p+"="+strings.Join(strings.Fields(string(v)), " "))
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	var b strings.Builder
	b.WriteString(strings.Join(lines, "\n"))
	cmds := [][]string{
		{"tc", "-j", "qdisc", "show"},
		{"ip", "-d", "-j", "route", "show", "table", "all"},
		{"ip", "-6", "-d", "-j", "route", "show", "table", "all"},
		{"ip", "-d", "-j", "link", "show"},
	}
	for _, d := range devs {
		cmds = append(cmds, []string{"tc", "-j", "filter", "show", "dev", d, "ingress"}, []string{"tc", "-j", "class", "show", "dev", d})
	}
	for _, args := range cmds {
		path, err := exec.LookPath(args[0])
		if err != nil {
			t.Fatalf("%s (iproute2) is needed to cross-check lowlat: apt-get install iproute2", args[0])
		}
		out, err := n.Command(path, args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if args[1] == "-j" && args[2] == "class" {
			out = dropFlowClasses(out)
		}
		b.WriteString("\n")
		b.Write(out)
	}
	return b.String()
}

// flowClassKinds are qdiscs whose classes are their flows: cake and
// fq_codel dump one class per flow that has packets queued at that moment,
// so they come and go with traffic (a neighbour solicitation, say) and are
// state of the traffic, not configuration a transaction sets.
var flowClassKinds = map[string]bool{"cake": true, "fq_codel": true, "fq": true, "sfq": true}

// dropFlowClasses removes flow classes from tc's class listing, in JSON
// (one object per class) or, where tc prints classes as text, line by line.
func dropFlowClasses(out []byte) []byte {
	var classes []map[string]any
	if json.Unmarshal(out, &classes) == nil {
		kept := classes[:0]
		for _, c := range classes {
			if kind, _ := c["class"].(string); !flowClassKinds[kind] {
				kept = append(kept, c)
			}
		}
		b, _ := json.Marshal(kept)
		return b
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "class" && flowClassKinds[f[1]] {
			continue
		}
		lines = append(lines, l)
	}
	return []byte(strings.Join(lines, "\n"))
}

// DiffLines lists lines only in a (-) or only in b (+).
func DiffLines(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	am, bm := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !bm[l] {
			out.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !am[l] {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}
