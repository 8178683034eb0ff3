package testnet

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// naglePy is runbook 001's gateway in miniature: it answers each request in
// two small writes (a header, then a body) and never sets TCP_NODELAY, so
// the body waits for the header's ACK, which the client delays (~40 ms).
const naglePy = `
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
print("ready", flush=True)
def serve(c):
    while True:
        d = c.recv(64)
        if not d:
            break
        c.send(b"H" * 20)
        c.send(b"B" * 100)
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`

// NagleAnswer is the size of the server's answer to each request.
const NagleAnswer = 120

// Unstalled bounds the p50 round trip of a request that no longer waits for
// the Nagle/delayed-ACK stall. The stall waits for the client's delayed
// ACK, whose timer is 40 ms at least (TCP_DELACK_MIN), so tests take a p50
// of 30 ms or more as the stall. Without it a round trip on loopback takes
// well under a millisecond, but a busy machine adds milliseconds of
// scheduling to each one: a CPU kept busy in softirq added 1.2 ms to each
// wakeup on it, and the VM's emulated CPUs, short of host CPU, 8 ms. A
// quarter of the timer's floor tells the two apart on such a machine too.
const Unstalled = 10 * time.Millisecond

// Stalled counts the round trips that waited for the delayed ACK: 30 ms or
// more (Unstalled's reasoning). A connection has TCP_NODELAY or not:
// without it every round trip stalls, with it none does, and one a busy
// machine delays past 30 ms is rare. Its p50 alone is not as clear: the
// VM, short of host CPU, read 10.3 and 12.7 ms (p50 of 30) on connections
// where at most one round trip in 30 reached 30 ms.
func Stalled(ds []time.Duration) int {
	n := 0
	for _, d := range ds {
		if d >= 30*time.Millisecond {
			n++
		}
	}
	return n
}

// NoStall reports whether at most a quarter of the round trips stalled.
func NoStall(ds []time.Duration) bool { return 4*Stalled(ds) <= len(ds) }

// NagleServer runs a Python server that answers in two writes without
// TCP_NODELAY on 127.0.0.1:port inside n until the test ends. Where there
// is no python3 (the stock-kernel VM holds only the test binaries and a few
// host programs) the same server runs in Go, in this process, with
// TCP_NODELAY turned off.
func NagleServer(t testing.TB, n *NS, port int) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Logf("no python3 here: the server on port %d is the same loop in Go (SetNoDelay(false))", port)
		nagleServerGo(t, n, port)
		return
	}
	cmd := n.Command("python3", "-c", naglePy, fmt.Sprint(port))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the python server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("python server on port %d: %q, %v", port, line, err)
	}
}

