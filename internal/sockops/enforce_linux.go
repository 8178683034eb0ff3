package sockops

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Pin names inside a namespace's directory.
const (
	pinLink    = "link" // the attachment, where the kernel has bpf_link for cgroups (5.7)
	pinProg    = "prog" // the program, attached by BPF_PROG_ATTACH, where it has not
	pinOptions = "options"
	pinCounts  = "counts"
)

// Host is sock_ops enforcement in the caller's network namespace: one
// program, attached to the root of the cgroup v2 hierarchy, and its maps,
// pinned in bpffs under lowlat/sockops/<namespace>/.
type Host struct {
	// Dir is the pin directory.
	Dir string
	// Cgroup is the unified hierarchy's root, where the program attaches:
	// a server's accepted connections belong to whatever cgroup the server
	// runs in, and a port selector must see them all.
	Cgroup string
	// Netns is the namespace's cookie, 0 when the kernel cannot tell
	// namespaces apart in sock_ops (the entries then apply in every one).
	Netns   uint64
	Support *Support

	fs string // bpffs's mount point
}

// Open prepares enforcement in the caller's network namespace: it probes the
// kernel, finds the cgroup v2 root and bpffs, and names the pin directory.
// It attaches nothing, and mounts nothing: a bpffs lowlat needs is mounted
// by its own knob, before (BPFFSToMount), so a rollback unmounts it.
func Open() (*Host, error) {
	sup, err := Probe()
	if err != nil {
		return nil, err
	}
	cg, err := Cgroup2Root()
	if err != nil {
		return nil, err
	}
	fs, err := bpffs()
	if err != nil {
		return nil, err
	}
	if fs == "" {
		return nil, fmt.Errorf("bpffs is not mounted here: sock_ops pins live there (a plan with [[sockets]] mounts it on %s first, as a knob of its own): %w", bpffsDefault, ErrUnsupported)
	}
	h := &Host{Cgroup: cg, Support: sup, fs: fs}
	if sup.NetnsCookie {
		if h.Netns, err = netnsCookie(); err != nil {
			return nil, err
		}
	}
	h.Dir = pinDir(fs, sup.NetnsCookie, h.Netns)
	return h, nil
}

// Locate finds what lowlat has pinned for the caller's network namespace
// without probing the kernel or changing anything, for reads (status, plan
// facts, an unprivileged user). Its Host can Read, list Entries, Pins and
// Counts; Set needs Open.
func Locate() (*Host, error) {
	fs, err := bpffs()
	if err != nil {
		return nil, err
	}
	h := &Host{fs: fs}
	if fs == "" {
		return h, nil // nothing mounted, nothing pinned
	}
	// Where the port selectors' program acts; unknown stays "" (Attached
	// then says why).
	h.Cgroup, _ = Cgroup2Root()
	c, err := netnsCookie()
	if err == nil {
		h.Netns = c
		h.Dir = pinDir(fs, true, c)
	}
	// A kernel without the cookie in sock_ops pins under "all".
	if all := pinDir(fs, false, 0); err != nil || !exists(h.Dir) && exists(all) {
		h.Netns, h.Dir = 0, all
	}
	return h, nil
}

