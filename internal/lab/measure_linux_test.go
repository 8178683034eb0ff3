package lab

import (
	"strings"
	"testing"
)

// A prober that sent late says so in the variant's notes, with how late;
// one that kept its schedule adds nothing.
func TestNoteSendLag(t *testing.T) {
	var vr VariantResult
	noteSendLag(&vr, "RTT probe's", 10478, 20000, "")
	if len(vr.Notes) != 0 {
		t.Errorf("10.5 ms of send lag noted against 20: %q", vr.Notes)
	}
	noteSendLag(&vr, "RTT probe's", 30818, 20000, "")
	if len(vr.Notes) != 1 || !strings.Contains(vr.Notes[0], "RTT probe's sends left up to 30.8 ms late (p99)") {
		t.Errorf("31 ms of send lag: notes %q", vr.Notes)
	}
}
