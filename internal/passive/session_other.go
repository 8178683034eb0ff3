//go:build !linux

package passive

import "fmt"

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
