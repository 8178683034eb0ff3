//go:build lowlat_testhooks

package sockops

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Test builds only:
//
//   - LOWLAT_TEST_MOUNTINFO=FILE reads the mount table from FILE, for this
//     process and for init: a host with cgroup v1 only is one whose table
//     has no cgroup2.
//   - LOWLAT_TEST_NO_BPF=1 makes bpf(2) fail with ENOSYS in this process
//     (a seccomp filter on every thread), which is what a kernel built
//     without CONFIG_BPF_SYSCALL answers.
//   - LOWLAT_TEST_NO_CGROUP_LINK=1 makes creating a cgroup's bpf_link
//     answer what a kernel before 5.7 answers (not supported), so the
//     legacy attachment (BPF_PROG_ATTACH) runs on this kernel.
//   - LOWLAT_TEST_HOST_MOUNTNS=1 takes this process's mount namespace for
//     the host's: a test mounts and unmounts bpffs in a namespace of its
//     own, never on the machine's /sys/fs/bpf.
func init() {
	if f := os.Getenv("LOWLAT_TEST_MOUNTINFO"); f != "" {
		mountinfoSelf, mountinfoInit = f, f
	}
	if os.Getenv("LOWLAT_TEST_NO_CGROUP_LINK") == "1" {
		cgroupLink = noCgroupLink
	}
	if os.Getenv("LOWLAT_TEST_HOST_MOUNTNS") == "1" {
		privateMountNS = func() bool { return false }
	}
	if os.Getenv("LOWLAT_TEST_NO_BPF") == "1" {
		if err := denyBPF(); err != nil {
			panic("LOWLAT_TEST_NO_BPF: " + err.Error())
		}
	}
}

func denyBPF() error {
	const (
		retErrno = 0x00050000
		retAllow = 0x7fff0000
		tsync    = 1 // SECCOMP_FILTER_FLAG_TSYNC
		modeFilt = 1 // SECCOMP_SET_MODE_FILTER
	)
	filter := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jt: 0, Jf: 1, K: unix.SYS_BPF},
		{Code: unix.BPF_RET | unix.BPF_K, K: retErrno | uint32(unix.ENOSYS)},
		{Code: unix.BPF_RET | unix.BPF_K, K: retAllow},
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return err
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, modeFilt, tsync, uintptr(unsafe.Pointer(&prog))); e != 0 {
		return e
	}
	return nil
}