// nagleServerGo is naglePy in Go on raw descriptors: Go's net package
// turns TCP_NODELAY on for every connection it accepts, and turning it off
// again after accept would undo what lowlat set at establishment. Python's
// server never touches the option; neither does this one.
func nagleServerGo(t testing.TB, n *NS, port int) {
	var lfd int
	if err := n.Do(func() (err error) {
		if lfd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0); err != nil {
			return err
		}
		unix.SetsockoptInt(lfd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(lfd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
			return err
		}
		return unix.Listen(lfd, 64)
	}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	open := map[int]bool{}
	closing := false
	t.Cleanup(func() {
		mu.Lock()
		closing = true
		for fd := range open {
			unix.Shutdown(fd, unix.SHUT_RDWR)
		}
		mu.Unlock()
		unix.Shutdown(lfd, unix.SHUT_RDWR)
	})
	go func() {
		defer unix.Close(lfd)
		for {
			fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil {
				return
			}
			mu.Lock()
			if closing {
				mu.Unlock()
				unix.Close(fd)
				return
			}
			open[fd] = true
			mu.Unlock()
			go func() {
				defer func() { mu.Lock(); delete(open, fd); mu.Unlock(); unix.Close(fd) }()
				buf := make([]byte, 64)
				for {
					if n, err := unix.Read(fd, buf); (err != nil && err != unix.EINTR) || n == 0 && err == nil {
						return
					}
					unix.Write(fd, make([]byte, 20))
					unix.Write(fd, make([]byte, NagleAnswer-20))
				}
			}()
		}
	}()
}

// Dial connects to 127.0.0.1:port inside n; the connection is closed when
// the test ends.
func Dial(t testing.TB, n *NS, port int) net.Conn {
	t.Helper()
	var c net.Conn
	if err := n.Do(func() (err error) {
		c, err = net.DialTimeout("tcp4", fmt.Sprintf("127.0.0.1:%d", port), 2*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RoundTrips sends count one-byte requests on c, each after the previous
// answer, and returns the sorted times to each whole answer.
func RoundTrips(t testing.TB, c net.Conn, count int) []time.Duration {
	t.Helper()
	var ds []time.Duration
	buf := make([]byte, NagleAnswer)
	for range count {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		t0 := time.Now()
		if _, err := c.Write([]byte("q")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds
}

// Quantile returns the q-quantile (0..1) of sorted durations.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q * float64(len(sorted)-1))
	return sorted[i]
}

// nagleClientEnv makes Main run this binary as NagleClient's process.
const nagleClientEnv = "LOWLAT_TESTNET_NAGLE_CLIENT"

// NagleConn is a client process that sends each request in two writes
// without TCP_NODELAY and waits for the answer: runbook 001's stall on the
// sending side, when the peer delays its ACK.
type NagleConn struct {
	t   testing.TB
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// NagleClient starts this test binary as a client of 127.0.0.1:port inside
// n, in the cgroup v2 directory cgroup (as the child sees it, "" for its
// parent's), on raw descriptors: Go's net package would turn TCP_NODELAY
// on by itself. It opens one connection at once and keeps it. The test's
// TestMain must call Main.
func NagleClient(t testing.TB, n *NS, port int, cgroup string) *NagleConn {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := n.Command(self)
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d,%s", nagleClientEnv, port, cgroup))
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the Nagle client: %v", err)
	}
	c := &NagleConn{t: t, cmd: cmd, in: in, out: bufio.NewReader(out)}
	t.Cleanup(func() { in.Close(); cmd.Process.Kill(); cmd.Wait() })
	if line, err := c.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("Nagle client: %q, %v", line, err)
	}
	return c
}

// PID is the client's process.
func (c *NagleConn) PID() int { return c.cmd.Process.Pid }

// Measure runs count requests on the connection opened at start ("old") or
// on a new one ("new"), and returns their sorted round trips.
func (c *NagleConn) Measure(which string, count int) []time.Duration {
	c.t.Helper()
	fmt.Fprintf(c.in, "%s %d\n", which, count)
	line, err := c.out.ReadString('\n')
	if err != nil {
		c.t.Fatalf("Nagle client: %v", err)
	}
	var ds []time.Duration
	for _, f := range strings.Fields(line) {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			c.t.Fatalf("Nagle client: %q", line)
		}
		ds = append(ds, time.Duration(n))
	}
	slices.Sort(ds)
	return ds
}

// nagleClientMain is the client process: join the cgroup, connect, then
// answer "old N" / "new N" lines with N round trips in nanoseconds.
func nagleClientMain(arg string) error {
	portStr, cgroup, _ := strings.Cut(arg, ",")
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	if cgroup != "" {
		if err := os.WriteFile(cgroup+"/cgroup.procs", []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", cgroup, err)
		}
	}
	dial := func() (int, error) {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return -1, err
		}
		return fd, unix.Connect(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	}
	old, err := dial()
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var which string
		var count int
		if _, err := fmt.Sscanf(sc.Text(), "%s %d", &which, &count); err != nil {
			return err
		}
		fd := old
		if which == "new" {
			if fd, err = dial(); err != nil {
				return err
			}
		}
		var out []string
		buf := make([]byte, 64)
		for range count {
			t0 := time.Now()
			unix.Write(fd, buf[:32])
			unix.Write(fd, buf[32:])
			for got := 0; got < len(buf); {
				n, err := unix.Read(fd, buf[got:])
				if err != nil || n == 0 {
					return fmt.Errorf("read answer: %v", err)
				}
				got += n
			}
			out = append(out, strconv.FormatInt(int64(time.Since(t0)), 10))
		}
		if fd != old {
			unix.Close(fd)
		}
		fmt.Println(strings.Join(out, " "))
	}
	return nil
}

// EchoServer answers every 64 bytes it reads with 64 bytes, on
// 127.0.0.1:port inside n, in this process, until the test ends.
func EchoServer(t testing.TB, n *NS, port int) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func() (err error) {
		ln, err = net.Listen("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
}
