package sockets_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/sockets"
	"github.com/lowlat/lowlat/internal/testnet"
	"golang.org/x/sys/unix"
)

// Environment variables that turn the test binary into a helper process.
const (
	goHelperEnv = "LOWLAT_SOCKETS_GOHELPER" // the Go socket helper (same protocol as testdata/helper.c)
	auditEnv    = "LOWLAT_SOCKETS_AUDIT"    // run one audit for the pid in the variable, print JSON
)

var tmpDirs []string

func TestMain(m *testing.M) {
	// testnet's own helper stage (entering the namespace) runs first: it
	// execs this binary again, and only then is it the Go helper.
	if os.Getenv(goHelperEnv) != "" && os.Getenv("LOWLAT_TESTNET_EXEC") == "" {
		if err := goHelper(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "go helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if v := os.Getenv(auditEnv); v != "" {
		pid, _ := strconv.Atoi(v)
		rep, err := sockets.Audit(context.Background(), sockets.Config{Filter: sockets.Filter{PID: pid}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "audit:", err)
			os.Exit(1)
		}
		if err := jsonOut(os.Stdout, rep); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	testnet.Main(m, func() {
		for _, d := range tmpDirs {
			os.RemoveAll(d)
		}
	})
}

// helperNames are the client connections every helper opens, in order.
var helperNames = []string{"nagle", "nodelay", "cork", "sndbuf"}

// goHelper is the Go helper: the same protocol as testdata/helper.c, with
// Go's defaults (TCP_NODELAY on every connection unless turned off).
func goHelper(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: PORT FASTOPEN_QLEN all|nodelay")
	}
	port, qlen, allnd := args[0], args[1], args[2] == "nodelay"
	q, _ := strconv.Atoi(qlen)
	addr := "127.0.0.1:" + port
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_FASTOPEN, q) })
		return serr
	}}
	l, err := lc.Listen(context.Background(), "tcp4", addr)
	if err != nil {
		return err
	}
	var clients, servers []*net.TCPConn
	for i, name := range helperNames {
		d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			c.Control(func(fd uintptr) {
				if i == 3 {
					serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, 65536)
				}
			})
			return serr
		}}
		c, err := d.Dial("tcp4", addr)
		if err != nil {
			return err
		}
		s, err := l.Accept()
		if err != nil {
			return err
		}
		tc := c.(*net.TCPConn)
		if i == 0 && !allnd {
			if err := tc.SetNoDelay(false); err != nil {
				return err
			}
		}
		if i == 2 && !allnd {
			raw, _ := tc.SyscallConn()
			var serr error
			raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, 1) })
			if serr != nil {
				return serr
			}
		}
		clients = append(clients, tc)
		servers = append(servers, s.(*net.TCPConn))
		fmt.Printf("%s %d\n", name, tc.LocalAddr().(*net.TCPAddr).Port)
	}
	fmt.Printf("pid %d\nready\n", os.Getpid())
	msg := make([]byte, 200)
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), "talk %d", &n); err != nil {
			continue
		}
		for r := 0; r < n; r++ {
			for i := 0; i < 2; i++ {
				clients[i].Write(msg[:100])
				clients[i].Write(msg[:100])
				if _, err := io.ReadFull(servers[i], msg[:200]); err != nil {
					return err
				}
				servers[i].Write(msg[:100])
				if _, err := io.ReadFull(clients[i], msg[:100]); err != nil {
					return err
				}
			}
		}
		fmt.Println("done")
	}
	return nil
}

// helper is a running helper process.
type helper struct {
	lang  string
	pid   int
	ports map[string]uint16
	in    io.WriteCloser
	out   *bufio.Scanner
	cmd   *exec.Cmd
}

// exit ends the helper (end of input) and reaps it.
func (h *helper) exit(t *testing.T) {
	t.Helper()
	h.in.Close()
	done := make(chan error, 1)
	go func() { done <- h.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s helper did not exit", h.lang)
	}
}

var buildC = sync.OnceValues(func() (string, error) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		return "", fmt.Errorf("gcc not found (Debian package gcc): %w", err)
	}
	dir, err := os.MkdirTemp("", "lowlat-sockets-")
	if err != nil {
		return "", err
	}
	tmpDirs = append(tmpDirs, dir)
	bin := filepath.Join(dir, "helper")
	if out, err := exec.Command(gcc, "-O2", "-Wall", "-o", bin, "testdata/helper.c").CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc testdata/helper.c: %v\n%s", err, out)
	}
	return bin, nil
})

// needTool fails the test when a helper language is missing, except in
// the stock-kernel VM, whose initramfs carries only Go binaries.
func needTool(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if testnet.InVM() {
		t.Skipf("not in the VM image: %v", err)
	}
	t.Fatal(err)
}

// startHelper starts the lang helper inside ns and waits for it to be ready.
func startHelper(t *testing.T, ns *testnet.NS, lang string, port, qlen int, mode string) *helper {
	t.Helper()
	args := []string{strconv.Itoa(port), strconv.Itoa(qlen), mode}
	var cmd *exec.Cmd
	switch lang {
	case "c":
		bin, err := buildC()
		needTool(t, err)
		cmd = ns.Command(bin, args...)
	case "python":
		py, err := exec.LookPath("python3")
		needTool(t, err)
		cmd = ns.Command(py, append([]string{"testdata/helper.py"}, args...)...)
	case "go":
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = ns.Command(self, args...)
		cmd.Env = append(cmd.Env, goHelperEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s helper: %v", lang, err)
	}
	h := &helper{lang: lang, ports: map[string]uint16{}, in: in, out: bufio.NewScanner(outp), cmd: cmd}
	t.Cleanup(func() {
		in.Close()
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	lines := h.readUntil(t, "ready", 10*time.Second)
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		if f[0] == "pid" {
			h.pid = n
		} else {
			h.ports[f[0]] = uint16(n)
		}
	}
	if h.pid == 0 || len(h.ports) != 4 {
		t.Fatalf("%s helper said %q", lang, lines)
	}
	return h
}

// readUntil reads lines until want, bounded in time.
func (h *helper) readUntil(t *testing.T, want string, limit time.Duration) []string {
	t.Helper()
	type res struct {
		lines []string
		err   error
	}
	ch := make(chan res, 1)
	go func() {
		var lines []string
		for h.out.Scan() {
			if h.out.Text() == want {
				ch <- res{lines: lines}
				return
			}
			lines = append(lines, h.out.Text())
		}
		ch <- res{lines: lines, err: fmt.Errorf("helper ended before %q: %v", want, h.out.Err())}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s helper: %v (output %q)", h.lang, r.err, r.lines)
		}
		return r.lines
	case <-time.After(limit):
		t.Fatalf("%s helper: no %q within %v", h.lang, want, limit)
	}
	return nil
}

// talk runs n write-write-read exchanges on the nagle and nodelay connections.
func (h *helper) talk(t *testing.T, n int) {
	t.Helper()
	if _, err := fmt.Fprintf(h.in, "talk %d\n", n); err != nil {
		t.Fatal(err)
	}
	h.readUntil(t, "done", 30*time.Second)
}

// audit runs Audit inside ns.
func audit(t *testing.T, ns *testnet.NS, cfg sockets.Config) *sockets.Report {
	t.Helper()
	var rep *sockets.Report
	err := ns.Do(func() error {
		var err error
		rep, err = sockets.Audit(context.Background(), cfg)
		return err
	})
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	return rep
}
