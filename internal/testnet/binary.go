package testnet

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// binDir holds the lowlat built by Lowlat; Main removes it after the tests.
var binDir string

// Lowlat returns a lowlat binary for tests that drive the command line: the
// one named by $LOWLAT_BIN (the VM run passes its own), or one built once per
// test binary with the test hooks compiled in (kill -9 at a chosen write, a
// pretend boot id; never in a release build).
var Lowlat = sync.OnceValues(func() (string, error) {
	if p := os.Getenv("LOWLAT_BIN"); p != "" {
		return p, nil
	}
	dir, err := os.MkdirTemp("", "lowlat-test-bin-")
	if err != nil {
		return "", err
	}
	binDir = dir
	// Readable and executable by other users, for tests that run it as nobody.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	out := filepath.Join(dir, "lowlat")
	cmd := exec.Command("go", "build", "-tags", "lowlat_testhooks", "-o", out, "github.com/lowlat/lowlat/cmd/lowlat")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build lowlat: %v\n%s", err, b)
	}
	return out, nil
})

func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}
