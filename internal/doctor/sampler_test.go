package doctor

import (
	"os"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// TestLiveSampler watches this host for a short window while a goroutine
// burns CPU: that thread must be among the busiest, with its share and CPU.
// The machine is shared with other tests, so the share asked for is modest
// and one retry is allowed.
func TestLiveSampler(t *testing.T) {
	testnet.Heavy(t, "samples the whole machine's CPU")
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	defer close(stop)
	for attempt := 1; ; attempt++ {
		s, err := LiveSampler{Proc: "/proc"}.Sample(nil, 300*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if s.Window < 300*time.Millisecond || len(s.Ksoftirqd) == 0 {
			t.Fatalf("sample %+v", s)
		}
		var mine *ThreadLoad
		for i, th := range s.Threads {
			if th.PID == os.Getpid() && th.Share >= 0.1 && th.CPU >= 0 {
				mine = &s.Threads[i]
				break
			}
		}
		if mine != nil {
			return
		}
		if attempt == 2 {
			t.Fatalf("this test's spinning thread (pid %d) not among the busiest: %+v", os.Getpid(), s.Threads)
		}
		t.Logf("retrying once: the spinning thread got too little CPU on a busy machine: %+v", s.Threads)
	}
}

// The live sampler test is heavy: a plain "go test ./..." leaves it out.
func TestLiveSamplerIsHeavy(t *testing.T) {
	testnet.CheckHeavy(t, "TestLiveSampler")
}