func pinDir(fs string, cookie bool, netns uint64) string {
	ns := "all"
	if cookie {
		ns = strconv.FormatUint(netns, 10)
	}
	return filepath.Join(fs, "lowlat", "sockops", ns)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// Entries lists every selector's entry in this namespace: the port
// selectors' from the shared map, each cgroup or service selector's from
// its own attachment.
func (h *Host) Entries() (map[Selector]Entry, error) {
	out := map[Selector]Entry{}
	if h.Dir == "" {
		return out, nil
	}
	if err := h.readMap(h.Dir, func(k, v []byte) error {
		e, err := unmarshalEntry(v)
		if err == nil {
			out[Selector{Port: uint16(getU32(k[8:]))}] = e
		}
		return err
	}); err != nil {
		return nil, err
	}
	subs, _ := os.ReadDir(h.Dir)
	for _, d := range subs {
		sel, ok := selectorOfDir(d.Name())
		if !d.IsDir() || !ok {
			continue
		}
		if err := h.readMap(filepath.Join(h.Dir, d.Name()), func(k, v []byte) error {
			e, err := unmarshalEntry(v)
			if err == nil {
				out[sel] = e
			}
			return err
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readMap calls fn for each of this namespace's entries in dir's options map.
func (h *Host) readMap(dir string, fn func(k, v []byte) error) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(dir, pinOptions), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sock_ops: open pinned map: %w", err)
	}
	defer m.Close()
	var k, v []byte
	it := m.Iterate()
	for it.Next(&k, &v) {
		if getU64(k) != h.Netns {
			continue
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("sock_ops: list entries: %w", err)
	}
	return nil
}

// A cgroup or service selector's attachment lives in a subdirectory named
// after the selector (bpffs holds pins and directories, nothing else).
const selDirPrefix = "sel-"

func selectorDir(sel Selector) string {
	return selDirPrefix + base64.RawURLEncoding.EncodeToString([]byte(sel.String()))
}

func selectorOfDir(name string) (Selector, bool) {
	enc, ok := strings.CutPrefix(name, selDirPrefix)
	if !ok {
		return Selector{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return Selector{}, false
	}
	sel, err := ParseSelector(string(b))
	return sel, err == nil && sel.Outbound()
}

// attachment is one program with its maps: the port selectors' one at the
// cgroup root, or a cgroup or service selector's own at its cgroup.
type attachment struct {
	dir      string // pin directory
	cgroup   string // where the program attaches ("" until resolved)
	outbound bool
	port     uint16 // the key's port: the selector's, or 0 for outbound
}

// attachmentOf says where sel's entry lives. resolve finds the cgroup a
// cgroup or service selector attaches at (needed to attach or detach, not
// to read).
func (h *Host) attachmentOf(sel Selector, resolve bool) (attachment, error) {
	if !sel.Outbound() {
		a := attachment{dir: h.Dir, cgroup: h.Cgroup, port: sel.Port}
		if resolve && a.cgroup == "" {
			cg, err := Cgroup2Root()
			if err != nil {
				return a, err
			}
			a.cgroup = cg
		}
		return a, nil
	}
	a := attachment{dir: filepath.Join(h.Dir, selectorDir(sel)), outbound: true}
	if resolve {
		cg, err := CgroupOf(sel)
		if err != nil {
			return a, err
		}
		a.cgroup = cg
	}
	return a, nil
}

// netnsCookie is the caller's network namespace cookie, as the kernel's
// bpf_get_netns_cookie returns it (SO_NETNS_COOKIE, Linux 5.14).
func netnsCookie() (uint64, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: socket: %w", err)
	}
	defer unix.Close(fd)
	c, err := unix.GetsockoptUint64(fd, unix.SOL_SOCKET, unix.SO_NETNS_COOKIE)
	if err != nil {
		return 0, fmt.Errorf("netns cookie: getsockopt SO_NETNS_COOKIE: %w", err)
	}
	return c, nil
}

// Read returns the entry for sel; an empty one when nothing is pinned.
func (h *Host) Read(sel Selector) (Entry, error) {
	if h.Dir == "" {
		return Entry{}, nil
	}
	a, _ := h.attachmentOf(sel, false)
	m, err := ebpf.LoadPinnedMap(filepath.Join(a.dir, pinOptions), nil)
	if errors.Is(err, os.ErrNotExist) {
		return Entry{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sock_ops %s: open pinned map: %w", sel, err)
	}
	defer m.Close()
	var b []byte
	if err := m.Lookup(key(h.Netns, a.port), &b); errors.Is(err, ebpf.ErrKeyNotExist) {
		return Entry{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("sock_ops %s: read entry: %w", sel, err)
	}
	return unmarshalEntry(b)
}

// Set makes e the entry for sel: attaching and pinning the program first
// when none is, deleting the entry when e is empty, and detaching and
// unpinning everything once no entry is left.
func (h *Host) Set(sel Selector, e Entry) error {
	if h.Support == nil {
		return fmt.Errorf("sock_ops %s: not opened for writing", sel)
	}
	for o := range e {
		if err := h.Support.Check(o); err != nil {
			return fmt.Errorf("sock_ops %s: %w", sel, err)
		}
	}
	b, err := e.marshal()
	if err != nil {
		return fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	unlock, err := lockDir(h.fs)
	if err != nil {
		return err
	}
	defer unlock()
	a, err := h.attachmentOf(sel, true)
	switch {
	case err != nil:
		// Only attaching needs the cgroup. A service that has stopped, its
		// cgroup gone and the program detached with it, can still lose its
		// entry, or options of it (a rollback, one option at a time).
		cur, rerr := h.Read(sel)
		if rerr != nil || !shrinks(cur, e) {
			return fmt.Errorf("sock_ops %s: %w", sel, err)
		}
		a, _ = h.attachmentOf(sel, false)
	case len(e) > 0:
		if err := h.attach(a); err != nil {
			return fmt.Errorf("sock_ops %s: %w", sel, err)
		}
	}
	if len(e) == 0 {
		return h.delete(sel, a)
	}
	return h.put(sel, a, b)
}

// shrinks reports whether e is cur with options taken away, none changed.
func shrinks(cur, e Entry) bool {
	if len(e) >= len(cur) {
		return len(e) == 0 && len(cur) == 0
	}
	for o, v := range e {
		if c, ok := cur[o]; !ok || o.Canon(c) != o.Canon(v) {
			return false
		}
	}
	return true
}

// put writes a's entry into its pinned map.
func (h *Host) put(sel Selector, a attachment, b []byte) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(a.dir, pinOptions), nil)
	if err != nil {
		return fmt.Errorf("sock_ops %s: open pinned map: %w", sel, err)
	}
	defer m.Close()
	if err := m.Put(key(h.Netns, a.port), b); err != nil {
		return fmt.Errorf("sock_ops %s: write entry: %w", sel, err)
	}
	return nil
}

func (h *Host) delete(sel Selector, a attachment) error {
	m, err := ebpf.LoadPinnedMap(filepath.Join(a.dir, pinOptions), nil)
	if errors.Is(err, os.ErrNotExist) {
		return h.detach(a)
	}
	if err != nil {
		return fmt.Errorf("sock_ops %s: open pinned map: %w", sel, err)
	}
	defer m.Close()
	if err := m.Delete(key(h.Netns, a.port)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("sock_ops %s: delete entry: %w", sel, err)
	}
	var k, v []byte
	if m.Iterate().Next(&k, &v) {
		return nil // other selectors still enforced
	}
	return h.detach(a)
}

// attach loads, attaches and pins the program of a and its maps when they
// are not there, and attaches the pinned program again when it is not
// attached (its cgroup re-created).
func (h *Host) attach(a attachment) error {
	if m, err := ebpf.LoadPinnedMap(filepath.Join(a.dir, pinOptions), nil); err == nil {
		m.Close()
		on, err := attachedAt(a)
		if err == nil && !on && pinned(a.dir) {
			// The maps keep their entries (other ports') and counts.
			err = h.reattach(a)
			on = err == nil
		}
		if on || err != nil {
			return err
		}
	}
	// Half-made pins (a crash between pinning and attaching) go first.
	if err := h.detach(a); err != nil {
		return err
	}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return fmt.Errorf("create pin directory: %w", err)
	}
	opts, err := newOptionsMap()
	if err != nil {
		return bpfError("create the options map", err)
	}
	defer opts.Close()
	counts, err := newCountsMap()
	if err != nil {
		return bpfError("create the counts map", err)
	}
	defer counts.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "lowlat_sockops",
		Type:         ebpf.SockOps,
		License:      "GPL",
		Instructions: enforcer(opts, counts, h.Support.NetnsCookie, a.outbound),
	})
	if err != nil {
		return bpfError("load the sock_ops program", err)
	}
	defer prog.Close()
	fail := func(err error) error {
		_ = h.detach(a)
		return err
	}
	if err := opts.Pin(filepath.Join(a.dir, pinOptions)); err != nil {
		return fail(bpfError("pin the options map", err))
	}
	if err := counts.Pin(filepath.Join(a.dir, pinCounts)); err != nil {
		return fail(bpfError("pin the counts map", err))
	}
	if err := attachPinned(a, prog); err != nil {
		return fail(err)
	}
	return nil
}

// cgroupLink attaches prog to the cgroup open as cg by a bpf_link. A kernel
// without bpf_link for cgroups (before 5.7) answers ebpf.ErrNotSupported:
// cilium/ebpf finds that out by trying BPF_LINK_CREATE, not from the
// version. A test build can make it answer that on any kernel
// (LOWLAT_TEST_NO_CGROUP_LINK), to run the legacy path on this one.
var cgroupLink = func(cg *os.File, prog *ebpf.Program) (*link.RawLink, error) {
	return link.AttachRawLink(link.RawLinkOptions{Target: int(cg.Fd()), Program: prog, Attach: ebpf.AttachCGroupSockOps})
}

// attachLegacy attaches prog to the cgroup open as cg the way a kernel
// without bpf_link does: BPF_PROG_ATTACH with BPF_F_ALLOW_MULTI (4.15), so
// it runs beside the programs attached there and replaces none (cilium/ebpf's
// own fallback would take BPF_F_ALLOW_OVERRIDE before 5.6, which replaces
// one). The attachment belongs to the cgroup, not to a descriptor: it stays
// when lowlat exits, until a BPF_PROG_DETACH names this program, or the
// cgroup goes.
func attachLegacy(cg *os.File, prog *ebpf.Program, where string) error {
	err := link.RawAttachProgram(link.RawAttachProgramOptions{Target: int(cg.Fd()), Program: prog, Attach: ebpf.AttachCGroupSockOps, Flags: unix.BPF_F_ALLOW_MULTI})
	if err != nil {
		return fmt.Errorf("attach the sock_ops program to cgroup %s: this kernel has no bpf_link for cgroups (5.7), and BPF_PROG_ATTACH with BPF_F_ALLOW_MULTI (4.15) failed (%v): a program attached there or above without BPF_F_ALLOW_MULTI admits no other, and lowlat does not replace it: %w", where, err, ErrUnsupported)
	}
	return nil
}

// attachPinned attaches prog at a's cgroup and pins what holds the
// attachment: its bpf_link, or, on a kernel without, the program itself,
// pinned before it is attached, so that a lowlat killed right after the
// attach leaves a pin that the next rollback finds and detaches.
func attachPinned(a attachment, prog *ebpf.Program) error {
	cg, err := os.Open(a.cgroup)
	if err != nil {
		return fmt.Errorf("attach the sock_ops program: open cgroup %s: %w", a.cgroup, err)
	}
	defer cg.Close()
	l, err := cgroupLink(cg, prog)
	if err == nil {
		// Until it is pinned, the link lives by this descriptor: closed
		// unpinned, it detaches.
		defer l.Close()
		if err := l.Pin(filepath.Join(a.dir, pinLink)); err != nil {
			return bpfError("pin the sock_ops link", err)
		}
		return nil
	}
	if !errors.Is(err, ebpf.ErrNotSupported) {
		return bpfError("attach the sock_ops program to cgroup "+a.cgroup, err)
	}
	pp := filepath.Join(a.dir, pinProg)
	if !exists(pp) {
		if err := prog.Pin(pp); err != nil {
			return bpfError("pin the sock_ops program", err)
		}
	}
	return attachLegacy(cg, prog, a.cgroup)
}

// detachLegacy detaches prog, attached by BPF_PROG_ATTACH, from the cgroup
// at dir, only if it is attached there: in a cgroup whose programs were
// attached without BPF_F_ALLOW_MULTI, BPF_PROG_DETACH detaches whichever
// program is there, whatever program it names (the kernel's compatibility
// with the first cgroup-BPF interface), and that one is another tool's. A
// cgroup that is gone took the attachment with it.
func detachLegacy(dir string, prog *ebpf.Program) error {
	cg, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) || dir == "" {
		return nil
	}
	if err != nil {
		return err
	}
	defer cg.Close()
	info, err := prog.Info()
	if err != nil {
		return err
	}
	id, _ := info.ID()
	q, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: ebpf.AttachCGroupSockOps})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(q.Programs, func(p link.AttachedProgram) bool { return p.ID == id }) {
		return nil
	}
	return link.RawDetachProgram(link.RawDetachProgramOptions{Target: int(cg.Fd()), Program: prog, Attach: ebpf.AttachCGroupSockOps})
}

