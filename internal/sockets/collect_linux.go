package sockets

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Collect audits every TCP socket of the calling thread's network namespace
// and condenses it for host.Facts: per-process summaries, the runtimes of
// processes that need advice, and the nginx/HAProxy configurations in use
// (read through fsys). It never fails: what could not be read is in the
// Summary.
func Collect(ctx context.Context, fsys FS) *Summary {
	rep, err := Audit(ctx, Config{})
	if err != nil {
		sum := &Summary{Live: true, Error: err.Error()}
		sum.Proxies = ReadProxies(fsys, nil)
		return sum
	}
	sum := Summarize(rep)
	var procs []ProxyProcess
	masters := map[int]string{} // pid -> configuration
	var workers []*ProcessSummary
	for i := range sum.Processes {
		p := &sum.Processes[i]
		dir := "/proc/" + strconv.Itoa(p.PID)
		if kind, conf := ProxyFromCmdline(p.Comm, readCmdline(dir)); kind != "" && conf != "" {
			p.Runtime, p.ConfigPath = kind, conf
			masters[p.PID] = conf
			procs = append(procs, ProxyProcess{Kind: kind, PID: p.PID, ConfigPath: conf})
			continue
		}
		if p.Comm == "nginx" || p.Comm == "haproxy" {
			workers = append(workers, p)
			continue
		}
		if p.SmallWrites > 0 {
			p.Runtime = DetectRuntime(dir)
		}
	}
	// Workers (nginx's hold the connections) belong to their master's
	// configuration.
	for _, p := range workers {
		p.Runtime = p.Comm
		if conf, ok := masters[readPPid("/proc/"+strconv.Itoa(p.PID))]; ok {
			p.ConfigPath = conf
			procs = append(procs, ProxyProcess{Kind: p.Comm, PID: p.PID, ConfigPath: conf})
		}
	}
	sum.Proxies = ReadProxies(fsys, procs)
	return sum
}

func readCmdline(dir string) []string {
	b, err := os.ReadFile(dir + "/cmdline")
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
}

// DetectRuntime guesses the language runtime of the process at /proc/PID
// dir from its executable: the name for interpreters and VMs, Go's build
// information for Go binaries, "" otherwise (C, C++, unknown).
func DetectRuntime(dir string) string {
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		return ""
	}
	base := strings.TrimSuffix(filepath.Base(exe), " (deleted)")
	switch {
	case base == "java":
		return "java"
	case base == "node" || base == "nodejs":
		return "node"
	case strings.HasPrefix(base, "python"):
		return "python"
	case base == "nginx" || base == "haproxy":
		return base
	}
	if _, err := buildinfo.ReadFile(dir + "/exe"); err == nil {
		return "go"
	}
	return ""
}

// readPPid returns the parent pid of the process at dir, or 0.
func readPPid(dir string) int {
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// Connections lists the established TCP connections of the caller's network
// namespace with their tcp_info, from one inet_diag dump per family and
// nothing else (no process scan, no socket options): cheap enough to run five
// times a second, for autorate's passive signal.
func Connections() ([]Socket, error) {
	keep := func(s *Socket) bool { return s.stateNum == stateEstablished }
	var out []Socket
	for _, fam := range []uint8{afInet, afInet6} {
		var err error
		out, _, err = dumpTCP(fam, keep, out)
		if err != nil && !errors.Is(err, errDumpInterrupted) && fam == afInet {
			return nil, err
		}
	}
	return out, nil
}
