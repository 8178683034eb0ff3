package knob

import (
	"strings"
	"testing"
)

// TestQdiscSame: a restore is exact only when everything the recorded value
// holds matches; a value journaled by an older lowlat still matches what it
// recorded.
func TestQdiscSame(t *testing.T) {
	const live = "fq_codel limit 10240 flows 1024 target 5ms interval 100ms quantum 1514 ecn ce_threshold 2ms memory_limit 33554432 drop_batch 64 attr 10:01 attr 11:03 handle 5:"
	tests := []struct {
		name, recorded string
		want           bool
	}{
		{"exact record", live, true},
		{"preserved attribute differs", strings.Replace(live, "attr 11:03", "attr 11:01", 1), false},
		{"preserved attribute missing", strings.Replace(live, " attr 10:01", "", 1), false},
		{"handle differs", strings.Replace(live, "handle 5:", "handle 8001:", 1), false},
		{"record of an older lowlat", "fq_codel limit 10240 flows 1024 target 4999us interval 99999us quantum 1514 ecn ce_threshold 1999us memory_limit 33554432 drop_batch 64", true},
		{"older record without the threshold", "fq_codel limit 10240 flows 1024 target 4999us interval 99999us quantum 1514 ecn memory_limit 33554432 drop_batch 64", false},
		{"absent", Absent, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := QdiscSame(live, tt.recorded); got != tt.want {
				t.Errorf("QdiscSame(live, %q) = %v, want %v", tt.recorded, got, tt.want)
			}
			if got := QdiscSame(tt.recorded, live); got != tt.want {
				t.Errorf("QdiscSame is not symmetric for %q", tt.recorded)
			}
		})
	}
}

func TestValidateQdiscRefusesUnmanaged(t *testing.T) {
	for _, v := range []string{"pfifo limit 77 handle 5: @unmanaged", "mq handle 7: children { pfifo @unmanaged; pfifo_fast @default }"} {
		err := ValidateQdisc(v, false)
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "cannot recreate") {
			t.Errorf("ValidateQdisc(%q) = %v, want a one-line refusal", v, err)
		}
	}
	if err := ValidateQdisc("fq_codel attr 10:01 handle 5:", false); err != nil {
		t.Errorf("an exact value is writable: %v", err)
	}
}
