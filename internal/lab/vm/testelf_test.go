package vm

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"sort"
	"testing"
)

// testELF describes a minimal ELF64 file for fixtures: named sections with
// contents and, optionally, one PT_NOTE segment.
type testELF struct {
	typ      elf.Type
	sections map[string][]byte
	note     []byte
}

// bytes renders the file: header, note segment, section data, .shstrtab and
// the section header table.
func (e testELF) bytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	hdr := elf.Header64{
		Type: uint16(e.typ), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Shentsize: 64,
	}
	copy(hdr.Ident[:], elf.ELFMAG)
	hdr.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	hdr.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	hdr.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	if hdr.Type == 0 {
		hdr.Type = uint16(elf.ET_REL)
	}

	names := make([]string, 0, len(e.sections))
	for n := range e.sections {
		names = append(names, n)
	}
	sort.Strings(names)

	off := uint64(64)
	var phdr *elf.Prog64
	if e.note != nil {
		hdr.Phoff, hdr.Phentsize, hdr.Phnum = off, 56, 1
		off += 56
		phdr = &elf.Prog64{Type: uint32(elf.PT_NOTE), Off: off, Filesz: uint64(len(e.note)), Memsz: uint64(len(e.note)), Align: 4}
		off += uint64(len(e.note))
	}
	shstr := []byte{0}
	shdrs := []elf.Section64{{}}
	var data [][]byte
	for _, n := range append(names, ".shstrtab") {
		b := e.sections[n]
		if n == ".shstrtab" {
			b = nil // filled below
		}
		nameOff := uint32(len(shstr))
		shstr = append(append(shstr, n...), 0)
		typ := uint32(elf.SHT_PROGBITS)
		if n == ".shstrtab" {
			typ = uint32(elf.SHT_STRTAB)
		}
		shdrs = append(shdrs, elf.Section64{Name: nameOff, Type: typ, Off: off, Size: uint64(len(b)), Addralign: 1})
		data = append(data, b)
		off += uint64(len(b))
	}
	// .shstrtab's contents are known only now.
	last := len(shdrs) - 1
	shdrs[last].Size = uint64(len(shstr))
	data[len(data)-1] = shstr
	off += uint64(len(shstr))
	pad := (8 - off%8) % 8
	hdr.Shoff = off + pad
	hdr.Shnum = uint16(len(shdrs))
	hdr.Shstrndx = uint16(last)

	binary.Write(&buf, binary.LittleEndian, hdr)
	if phdr != nil {
		binary.Write(&buf, binary.LittleEndian, *phdr)
		buf.Write(e.note)
	}
	for _, b := range data {
		buf.Write(b)
	}
	buf.Write(make([]byte, pad))
	for _, sh := range shdrs {
		binary.Write(&buf, binary.LittleEndian, sh)
	}
	return buf.Bytes()
}

func (e testELF) write(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, e.bytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
}

// modinfoELF is a fake kernel module with the given .modinfo strings.
func modinfoELF(kv ...string) testELF {
	var b []byte
	for _, s := range kv {
		b = append(append(b, s...), 0)
	}
	return testELF{sections: map[string][]byte{".modinfo": b, ".text": {0xc3}}}
}

// elfNote renders one ELF note.
func elfNote(name string, typ uint32, desc []byte) []byte {
	var b bytes.Buffer
	n := append([]byte(name), 0)
	binary.Write(&b, binary.LittleEndian, uint32(len(n)))
	binary.Write(&b, binary.LittleEndian, uint32(len(desc)))
	binary.Write(&b, binary.LittleEndian, typ)
	b.Write(n)
	b.Write(make([]byte, align4(len(n))-len(n)))
	b.Write(desc)
	b.Write(make([]byte, align4(len(desc))-len(desc)))
	return b.Bytes()
}

func TestTestELFParses(t *testing.T) {
	b := modinfoELF("name=x", "depends=y").bytes(t)
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if f.Section(".modinfo") == nil {
		t.Fatal("no .modinfo section")
	}
}
