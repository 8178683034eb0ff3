package knob

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/autorate"
)

const testPolicy = "iface=eth0 min=1000000 base=1800000 max=3000000 reflectors= icmp= passive=on threshold=15ms"

func TestAutorateKnob(t *testing.T) {
	ctx := context.Background()
	sys := &System{Root: t.TempDir()}
	k, err := New(sys, "autorate/eth0")
	if err != nil {
		t.Fatal(err)
	}
	if k.ID() != "autorate/eth0" || AutorateID("eth0") != k.ID() {
		t.Errorf("ID = %q", k.ID())
	}
	if v, err := k.Read(ctx); err != nil || v != Absent {
		t.Fatalf("no policy file: Read = %q, %v; want Absent", v, err)
	}
	// A value in another spelling is written in canonical form.
	in := "iface=eth0 passive=on min=1000000 max=3000000 base=1800000"
	if err := k.Write(ctx, in); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sys.Root, autorate.PolicyPath("eth0"))
	b, err := os.ReadFile(path)
	if err != nil || string(b) != testPolicy+"\n" {
		t.Errorf("policy file = %q, %v; want the canonical policy", b, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("policy file mode: %v, %v", fi, err)
	}
	if err := Verify(ctx, k, in); err != nil {
		t.Error(err)
	}
	if v, _ := k.Read(ctx); v != testPolicy {
		t.Errorf("Read = %q, want %q", v, testPolicy)
	}
	// Writing Absent removes it (no pid file: no daemon to stop).
	if err := k.Write(ctx, Absent); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("policy file still there: %v", err)
	}
	if v, _ := k.Read(ctx); v != Absent {
		t.Errorf("after removal Read = %q", v)
	}
	// A stale pid file (the pid is gone) is no daemon.
	writeFile(t, filepath.Join(sys.Root, autorate.PIDPath("eth0")), "2147483646\n")
	if v, err := k.Read(ctx); err != nil || v != Absent {
		t.Errorf("stale pid file: Read = %q, %v", v, err)
	}
	if err := k.Write(ctx, Absent); err != nil {
		t.Errorf("stale pid file: Write(Absent) = %v", err)
	}
	writeFile(t, filepath.Join(sys.Root, autorate.PIDPath("eth0")), "garbage\n")
	if err := k.Write(ctx, Absent); err == nil || !strings.Contains(err.Error(), "not a pid") {
		t.Errorf("garbage pid file: Write(Absent) = %v", err)
	}
}

func TestAutorateKnobRefuses(t *testing.T) {
	sys := &System{Root: t.TempDir()}
	k, _ := New(sys, "autorate/eth0")
	for _, v := range []string{
		strings.Replace(testPolicy, "iface=eth0", "iface=eth1", 1), // another interface
		"min=1000000 base=1800000 max=3000000 passive=on",          // no iface
		strings.Replace(testPolicy, "min=1000000", "min=1mbit", 1), // units are the profile's, not the knob's
		strings.Replace(testPolicy, "base=1800000", "base=4000000", 1),
	} {
		if err := k.(Validator).Validate(v); err == nil {
			t.Errorf("Validate(%q) = nil", v)
		}
		if err := k.Write(context.Background(), v); err == nil {
			t.Errorf("Write(%q) = nil", v)
		}
	}
	if _, err := os.Stat(filepath.Join(sys.Root, autorate.PolicyDir)); !os.IsNotExist(err) {
		t.Errorf("a refused write left %s: %v", autorate.PolicyDir, err)
	}
	if err := k.(Validator).Validate(Absent); err != nil {
		t.Errorf("Validate(Absent) = %v", err)
	}
	r := k.(Restorer)
	if err := r.Restorable("hand-written garbage"); err == nil {
		t.Error("a policy file that does not parse is restorable")
	}
	if r.Fallback("hand-written garbage") != Absent {
		t.Error("fallback is not Absent")
	}
	for _, id := range []string{"autorate/", "autorate/a/b", "autorate/waytoolonginterfacename"} {
		if _, err := New(sys, id); err == nil {
			t.Errorf("New(%q) = nil error", id)
		}
	}
}

