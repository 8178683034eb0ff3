//go:build linux

package testnet

import (
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
		b.WriteString("\n")
		b.Write(out)
	}
	return b.String()
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
