package testnet

import (
	"strings"
	"sync"
)

// Log is a process's or a command's output, safe to read while it is being
// written (exec's copying goroutine, a command running in the background).
type Log struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is what was written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
