//go:build !linux

package passive

import (
	"fmt"
	"time"
)

// Session is a set of attached measurements (Linux only).
type Session struct {
	Hooks    []string
	MapBytes int
}

// Open fails: passive measurement needs Linux's BPF.
func Open(cfg Config) (*Session, error) {
	return nil, fmt.Errorf("passive measurement needs Linux: %w", ErrUnsupported)
}

// Snapshot is never reached.
func (s *Session) Snapshot() (Snapshot, error) { return Snapshot{}, ErrUnsupported }

// Close does nothing.
func (s *Session) Close() error { return nil }

// OpenSampled fails: it reads Linux's tcp_info.
func OpenSampled(cfg Config) (*Session, error) {
	return nil, fmt.Errorf("passive measurement needs Linux: %w", ErrUnsupported)
}

// HookStat is one hook's cost (Linux only).
type HookStat struct {
	Hook string
	Runs uint64
	Time time.Duration
}

// EnableHookStats fails off Linux.
func (s *Session) EnableHookStats() error { return ErrUnsupported }

// HookStats is empty off Linux.
func (s *Session) HookStats() ([]HookStat, error) { return nil, ErrUnsupported }
