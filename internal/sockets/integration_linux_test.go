package sockets_test

import (
	"context"
	"encoding/json"
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
)

func jsonOut(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// byLocal indexes a helper's rows: clients by local port, the listener and
// the accepted sockets by state.
func byLocal(rep *sockets.Report, pid int) (map[uint16]*sockets.Socket, *sockets.Socket, []*sockets.Socket) {
	clients := map[uint16]*sockets.Socket{}
	var lst *sockets.Socket
	var accepted []*sockets.Socket
	for i := range rep.Sockets {
		s := &rep.Sockets[i]
		if s.PID != pid {
			continue
		}
		switch {
		case s.Listener():
			lst = s
		case s.LocalPort() == 4001:
			accepted = append(accepted, s)
		default:
			clients[s.LocalPort()] = s
		}
	}
	return clients, lst, accepted
}

// TestIntegrationHelpersReportedExactly starts a helper in C, Python and Go
// with known options and checks the audit reports each one exactly, then
// that tcp_info moves when traffic flows.
func TestIntegrationHelpersReportedExactly(t *testing.T) {
	qlens := map[string]int{"c": 17, "python": 11, "go": 23}
	for _, lang := range []string{"c", "python", "go"} {
		t.Run(lang, func(t *testing.T) {
			ns := testnet.New(t)
			h := startHelper(t, ns, lang, 4001, qlens[lang], "all")
			rep := audit(t, ns, sockets.Config{Filter: sockets.Filter{PID: h.pid}})
			clients, lst, accepted := byLocal(rep, h.pid)
			if lst == nil || lst.Local != "127.0.0.1:4001" || lst.Options == nil {
				t.Fatalf("listener: %+v", lst)
			}
			if lst.Options.FastOpenQLen != qlens[lang] || lst.Options.ReusePort {
				t.Errorf("listener options %+v, want fastopen_qlen %d", lst.Options, qlens[lang])
			}
			if len(accepted) != 4 || len(clients) != 4 || len(rep.Sockets) != 9 {
				t.Fatalf("%d rows: %d clients, %d accepted", len(rep.Sockets), len(clients), len(accepted))
			}
			goDefault := lang == "go" // Go sets TCP_NODELAY on every connection
			want := map[string]sockets.Options{
				"nagle":   {NoDelay: false},
				"nodelay": {NoDelay: true},
				"cork":    {NoDelay: goDefault, Cork: true},
				"sndbuf":  {NoDelay: goDefault, SndBuf: 2 * 65536},
			}
			for name, w := range want {
				s := clients[h.ports[name]]
				if s == nil || s.Options == nil {
					t.Fatalf("%s: %+v", name, s)
				}
				o := s.Options
				if s.State != "established" || s.Comm == "" || s.OptionsError != "" {
					t.Errorf("%s: state %s comm %q error %q", name, s.State, s.Comm, s.OptionsError)
				}
				if o.NoDelay != w.NoDelay || o.Cork != w.Cork {
					t.Errorf("%s: nodelay %v cork %v, want %v %v", name, o.NoDelay, o.Cork, w.NoDelay, w.Cork)
				}
				if w.SndBuf != 0 && o.SndBuf != w.SndBuf {
					t.Errorf("%s: sndbuf %d, want %d (setsockopt 65536, doubled by Linux)", name, o.SndBuf, w.SndBuf)
				}
				if w.SndBuf == 0 && o.SndBuf == 2*65536 {
					t.Errorf("%s: sndbuf %d looks locked", name, o.SndBuf)
				}
				if o.Congestion == "" || o.Congestion != s.Congestion || o.RcvBuf <= 0 || o.FastOpenQLen != 0 || len(o.Unsupported) > 0 {
					t.Errorf("%s: options %+v (diag congestion %q)", name, o, s.Congestion)
				}
				if s.TCPInfo == nil || s.TCPInfo.Cwnd == 0 {
					t.Errorf("%s: tcp_info %+v", name, s.TCPInfo)
				}
			}
			for _, s := range accepted {
				if s.Options == nil || s.Options.NoDelay != goDefault {
					t.Errorf("accepted %s: options %+v, want nodelay %v", s.Remote, s.Options, goDefault)
				}
			}

			// tcp_info moves with traffic.
			before := *clients[h.ports["nagle"]].TCPInfo
			h.talk(t, 10)
			rep = audit(t, ns, sockets.Config{Filter: sockets.Filter{PID: h.pid}})
			clients, _, _ = byLocal(rep, h.pid)
			after := clients[h.ports["nagle"]].TCPInfo
			if after == nil || after.BytesSent == nil || before.BytesSent == nil || after.DataSegsOut == nil || after.BusyUs == nil || after.DeliveryRate == nil {
				t.Fatalf("tcp_info after traffic: %+v", after)
			}
			if *after.BytesSent-*before.BytesSent < 2000 || *after.DataSegsOut <= *before.DataSegsOut || *after.BytesReceived-*before.BytesReceived < 1000 {
				t.Errorf("bytes sent %d -> %d, segs %d -> %d, received %d -> %d", *before.BytesSent, *after.BytesSent, *before.DataSegsOut, *after.DataSegsOut, *before.BytesReceived, *after.BytesReceived)
			}
			if after.RTTus == 0 || *after.DeliveryRate == 0 || *after.BusyUs <= *before.BusyUs {
				t.Errorf("rtt %d delivery %d busy %d -> %d", after.RTTus, *after.DeliveryRate, *before.BusyUs, *after.BusyUs)
			}
			if bps := after.BytesPerSegment(); bps <= 0 || bps > 200 {
				t.Errorf("bytes per segment %.1f, want 100-200 (Nagle may merge two writes)", bps)
			}
			if !sockets.SmallWrites(clients[h.ports["nagle"]]) || sockets.SmallWrites(clients[h.ports["nodelay"]]) {
				t.Error("small writes: the Nagle connection qualifies, the NODELAY one never does")
			}
		})
	}
}

// TestIntegrationNotRoot: an unprivileged audit of another user's process
// reports its options as unknown (permission), and tcp_info still works.
func TestIntegrationNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start a root-owned helper and switch to nobody")
	}
	ns := testnet.New(t)
	h := startHelper(t, ns, "go", 4001, 5, "all")
	h.talk(t, 2)
	bin := copyTestBinary(t)
	var out []byte
	var runErr error
	err := ns.Do(func() error {
		// Started from a thread inside the namespace, the child is in it too.
		cmd := exec.Command(bin)
		cmd.Dir = "/"
		cmd.Env = []string{auditEnv + "=" + strconv.Itoa(h.pid)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, runErr = cmd.Output()
		if runErr != nil {
			runErr = fmt.Errorf("%v: %s", runErr, stderr.String())
		}
		return nil
	})
	if err != nil || runErr != nil {
		t.Fatalf("audit as nobody: %v %v", err, runErr)
	}
	var rep sockets.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rep.Warnings) == 0 || !strings.Contains(rep.Warnings[0], "permission") {
		t.Errorf("warnings %q", rep.Warnings)
	}
	established := 0
	for _, s := range rep.Sockets {
		if s.Options != nil || !strings.HasPrefix(s.OptionsError, "unknown (permission") {
			t.Errorf("%s %s: options %+v error %q", s.Local, s.State, s.Options, s.OptionsError)
		}
		if s.State == "established" {
			established++
			if s.TCPInfo == nil || s.TCPInfo.RTTus == 0 {
				t.Errorf("%s: tcp_info %+v", s.Local, s.TCPInfo)
			}
		}
	}
	if established != 8 {
		t.Errorf("%d established sockets listed for the hidden process, want 8", established)
	}
}

