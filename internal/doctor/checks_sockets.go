package doctor

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/sockets"
)

// The socket checks read Facts.Sockets, which the live gather fills from a
// socket audit (internal/sockets) and captures keep. A tree has no live
// sockets, only proxy configuration files: the Nagle check is not checked
// there (nor on a capture from an older lowlat), and the proxy checks judge
// the files alone, as for a host whose proxies do not run.
func init() {
	Checks = append(Checks,
		Check{ID: "nagle-risk", Needs: []string{"sockets"}, Run: checkNagle},
		Check{ID: "proxy-tcp-nodelay", Run: checkProxyNoDelay},
		Check{ID: "proxy-fastopen", Run: checkProxyFastOpen},
	)
}

// checkNagle reports each process with established connections that lack
// TCP_NODELAY and send small segments: runbook 001's 85 ms P99, which no
// sysctl can fix because the option belongs to the application.
func checkNagle(f *host.Facts, _ Options) []Finding {
	if f.Sockets == nil || !f.Sockets.Live {
		return []Finding{notCheckedRow("nagle-risk", "which connections lack TCP_NODELAY",
			"the facts have no socket audit of a running host (a tree, or a capture without one)")}
	}
	var out []Finding
	ext := f.SNMP["TcpExt"]
	for _, p := range f.Sockets.Processes {
		if p.SmallWrites == 0 || p.Runtime == "nginx" || p.Runtime == "haproxy" {
			continue // proxies are judged against their configuration below
		}
		ev := map[string]string{
			"pid":                     strconv.Itoa(p.PID),
			"comm":                    p.Comm,
			"established":             strconv.Itoa(p.Established),
			"without_nodelay":         strconv.Itoa(p.OptionsKnown - p.NoDelay),
			"small_writes_no_nodelay": strconv.Itoa(p.SmallWrites),
		}
		if p.Runtime != "" {
			ev["runtime"] = p.Runtime
		}
		for i, c := range p.Examples {
			ev["example_"+strconv.Itoa(i+1)] = fmt.Sprintf("%s -> %s: %.0f bytes/segment over %d segments, rtt %.2f ms, ato %.0f ms",
				c.Local, c.Remote, c.BytesPerSegment, c.DataSegsOut, float64(c.RTTus)/1000, float64(c.ATOus)/1000)
		}
		for _, k := range []string{"DelayedACKs", "DelayedACKLocked", "DelayedACKLost"} {
			if v, ok := ext[k]; ok {
				ev["TcpExt."+k] = strconv.FormatInt(v, 10)
			}
		}
		out = append(out, Finding{
			ID: "nagle-risk", Severity: Warn,
			Summary: fmt.Sprintf("%s (pid %d) has %d connections without TCP_NODELAY sending small segments: with the peer's delayed ACK, a write-write-read exchange stalls about 40 ms (runbook 001: P99 85 ms)",
				orDefault(p.Comm, "?"), p.PID, p.SmallWrites),
			Evidence: ev,
			Fix: "If the application cannot be changed (closed-source or vendor servers), enforce it from outside, reversibly and without a restart: " +
				"lowlat sockets --fix nodelay --port " + naglePort(&p) + " --confirm 5m (new connections through sock_ops, open ones through pidfd; 'lowlat rollback' undoes it). " +
				"In the application: " + nagleFix(p.Runtime) + "; for request/response also TCP_QUICKACK after each read. Check it at startup: lowlat sockets --pid PID --require nodelay --port PORT",
			Source: runbook001,
		})
	}
	if e := f.ErrorFor("sockets:options"); e != "" {
		out = append(out, notCheckedRow("nagle-risk", "the options of every socket", "sockets:options: "+e))
	}
	return out
}

// naglePort names the listening port of p whose accepted connections lack
// TCP_NODELAY, for the fix's command line; "PORT" when it cannot tell.
func naglePort(p *sockets.ProcessSummary) string {
	listens := map[uint16]bool{}
	for _, l := range p.Listeners {
		listens[l.Port] = true
	}
	for _, b := range p.ByPort {
		if listens[b.Port] && b.OptionsKnown > b.NoDelay {
			return strconv.Itoa(int(b.Port))
		}
	}
	return "PORT"
}

// nagleFix is runbook 001 §2's advice for the process's language.
func nagleFix(runtime string) string {
	switch runtime {
	case "go":
		return "Go sets TCP_NODELAY on every TCPConn by default, so this program turns it off (conn.SetNoDelay(false)) or gets the socket from C through cgo: remove that call, or call conn.(*net.TCPConn).SetNoDelay(true)"
	case "java":
		return "Netty: bootstrap.childOption(ChannelOption.TCP_NODELAY, true) on servers and .option(ChannelOption.TCP_NODELAY, true) on client Bootstraps; plain Java: socket.setTcpNoDelay(true)"
	case "node":
		return "Node: socket.setNoDelay(true) on each net.Socket, or net.createServer({noDelay: true})"
	case "python":
		return "Python: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1) after connect()/accept() (asyncio: transport.get_extra_info('socket'))"
	}
	return "C/C++: int one = 1; setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) right after accept()/connect() (Go does it by default; Netty ChannelOption.TCP_NODELAY; Node setNoDelay(true); Python setsockopt)"
}

