package lab

import (
	"fmt"
	"strings"
	"testing"
)

// reporter is the part of testing.T retryOnce reports through.
type reporter interface {
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
}

// retryOnce runs try and returns its result when nothing was missed. A
// timing test (retry set) gets one more attempt, never more, and the retry
// is logged with what the first attempt missed; a miss of the last attempt
// fails the test.
func retryOnce[T any](rep reporter, what string, retry bool, try func(attempt int) (T, []string)) T {
	for attempt := 1; ; attempt++ {
		res, missed := try(attempt)
		if len(missed) == 0 {
			return res
		}
		if !retry || attempt == 2 {
			rep.Errorf("%s: expectations missed: %s", what, strings.Join(missed, "; "))
			return res
		}
		rep.Logf("RETRY %s (the one retry allowed): attempt 1 missed %s", what, strings.Join(missed, "; "))
	}
}

type fakeReporter struct{ logs, errs []string }

func (f *fakeReporter) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *fakeReporter) Errorf(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

func TestRetryOnce(t *testing.T) {
	tests := []struct {
		name     string
		retry    bool
		misses   [][]string // what each attempt misses
		attempts int
		retries  int // RETRY lines logged
		fail     bool
	}{
		{"holds at once", true, [][]string{nil}, 1, 0, false},
		{"holds on the retry", true, [][]string{{"p99 = 12"}, nil}, 2, 1, false},
		{"misses twice", true, [][]string{{"p99 = 12"}, {"p99 = 11"}, nil}, 2, 1, true},
		{"no retry for a non-timing test", false, [][]string{{"exit 1"}, nil}, 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &fakeReporter{}
			n := 0
			got := retryOnce(rep, "game-egress", tt.retry, func(attempt int) (int, []string) {
				n++
				if attempt != n {
					t.Errorf("attempt %d, want %d", attempt, n)
				}
				return attempt, tt.misses[attempt-1]
			})
			if n != tt.attempts || got != tt.attempts {
				t.Errorf("%d attempts (result of attempt %d), want %d", n, got, tt.attempts)
			}
			retries := 0
			for _, l := range rep.logs {
				if strings.HasPrefix(l, "RETRY game-egress") && strings.Contains(l, tt.misses[0][0]) {
					retries++
				}
			}
			if retries != tt.retries {
				t.Errorf("logged %q, want %d RETRY lines naming the first miss", rep.logs, tt.retries)
			}
			if fail := len(rep.errs) > 0; fail != tt.fail {
				t.Errorf("errors %q, want failure %v", rep.errs, tt.fail)
			}
			if tt.fail && !strings.Contains(rep.errs[0], tt.misses[n-1][0]) {
				t.Errorf("the failure %q does not name the last miss", rep.errs[0])
			}
		})
	}
}