// reattach attaches a's pinned program again at a's cgroup: the kernel
// detached it when its cgroup was removed (systemctl restart re-creates a
// service's), or someone detached it by hand. The maps stay as they are.
func (h *Host) reattach(a attachment) error {
	var prog *ebpf.Program
	lp := filepath.Join(a.dir, pinLink)
	old, err := link.LoadPinnedLink(lp, nil)
	switch {
	case err == nil:
		info, err := old.Info()
		if err == nil {
			prog, err = ebpf.NewProgramFromID(info.Program)
		}
		if err != nil {
			old.Close()
			return bpfError("find the program of "+lp, err)
		}
		// The old link is defunct (its cgroup is gone) or attached where
		// it should not be: it goes, and the new one takes its pin.
		err = old.Detach()
		if err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			old.Close()
			prog.Close()
			return fmt.Errorf("detach %s: %w", lp, err)
		}
		err = old.Unpin()
		old.Close()
		if err != nil {
			prog.Close()
			return fmt.Errorf("unpin %s: %w", lp, err)
		}
	case errors.Is(err, os.ErrNotExist):
		pp := filepath.Join(a.dir, pinProg)
		if prog, err = ebpf.LoadPinnedProgram(pp, nil); err != nil {
			return bpfError("open pinned program "+pp, err)
		}
	default:
		return bpfError("open pinned link "+lp, err)
	}
	defer prog.Close()
	return attachPinned(a, prog)
}

