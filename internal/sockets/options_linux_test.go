package sockets

import (
	"net"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadOptionsClosedOrReused: a descriptor closed between the /proc scan
// and pidfd_getfd, or reused by another file meanwhile, is reported as
// "unknown (socket closed ...)", never read as the wrong socket.
func TestReadOptionsClosedOrReused(t *testing.T) {
	pf := newPidfds()
	defer pf.close()
	pidfd, oe := pf.get(os.Getpid())
	if oe != nil {
		t.Fatalf("pidfd_open self: %v", oe)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	o, oe := readOptions(pidfd, os.Getpid(), fd, st.Ino, false)
	if oe != nil || o == nil || o.SndBuf <= 0 {
		t.Fatalf("live socket: %+v %v", o, oe)
	}
	f.Close()
	if _, oe := readOptions(pidfd, os.Getpid(), fd, st.Ino, false); oe == nil || oe.Reason != "socket closed" {
		t.Fatalf("closed fd: %v", oe)
	}
	// Reuse the number for another file: the inode check catches it.
	g, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := unix.Dup2(int(g.Fd()), fd); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	_, oe = readOptions(pidfd, os.Getpid(), fd, st.Ino, false)
	if oe == nil || oe.Reason != "socket closed" || !strings.Contains(oe.Error(), "another file") {
		t.Fatalf("reused fd: %v", oe)
	}
}

// TestPidfdExited: a process gone before pidfd_open is "process exited".
func TestPidfdExited(t *testing.T) {
	pf := newPidfds()
	defer pf.close()
	// pid_max is at most 4194304: a larger pid cannot exist.
	if _, oe := pf.get(1 << 23); oe == nil || oe.Reason != "process exited" {
		t.Fatalf("missing pid: %v", oe)
	}
	if oe := pf.open[1<<23].err; oe.Error() != "unknown (process exited: pid 8388608 exited during the audit)" {
		t.Errorf("message %q", oe.Error())
	}
}
