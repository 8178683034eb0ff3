package sockops

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/lowlat/lowlat/internal/bpfload"
	"golang.org/x/sys/unix"
)

// Support is what the running kernel can do, found by Probe.
type Support struct {
	// NetnsCookie: the program can tell network namespaces apart (the
	// bpf_get_netns_cookie helper in sock_ops, Linux 5.15). Without it an
	// entry for a port applies to that port in every namespace.
	NetnsCookie bool
	// Refused holds, per option bpf_setsockopt refused in sock_ops, the
	// kernel's reason. An option not in it was accepted.
	Refused map[Option]error
	// CgroupLink: the kernel attaches to cgroups by bpf_link (5.7), and
	// lowlat pins the link. Without it, the program is attached with
	// BPF_PROG_ATTACH (BPF_F_ALLOW_MULTI) and pinned itself; the attachment
	// is the cgroup's until a rollback detaches exactly that program.
	CgroupLink bool
}

// Check says whether o can be set, and why not.
func (s *Support) Check(o Option) error {
	if err, ok := s.Refused[o]; ok {
		return fmt.Errorf("%s: bpf_setsockopt in sock_ops refuses it on this kernel (%v): %w", o, err, ErrUnsupported)
	}
	return nil
}

// Probe finds out what this kernel's sock_ops can do. It loads a throwaway
// program that tries every option with a harmless value, attaches it to this
// process's own cgroup (never the root: the program acts on nothing but the
// probe's connection) and makes one loopback connection to itself, in the
// caller's network namespace. Needs root (CAP_BPF and CAP_NET_ADMIN).
//
// What the kernel accepts does not change while lowlat runs: a successful
// probe is kept for the process, so a plan and the writes of its knobs
// (each of which opens the host) probe once.
func Probe() (*Support, error) {
	probed.Lock()
	defer probed.Unlock()
	if probed.s != nil {
		return probed.s, nil
	}
	s, err := probe()
	if err == nil {
		probed.s = s
	}
	return s, err
}

var probed struct {
	sync.Mutex
	s *Support
}

func probe() (*Support, error) {
	if err := features.HaveProgramType(ebpf.SockOps); err != nil {
		if errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("this kernel has no BPF (bpf() answers ENOSYS: built without CONFIG_BPF_SYSCALL): %w", ErrUnsupported)
		}
		return nil, fmt.Errorf("sock_ops programs: %v: %w", err, ErrUnsupported)
	}
	cg, err := ownCgroup()
	if err != nil {
		return nil, err
	}
	s := &Support{Refused: map[Option]error{}}
	s.NetnsCookie = features.HaveProgramHelper(ebpf.SockOps, asm.FnGetNetnsCookie) == nil

	in, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: entrySize, MaxEntries: 1})
	if err != nil {
		return nil, bpfError("create the probe's map", err)
	}
	defer in.Close()
	results, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8 * uint32(numOptions), MaxEntries: 1})
	if err != nil {
		return nil, bpfError("create the probe's map", err)
	}
	defer results.Close()
	probe := Entry{Congestion: "reno"}
	for _, o := range Options() {
		if o != Congestion {
			probe[o] = fmt.Sprint(options[o].probe)
		}
	}
	b, _ := probe.marshal()
	if err := in.Put(uint32(0), b); err != nil {
		return nil, bpfError("fill the probe's map", err)
	}
	// A result the program never wrote stays 1, which no call returns.
	pending := make([]byte, 8*numOptions)
	for o := range numOptions {
		putU64(pending[8*o:], 1)
	}
	if err := results.Put(uint32(0), pending); err != nil {
		return nil, bpfError("fill the probe's map", err)
	}

	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("probe sock_ops: listen on loopback: %w", err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)

	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "lowlat_probe",
		Type:         ebpf.SockOps,
		License:      "GPL",
		Instructions: prober(in, results, port),
	})
	if err != nil {
		return nil, bpfError("load the probe program", err)
	}
	defer prog.Close()
	// Attached as lowlat's own program will be: by a bpf_link, or where the
	// kernel has none, by BPF_PROG_ATTACH, detached again on the way out.
	cgf, err := os.Open(cg)
	if err != nil {
		return nil, fmt.Errorf("probe sock_ops: open cgroup %s: %w", cg, err)
	}
	defer cgf.Close()
	l, err := cgroupLink(cgf, prog)
	switch {
	case err == nil:
		s.CgroupLink = true
		defer l.Close()
	case errors.Is(err, ebpf.ErrNotSupported):
		if err := attachLegacy(cgf, prog, cg); err != nil {
			return nil, err
		}
		defer link.RawDetachProgram(link.RawDetachProgramOptions{Target: int(cgf.Fd()), Program: prog, Attach: ebpf.AttachCGroupSockOps})
	default:
		return nil, bpfError("attach the probe program to cgroup "+cg, err)
	}

	c, err := net.DialTimeout("tcp4", ln.Addr().String(), 2*time.Second)
	if err != nil {
		return nil, fmt.Errorf("probe sock_ops: connect to %s: %w", ln.Addr(), err)
	}
	defer c.Close()
	ln.SetDeadline(time.Now().Add(2 * time.Second))
	a, err := ln.Accept()
	if err != nil {
		return nil, fmt.Errorf("probe sock_ops: accept on %s: %w", ln.Addr(), err)
	}
	a.Close()

	var got []byte
	if err := results.Lookup(uint32(0), &got); err != nil {
		return nil, bpfError("read the probe's results", err)
	}
	for _, o := range Options() {
		rc := int64(getU64(got[8*o:]))
		switch {
		case rc == 1:
			return nil, fmt.Errorf("probe sock_ops: the probe program did not run on its connection (is this process's cgroup %s in the unified hierarchy?): %w", cg, ErrUnsupported)
		case rc < 0:
			s.Refused[o] = unix.Errno(-rc)
		}
	}
	return s, nil
}