// copyTestBinary copies the test binary where nobody may run it.
func copyTestBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "lowlat-sockets-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sockets.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestIntegrationExitedProcess: a process that exits before the audit reads
// its sockets is reported, not fatal; an audit of a pid that is gone says so.
func TestIntegrationExitedProcess(t *testing.T) {
	ns := testnet.New(t)
	h := startHelper(t, ns, "go", 4001, 5, "all")
	pid := h.pid
	h.exit(t)
	err := ns.Do(func() error {
		_, err := sockets.Audit(context.Background(), sockets.Config{Filter: sockets.Filter{PID: pid}})
		if err == nil || !strings.Contains(err.Error(), "no such process") {
			return fmt.Errorf("audit of an exited pid: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationChurnAndThousands: thousands of sockets, and processes
// opening and closing connections while the audit runs. Every row is either
// complete or says what happened; nothing crashes.
func TestIntegrationChurnAndThousands(t *testing.T) {
	testnet.HostOnly(t, "sock_diag and /proc, which both kernels have; thousands of sockets only cost emulated time")
	ns := testnet.New(t)
	const conns = 2000
	var ln net.Listener
	var mu sync.Mutex
	var keep []net.Conn
	accepted := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:4001")
		if err != nil {
			return err
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				mu.Lock()
				keep = append(keep, c)
				accepted++
				mu.Unlock()
			}
		}()
		for i := 0; i < conns; i++ {
			c, err := net.Dial("tcp4", "127.0.0.1:4001")
			if err != nil {
				return fmt.Errorf("connection %d: %w", i, err)
			}
			mu.Lock()
			keep = append(keep, c)
			mu.Unlock()
		}
		return nil
	})
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := accepted
		mu.Unlock()
		if n >= conns {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("only %d of %d connections accepted", n, conns)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(stop)
		wg.Wait()
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range keep {
			c.Close()
		}
	}()
	// Churn: a goroutine that opens and closes connections, bounded in time.
	wg.Add(1)
	go func() {
		defer wg.Done()
		ns.Do(func() error {
			end := time.Now().Add(5 * time.Second)
			for time.Now().Before(end) {
				select {
				case <-stop:
					return nil
				default:
				}
				c, err := net.Dial("tcp4", "127.0.0.1:4001")
				if err == nil {
					c.Close()
				}
			}
			return nil
		})
	}()
	pid := os.Getpid()
	for round := 0; round < 10; round++ {
		rep := audit(t, ns, sockets.Config{Filter: sockets.Filter{PID: pid, Port: 4001}})
		est := 0
		for _, s := range rep.Sockets {
			switch {
			case s.Options != nil && s.OptionsError != "":
				t.Fatalf("row with options and an error: %+v", s)
			case s.Options == nil && !strings.HasPrefix(s.OptionsError, "unknown ("):
				t.Fatalf("row without options or a reason: %+v", s)
			case s.Options != nil && (s.Options.SndBuf <= 0 || s.Options.Congestion == ""):
				t.Fatalf("garbage options: %+v", s.Options)
			}
			if s.State == "established" && s.Options != nil {
				est++
			}
		}
		// Both ends of every kept connection are ours (the churn adds a few).
		if est < 2*conns {
			t.Fatalf("round %d: %d established sockets with options, want >= %d", round, est, 2*conns)
		}
		if round == 0 {
			t.Logf("audit of %d sockets: %.1f ms", rep.Stats.Listed, float64(rep.Stats.ElapsedUs)/1000)
		}
	}
}
