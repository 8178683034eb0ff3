//go:build !linux

package vm

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
)

func lockFile(ctx context.Context, name string) (func(), error) {
	return nil, fmt.Errorf("vm: not supported on %s", runtime.GOOS)
}

func setProcessGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}
