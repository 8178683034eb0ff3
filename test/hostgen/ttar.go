package hostgen

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ExtractTTAR unpacks a ttar archive (the plain-text archive format of
// prometheus/procfs and node_exporter's test fixtures, written by their
// "ttar" script) below dst. Entries are "Directory: P", "Path: P" followed
// by "Lines: N" and N lines of content or by "SymlinkTo: T", and "Mode:
// NNN"; lines starting with "#" separate them. In content, NULLBYTE stands
// for a zero byte and a trailing EOF for a last line without a newline,
// each escaped with a backslash when meant literally. Paths must stay
// inside dst.
func ExtractTTAR(r io.Reader, dst string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	lineNo := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		lineNo++
		return sc.Text(), true
	}
	target := func(p string) (string, error) {
		clean := filepath.Clean(filepath.FromSlash(p))
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
			return "", fmt.Errorf("ttar line %d: path %q leaves the archive", lineNo, p)
		}
		return filepath.Join(dst, clean), nil
	}
	var cur string // the current entry's path on disk
	for {
		line, ok := next()
		if !ok {
			break
		}
		key, val, _ := strings.Cut(line, ": ")
		switch {
		case strings.HasPrefix(line, "#") || line == "":
			continue
		case key == "Directory":
			p, err := target(val)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			cur = p
		case key == "Path":
			p, err := target(val)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			cur = p
		case key == "SymlinkTo":
			if err := os.Symlink(val, cur); err != nil {
				return fmt.Errorf("ttar line %d: %w", lineNo, err)
			}
		case key == "Lines":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("ttar line %d: bad line count %q", lineNo, val)
			}
			var b strings.Builder
			for range n {
				l, ok := next()
				if !ok {
					return fmt.Errorf("ttar: %s: archive ends inside the file", cur)
				}
				b.WriteString(ttarLine(l))
			}
			if err := os.WriteFile(cur, []byte(b.String()), 0o644); err != nil {
				return err
			}
		case key == "Mode":
			m, err := strconv.ParseUint(val, 8, 32)
			if err != nil {
				return fmt.Errorf("ttar line %d: bad mode %q", lineNo, val)
			}
			if err := os.Chmod(cur, os.FileMode(m)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("ttar line %d: unknown keyword in %q", lineNo, line)
		}
	}
	return sc.Err()
}

// ttarLine decodes one content line, its newline included unless it ends
// in an unescaped EOF.
func ttarLine(l string) string {
	nl := "\n"
	if strings.HasSuffix(l, "EOF") && !strings.HasSuffix(l, `\EOF`) {
		l, nl = strings.TrimSuffix(l, "EOF"), ""
	}
	var b strings.Builder
	for i := 0; i < len(l); {
		switch {
		case strings.HasPrefix(l[i:], `\NULLBYTE`):
			b.WriteString("NULLBYTE")
			i += len(`\NULLBYTE`)
		case strings.HasPrefix(l[i:], "NULLBYTE"):
			b.WriteByte(0)
			i += len("NULLBYTE")
		case strings.HasPrefix(l[i:], `\EOF`):
			b.WriteString("EOF")
			i += len(`\EOF`)
		default:
			b.WriteByte(l[i])
			i++
		}
	}
	return b.String() + nl
}
