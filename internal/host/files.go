package host

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/lowlat/lowlat/internal/nsthread"
)

// fileReader carries the root, the facts being filled and the error record
// through the readers in this package.
type fileReader struct {
	r Root
	f *Facts
	// groups collects errors from per-item reads (one file per IRQ, per queue)
	// under one source pattern, so a host where every /proc/irq/N is denied
	// reports one line, not hundreds.
	groups     map[string]*errGroup
	groupOrder []string
	online     []int
	// noNodes is why /sys/devices/system/node is missing, when it is.
	noNodes error
	// mods is what /lib/modules and /proc/modules say is loadable.
	mods moduleIndex
	// openNetns stands in for nsthread.Current in tests.
	openNetns func() (nsthread.NS, error)
}

type errGroup struct {
	first string
	n     int
}

func (rd *fileReader) readAll() {
	f := rd.f
	if f.Sysctls == nil {
		f.Sysctls = map[string]string{}
	}
	if f.Sysfs == nil {
		f.Sysfs = Sysfs{}
	}
	// The net.* sysctl walk is a thousand small reads that depend on nothing
	// else: it runs beside the other readers, on its own fileReader so that
	// neither touches the other's state, and is merged before the kernel
	// support checks that use it.
	walk := &fileReader{r: rd.r, f: &Facts{Sysctls: map[string]string{}}}
	done := make(chan struct{})
	// /proc/sys/net shows the network namespace of the thread that opens it:
	// the walker joins the caller's (the lab gathers on a thread it moved into
	// a namespace). When it cannot, it reads nothing and says why: the
	// values of another namespace would pass for the caller's.
	caller, err := rd.callerNetns()
	go func() {
		defer close(done)
		if err == nil && caller >= 0 {
			defer caller.Close()
			err = caller.Join()
		}
		if err != nil {
			walk.fail("/proc/sys/net", fmt.Errorf("read in the caller's network namespace: %w", err))
			return
		}
		walk.walkSysctls("/proc/sys/net", "net")
	}()
	rd.extraSysctls()
	rd.kernelBasics()
	rd.cpus()
	rd.interrupts()
	rd.softirqs()
	rd.softnet()
	rd.snmp()
	rd.interfaces()
	rd.thp()
	rd.irqbalance()
	rd.autorate()
	rd.block()
	rd.systemd()
	rd.sysctlConf()
	<-done
	rd.merge(walk)
	rd.kernelSupport()
}

// callerNetns opens the network namespace the /proc/sys/net walk must read:
// the calling thread's on the live host, none (-1) for a file tree, where
// namespaces play no part.
func (rd *fileReader) callerNetns() (nsthread.NS, error) {
	switch {
	case !rd.r.Live():
		return -1, nil
	case rd.openNetns != nil:
		return rd.openNetns()
	}
	return nsthread.Current()
}

// merge takes over the sysctls and errors another reader collected.
func (rd *fileReader) merge(o *fileReader) {
	for k, v := range o.f.Sysctls {
		rd.f.Sysctls[k] = v
	}
	rd.f.ReadOnlySysctls = append(rd.f.ReadOnlySysctls, o.f.ReadOnlySysctls...)
	sort.Strings(rd.f.ReadOnlySysctls)
	rd.f.Errors = append(rd.f.Errors, o.f.Errors...)
	for _, p := range o.groupOrder {
		g := o.groups[p]
		if rd.groups == nil {
			rd.groups = map[string]*errGroup{}
		}
		if mine := rd.groups[p]; mine != nil {
			mine.n += g.n
			continue
		}
		rd.groups[p] = g
		rd.groupOrder = append(rd.groupOrder, p)
	}
}

// reason is the part of an error worth recording next to its source: the
// errno text for file errors ("permission denied"), the whole message
// otherwise.
func reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// fail records that source could not be read.
func (rd *fileReader) fail(source string, err error) {
	rd.f.Errors = append(rd.f.Errors, FactError{Source: source, Err: reason(err)})
}

