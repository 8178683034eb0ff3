// Package nsthread runs Go code inside a network namespace.
//
// A network namespace belongs to an OS thread, not to a goroutine. Code that
// moves a thread into another namespace must lock its goroutine to that
// thread and never unlock it: the runtime then destroys the thread when the
// goroutine ends, so the namespace never leaks into goroutines scheduled on
// the thread later. Every setns(2) is checked: a goroutine that failed to
// enter a namespace and went on would read or change the wrong one.
//
// This is the only place in lowlat that enters a namespace on a thread; the
// lab, the test namespaces, host gathering and the probes' dialers use it.
package nsthread

import (
	"errors"
	"runtime"
)

// NS is an open network namespace: a file descriptor of /proc/…/ns/net or of
// a bind mount below /run/netns (vishvananda/netns.NsHandle converts to it).
// The holder closes it.
type NS int

// OnNewThread runs f on a fresh OS thread that is thrown away afterwards, so
// whatever namespace f moves the thread into (with Join, or by creating one
// with unshare(2)) never leaks into other goroutines. It returns f's error.
func OnNewThread(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime destroys the thread when this
		// goroutine exits, along with whatever namespace it was moved into.
		runtime.LockOSThread()
		// runtime.Goexit (t.Fatal or t.Skip inside f) ends the goroutine
		// without a return value: report that rather than leave the caller
		// waiting forever.
		err := errors.New("nsthread: goroutine ended before f returned (runtime.Goexit, t.Fatal or t.Skip inside f)")
		defer func() { errc <- err }()
		err = f()
	}()
	return <-errc
}