// pinned reports whether dir holds the program's link or legacy program:
// something a rollback must detach. It says nothing of whether the program
// is attached (attachedAt).
func pinned(dir string) bool {
	return exists(filepath.Join(dir, pinLink)) || exists(filepath.Join(dir, pinProg))
}

// pinnedProgram returns the ID of the program a's pins hold: the link's, or
// the legacy program's; 0 when there is neither.
func pinnedProgram(dir string) (ebpf.ProgramID, error) {
	lp := filepath.Join(dir, pinLink)
	l, err := link.LoadPinnedLink(lp, nil)
	if err == nil {
		defer l.Close()
		info, err := l.Info()
		if err != nil {
			return 0, bpfError("read pinned link "+lp, err)
		}
		return info.Program, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return 0, bpfError("open pinned link "+lp, err)
	}
	pp := filepath.Join(dir, pinProg)
	p, err := ebpf.LoadPinnedProgram(pp, nil)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, bpfError("open pinned program "+pp, err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		return 0, bpfError("read pinned program "+pp, err)
	}
	id, ok := info.ID()
	if !ok {
		return 0, fmt.Errorf("read pinned program %s: the kernel does not say its ID: %w", pp, ErrUnsupported)
	}
	return id, nil
}

// attachedAt reports whether a's program is attached at a's cgroup, as the
// kernel says (BPF_PROG_QUERY on the cgroup): pins outlive an attachment,
// the kernel detaches a cgroup's programs when the cgroup is removed, and
// a cgroup created again at the same path is a new one with none. A cgroup
// that does not exist (a service that is not running) has nothing attached.
func attachedAt(a attachment) (bool, error) {
	id, err := pinnedProgram(a.dir)
	if err != nil || id == 0 {
		return false, err
	}
	if a.cgroup == "" {
		return false, fmt.Errorf("sock_ops: where %s's program attaches is not known", a.dir)
	}
	cg, err := os.Open(a.cgroup)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("open cgroup %s: %w", a.cgroup, err)
	}
	defer cg.Close()
	q, err := link.QueryPrograms(link.QueryOptions{Target: int(cg.Fd()), Attach: ebpf.AttachCGroupSockOps})
	if err != nil {
		return false, bpfError("query the sock_ops programs of cgroup "+a.cgroup, err)
	}
	for _, p := range q.Programs {
		if p.ID == id {
			return true, nil
		}
	}
	return false, nil
}

