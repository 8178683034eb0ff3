//go:build lowlat_testhooks && linux

package passive

import (
	"errors"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// Test builds only:
//
//   - LOWLAT_TEST_NO_BTF=1: the kernel's BTF cannot be read, as on a
//     kernel built without CONFIG_DEBUG_INFO_BTF.
//   - LOWLAT_TEST_MISSING_HOOK=NAME: the tracepoint NAME (tcp_probe) is
//     renamed to one no kernel has, as on a kernel that lacks the hook.
//
// (LOWLAT_TEST_NO_BPF=1, bpf(2) answering ENOSYS, is sockops's hook and
// holds for the whole process.)
func init() {
	if os.Getenv("LOWLAT_TEST_NO_BTF") == "1" {
		kernelBTF = func() (*btf.Spec, error) {
			return nil, errors.New("open /sys/kernel/btf/vmlinux: no such file or directory")
		}
	}
	if name := os.Getenv("LOWLAT_TEST_MISSING_HOOK"); name != "" {
		adjustSpecs = func(spec *ebpf.CollectionSpec) {
			for _, p := range spec.Programs {
				if p.AttachTo == name || strings.HasSuffix(p.SectionName, "/"+name) {
					p.AttachTo = name + "_lowlat_test_missing"
				}
			}
		}
	}
}