// wantsFastOpen reports whether TCP Fast Open is wanted on the server side:
// the profile sets the server bit of net.ipv4.tcp_fastopen, or, without a
// profile, the host already has it on.
func wantsFastOpen(f *host.Facts, o Options) (bool, string) {
	if o.Plan != nil {
		for _, c := range o.Plan.Changes {
			if c.Knob == "sysctl/net.ipv4.tcp_fastopen" {
				v, err := strconv.ParseInt(strings.TrimSpace(c.Desired), 0, 64)
				return err == nil && v&0x2 != 0, "profile " + o.Plan.Profile + " sets net.ipv4.tcp_fastopen=" + c.Desired
			}
		}
		return false, ""
	}
	v, ok := num(f, "net.ipv4.tcp_fastopen")
	return ok && v&0x2 != 0, "net.ipv4.tcp_fastopen=" + strconv.FormatInt(v, 10)
}

// proxyProcesses returns the summaries of the processes running with a
// proxy configuration (the nginx master holds the listeners, its workers
// the connections). A configuration no process runs with has none: only
// the file itself is judged then.
func proxyProcesses(s *sockets.Summary, pc *sockets.ProxyConfig) []*sockets.ProcessSummary {
	var out []*sockets.ProcessSummary
	for _, pid := range pc.PIDs {
		if p := s.Process(pid); p != nil {
			out = append(out, p)
		}
	}
	return out
}

// liveListener finds the kernel's listener of a proxy for a configured port.
func liveListener(procs []*sockets.ProcessSummary, port uint16) (*sockets.ListenerSummary, int) {
	for _, p := range procs {
		for i := range p.Listeners {
			if p.Listeners[i].Port == port {
				return &p.Listeners[i], p.PID
			}
		}
	}
	return nil, 0
}

// livePort sums a proxy's established connections on a local port.
func livePort(procs []*sockets.ProcessSummary, port uint16) (est, known, nodelay int) {
	for _, p := range procs {
		for _, bp := range p.ByPort {
			if bp.Port == port {
				est += bp.Established
				known += bp.OptionsKnown
				nodelay += bp.NoDelay
			}
		}
	}
	return
}

func proxyUnreadable(id string, pc *sockets.ProxyConfig) Finding {
	return Finding{
		ID: id, Severity: Info, NotChecked: true,
		Summary:  fmt.Sprintf("%s configuration %s could not be read: %s", pc.Kind, pc.Path, pc.Errors[0]),
		Evidence: map[string]string{"config": pc.Path, "errors": strings.Join(pc.Errors, "; ")},
		Fix:      fmt.Sprintf("fix the configuration (%s -t checks it), then run lowlat doctor again", pc.Kind),
	}
}

func listenerName(pc *sockets.ProxyConfig, l *sockets.ProxyListener) string {
	return fmt.Sprintf("%s %s listen %s (%s:%d)", pc.Kind, l.Context, l.Addr, l.File, l.Line)
}

// checkProxyNoDelay flags nginx stream servers whose tcp_nodelay is off,
// and any TCP-mode proxy listener whose live connections lack TCP_NODELAY:
// the configuration and the kernel must agree (a configuration changed but
// not reloaded, a proxy version that behaves differently).
func checkProxyNoDelay(f *host.Facts, _ Options) []Finding {
	if f.Sockets == nil {
		return nil
	}
	var out []Finding
	for i := range f.Sockets.Proxies {
		pc := &f.Sockets.Proxies[i]
		if len(pc.Errors) > 0 {
			out = append(out, proxyUnreadable("proxy-tcp-nodelay", pc))
			continue
		}
		procs := proxyProcesses(f.Sockets, pc)
		for j := range pc.Listeners {
			l := &pc.Listeners[j]
			if l.Mode != "tcp" && (l.NoDelay == nil || *l.NoDelay) {
				continue // HTTP keeps nginx's default tcp_nodelay on
			}
			ev := map[string]string{"config": pc.Path, "listener": l.Addr, "context": l.Context, "where": fmt.Sprintf("%s:%d", l.File, l.Line)}
			if l.NoDelay != nil && !*l.NoDelay {
				out = append(out, Finding{
					ID: "proxy-tcp-nodelay", Severity: Warn,
					Summary:  listenerName(pc, l) + ": tcp_nodelay is off, so nginx leaves Nagle's algorithm on for every proxied connection: small game or RPC messages wait for the previous ACK (~40 ms with delayed ACKs)",
					Evidence: ev,
					Fix:      "tcp_nodelay on; in that server (or the stream block), then nginx -s reload (runbook 001)",
					Source:   runbook001,
				})
				continue
			}
			if !f.Sockets.Live || len(procs) == 0 {
				continue
			}
			est, known, nd := livePort(procs, l.Port)
			ev["live_connections"] = strconv.Itoa(est)
			ev["live_with_nodelay"] = fmt.Sprintf("%d of %d read", nd, known)
			if known > 0 && nd < known {
				want := "the configuration says tcp_nodelay on"
				fix := "reload the proxy so the running processes use the configuration (nginx -s reload), and check again with lowlat sockets --comm nginx --port " + strconv.Itoa(int(l.Port))
				if pc.Kind == "haproxy" {
					want = "HAProxy is expected to set TCP_NODELAY itself in TCP mode"
					fix = "check the HAProxy version's behaviour (runbook 001: it differs by mode and version); until then the clients' and servers' own sockets must set TCP_NODELAY"
				}
				out = append(out, Finding{
					ID: "proxy-tcp-nodelay", Severity: Warn,
					Summary:  fmt.Sprintf("%s: %d of %d live connections lack TCP_NODELAY although %s: configuration and kernel disagree", listenerName(pc, l), known-nd, known, want),
					Evidence: ev, Fix: fix, Source: runbook001,
				})
			}
		}
	}
	return out
}