// bpfError names what failed, and says plainly when the cause is a missing
// privilege or a kernel without BPF.
func bpfError(what string, err error) error {
	return bpfload.Error(what, "sock_ops needs root: CAP_BPF and CAP_NET_ADMIN", ErrUnsupported, err)
}

// Cgroup2Root finds where the unified cgroup hierarchy is mounted: /sys/fs/cgroup
// on current systems, /sys/fs/cgroup/unified on hybrid ones.
func Cgroup2Root() (string, error) {
	dir, err := hostMount("cgroup2")
	if err != nil {
		return "", err
	}
	if dir == "" {
		return "", fmt.Errorf("cgroup v2 is not mounted here (cgroup v1 only, or a private mount namespace such as ip netns exec's: use nsenter --net): sock_ops programs attach to the unified hierarchy: %w", ErrUnsupported)
	}
	return dir, nil
}

// ownCgroup is this process's cgroup v2 directory.
func ownCgroup() (string, error) {
	root, err := Cgroup2Root()
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(root, p), nil
		}
	}
	return "", fmt.Errorf("/proc/self/cgroup has no cgroup v2 line: %w", ErrUnsupported)
}

// hostMount finds where a filesystem type is mounted, as this process can
// reach it: in its own mount namespace, else in init's through /proc/1/root.
// 'ip netns exec' runs a command in a private mount namespace with a fresh
// /sys that has neither cgroup2 nor bpffs; the host's are the ones that
// count (a pin in a private bpffs would vanish with the namespace, and the
// program with it).
func hostMount(fstype string) (string, error) {
	dir, err := mountOf(mountinfoSelf, fstype)
	if err != nil || dir != "" {
		return dir, err
	}
	if !privateMountNS() {
		return "", nil
	}
	dir, err = mountOf(mountinfoInit, fstype)
	if err != nil || dir == "" {
		return "", nil
	}
	p := filepath.Join("/proc/1/root", dir)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is mounted on the host at %s but not in this mount namespace, and %v: run lowlat with 'nsenter --net=/run/netns/NAME', which keeps the host's mounts, rather than 'ip netns exec'", fstype, dir, err)
	}
	return p, nil
}

// The mount tables of this process and of init (a test build can replace
// them).
var mountinfoSelf, mountinfoInit = "/proc/self/mountinfo", "/proc/1/mountinfo"

// ownMountNS reports whether this process may be in a mount namespace of
// its own, not init's (true when it cannot tell).
func ownMountNS() bool {
	a, err1 := os.Readlink("/proc/self/ns/mnt")
	b, err2 := os.Readlink("/proc/1/ns/mnt")
	return err1 != nil || err2 != nil || a != b
}

// mountOf returns where a filesystem type is mounted in a mountinfo file:
// the most recent mount whose directory is reachable (a later mount can
// cover an earlier one, as a namespace's own /sys covers the host's), ""
// if none.
func mountOf(mountinfo, fstype string) (string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return "", fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && qf[0] == fstype {
			found = append(found, unescapeMount(pf[4]))
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	for i := len(found) - 1; i >= 0; i-- {
		if mountinfo != mountinfoSelf || isMountPoint(found[i], fstype) {
			return found[i], nil
		}
	}
	return "", nil
}

// isMountPoint reports whether dir shows a filesystem of fstype now: not
// covered by a later mount.
func isMountPoint(dir, fstype string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false
	}
	switch fstype {
	case "bpf":
		return st.Type == unix.BPF_FS_MAGIC
	case "cgroup2":
		return st.Type == unix.CGROUP2_SUPER_MAGIC
	}
	return true
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var n int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &n); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
