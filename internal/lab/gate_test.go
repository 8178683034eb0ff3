package lab

import (
	"encoding/json"
	"os"
	"testing"
)

// TestJudgeStoredResult runs the gate on a result read back from JSON (the
// VM's bufferbloat-uplink run): every fix brought the 5 s queue down, so the
// gate keeps each, and the verdict is also the figure derived.gate_keep.
func TestJudgeStoredResult(t *testing.T) {
	b, err := os.ReadFile("testdata/results/bufferbloat-uplink.vm.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	for i := range r.Variants {
		r.Variants[i].Gate = nil
	}
	judge(&r)
	if r.Variants[0].Gate != nil {
		t.Error("the baseline was judged against itself")
	}
	for _, v := range r.Variants[1:] {
		if v.Gate == nil {
			t.Errorf("%s: no verdict (notes %v)", v.Name, v.Notes)
			continue
		}
		if !v.Gate.Keep || v.Gate.Measurement != "load" || len(v.Gate.Rows) != 3 {
			t.Errorf("%s: %+v", v.Name, v.Gate)
		}
		if keep, ok := lookup(flatten(v.Metrics), "derived.gate_keep"); !ok || keep != 1 {
			t.Errorf("%s: derived.gate_keep = %v, %v", v.Name, keep, ok)
		}
		t.Log(gateLine(&v))
	}
}