func TestAutorateSatisfied(t *testing.T) {
	reordered := "passive=on iface=eth0 max=3000000 min=1000000 base=1800000 threshold=15ms"
	tests := []struct {
		live, desired string
		want          bool
	}{
		{testPolicy, testPolicy, true},
		{testPolicy, reordered, true},
		{reordered, testPolicy, true},
		{testPolicy, strings.Replace(testPolicy, "max=3000000", "max=3500000", 1), false},
		{testPolicy, Absent, false},
		{Absent, testPolicy, false},
		{Absent, Absent, true},
		{"<absent; daemon pid 7 still runs>", Absent, false},
		{"garbage", "garbage", false},
	}
	for _, tt := range tests {
		if got := AutorateSatisfied(tt.live, tt.desired); got != tt.want {
			t.Errorf("AutorateSatisfied(%q, %q) = %v, want %v", tt.live, tt.desired, got, tt.want)
		}
	}
	if got, want := Describe("autorate/eth0", testPolicy, Absent), "autorate eth0: applied rate 1mbit..3mbit, base 1800kbit, signals: passive tcp_info, now off"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestQdiscRootSatisfiedAutorate: a shaper whose rate autorate moved within
// the policy's range is no drift; anything else still is.
func TestQdiscRootSatisfiedAutorate(t *testing.T) {
	const (
		cake = "cake bandwidth 1800kbit besteffort"
		// As the kernel reports it: every option, a handle.
		cakeLive = "cake bandwidth 2500kbit rtt 100ms besteffort triple-isolate nonat nowash split-gso no-ack-filter egress no-autorate-ingress overhead 0 mpu 0 noatm memlimit 0 fwmark 0 handle 8001:"
		tbf      = "tbf rate 1800kbit burst 3028 latency 50ms leaf { fq_codel target 10100us interval 100ms }"
		tbfLive  = "tbf rate 2500kbit burst 3100 limit 18700 leaf { fq_codel limit 10240 flows 1024 target 10100us interval 100ms quantum 1514 ecn }"
	)
	tests := []struct {
		name, policy, live, desired string
		want                        bool
	}{
		{"cake inside the range", testPolicy, cakeLive, cake, true},
		{"cake at the desired rate", "", strings.Replace(cakeLive, "2500kbit", "1800kbit", 1), cake, true},
		{"cake above the range", testPolicy, strings.Replace(cakeLive, "2500kbit", "3500kbit", 1), cake, false},
		{"cake below the range", testPolicy, strings.Replace(cakeLive, "2500kbit", "900kbit", 1), cake, false},
		{"cake rate and another option", testPolicy, strings.Replace(cakeLive, "besteffort", "diffserv4", 1), cake, false},
		{"cake without a policy", "", cakeLive, cake, false},
		{"policy of another interface", strings.Replace(testPolicy, "eth0", "eth1", 1), cakeLive, cake, false},
		{"tbf inside the range", testPolicy, tbfLive, tbf, true},
		{"tbf outside the range", testPolicy, strings.Replace(tbfLive, "2500kbit", "3100kbit", 1), tbf, false},
		{"tbf leaf changed", testPolicy, strings.Replace(tbfLive, "fq_codel", "sfq", 1), tbf, false},
		{"tbf without a policy", "", tbfLive, tbf, false},
		{"tbf burst alone changed", testPolicy, "tbf rate 1800kbit burst 9000 limit 14278 leaf { fq_codel target 10100us interval 100ms }", tbf, false},
		{"tbf back at its rate with a byte more bucket (autorate's stop)", testPolicy, "tbf rate 1800kbit burst 3029 limit 14279 leaf { fq_codel target 10100us interval 100ms }", tbf, true},
		{"another kind", testPolicy, "fq_codel", cake, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sys := &System{Root: t.TempDir()}
			if tt.policy != "" {
				p, err := autorate.ParsePolicy(tt.policy)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, filepath.Join(sys.Root, autorate.PolicyPath(p.Iface)), tt.policy+"\n")
			}
			if got := QdiscRootSatisfied(sys, "eth0", tt.live, tt.desired); got != tt.want {
				t.Errorf("QdiscRootSatisfied(%q, %q) = %v, want %v", tt.live, tt.desired, got, tt.want)
			}
			if runtime.GOOS != "linux" {
				return
			}
			root, _ := New(sys, "qdisc/eth0/root")
			if got := root.Satisfied(tt.live, tt.desired); got != tt.want {
				t.Errorf("root knob: Satisfied = %v, want %v", got, tt.want)
			}
			// Ingress shaping is not autorate's: no tolerance there.
			ing, _ := New(sys, "qdisc/eth0/ingress")
			if got := ing.Satisfied(tt.live, tt.desired); got != QdiscSatisfied(tt.live, tt.desired) {
				t.Errorf("ingress knob: Satisfied = %v, want %v", got, !got)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
