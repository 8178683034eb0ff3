package doctor

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/plan"
	"github.com/lowlat/lowlat/internal/sockets"
)

func boolp(b bool) *bool { return &b }

// socketFacts is a host with a Nagle-prone Java process, a NODELAY process
// and an nginx whose configuration disagrees with its kernel sockets.
func socketFacts() *host.Facts {
	return &host.Facts{
		Sysctls: map[string]string{"net.ipv4.tcp_fastopen": "1"},
		SNMP:    map[string]map[string]int64{"TcpExt": {"DelayedACKs": 1234}},
		Sockets: &sockets.Summary{Live: true, Processes: []sockets.ProcessSummary{
			{PID: 10, Comm: "java", Runtime: "java", Established: 5, OptionsKnown: 5, NoDelay: 1, SmallWrites: 3,
				Listeners: []sockets.ListenerSummary{{Local: "0.0.0.0:4001", Port: 4001}},
				ByPort:    []sockets.PortSummary{{Port: 4001, Established: 5, OptionsKnown: 5, NoDelay: 1}},
				Examples:  []sockets.ConnSummary{{Local: "10.0.0.1:4001", Remote: "10.0.0.9:5000", BytesPerSegment: 96, DataSegsOut: 400, ATOus: 40000}}},
			{PID: 11, Comm: "gateway", Runtime: "go", Established: 5, OptionsKnown: 5, NoDelay: 5},
			{PID: 20, Comm: "nginx", Runtime: "nginx", ConfigPath: "/etc/nginx/nginx.conf",
				Listeners: []sockets.ListenerSummary{{Local: "0.0.0.0:4100", Port: 4100, FastOpenQLen: 16}}},
			{PID: 21, Comm: "nginx", Runtime: "nginx", SmallWrites: 2, Established: 2, OptionsKnown: 2,
				ByPort: []sockets.PortSummary{{Port: 4100, Established: 2, OptionsKnown: 2, NoDelay: 0}}},
		}, Proxies: []sockets.ProxyConfig{{
			Kind: "nginx", Path: "/etc/nginx/nginx.conf", PIDs: []int{20, 21},
			Listeners: []sockets.ProxyListener{
				{Context: "stream", Addr: "4100", Port: 4100, Mode: "tcp", FastOpen: 64, NoDelay: boolp(true), File: "/etc/nginx/nginx.conf", Line: 12},
				{Context: "stream", Addr: "4101", Port: 4101, Mode: "tcp", NoDelay: boolp(false), File: "/etc/nginx/nginx.conf", Line: 13},
			},
		}}},
	}
}

func TestSocketChecks(t *testing.T) {
	rep := Run(socketFacts(), Options{})
	by := map[string][]Finding{}
	for _, f := range rep.Findings {
		by[f.ID] = append(by[f.ID], f)
	}
	ng := by["nagle-risk"]
	if len(ng) != 1 || ng[0].Evidence["pid"] != "10" || !strings.Contains(ng[0].Fix, "ChannelOption.TCP_NODELAY") || ng[0].Evidence["TcpExt.DelayedACKs"] != "1234" {
		t.Fatalf("nagle-risk (only the Java process; nginx is judged by its config): %+v", ng)
	}
	// When the application cannot be changed, lowlat's own fix comes first,
	// on the port whose connections lack the option.
	if !strings.HasPrefix(ng[0].Fix, "If the application cannot be changed") || !strings.Contains(ng[0].Fix, "lowlat sockets --fix nodelay --port 4001 ") {
		t.Errorf("nagle-risk fix: %q", ng[0].Fix)
	}
	nd := by["proxy-tcp-nodelay"]
	if len(nd) != 2 {
		t.Fatalf("proxy-tcp-nodelay: %+v", nd)
	}
	var off, disagree bool
	for _, f := range nd {
		off = off || strings.Contains(f.Summary, "listen 4101") && strings.Contains(f.Summary, "tcp_nodelay is off")
		disagree = disagree || strings.Contains(f.Summary, "listen 4100") && strings.Contains(f.Summary, "2 of 2 live connections lack TCP_NODELAY")
	}
	if !off || !disagree {
		t.Errorf("proxy-tcp-nodelay: %+v", nd)
	}
	fo := by["proxy-fastopen"]
	var qlen, notRunning bool
	for _, f := range fo {
		qlen = qlen || f.Evidence["config_fastopen"] == "=64" && f.Evidence["kernel_fastopen_qlen"] == "16"
		notRunning = notRunning || strings.Contains(f.Summary, "no running nginx process listens on port 4101")
		if strings.Contains(f.Summary, "without TCP Fast Open") {
			t.Errorf("TFO not wanted (tcp_fastopen=1, no profile), yet: %s", f.Summary)
		}
	}
	if !qlen || !notRunning {
		t.Errorf("proxy-fastopen: %+v", fo)
	}

	// A profile that wants server-side TFO flags the listener without it.
	p := &plan.Plan{Profile: "realtime-tcp", Changes: []plan.Change{{Knob: "sysctl/net.ipv4.tcp_fastopen", Desired: "3"}}}
	rep = Run(socketFacts(), Options{Plan: p})
	found := false
	for _, f := range rep.Findings {
		if f.ID == "proxy-fastopen" && strings.Contains(f.Summary, "1 listeners without TCP Fast Open while profile realtime-tcp") && strings.Contains(f.Evidence["listeners"], "stream 4101") {
			found = true
		}
	}
	if !found {
		t.Errorf("profile wanting TFO: %+v", rep.Findings)
	}
}

// TestSocketChecksWithoutData: facts without a socket audit (fixtures, old
// captures) and broken proxy configurations never crash the checks; the
// Nagle check is then not checked (it cannot pass without sockets), and
// the proxy checks, with no configuration file, have nothing to judge.
func TestSocketChecksWithoutData(t *testing.T) {
	for _, c := range []func(*host.Facts, Options) []Finding{checkProxyNoDelay, checkProxyFastOpen} {
		if got := c(&host.Facts{}, Options{}); len(got) != 0 {
			t.Errorf("no socket data: %+v", got)
		}
	}
	for _, f := range []*host.Facts{{}, {Sockets: &sockets.Summary{Proxies: []sockets.ProxyConfig{{Kind: "nginx", Path: "/n.conf"}}}}} {
		if got := checkNagle(f, Options{}); len(got) != 1 || !got[0].NotChecked {
			t.Errorf("nagle-risk without a live socket audit: %+v, want one not-checked row", got)
		}
	}
	f := &host.Facts{Sockets: &sockets.Summary{Proxies: []sockets.ProxyConfig{{Kind: "nginx", Path: "/n.conf", Errors: []string{"/n.conf:3: unexpected \"}\""}}}}}
	got := checkProxyNoDelay(f, Options{})
	if len(got) != 1 || !got[0].NotChecked || !strings.Contains(got[0].Summary, "/n.conf:3") {
		t.Errorf("malformed config: %+v", got)
	}
}
