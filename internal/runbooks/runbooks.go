// Package runbooks names the sections of docs/runbooks.md, the five field
// runbooks in lowlat's words, that doctor findings, profile settings and plan
// rows cite as their source, and reads those sections back so tests can
// check that every citation leads somewhere.
package runbooks

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// The sections, as a source names them.
const (
	R000 = "docs/runbooks.md#000-cross-border-game-server"
	R001 = "docs/runbooks.md#001-small-tcp-messages-and-nagle"
	R002 = "docs/runbooks.md#002-interrupt-and-queue-placement"
	R003 = "docs/runbooks.md#003-bufferbloat-behind-a-capped-uplink"
	R004 = "docs/runbooks.md#004-time-to-first-frame-on-a-streaming-edge"
)

// Sections reads docs/runbooks.md at path and returns every "## " heading as
// the reference a source uses ("docs/runbooks.md#000-cross-border-game-server"
// for "## 000: cross-border game server"), by GitHub's anchor rules.
func Sections(path string) (map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("runbook sections: %w", err)
	}
	defer f.Close()
	return parse(f)
}

func parse(r io.Reader) (map[string]bool, error) {
	out := map[string]bool{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		h, ok := strings.CutPrefix(sc.Text(), "## ")
		if !ok {
			continue
		}
		var a strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				a.WriteByte('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
				a.WriteRune(r)
			}
		}
		out["docs/runbooks.md#"+a.String()] = true
	}
	return out, sc.Err()
}
