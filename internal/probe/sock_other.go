//go:build !linux

package probe

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"syscall"
	"time"
)

var errNotSupported = fmt.Errorf("probe: not supported on %s", runtime.GOOS)

func enableRxTimestamps(rc syscall.RawConn) error                    { return errNotSupported }
func parseRxTimestamp(oob []byte) (int64, bool)                      { return 0, false }
func parseRxMeta(oob []byte) rxMeta                                  { return rxMeta{} }
func tosCmsg(b []byte, v6 bool, tos uint8) []byte                    { return nil }
func setTOS(rc syscall.RawConn, v6 bool, dscp int) error             { return errNotSupported }
func listenControl(network, address string, c syscall.RawConn) error { return nil }
func fastOpenControl(network, address string, c syscall.RawConn) error {
	return errNotSupported
}
func synDataAcked(rc syscall.RawConn) bool    { return false }
func ensureFiles(need int, what string) error { return nil }

var oobSize = 64

var tosCmsgSpace = 0

type rxMeta struct {
	ts     int64
	hasTS  bool
	tos    uint8
	hasTOS bool
}

type preciseSleeper struct{}

func lockThread() preciseSleeper         { return preciseSleeper{} }
func (preciseSleeper) until(t time.Time) { time.Sleep(time.Until(t)) }
func isConnRefused(err error) bool       { return errors.Is(err, syscall.ECONNREFUSED) }

func kernelRelease() string { return "" }

type udpSock struct{}

func dialUDPSock(dst netip.AddrPort) (*udpSock, error)  { return nil, errNotSupported }
func (s *udpSock) kernelTimestamps() bool               { return false }
func (s *udpSock) recvTOS() bool                        { return false }
func (s *udpSock) setDSCP(dscp int) error               { return errNotSupported }
func (s *udpSock) send(b []byte) error                  { return errNotSupported }
func (s *udpSock) recv(b, oob []byte) (int, int, error) { return 0, 0, errNotSupported }
func (s *udpSock) close()                               {}

// RaiseFileLimit is a no-op here.
func RaiseFileLimit(n int) error { return nil }

func unsentBytes(c net.Conn) (int64, bool) { return 0, false }

func dscpControl(dscp int) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error { return nil }
}