// checkProxyFastOpen flags proxy listeners without Fast Open when TFO is
// wanted, and listeners whose kernel queue differs from the configuration.
func checkProxyFastOpen(f *host.Facts, o Options) []Finding {
	if f.Sockets == nil {
		return nil
	}
	want, why := wantsFastOpen(f, o)
	var out []Finding
	for i := range f.Sockets.Proxies {
		pc := &f.Sockets.Proxies[i]
		if len(pc.Errors) > 0 {
			out = append(out, proxyUnreadable("proxy-fastopen", pc))
			continue
		}
		procs := proxyProcesses(f.Sockets, pc)
		var missing []string
		for j := range pc.Listeners {
			l := &pc.Listeners[j]
			if l.FastOpen == 0 && want {
				missing = append(missing, fmt.Sprintf("%s %s (%s:%d)", l.Context, l.Addr, l.File, l.Line))
			}
			if !f.Sockets.Live || len(procs) == 0 {
				continue
			}
			live, pid := liveListener(procs, l.Port)
			ev := map[string]string{"config": pc.Path, "listener": l.Addr, "where": fmt.Sprintf("%s:%d", l.File, l.Line)}
			switch {
			case live == nil:
				out = append(out, Finding{
					ID: "proxy-fastopen", Severity: Info,
					Summary:  fmt.Sprintf("%s: no running %s process listens on port %d: the configuration is not the one running (not reloaded?)", listenerName(pc, l), pc.Kind, l.Port),
					Evidence: ev, Fix: "reload or restart " + pc.Kind + " so the kernel's listeners match the configuration", Source: runbook001,
				})
			case live.OptionsError != "":
				// Options unreadable (not root): nothing to compare, and
				// nothing to vouch for either.
				out = append(out, notCheckedRow("proxy-fastopen", listenerName(pc, l)+"'s Fast Open queue in the kernel", live.OptionsError))
			case l.FastOpen > 0 && live.FastOpenQLen != l.FastOpen, l.FastOpen < 0 && live.FastOpenQLen == 0, l.FastOpen == 0 && live.FastOpenQLen > 0:
				ev["config_fastopen"] = fastOpenText(l.FastOpen)
				ev["kernel_fastopen_qlen"] = strconv.Itoa(live.FastOpenQLen)
				ev["pid"] = strconv.Itoa(pid)
				out = append(out, Finding{
					ID: "proxy-fastopen", Severity: Warn,
					Summary:  fmt.Sprintf("%s: the configuration says fastopen %s but the kernel's listener has a Fast Open queue of %d: configuration and kernel disagree", listenerName(pc, l), fastOpenText(l.FastOpen), live.FastOpenQLen),
					Evidence: ev, Fix: "restart " + pc.Kind + " (listen options of an existing socket change only on restart for some versions), then lowlat sockets --comm " + pc.Kind + " --state listen",
					Source: runbook001,
				})
			}
		}
		if len(missing) > 0 {
			fix := "add fastopen=256 to each listen line (nginx: listen ... fastopen=256;), then restart nginx"
			if pc.Kind == "haproxy" {
				fix = "add tfo to each bind line (bind :PORT tfo), then reload HAProxy"
			}
			sort.Strings(missing)
			out = append(out, Finding{
				ID: "proxy-fastopen", Severity: Info,
				Summary:  fmt.Sprintf("%s %s: %d listeners without TCP Fast Open while %s: returning clients pay a full round trip before their first byte", pc.Kind, pc.Path, len(missing), why),
				Evidence: map[string]string{"config": pc.Path, "listeners": strings.Join(missing, "; ")},
				Fix:      fix, Source: runbook001,
			})
		}
	}
	return out
}

func fastOpenText(n int) string {
	switch {
	case n < 0:
		return "on (tfo)"
	case n == 0:
		return "off"
	}
	return "=" + strconv.Itoa(n)
}
