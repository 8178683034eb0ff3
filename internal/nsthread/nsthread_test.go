package nsthread

import (
	"runtime"
	"strings"
	"testing"
)

// TestOnNewThreadGoexit: f ending its goroutine with runtime.Goexit (what
// t.Fatal does) is reported, not waited on forever.
func TestOnNewThreadGoexit(t *testing.T) {
	err := OnNewThread(func() error {
		runtime.Goexit()
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "Goexit") {
		t.Errorf("OnNewThread(Goexit) = %v, want an error naming Goexit", err)
	}
}
