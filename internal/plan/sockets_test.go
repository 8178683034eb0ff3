package plan

import (
	"strings"
	"testing"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/profile"
	"github.com/lowlat/lowlat/internal/sockets"
)

func socketsProfile(t *testing.T, body string) *profile.Resolved {
	t.Helper()
	p, err := profile.Parse("gw.toml", []byte("name = \"gw\"\n"+body))
	if err != nil {
		t.Fatal(err)
	}
	r, err := profile.Resolve(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// gateway is a host whose server listens on 7000 with two connections,
// one of them with TCP_NODELAY.
func gateway(so *host.SockOps) *host.Facts {
	return &host.Facts{
		Source: "live",
		Kernel: host.Kernel{Release: "6.1.0", Major: 6, Minor: 1, Pidfd: true, CongestionAvailable: []string{"reno", "cubic"}},
		Sockets: &sockets.Summary{Live: true, Processes: []sockets.ProcessSummary{{
			PID: 10, Comm: "gateway", Established: 2, OptionsKnown: 2, NoDelay: 1,
			Listeners: []sockets.ListenerSummary{{Local: "0.0.0.0:7000", Port: 7000}},
			ByPort:    []sockets.PortSummary{{Port: 7000, Established: 2, OptionsKnown: 2, NoDelay: 1}},
		}}},
		SockOps: so,
	}
}

func rows(t *testing.T, f *host.Facts, body string) map[string]Change {
	t.Helper()
	p, err := Make(f, socketsProfile(t, body), Options{Ifaces: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Change{}
	for _, c := range p.Changes {
		out[c.Knob] = c
	}
	return out
}

func TestSocketRows(t *testing.T) {
	block := "[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\ninitcwnd = 40\n"
	r := rows(t, gateway(&host.SockOps{NetnsCookie: true}), block)
	if c := r["sockopt/port:7000/nodelay"]; c.Action != Set || c.Current != "<absent>" || c.Desired != "1" || c.Note != "" {
		t.Errorf("entry row: %+v", c)
	}
	if c := r["socket/port:7000/nodelay"]; c.Action != Set || c.Current != "2 open, 1 with nodelay" || c.Desired != "*=1" {
		t.Errorf("open connections row: %+v", c)
	}
	if c := r["sockopt/port:7000/initcwnd"]; c.Action != Set || !strings.Contains(c.Note, "new connections only") {
		t.Errorf("initcwnd row: %+v", c)
	}
	if _, ok := r["socket/port:7000/initcwnd"]; ok {
		t.Error("initcwnd has an open-connections row")
	}

	// In force already: nothing to do.
	f := gateway(&host.SockOps{NetnsCookie: true, Entries: map[string]map[string]string{"port:7000": {"nodelay": "1"}}})
	f.Sockets.Processes[0].NoDelay, f.Sockets.Processes[0].ByPort[0].NoDelay = 2, 2
	r = rows(t, f, "[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\n")
	if r["sockopt/port:7000/nodelay"].Action != OK || r["socket/port:7000/nodelay"].Action != OK {
		t.Errorf("in force: %+v", r)
	}

	// What the kernel refuses, or cannot do at all, is a row saying why.
	r = rows(t, gateway(&host.SockOps{NetnsCookie: true, Refused: map[string]string{"initcwnd": "invalid argument"}}), block)
	if c := r["sockopt/port:7000/initcwnd"]; c.Action != Skip || !strings.Contains(c.Reason, "refuses initcwnd on this kernel (invalid argument)") {
		t.Errorf("refused: %+v", c)
	}
	if r["sockopt/port:7000/nodelay"].Action != Set {
		t.Errorf("nodelay is accepted: %+v", r["sockopt/port:7000/nodelay"])
	}
	r = rows(t, gateway(&host.SockOps{Unsupported: "cgroup v2 is not mounted"}), block)
	for _, id := range []string{"sockopt/port:7000/nodelay", "socket/port:7000/nodelay", "sockopt/port:7000/initcwnd"} {
		if c := r[id]; c.Action != Skip || c.Reason != "cgroup v2 is not mounted" {
			t.Errorf("unsupported %s: %+v", id, c)
		}
	}
	r = rows(t, gateway(&host.SockOps{NetnsCookie: true}), "[[sockets]]\nmatch = \"port:7000\"\ncongestion = \"bbr\"\n")
	if c := r["sockopt/port:7000/congestion"]; c.Action != Skip || !strings.Contains(c.Reason, "bbr") {
		t.Errorf("congestion the kernel lacks: %+v", c)
	}

	// An idle port, an old kernel, no pidfd, a capture.
	f = gateway(&host.SockOps{})
	f.Kernel.Pidfd = false
	r = rows(t, f, "[[sockets]]\nmatch = \"port:7999\"\nnodelay = true\n")
	if c := r["sockopt/port:7999/nodelay"]; c.Action != Set || !strings.Contains(c.Note, "nothing listens on port 7999 now") || !strings.Contains(c.Note, "every namespace") {
		t.Errorf("idle port, no netns cookie: %+v", c)
	}
	if c := r["socket/port:7999/nodelay"]; c.Action != Skip || !strings.Contains(c.Reason, "pidfd_getfd") {
		t.Errorf("no pidfd: %+v", c)
	}
	// A cgroup: its processes' outbound connections; an unknown service.
	r = rows(t, gateway(&host.SockOps{NetnsCookie: true, Cgroups: map[string]string{"cgroup:/gw": "/sys/fs/cgroup/gw"},
		Unresolved: map[string]string{"service:no.service": "unknown service no.service"}}),
		"[[sockets]]\nmatch = \"cgroup:/gw\"\nnodelay = true\n[[sockets]]\nmatch = \"service:no.service\"\nnodelay = true\n")
	if c := r["sockopt/cgroup:/gw/nodelay"]; c.Action != Set || !strings.Contains(c.Note, "attached at its cgroup /sys/fs/cgroup/gw") {
		t.Errorf("cgroup: %+v", c)
	}
	if c := r["socket/cgroup:/gw/nodelay"]; c.Action != Set || c.Current != "?" {
		t.Errorf("cgroup's open connections: %+v", c)
	}
	if c := r["sockopt/service:no.service/nodelay"]; c.Action != Skip || c.Reason != "unknown service no.service" {
		t.Errorf("unknown service: %+v", c)
	}
	f = gateway(nil)
	f.Source = "capture:x.json"
	r = rows(t, f, block)
	if c := r["sockopt/port:7000/nodelay"]; c.Action != Set || !strings.Contains(c.Note, "probed on the host itself") {
		t.Errorf("capture: %+v", c)
	}
}

// TestSocketRowsDetachedAndBPFFS: an entry whose program a service restart
// detached is not in force, and is planned again; where nothing has mounted
// bpffs, its mount comes before the first entry to set, so a rollback (in
// reverse) unmounts it after the pins are gone.
func TestSocketRowsDetachedAndBPFFS(t *testing.T) {
	svc := "[[sockets]]\nmatch = \"service:gw.service\"\nnodelay = true\n"
	so := &host.SockOps{NetnsCookie: true, Cgroups: map[string]string{"service:gw.service": "/sys/fs/cgroup/system.slice/gw.service"},
		Entries: map[string]map[string]string{"service:gw.service": {"nodelay": "1"}}}
	if c := rows(t, gateway(so), svc)["sockopt/service:gw.service/nodelay"]; c.Action != OK || c.Current != "1" {
		t.Errorf("attached: %+v, want ok at 1", c)
	}
	so.Detached = []string{"service:gw.service"}
	if c := rows(t, gateway(so), svc)["sockopt/service:gw.service/nodelay"]; c.Action != Set || c.Current != "<detached>" || !strings.Contains(c.Note, "no longer attached") {
		t.Errorf("detached: %+v, want set from <detached>, saying why", c)
	}

	for _, tt := range []struct {
		name  string
		mount string
		want  []string
	}{
		{"bpffs mounted", "", []string{"sockopt/port:7000/nodelay", "socket/port:7000/nodelay"}},
		{"bpffs not mounted", "/sys/fs/bpf", []string{"bpffs/sys/fs/bpf", "sockopt/port:7000/nodelay", "socket/port:7000/nodelay"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Make(gateway(&host.SockOps{NetnsCookie: true, MountBPFFS: tt.mount}), socketsProfile(t, "[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\n"), Options{Ifaces: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range p.ToApply() {
				got = append(got, c.Knob)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("apply order (-want +got):\n- %v\n+ %v", tt.want, got)
			}
			if tt.mount != "" {
				if c := p.ToApply()[0]; c.Current != "<absent>" || c.Desired != "mounted" || !c.Supported {
					t.Errorf("mount row: %+v", c)
				}
			}
		})
	}
	// Nothing to set: nothing to mount.
	so = &host.SockOps{NetnsCookie: true, MountBPFFS: "/sys/fs/bpf", Entries: map[string]map[string]string{"port:7000": {"nodelay": "1"}}}
	if c, ok := rows(t, gateway(so), "[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\n")["bpffs/sys/fs/bpf"]; ok {
		t.Errorf("a mount row with nothing to set: %+v", c)
	}
}
