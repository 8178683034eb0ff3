package vm

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// Booting the bzImage under TCG spends about three seconds in the kernel's
// real-mode decompressor (Debian compresses with xz). qemu can instead load
// the uncompressed ELF kernel directly and enter it through the PVH entry
// point (CONFIG_PVH, which Debian enables), which halves the boot. So the
// cache keeps the vmlinux extracted from the bzImage next to it.

// xenElfnotePhys32Entry is XEN_ELFNOTE_PHYS32_ENTRY, the note that marks a
// kernel qemu can boot through PVH.
const xenElfnotePhys32Entry = 18

// extractVmlinux decompresses the kernel ELF embedded in a bzImage (boot
// protocol ≥ 2.08: the setup header records the payload's offset and length)
// and writes it to dst. It supports gzip, xz and zstd payloads.
func extractVmlinux(bzImage, dst string) error {
	img, err := os.ReadFile(bzImage)
	if err != nil {
		return fmt.Errorf("vmlinux: %w", err)
	}
	payload, err := bzImagePayload(img)
	if err != nil {
		return fmt.Errorf("vmlinux: %s: %w", bzImage, err)
	}
	var r io.Reader
	switch {
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		gz, err := gzip.NewReader(bytes.NewReader(payload))
		if err != nil {
			return fmt.Errorf("vmlinux: %s: %w", bzImage, err)
		}
		gz.Multistream(false)
		r = gz
	case bytes.HasPrefix(payload, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		// The kernel's xz stream uses the x86 BCJ filter, which
		// github.com/ulikunitz/xz does not implement: use xz-utils.
		xzBin, err := exec.LookPath("xz")
		if err != nil {
			return fmt.Errorf("vmlinux: %s is xz-compressed and xz is not installed (apt-get install xz-utils)", bzImage)
		}
		cmd := exec.Command(xzBin, "-dc", "--single-stream")
		cmd.Stdin = bytes.NewReader(payload)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("vmlinux: %s: xz: %w: %s", bzImage, err, bytes.TrimSpace(stderr.Bytes()))
		}
		r = bytes.NewReader(out)
	case bytes.HasPrefix(payload, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(bytes.NewReader(payload), zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<31))
		if err != nil {
			return fmt.Errorf("vmlinux: %s: %w", bzImage, err)
		}
		defer zr.Close()
		r = zr
	default:
		return fmt.Errorf("vmlinux: %s: unsupported payload compression (magic % x)", bzImage, payload[:min(6, len(payload))])
	}
	f, err := os.CreateTemp(filepath.Dir(dst), ".vmlinux-*")
	if err != nil {
		return fmt.Errorf("vmlinux: %w", err)
	}
	tmp := f.Name()
	f.Chmod(0o644)
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkPVH(tmp)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("vmlinux: %s: %w", bzImage, err)
	}
	return os.Rename(tmp, dst)
}

// bzImagePayload returns the compressed kernel inside a bzImage.
func bzImagePayload(img []byte) ([]byte, error) {
	if len(img) < 0x250 || string(img[0x202:0x206]) != "HdrS" {
		return nil, errors.New("not a bzImage (no HdrS setup header)")
	}
	if v := binary.LittleEndian.Uint16(img[0x206:]); v < 0x208 {
		return nil, fmt.Errorf("boot protocol %#x predates payload_offset (2.08)", v)
	}
	setupSects := int(img[0x1f1])
	if setupSects == 0 {
		setupSects = 4
	}
	off := (setupSects+1)*512 + int(binary.LittleEndian.Uint32(img[0x248:]))
	n := int(binary.LittleEndian.Uint32(img[0x24c:]))
	if off < 0 || n <= 0 || off+n > len(img) {
		return nil, fmt.Errorf("payload %d+%d outside the %d-byte image", off, n, len(img))
	}
	return img[off : off+n], nil
}

// checkPVH reports an error unless the ELF file carries the PVH entry note.
func checkPVH(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, prog.Filesz)
		if _, err := prog.ReadAt(b, 0); err != nil {
			return err
		}
		for len(b) >= 12 {
			namesz := binary.LittleEndian.Uint32(b[0:])
			descsz := binary.LittleEndian.Uint32(b[4:])
			typ := binary.LittleEndian.Uint32(b[8:])
			name := align4(int(namesz))
			desc := align4(int(descsz))
			if 12+name+desc > len(b) {
				break
			}
			if typ == xenElfnotePhys32Entry && string(bytes.TrimRight(b[12:12+int(namesz)], "\x00")) == "Xen" {
				return nil
			}
			b = b[12+name+desc:]
		}
	}
	return errors.New("kernel has no PVH entry note (CONFIG_PVH off)")
}

func align4(n int) int { return (n + 3) &^ 3 }

// pvhKernel returns the path of the PVH-bootable vmlinux for k, extracting it
// into cacheDir/vmlinux on first use, or "" when the kernel cannot be booted
// that way (then qemu boots the bzImage).
func pvhKernel(k *Kernel, cacheDir string, logw io.Writer) string {
	if logw == nil {
		logw = io.Discard
	}
	if k.Image == "" {
		return ""
	}
	if checkPVH(k.Image) == nil {
		return k.Image // already an ELF kernel with the note
	}
	st, err := os.Stat(k.Image)
	if err != nil {
		return ""
	}
	dst := filepath.Join(cacheDir, "vmlinux",
		fmt.Sprintf("%s-%d-%d", filepath.Base(k.Image), st.Size(), st.ModTime().Unix()))
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		fmt.Fprintf(logw, "vm: booting the bzImage (slower): %v\n", err)
		return ""
	}
	if err := extractVmlinux(k.Image, dst); err != nil {
		fmt.Fprintf(logw, "vm: booting the bzImage (slower): %v\n", err)
		return ""
	}
	return dst
}
