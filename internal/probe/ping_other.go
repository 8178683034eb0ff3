//go:build !linux

package probe

import (
	"net/netip"
	"sync/atomic"
)

type pingSock struct {
	v6, dgram, ipHeader, timestamps bool
	closed                          atomic.Bool
}

func (s *pingSock) kind() string { return "" }

func openPingSock(addr netip.Addr, mode string, id uint16) (*pingSock, error) {
	return nil, errNotSupported
}

func (s *pingSock) setDSCP(int) error                           { return errNotSupported }
func (s *pingSock) send([]byte) error                           { return errNotSupported }
func (s *pingSock) recv(b, oob []byte) (n, oobn int, err error) { return 0, 0, errNotSupported }
func (s *pingSock) close()                                      {}

func isTransientSendErr(error) bool { return false }
