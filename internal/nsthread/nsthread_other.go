//go:build !linux

package nsthread

// Off Linux there are no network namespaces: every thread shares the one
// network stack, so there is nothing to open or join.

// Current returns a placeholder for the one network stack.
func Current() (NS, error) { return -1, nil }

// Close does nothing.
func (NS) Close() error { return nil }

// Join does nothing: the thread is already where every thread is.
func (NS) Join() error { return nil }

// PrepareRunDir does nothing: there are no named namespaces.
func PrepareRunDir() error { return nil }
