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
	"syscall"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/doctor"
	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/testnet"
)

// gatherDoctor gathers live facts inside ns (the socket audit included) and
// runs doctor on them. wantTFO sets net.ipv4.tcp_fastopen=3 in the facts:
func gatherDoctor(t *testing.T, ns *testnet.NS, wantTFO bool) (*host.Facts, *doctor.Report) {
	t.Helper()
	var f *host.Facts
	err := ns.Do(func() error {
		src, err := host.OpenRoot("")
		if err != nil {
			return err
		}
		src.Sockets = true // doctor's socket checks need the live audit
		f, err = host.Gather(context.Background(), src)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if f.Sockets == nil || !f.Sockets.Live {
		t.Fatalf("live gather without a socket audit: %+v", f.Sockets)
	}
	f.Sysctls["net.ipv4.tcp_fastopen"] = "1"
	if wantTFO {
		f.Sysctls["net.ipv4.tcp_fastopen"] = "3"
	}
	return f, doctor.Run(f, doctor.Options{})
}

// findings returns the findings with id, only those about configuration
// file conf when it is set (the host's own /etc/nginx is read too).
func findings(rep *doctor.Report, id string, conf ...string) []doctor.Finding {
	var out []doctor.Finding
	for _, f := range rep.Findings {
		if f.ID == id && (len(conf) == 0 || f.Evidence["config"] == conf[0]) {
			out = append(out, f)
		}
	}
	return out
}

// TestIntegrationDoctorNagle: the nagle-risk finding fires for each process
// that talks in small messages without TCP_NODELAY, with its language's fix,
// and not for the process that sets TCP_NODELAY everywhere.
func TestIntegrationDoctorNagle(t *testing.T) {
	ns := testnet.New(t)
	nagle := map[string]*helper{}
	port := 4001
	for _, lang := range []string{"c", "python", "go"} {
		nagle[lang] = startHelper(t, ns, lang, port, 5, "all")
		port++
	}
	nodelay := startHelper(t, ns, "python", port, 5, "nodelay")
	for _, h := range append([]*helper{nodelay}, nagle["c"], nagle["python"], nagle["go"]) {
		h.talk(t, 12)
	}
	_, rep := gatherDoctor(t, ns, false)
	got := map[string]doctor.Finding{}
	for _, f := range findings(rep, "nagle-risk") {
		got[f.Evidence["pid"]] = f
	}
	wantFix := map[string]string{"c": "C/C++: int one = 1; setsockopt", "python": "Python: sock.setsockopt", "go": "Go sets TCP_NODELAY on every TCPConn by default"}
	for lang, h := range nagle {
		f, ok := got[strconv.Itoa(h.pid)]
		if !ok {
			t.Errorf("%s: no nagle-risk finding for pid %d (findings: %v)", lang, h.pid, got)
			continue
		}
		if f.Severity != doctor.Warn || !strings.Contains(f.Fix, wantFix[lang]) || f.Evidence["example_1"] == "" || !strings.HasPrefix(f.Source, "docs/runbooks.md#001-") {
			t.Errorf("%s: finding %+v", lang, f)
		}
		if _, ok := f.Evidence["TcpExt.DelayedACKs"]; !ok {
			t.Errorf("%s: no DelayedACKs evidence: %v", lang, f.Evidence)
		}
	}
	if f, ok := got[strconv.Itoa(nodelay.pid)]; ok {
		t.Errorf("nagle-risk for the TCP_NODELAY process: %+v", f)
	}
}

// echoBackend listens on 127.0.0.1:5000 inside ns and echoes.
func echoBackend(t *testing.T, ns *testnet.NS) {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:5000")
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
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
}

// dialEcho connects to a proxy port inside ns and checks a round trip, so
// the proxy has its client and upstream connections set up.
func dialEcho(t *testing.T, ns *testnet.NS, port int) {
	t.Helper()
	var c net.Conn
	err := ns.Do(func() error {
		var err error
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			c, err = net.Dial("tcp4", "127.0.0.1:"+strconv.Itoa(port))
			if err == nil || time.Now().After(end) {
				break
			}
		}
		return err
	})
	if err != nil {
		t.Fatalf("dial proxy port %d: %v", port, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintln(c, "ping")
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo through port %d: %q %v", port, line, err)
	}
}

// startProxy runs a proxy program inside ns until the test ends.
func startProxy(t *testing.T, ns *testnet.NS, name string, args ...string) {
	t.Helper()
	bin, err := exec.LookPath(name)
	if err != nil {
		needTool(t, fmt.Errorf("%s not installed (Debian packages nginx-light libnginx-mod-stream haproxy): %w", name, err))
	}
	cmd := ns.Command(bin, args...)
	// A file, not a pipe: workers inherit stderr, and Wait would wait for
	// them to close it. Their own process group lets cleanup kill them all.
	logPath := filepath.Join(t.TempDir(), name+".stderr")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stderr := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", name, stderr())
		}
	})
	select {
	case <-exited:
		t.Fatalf("%s exited: %s", name, stderr())
	case <-time.After(300 * time.Millisecond):
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationNginx runs nginx on a temporary configuration in a test
// namespace: a stream server with tcp_nodelay off is flagged, the live
// sockets agree with the configuration, and a configuration edited without
// a reload is caught as disagreeing with the kernel.
func TestIntegrationNginx(t *testing.T) {
	ns := testnet.New(t)
	echoBackend(t, ns)
	dir := t.TempDir()
	mod := "/usr/lib/nginx/modules/ngx_stream_module.so"
	load := ""
	if _, err := os.Stat(mod); err == nil {
		load = "load_module " + mod + ";"
	}
	conf := filepath.Join(dir, "nginx.conf")
	tmpl := `%s
worker_processes 1;
daemon off;
pid %s/nginx.pid;
error_log stderr;
events { worker_connections 64; }
stream {
    server { listen 127.0.0.1:4100 fastopen=%d; proxy_pass 127.0.0.1:5000; }
    server { listen 127.0.0.1:4101; tcp_nodelay %s; proxy_pass 127.0.0.1:5000; }
}
`
	writeFile(t, conf, fmt.Sprintf(tmpl, load, dir, 32, "off"))
	startProxy(t, ns, "nginx", "-c", conf, "-p", dir)
	dialEcho(t, ns, 4100)
	dialEcho(t, ns, 4101)

	f, rep := gatherDoctor(t, ns, true)
	var px []string
	for _, p := range f.Sockets.Proxies {
		px = append(px, p.Kind+" "+p.Path)
		if p.Path == conf && (len(p.PIDs) == 0 || len(p.Listeners) != 2 || len(p.Errors) > 0) {
			t.Fatalf("proxy config %+v", p)
		}
	}
	nd := findings(rep, "proxy-tcp-nodelay", conf)
	if len(nd) != 1 || !strings.Contains(nd[0].Summary, "listen 127.0.0.1:4101") || !strings.Contains(nd[0].Summary, "tcp_nodelay is off") {
		t.Fatalf("proxy-tcp-nodelay findings %+v (proxies %v)", nd, px)
	}
	fo := findings(rep, "proxy-fastopen", conf)
	if len(fo) != 1 || !strings.Contains(fo[0].Evidence["listeners"], "127.0.0.1:4101") || strings.Contains(fo[0].Evidence["listeners"], "4100") {
		t.Fatalf("proxy-fastopen findings %+v", fo)
	}
	// The kernel agrees with the configuration: nginx's connections on 4100
	// have TCP_NODELAY, those on 4101 do not, the listener's queue is 32.
	est, withND := map[uint16]int{}, map[uint16]int{}
	fastopen := -1
	for _, p := range f.Sockets.Processes {
		if p.Comm != "nginx" {
			continue
		}
		for _, bp := range p.ByPort {
			est[bp.Port] += bp.Established
			withND[bp.Port] += bp.NoDelay
		}
		for _, l := range p.Listeners {
			if l.Port == 4100 {
				fastopen = l.FastOpenQLen
			}
		}
	}
	if est[4100] == 0 || withND[4100] != est[4100] || est[4101] == 0 || withND[4101] != 0 || fastopen != 32 {
		t.Fatalf("live nginx sockets: established %v with nodelay %v, fastopen %d", est, withND, fastopen)
	}

	// Edit the configuration without reloading: now it disagrees with the
	// kernel on both ports.
	writeFile(t, conf, fmt.Sprintf(tmpl, load, dir, 64, "on"))
	_, rep = gatherDoctor(t, ns, true)
	nd = findings(rep, "proxy-tcp-nodelay", conf)
	if len(nd) != 1 || !strings.Contains(nd[0].Summary, "configuration and kernel disagree") || !strings.Contains(nd[0].Summary, "4101") {
		t.Errorf("after the edit, proxy-tcp-nodelay %+v", nd)
	}
	var disagree bool
	for _, f := range findings(rep, "proxy-fastopen", conf) {
		if strings.Contains(f.Summary, "disagree") && f.Evidence["kernel_fastopen_qlen"] == "32" && f.Evidence["config_fastopen"] == "=64" {
			disagree = true
		}
	}
	if !disagree {
		t.Errorf("after the edit, proxy-fastopen %+v", findings(rep, "proxy-fastopen", conf))
	}

	// A malformed configuration is a not-checked row naming file and line.
	writeFile(t, conf, "stream {\n server { listen 4100;\n")
	_, rep = gatherDoctor(t, ns, true)
	nd = findings(rep, "proxy-tcp-nodelay", conf)
	if len(nd) != 1 || !nd[0].NotChecked || !strings.Contains(nd[0].Evidence["errors"], conf+": unexpected end of file") {
		t.Errorf("malformed config: %+v", nd)
	}
}

// TestIntegrationHAProxy runs HAProxy in TCP mode in a test namespace and
// checks that doctor's verdict matches the live sockets: what HAProxy sets
// is read from the kernel, not assumed.
func TestIntegrationHAProxy(t *testing.T) {
	ns := testnet.New(t)
	echoBackend(t, ns)
	dir := t.TempDir()
	conf := filepath.Join(dir, "haproxy.cfg")
	writeFile(t, conf, `global
    maxconn 64
defaults
    mode tcp
    timeout connect 2s
    timeout client 20s
    timeout server 20s
frontend fe
    bind 127.0.0.1:4200 tfo
    default_backend be
frontend plain
    bind 127.0.0.1:4201
    default_backend be
backend be
    server s1 127.0.0.1:5000
`)
	startProxy(t, ns, "haproxy", "-f", conf, "-db")
	dialEcho(t, ns, 4200)
	dialEcho(t, ns, 4201)
	f, rep := gatherDoctor(t, ns, true)
	est, withND, fastopen := 0, 0, map[uint16]int{}
	for _, p := range f.Sockets.Processes {
		if p.Comm != "haproxy" {
			continue
		}
		for _, bp := range p.ByPort {
			if bp.Port == 4200 || bp.Port == 4201 {
				est += bp.Established
				withND += bp.NoDelay
			}
		}
		for _, l := range p.Listeners {
			fastopen[l.Port] = l.FastOpenQLen
		}
	}
	if est != 2 {
		t.Fatalf("haproxy client connections: %d", est)
	}
	t.Logf("HAProxy TCP mode: %d of %d client connections have TCP_NODELAY; listener Fast Open queues %v", withND, est, fastopen)
	nd := findings(rep, "proxy-tcp-nodelay", conf)
	if (withND < est) != (len(nd) > 0) {
		t.Errorf("live sockets: %d of %d with nodelay, but findings %+v", withND, est, nd)
	}
	if fastopen[4200] == 0 || fastopen[4201] != 0 {
		t.Errorf("tfo bind line: kernel queues %v", fastopen)
	}
	fo := findings(rep, "proxy-fastopen", conf)
	if len(fo) != 1 || !strings.Contains(fo[0].Evidence["listeners"], "frontend plain 127.0.0.1:4201") || strings.Contains(fo[0].Evidence["listeners"], "4200") {
		t.Errorf("proxy-fastopen %+v", fo)
	}
}
