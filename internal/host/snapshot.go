package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Save writes f as indented JSON, the capture file format.
func Save(w io.Writer, f *Facts) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(f); err != nil {
		return fmt.Errorf("save facts: %w", err)
	}
	return nil
}

// Load reads a capture file written by Save. A file from a newer lowlat
// (higher schema) is refused rather than half-understood; a malformed file is
// reported with its position. The loaded facts' Source becomes "capture:PATH".
func Load(p string) (*Facts, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("load capture: %w", err)
	}
	f, err := decodeFacts(b)
	if err != nil {
		return nil, fmt.Errorf("capture %s: %w", p, err)
	}
	f.Source = "capture:" + p
	return f, nil
}

func decodeFacts(b []byte) (*Facts, error) {
	// The schema is checked before the full decode so that a newer file fails
	// on its version, not on a field whose type changed.
	var head struct {
		Schema *int `json:"schema"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, jsonError(b, err)
	}
	switch {
	case head.Schema == nil:
		return nil, errors.New("not a lowlat capture (no \"schema\" field)")
	case *head.Schema > SchemaVersion:
		return nil, fmt.Errorf("schema %d is newer than this lowlat understands (%d); use a newer lowlat", *head.Schema, SchemaVersion)
	case *head.Schema < 1:
		return nil, fmt.Errorf("bad schema %d", *head.Schema)
	}
	var f Facts
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, jsonError(b, err)
	}
	return &f, nil
}

// jsonError names the position of a decoding error as line:column and byte
// offset.
func jsonError(b []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	line := 1 + bytes.Count(b[:min(off, int64(len(b)))], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(b[:min(off, int64(len(b)))], '\n'))
	return fmt.Errorf("malformed JSON at line %d, column %d (offset %d): %w", line, col-1, off, err)
}

// CaptureTree copies exactly the files lowlat reads from r into dstDir, so the
// tree can be sent elsewhere and read back with --root (OpenRoot). Symbolic
// links are kept as links, relative inside the tree. File contents are the
// bytes read during the capture, not a second read, so the tree is one
// consistent snapshot. dstDir must not exist or be empty. Netlink and ethtool
// facts are not files: write them next to the tree with WriteStaticNetlink.
func CaptureTree(r Root, dstDir string) error {
	_, err := captureTree(r, dstDir)
	return err
}

func captureTree(r Root, dstDir string) (*Facts, error) {
	if ents, err := os.ReadDir(dstDir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("capture tree: %s is not empty", dstDir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("capture tree: %w", err)
	}
	rec := newRecorder()
	rr := r
	rr.rec = rec
	rr.dirs = nil // every link must be seen to be recorded
	f := &Facts{Schema: SchemaVersion, CapturedAt: time.Now().UTC(), Sysctls: map[string]string{}, Sysfs: Sysfs{}}
	rd := &fileReader{r: rr, f: f}
	rd.readAll()
	rd.flush()
	if err := rec.writeTree(dstDir); err != nil {
		return nil, fmt.Errorf("capture tree %s: %w", dstDir, err)
	}
	// Keep read-only sysctls read-only in the tree, so reading it back tells
	// the same story (a namespace's read-only net.core limits).
	for _, name := range f.ReadOnlySysctls {
		if err := os.Chmod(filepath.Join(dstDir, filepath.FromSlash(SysctlPath(name))), 0o444); err != nil {
			return nil, fmt.Errorf("capture tree %s: %w", dstDir, err)
		}
	}
	return f, nil
}

// writeTree materializes the recorded reads below dst: directories, then
// files, then links (so no directory is ever created through a link).
func (rc *recorder) writeTree(dst string) error {
	osPath := func(p string) string { return filepath.Join(dst, filepath.FromSlash(p)) }
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, d := range sortedKeys(rc.dirs) {
		if err := os.MkdirAll(osPath(d), 0o755); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(rc.files) {
		if err := os.MkdirAll(osPath(path.Dir(p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(osPath(p), rc.files[p], 0o644); err != nil {
			return err
		}
	}
	for _, p := range sortedKeys(rc.empty) {
		if _, ok := rc.files[p]; ok {
			continue
		}
		if err := os.MkdirAll(osPath(path.Dir(p)), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(osPath(p), nil, 0o644); err != nil {
			return err
		}
	}
	// A directory can be a fact by its existence alone (/run/systemd/system
	// says systemd runs, an empty device directory that a NIC has one):
	// keep empty ones when the tree travels through git or an archiver
	// that drops them. Readers of a tree do not list the keep file.
	for _, d := range sortedKeys(rc.dirs) {
		ents, err := os.ReadDir(osPath(d))
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			if err := os.WriteFile(filepath.Join(osPath(d), TreeKeepFile), []byte(TreeKeepText), 0o644); err != nil {
				return err
			}
		}
	}
	for _, p := range sortedKeys(rc.links) {
		target := rc.links[p]
		if path.IsAbs(target) {
			// Keep the tree self-contained: an absolute link would point
			// into the machine that reads the tree.
			rel, err := filepath.Rel(path.Dir(p), target)
			if err != nil {
				return err
			}
			target = rel
		}
		if err := os.MkdirAll(osPath(path.Dir(p)), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, osPath(p)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// StaticNetlinkFrom turns gathered facts back into the netlink/ethtool
// stand-in file format, so a capture tree can carry them. What the facts
// could not read is written as that failure, not as an empty list: a tree
// read back must say what the host said.
func StaticNetlinkFrom(f *Facts) *StaticNetlink {
	s := &StaticNetlink{RouteList: append([]Route(nil), f.Routes...), LinkList: []Link{}, QdiscList: []LinkQdisc{}}
	for _, e := range f.Errors {
		if src, ok := strings.CutPrefix(e.Source, "netlink:"); ok || strings.HasPrefix(e.Source, "ethtool:") {
			if !ok {
				src = e.Source
			}
			if s.Errors == nil {
				s.Errors = map[string]string{}
			}
			s.Errors[src] = e.Err
		}
	}
	if _, ok := s.Errors["routes"]; ok {
		s.RouteList = nil
	}
	if _, ok := s.Errors["qdiscs"]; ok {
		s.QdiscList = nil
	}
	_, noLinks := s.Errors["links"]
	if noLinks {
		// The interfaces came from sysfs, which the tree carries itself.
		s.LinkList = nil
	}
	for _, ifc := range f.Interfaces {
		if !noLinks {
			s.LinkList = append(s.LinkList, Link{
				Name: ifc.Name, Index: ifc.Index, Kind: ifc.Kind, MTU: ifc.MTU, TxQueueLen: ifc.TxQueueLen,
				NumTxQueues: ifc.NumTxQueues, NumRxQueues: ifc.NumRxQueues, OperState: ifc.OperState,
				Up: ifc.Up, Loopback: ifc.Loopback, MAC: ifc.MAC,
			})
		}
		if s.QdiscList != nil {
			for _, q := range ifc.qdiscs() {
				s.QdiscList = append(s.QdiscList, LinkQdisc{Ifindex: ifc.Index, Qdisc: q})
			}
		}
		if ifc.Ethtool != nil {
			if s.EthtoolBy == nil {
				s.EthtoolBy = map[string]*Ethtool{}
			}
			s.EthtoolBy[ifc.Name] = ifc.Ethtool
		}
	}
	return s
}

// WriteStaticNetlink writes the netlink and ethtool facts of f as dir's
// lowlat-netlink.json.
func WriteStaticNetlink(dir string, f *Facts) error {
	b, err := json.MarshalIndent(StaticNetlinkFrom(f), "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, NetlinkFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", NetlinkFile, err)
	}
	return nil
}

// TreeKeepFile is written into the empty directories of a captured tree
// (they matter by their existence alone: /run/systemd/system), so they
// survive git and archivers that drop empty directories. Listing a tree's
// directory leaves it out.
const TreeKeepFile = ".lowlat-keep"

// TreeKeepText is its content.
const TreeKeepText = "kept by lowlat capture: this directory's existence is a fact\n"
