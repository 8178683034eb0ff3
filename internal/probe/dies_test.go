package probe

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/testnet"
)

// dyingReflector runs a reflector on loopback that the test stops (as if
// killed) with die; the test's cleanup stops it too.
func dyingReflector(t *testing.T) (*Reflector, func()) {
	t.Helper()
	r := NewReflector(ReflectorConfig{MinInterval: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	if err := r.Listen(ctx, "127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = r.Serve(ctx); close(done) }()
	var once sync.Once
	die := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(die)
	return r, die
}

// TestIntegrationUDPReflectorDies: a reflector that dies half-way leaves
// blocks with no reply at all. They stay in the batches at 100 % loss (on
// main they were dropped, and the run's blocks showed no loss at all after
// the reflector died).
func TestIntegrationUDPReflectorDies(t *testing.T) {
	r, die := dyingReflector(t)
	time.AfterFunc(1100*time.Millisecond, die)
	res, err := UDP(testCtx(t, 30*time.Second), UDPConfig{Target: r.Addr(), Interval: Duration(5 * time.Millisecond), Duration: Duration(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	b := res.Batches
	t.Logf("sent %d received %d, batches count %v loss %v", res.Sent, res.Received, b.Count, b.Loss)
	if len(b.Loss) != Blocks || len(b.Count) != Blocks || b.Loss[0] != 0 || b.Loss[Blocks-1] != 100 || b.Count[Blocks-1] != 0 {
		t.Errorf("batches %+v: want all %d blocks, the first without loss and the last at 100 %%", b, Blocks)
	}
}

// TestIntegrationTCPReflectorDies: requests that a dead connection could not
// send are failed requests, in their blocks (on main a run whose
// reflector died half-way reported one error per connection and its
// requests as if half as many had been scheduled).
func TestIntegrationTCPReflectorDies(t *testing.T) {
	r, die := dyingReflector(t)
	time.AfterFunc(1100*time.Millisecond, die)
	res, err := TCP(testCtx(t, 30*time.Second), TCPConfig{Target: r.Addr(), Connections: 2, Rate: 200, Duration: Duration(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	b := res.Batches
	t.Logf("requests %d failed %d errors %d (%s), batches count %v errors %v", res.Requests, res.Failed, res.Errors, res.ErrorSample, b.Count, b.Errors)
	if res.Errors != 2 || res.Requests+res.Failed < 395 || res.Requests+res.Failed > 400 || res.Failed < 150 || res.Failed > 250 {
		t.Errorf("requests %d failed %d of 400 scheduled, %d errors: want about half failed, both connections", res.Requests, res.Failed, res.Errors)
	}
	if len(b.Errors) != Blocks || b.Errors[0] != 0 || b.Errors[Blocks-1] != 100 || b.Count[Blocks-1] != 0 {
		t.Errorf("batches %+v: want all %d blocks, the first without errors and the last at 100 %%", b, Blocks)
	}
}

// TestIntegrationUDPStalledProberNotLoss: a prober the host stops for
// 100 ms sends what it owes in a burst, and the reflector's rate limit
// (burst 5) drops most of it. The reflector counts them and says so in its
// close: they are Throttled, not path loss (on main they were "up" loss,
// and a busy host's baseline judged an unchanged path worse).
func TestIntegrationUDPStalledProberNotLoss(t *testing.T) {
	bin, err := testnet.Lowlat()
	if err != nil {
		t.Fatal(err)
	}
	r := startReflector(t, ReflectorConfig{})
	out := filepath.Join(t.TempDir(), "udp.json")
	cmd := exec.Command(bin, "probe", "udp", r.Addr(), "--interval", "2ms", "--duration", "1500ms", "-o", out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGCONT)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res UDPResult
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	t.Logf("sent %d received %d loss %+v send lag %+v", res.Sent, res.Received, res.Loss, res.SendLag)
	if res.Loss.Throttled < 20 || res.Loss.Up > 2 || res.Sent-res.Received != res.Loss.Up+res.Loss.Down+res.Loss.Throttled {
		t.Errorf("loss %+v of %d sent, %d received: want the burst after the stall throttled (≥ 20), not lost upstream", res.Loss, res.Sent, res.Received)
	}
}