// failGroup records a per-item failure under a pattern source.
func (rd *fileReader) failGroup(pattern string, err error) {
	if rd.groups == nil {
		rd.groups = map[string]*errGroup{}
	}
	g := rd.groups[pattern]
	if g == nil {
		g = &errGroup{first: reason(err)}
		rd.groups[pattern] = g
		rd.groupOrder = append(rd.groupOrder, pattern)
	}
	g.n++
}

// flush turns grouped errors into FactErrors and orders all errors by source.
func (rd *fileReader) flush() {
	for _, p := range rd.groupOrder {
		g := rd.groups[p]
		msg := g.first
		if g.n > 1 {
			msg = fmt.Sprintf("%s (%d files)", g.first, g.n)
		}
		rd.f.Errors = append(rd.f.Errors, FactError{Source: p, Err: msg})
	}
	rd.groups, rd.groupOrder = nil, nil
	sortErrors(rd.f.Errors)
}

func sortErrors(errs []FactError) {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Source < errs[j].Source })
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// read reads a file every Linux host has; any failure is recorded.
func (rd *fileReader) read(p string) ([]byte, bool) {
	b, err := rd.r.ReadFile(p)
	if err != nil {
		rd.fail(p, err)
		return nil, false
	}
	return b, true
}

// readOpt reads a file that may legitimately be absent (older kernel, no such
// hardware): absence and the listed errnos are silent, other errors recorded.
func (rd *fileReader) readOpt(p string, quiet ...syscall.Errno) ([]byte, bool) {
	b, err := rd.r.ReadFile(p)
	if err != nil {
		if !isNotExist(err) && !isErrno(err, quiet) {
			rd.fail(p, err)
		}
		return nil, false
	}
	return b, true
}

// readItem is readOpt for one of many similar files; errors are grouped.
func (rd *fileReader) readItem(p, pattern string, quiet ...syscall.Errno) ([]byte, bool) {
	b, err := rd.r.ReadFile(p)
	if err != nil {
		if !isNotExist(err) && !isErrno(err, quiet) {
			rd.failGroup(pattern, err)
		}
		return nil, false
	}
	return b, true
}

// readItemAt is readItem for a file in a resolved directory.
func (rd *fileReader) readItemAt(dir, name, pattern string, quiet ...syscall.Errno) ([]byte, bool) {
	b, err := rd.r.readAt(dir, name)
	if err != nil {
		if !isNotExist(err) && !isErrno(err, quiet) {
			rd.failGroup(pattern, err)
		}
		return nil, false
	}
	return b, true
}

func isErrno(err error, list []syscall.Errno) bool {
	for _, e := range list {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// intItem reads a decimal file; ok is false when absent or unparsable (the
// latter recorded).
func (rd *fileReader) intAt(dir, name, pattern string, quiet ...syscall.Errno) (int, bool) {
	b, ok := rd.readItemAt(dir, name, pattern, quiet...)
	if !ok {
		return 0, false
	}
	n, err := atoiTrim(b)
	if err != nil {
		rd.failGroup(pattern, fmt.Errorf("parse %q: %w", trimValue(b), errors.Unwrap(err)))
		return 0, false
	}
	return n, true
}

// cpuListAt reads a CPU-list file. A missing one is silent unless need
// says every such directory has it: then its absence is a tree that lost
// it, recorded like any other failure.
func (rd *fileReader) cpuListAt(dir, name, pattern string, need bool) ([]int, bool) {
	b, err := rd.r.readAt(dir, name)
	if err != nil {
		if need || !isNotExist(err) {
			rd.failGroup(pattern, err)
		}
		return nil, false
	}
	l, err := ParseCPUList(string(b))
	if err != nil {
		rd.failGroup(pattern, err)
		return nil, false
	}
	return l, true
}

// linkBase returns the last element of a symlink's target ("i40e" for
// device/driver), "" when p is not a link.
func (rd *fileReader) linkBase(p string) string {
	t, err := rd.r.Readlink(p)
	if err != nil {
		return ""
	}
	return path.Base(t)
}

// numericNames returns the numeric names among ents, sorted numerically.
func numericNames(ents []fs.DirEntry) []int {
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// suffixNum returns n for names like prefix+n ("cpu12", "node1", "rx-3").
func suffixNum(name, prefix string) (int, bool) {
	s, ok := strings.CutPrefix(name, prefix)
	if !ok || s == "" {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
