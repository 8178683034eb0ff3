//go:build !linux

package host

func pidfdWorks() bool { return false }