// Attached reports whether sel's program acts on new connections: attached,
// as the kernel says, where it must be (the cgroup v2 root for a port, the
// cgroup for a cgroup or service selector), not merely pinned. A service
// whose cgroup was re-created by a restart, or that is not running, has
// its entry pinned and no program attached: false.
func (h *Host) Attached(sel Selector) (bool, error) {
	if h.Dir == "" {
		return false, nil
	}
	a, err := h.attachmentOf(sel, true)
	if err != nil {
		if errors.Is(err, errNoCgroup) {
			return false, nil
		}
		return false, fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	on, err := attachedAt(a)
	if err != nil {
		return false, fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	return on, nil
}

// Pins lists lowlat's pinned objects for this namespace, every attachment's:
// what status checks against the journal, and what a crashed apply leaves.
func (h *Host) Pins() []string {
	if h.Dir == "" {
		return nil
	}
	var out []string
	filepath.WalkDir(h.Dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// detach detaches a's program and removes its pins, its directory, and the
// directories above it that are left empty: nothing of lowlat's stays in
// bpffs once the last entry goes.
func (h *Host) detach(a attachment) error {
	var errs []error
	lp := filepath.Join(a.dir, pinLink)
	if l, err := link.LoadPinnedLink(lp, nil); err == nil {
		// Detach first: a link whose last reference goes is freed by a
		// kernel worker a little later, and a rollback must not return
		// while the program still acts on new connections. (Kernels before
		// BPF_LINK_DETACH, 5.9, free it on the close below.)
		if err := l.Detach(); err != nil && !errors.Is(err, ebpf.ErrNotSupported) {
			errs = append(errs, fmt.Errorf("detach %s: %w", lp, err))
		}
		if err := l.Unpin(); err != nil {
			errs = append(errs, fmt.Errorf("unpin %s: %w", lp, err))
		}
		l.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("open pinned link %s: %w", lp, err))
	}
	pp := filepath.Join(a.dir, pinProg)
	if prog, err := ebpf.LoadPinnedProgram(pp, nil); err == nil {
		if err := detachLegacy(a.cgroup, prog); err != nil {
			errs = append(errs, fmt.Errorf("detach %s from %s: %w", pp, a.cgroup, err))
		}
		prog.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("open pinned program %s: %w", pp, err))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range []string{pinProg, pinOptions, pinCounts} {
		if err := os.Remove(filepath.Join(a.dir, p)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// The directory and those above it go once empty (not empty: another
	// selector's attachment, another namespace's).
	for d := a.dir; d != h.fs && d != "." && d != "/"; d = filepath.Dir(d) {
		if os.Remove(d) != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// Counts returns, per option, how many connections the program set it on
// and how many refused it, since the program was attached.
func (h *Host) Counts() (ok, refused map[Option]uint64, err error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(h.Dir, pinCounts), nil)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sock_ops: open pinned counts: %w", err)
	}
	defer m.Close()
	ok, refused = map[Option]uint64{}, map[Option]uint64{}
	for _, o := range Options() {
		var a, r uint64
		if err := m.Lookup(uint32(2*o), &a); err != nil {
			return nil, nil, fmt.Errorf("sock_ops: read counts: %w", err)
		}
		if err := m.Lookup(uint32(2*o+1), &r); err != nil {
			return nil, nil, fmt.Errorf("sock_ops: read counts: %w", err)
		}
		ok[o], refused[o] = a, r
	}
	return ok, refused, nil
}

// lockDir holds an exclusive flock on dir until the returned function is
// called: two lowlat processes must not attach, or detach the last entry,
// at the same time. The lock is on bpffs's root, which is never removed (a
// lock on a pin directory would be lost when the last entry removes it).
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open pin directory %s: %w", dir, err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("lock pin directory %s: %w", dir, err)
	}
	return func() { unix.Close(fd) }, nil
}

// Clear removes every entry and attachment lowlat has in the caller's
// network namespace, pins without an entry included (an apply killed
// between attach and write). It is for a namespace being thrown away, such
// as a killed lab run's: a journal restores values, this only removes. It
// returns the selectors whose attachment or entry it removed.
func Clear() ([]Selector, error) {
	loc, err := Locate()
	if err != nil || loc.Dir == "" || !exists(loc.Dir) {
		return nil, err
	}
	h, err := Open()
	if err != nil {
		return nil, err
	}
	if h.Dir != loc.Dir {
		return nil, fmt.Errorf("sock_ops: pins in %s, and this kernel would use %s", loc.Dir, h.Dir)
	}
	entries, err := h.Entries()
	if err != nil {
		return nil, err
	}
	sels := map[Selector]bool{}
	for sel := range entries {
		sels[sel] = true
	}
	if pinned(h.Dir) || exists(filepath.Join(h.Dir, pinOptions)) {
		// The port selectors' attachment: any port names it.
		sels[Selector{Port: 1}] = true
	}
	subs, _ := os.ReadDir(h.Dir)
	for _, d := range subs {
		if sel, ok := selectorOfDir(d.Name()); ok && d.IsDir() {
			sels[sel] = true
		}
	}
	var errs []error
	var done []Selector
	for sel := range sels {
		if err := h.Set(sel, Entry{}); err != nil {
			errs = append(errs, err)
		} else {
			done = append(done, sel)
		}
	}
	slices.SortFunc(done, func(a, b Selector) int { return strings.Compare(a.String(), b.String()) })
	return done, errors.Join(errs...)
}

// noCgroupLink is cgroupLink on a kernel before 5.7, for tests: cilium/ebpf
// answers ebpf.ErrNotSupported there, from its probe of BPF_LINK_CREATE.
func noCgroupLink(*os.File, *ebpf.Program) (*link.RawLink, error) {
	return nil, fmt.Errorf("create link: bpf_link (pretended missing for a test): %w", ebpf.ErrNotSupported)
}
