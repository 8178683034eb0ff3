package sockops

import (
	"fmt"
	"os"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// kernelAtLeast compares the running kernel's release with major.minor.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var a, b int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &a, &b); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release, err)
	}
	return a > major || a == major && b >= minor
}

// TestIntegrationProbe probes the running kernel. From 6.0 bpf_setsockopt in
// sock_ops goes through do_tcp_setsockopt and the netns cookie helper is
// there (5.15): every option must be accepted, and a refusal is a failure,
// not a skip. (TestIntegrationNagleFixedFromOutside proves an accepted
// option takes effect.)
func TestIntegrationProbe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s, err := Probe()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("netns cookie %v, refused %v", s.NetnsCookie, s.Refused)
	if kernelAtLeast(t, 6, 0) && (!s.NetnsCookie || len(s.Refused) != 0) {
		t.Errorf("kernel 6.0 or later: want every option accepted and the netns cookie, got %+v", s)
	}
}

// TestEnforcerLoads has the verifier check every variant of the program:
// with and without the netns cookie (kernels before 5.15 load the latter),
// for ports and for a cgroup's outbound connections.
func TestEnforcerLoads(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	opts, err := newOptionsMap()
	if err != nil {
		t.Fatal(err)
	}
	defer opts.Close()
	counts, err := newCountsMap()
	if err != nil {
		t.Fatal(err)
	}
	defer counts.Close()
	for _, cookie := range []bool{true, false} {
		for _, outbound := range []bool{true, false} {
			p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SockOps, License: "GPL", Instructions: enforcer(opts, counts, cookie, outbound)})
			if err != nil {
				t.Fatalf("cookie %v outbound %v: %v", cookie, outbound, err)
			}
			p.Close()
		}
	}
}
