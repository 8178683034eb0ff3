package testnet

import (
	"os"
	"strings"
	"testing"
)

// RequireEnv names the kernel features (qdisc kinds, "netem", "bbr") that must be
// present. The stock-kernel VM run sets it, so a feature missing there is a
// failure; on a host kernel built without the feature the test skips and says
// where it runs instead.
const RequireEnv = "LOWLAT_REQUIRE_QDISCS"

// Required reports whether feature must be present in this run.
func Required(feature string) bool {
	for _, f := range strings.Split(os.Getenv(RequireEnv), ",") {
		if f = strings.TrimSpace(f); f == feature || f == "all" {
			return true
		}
	}
	return false
}

// NeedFeature is called with the result of trying to use a kernel feature.
// A nil error returns; otherwise the test fails when the feature is required
// and skips (naming the VM target that runs it) when it is not.
func NeedFeature(t testing.TB, feature string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if Required(feature) {
		t.Fatalf("kernel feature %s is required here but missing: %v", feature, err)
	}
	t.Skipf("this kernel lacks %s (%v); the test runs in the stock-kernel VM: make vmtest", feature, err)
}

// InVM reports whether the test runs inside the stock-kernel VM (vmtest
// sets LOWLAT_IN_VM).
func InVM() bool { return os.Getenv("LOWLAT_IN_VM") != "" }

// HostOnly skips a test inside the stock-kernel VM (InVM): one that
// uses no qdisc or kernel feature the VM is there for, so its run there
// would only add emulated minutes to the suite. why says what the test
// depends on, or where the VM's run of the same thing is.
func HostOnly(t testing.TB, why string) {
	t.Helper()
	if InVM() {
		t.Skip("runs on the host only: " + why)
	}
}
