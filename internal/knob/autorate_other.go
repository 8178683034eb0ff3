//go:build !linux

package knob

// The autorate daemon runs on Linux only: elsewhere none runs to stop.
func autorateRuns(pid int) bool { return false }

func processRuns(pid int) bool { return false }

func terminate(pid int) error { return nil }
