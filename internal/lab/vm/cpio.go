package vm

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// cpioWriter writes a cpio archive in the "newc" format (magic 070701), the only
// format the kernel's initramfs unpacker reads (Documentation/driver-api/
// early-userspace/buffer-format.rst). Every header is 110 ASCII bytes of magic
// and thirteen 8-digit hex fields; the name (with its NUL) and the data are each
// padded to a multiple of 4 bytes.
//
// The writer does not create parent directories: the caller writes them first
// (initramfs does). Timestamps are zero so that the same inputs give the same
// bytes.
type cpioWriter struct {
	w      io.Writer
	ino    uint32
	off    int64
	closed bool
}

func newCPIOWriter(w io.Writer) *cpioWriter { return &cpioWriter{w: w, ino: 1} }

// cpio mode bits (from <linux/stat.h>), which are not fs.FileMode's.
const (
	cpioTypeDir     = 0o040000
	cpioTypeReg     = 0o100000
	cpioTypeSymlink = 0o120000
	cpioTypeChar    = 0o020000
	cpioTypeBlock   = 0o060000
	cpioTypeFIFO    = 0o010000
	cpioTrailer     = "TRAILER!!!"
	cpioMaxFileSize = 1<<32 - 1
)

// cpioMode converts an fs.FileMode to the st_mode value cpio stores.
func cpioMode(m fs.FileMode) uint32 {
	mode := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	switch {
	case m.IsDir():
		mode |= cpioTypeDir
	case m&fs.ModeSymlink != 0:
		mode |= cpioTypeSymlink
	case m&fs.ModeCharDevice != 0:
		mode |= cpioTypeChar
	case m&fs.ModeDevice != 0:
		mode |= cpioTypeBlock
	case m&fs.ModeNamedPipe != 0:
		mode |= cpioTypeFIFO
	default:
		mode |= cpioTypeReg
	}
	return mode
}

type cpioHeader struct {
	name         string
	mode         fs.FileMode
	size         int64
	nlink        uint32
	rmajor, rmin uint32
}

func (c *cpioWriter) writeHeader(h cpioHeader) error {
	if c.closed {
		return errors.New("cpio: write after close")
	}
	if h.name == "" || strings.HasPrefix(h.name, "/") || strings.ContainsRune(h.name, 0) {
		return fmt.Errorf("cpio: bad entry name %q", h.name)
	}
	if h.size < 0 || h.size > cpioMaxFileSize {
		return fmt.Errorf("cpio: %s: size %d does not fit the newc format", h.name, h.size)
	}
	nlink := h.nlink
	if nlink == 0 {
		nlink = 1
	}
	ino := c.ino
	c.ino++
	mode := cpioMode(h.mode)
	if h.name == cpioTrailer {
		ino, mode, nlink = 0, 0, 1
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, 0, uint32(h.size), 0, 0, h.rmajor, h.rmin, len(h.name)+1, 0)
	if err := c.write([]byte(hdr)); err != nil {
		return err
	}
	if err := c.write(append([]byte(h.name), 0)); err != nil {
		return err
	}
	return c.pad()
}

func (c *cpioWriter) write(p []byte) error {
	n, err := c.w.Write(p)
	c.off += int64(n)
	if err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	return nil
}

func (c *cpioWriter) pad() error {
	if r := c.off % 4; r != 0 {
		return c.write(make([]byte, 4-r))
	}
	return nil
}

// Dir writes a directory entry.
func (c *cpioWriter) Dir(name string, perm fs.FileMode) error {
	return c.writeHeader(cpioHeader{name: name, mode: fs.ModeDir | perm&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid|fs.ModeSetuid), nlink: 2})
}

// Symlink writes a symbolic link name -> target.
func (c *cpioWriter) Symlink(name, target string) error {
	if err := c.writeHeader(cpioHeader{name: name, mode: fs.ModeSymlink | 0o777, size: int64(len(target))}); err != nil {
		return err
	}
	if err := c.write([]byte(target)); err != nil {
		return err
	}
	return c.pad()
}

// Device writes a device node; mode must carry fs.ModeDevice (and
// fs.ModeCharDevice for a character device).
func (c *cpioWriter) Device(name string, mode fs.FileMode, major, minor uint32) error {
	return c.writeHeader(cpioHeader{name: name, mode: mode, rmajor: major, rmin: minor})
}

// File writes a regular file of exactly size bytes read from r.
func (c *cpioWriter) File(name string, perm fs.FileMode, size int64, r io.Reader) error {
	if err := c.writeHeader(cpioHeader{name: name, mode: perm &^ fs.ModeType, size: size}); err != nil {
		return err
	}
	n, err := io.Copy(c.w, io.LimitReader(r, size))
	c.off += n
	if err != nil {
		return fmt.Errorf("cpio: %s: %w", name, err)
	}
	if n != size {
		return fmt.Errorf("cpio: %s: wrote %d of %d bytes (file changed while archiving?)", name, n, size)
	}
	return c.pad()
}

// Close writes the trailer. It does not close the underlying writer.
func (c *cpioWriter) Close() error {
	if c.closed {
		return nil
	}
	if err := c.writeHeader(cpioHeader{name: cpioTrailer}); err != nil {
		return err
	}
	c.closed = true
	return nil
}
