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

// bpffsDefault is where bpffs is mounted when nothing has mounted it yet
// (systemd mounts it there on boot; minimal systems may not).
const bpffsDefault = "/sys/fs/bpf"

// Pin names inside a namespace's directory.
const (
	pinLink    = "link"
	pinProg    = "prog" // kernels without bpf_link for cgroups (< 5.7)
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
// kernel, finds the cgroup v2 root and bpffs (mounting bpffs at /sys/fs/bpf
// when nothing has), and names the pin directory. It attaches nothing.
func Open() (*Host, error) {
	sup, err := Probe()
	if err != nil {
		return nil, err
	}
	cg, err := Cgroup2Root()
	if err != nil {
		return nil, err
	}
	fs, err := bpffs(true)
	if err != nil {
		return nil, err
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
	fs, err := bpffs(false)
	if err != nil {
		return nil, err
	}
	h := &Host{fs: fs}
	if fs == "" {
		return h, nil // nothing mounted, nothing pinned
	}
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
		return attachment{dir: h.Dir, cgroup: h.Cgroup, port: sel.Port}, nil
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

// bpffs returns bpffs's mount point; when none, mounts it at /sys/fs/bpf
// if mount is set, otherwise returns "".
func bpffs(mount bool) (string, error) {
	dir, err := hostMount("bpf")
	if err != nil || dir != "" || !mount {
		return dir, err
	}
	if ownMountNS() {
		return "", fmt.Errorf("bpffs is not mounted on this host, and a mount in this private mount namespace (ip netns exec?) would take lowlat's pins with it: mount it first (mount -t bpf bpf %s)", bpffsDefault)
	}
	if err := unix.Mount("bpf", bpffsDefault, "bpf", 0, "mode=0700"); err != nil {
		return "", fmt.Errorf("mount bpffs on %s: %w", bpffsDefault, err)
	}
	return bpffsDefault, nil
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
	// Removing needs the cgroup only to detach a legacy program (before
	// bpf_link, 5.7); a service that has stopped, its cgroup gone with the
	// program attached there, can still lose its entry.
	a, err := h.attachmentOf(sel, true)
	if err != nil && len(e) == 0 {
		a, err = h.attachmentOf(sel, false)
	}
	if err != nil {
		return fmt.Errorf("sock_ops %s: %w", sel, err)
	}
	if len(e) == 0 {
		return h.delete(sel, a)
	}
	m, err := h.attach(a)
	if err != nil {
		return fmt.Errorf("sock_ops %s: %w", sel, err)
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

// attach returns the pinned options map of a, loading, attaching and
// pinning the program and its maps when they are not there.
func (h *Host) attach(a attachment) (*ebpf.Map, error) {
	if m, err := ebpf.LoadPinnedMap(filepath.Join(a.dir, pinOptions), nil); err == nil {
		if attached(a.dir) {
			return m, nil
		}
		m.Close()
	}
	// Half-made pins (a crash between pinning and attaching) go first.
	if err := h.detach(a); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(a.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create pin directory: %w", err)
	}
	opts, err := newOptionsMap()
	if err != nil {
		return nil, bpfError("create the options map", err)
	}
	counts, err := newCountsMap()
	if err != nil {
		opts.Close()
		return nil, bpfError("create the counts map", err)
	}
	defer counts.Close()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "lowlat_sockops",
		Type:         ebpf.SockOps,
		License:      "GPL",
		Instructions: enforcer(opts, counts, h.Support.NetnsCookie, a.outbound),
	})
	if err != nil {
		opts.Close()
		return nil, bpfError("load the sock_ops program", err)
	}
	defer prog.Close()
	fail := func(what string, err error) (*ebpf.Map, error) {
		opts.Close()
		_ = h.detach(a)
		return nil, bpfError(what, err)
	}
	if err := opts.Pin(filepath.Join(a.dir, pinOptions)); err != nil {
		return fail("pin the options map", err)
	}
	if err := counts.Pin(filepath.Join(a.dir, pinCounts)); err != nil {
		return fail("pin the counts map", err)
	}
	l, err := link.AttachCgroup(link.CgroupOptions{Path: a.cgroup, Attach: ebpf.AttachCGroupSockOps, Program: prog})
	if err != nil {
		return fail("attach the sock_ops program to cgroup "+a.cgroup, err)
	}
	defer l.Close()
	if err := l.Pin(filepath.Join(a.dir, pinLink)); err != nil {
		// Before bpf_link (5.7) the attachment holds the program by itself:
		// pin the program, so it can be found and detached later.
		if perr := prog.Pin(filepath.Join(a.dir, pinProg)); perr != nil {
			_ = l.Close()
			return fail("pin the sock_ops program", errors.Join(err, perr))
		}
	}
	return opts, nil
}

// attached reports whether dir holds the program's link (or legacy program).
func attached(dir string) bool {
	for _, p := range []string{pinLink, pinProg} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
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
		cg, err := os.Open(a.cgroup)
		if err == nil {
			err = link.RawDetachProgram(link.RawDetachProgramOptions{Target: int(cg.Fd()), Program: prog, Attach: ebpf.AttachCGroupSockOps})
			cg.Close()
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
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
	if attached(h.Dir) || exists(filepath.Join(h.Dir, pinOptions)) {
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
