package host

import "testing"

// TestGatherMSSClampLeavesCaptures: facts from a tree or a capture keep
// their clamps unknown (nil), whatever this host has.
func TestGatherMSSClampLeavesCaptures(t *testing.T) {
	for _, src := range []string{"root:/tmp/tree", "capture:host.json"} {
		f := &Facts{Source: src}
		GatherMSSClamp(f)
		if f.MSSClamp != nil || len(f.Errors) != 0 {
			t.Errorf("%s: MSSClamp = %+v, errors %v", src, f.MSSClamp, f.Errors)
		}
	}
	// Gathered once: a second call keeps what the first found.
	m := &MSSClamp{Clamps: map[string]string{"eth0": "536"}}
	f := &Facts{Source: "live", MSSClamp: m}
	GatherMSSClamp(f)
	if f.MSSClamp != m {
		t.Error("gathered again")
	}
}
