package runbooks

import (
	"strings"
	"testing"
)

// TestSectionsExist: every constant names a section of the real document, by
// the anchor GitHub gives its heading.
func TestSectionsExist(t *testing.T) {
	got, err := Sections("../../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{R000, R001, R002, R003, R004} {
		if !got[s] {
			t.Errorf("%s is not a section of docs/runbooks.md (sections: %v)", s, got)
		}
	}
	p, _ := parse(strings.NewReader("# Title\n## 003: Bufferbloat, behind a capped_uplink\ntext\n"))
	if !p["docs/runbooks.md#003-bufferbloat-behind-a-capped_uplink"] || len(p) != 1 {
		t.Errorf("parse: %v", p)
	}
}
