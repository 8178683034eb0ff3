package sockets

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// tcpInfoBytes builds a struct tcp_info of length n with recognisable values.
func tcpInfoBytes(n int) []byte {
	b := make([]byte, n)
	ne := binary.NativeEndian
	put32 := func(off int, v uint32) {
		if off+4 <= n {
			ne.PutUint32(b[off:], v)
		}
	}
	put64 := func(off int, v uint64) {
		if off+8 <= n {
			ne.PutUint64(b[off:], v)
		}
	}
	b[tiFlags] = 1
	put32(tiRTT, 1500)
	put32(tiRTTVar, 300)
	put32(tiCwnd, 10)
	put32(tiSsthresh, 7)
	put32(tiUnacked, 2)
	put32(tiRetrans, 1)
	put32(tiTotalRetrans, 4)
	put32(tiSndMSS, 1448)
	put64(tiPacingRate, 1000)
	put64(tiBytesAcked, 5000)
	put32(tiDataSegsOut, 50)
	put64(tiDeliveryRate, 125000)
	put64(tiBusy, 9000)
	put64(tiRwndLimited, 100)
	put64(tiSndbufLimit, 200)
	put64(tiBytesSent, 6000)
	return b
}

// TestDecodeTCPInfoByLength: each kernel's struct size yields exactly the
// fields it carries; nothing beyond the length is invented.
func TestDecodeTCPInfoByLength(t *testing.T) {
	if DecodeTCPInfo(make([]byte, 103)) != nil {
		t.Fatal("a buffer shorter than 3.10's tcp_info must not decode")
	}
	tests := []struct {
		name                      string
		n                         int
		pacing, delivery, busy    bool
		bytesSent, dataSegs       bool
		wantBytesPerSegment       float64
		wantDeliveryBitsPerSecond uint64
	}{
		{"3.10", 104, false, false, false, false, false, 0, 0},
		{"4.1", 136, true, false, false, false, false, 0, 0},
		{"4.6", 160, true, false, false, false, true, 100, 0},
		{"4.10", 192, true, true, true, false, true, 100, 1000000},
		{"5.4", 232, true, true, true, true, true, 120, 1000000},
		{"6.18", 280, true, true, true, true, true, 120, 1000000},
		{"future", 400, true, true, true, true, true, 120, 1000000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ti := DecodeTCPInfo(tcpInfoBytes(tt.n))
			if ti.RTTus != 1500 || ti.RTTVarus != 300 || ti.Cwnd != 10 || ti.Unacked != 2 || ti.Retrans != 1 || ti.TotalRetrans != 4 || ti.Len != tt.n {
				t.Fatalf("base fields: %+v", ti)
			}
			if ti.Ssthresh == nil || *ti.Ssthresh != 7 {
				t.Errorf("ssthresh = %v", ti.Ssthresh)
			}
			if (ti.PacingRate != nil) != tt.pacing || (ti.DeliveryRate != nil) != tt.delivery || (ti.BusyUs != nil) != tt.busy ||
				(ti.RwndLimitedUs != nil) != tt.busy || (ti.SndbufLimitedUs != nil) != tt.busy ||
				(ti.BytesSent != nil) != tt.bytesSent || (ti.DataSegsOut != nil) != tt.dataSegs {
				t.Errorf("presence wrong: pacing %v delivery %v busy %v bytes_sent %v data_segs %v", ti.PacingRate != nil, ti.DeliveryRate != nil, ti.BusyUs != nil, ti.BytesSent != nil, ti.DataSegsOut != nil)
			}
			if tt.delivery && (*ti.DeliveryRate != tt.wantDeliveryBitsPerSecond || !ti.DeliveryRateAppLimited) {
				t.Errorf("delivery %d bit/s app-limited %v", *ti.DeliveryRate, ti.DeliveryRateAppLimited)
			}
			if tt.busy && (*ti.BusyUs != 9000 || *ti.RwndLimitedUs != 100 || *ti.SndbufLimitedUs != 200) {
				t.Errorf("chrono fields %d %d %d", *ti.BusyUs, *ti.RwndLimitedUs, *ti.SndbufLimitedUs)
			}
			if got := ti.BytesPerSegment(); got != tt.wantBytesPerSegment {
				t.Errorf("bytes/segment %v, want %v", got, tt.wantBytesPerSegment)
			}
		})
	}
	b := tcpInfoBytes(280)
	binary.NativeEndian.PutUint32(b[tiSsthresh:], infiniteSsthresh)
	binary.NativeEndian.PutUint64(b[tiPacingRate:], ^uint64(0))
	ti := DecodeTCPInfo(b)
	if ti.Ssthresh != nil || ti.PacingRate != nil {
		t.Errorf("infinite ssthresh / unset pacing must be absent: %v %v", ti.Ssthresh, ti.PacingRate)
	}
}

// diagMsg builds an inet_diag_msg with attributes.
func diagMsg(family, state uint8, src, dst []byte, sport, dport uint16, inode uint32, attrs ...[]byte) []byte {
	b := make([]byte, inetDiagMsgLen)
	b[0], b[1] = family, state
	binary.BigEndian.PutUint16(b[4:], sport)
	binary.BigEndian.PutUint16(b[6:], dport)
	copy(b[8:24], src)
	copy(b[24:40], dst)
	ne := binary.NativeEndian
	ne.PutUint32(b[56:], 3)
	ne.PutUint32(b[60:], 4)
	ne.PutUint32(b[64:], 1000)
	ne.PutUint32(b[68:], inode)
	for _, a := range attrs {
		b = append(b, a...)
	}
	return b
}

func rtattr(typ uint16, v []byte) []byte {
	l := 4 + len(v)
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint16(b[0:], uint16(l))
	binary.NativeEndian.PutUint16(b[2:], typ)
	copy(b[4:], v)
	return b
}

func TestParseDiagMsg(t *testing.T) {
	mem := make([]byte, 9*4)
	binary.NativeEndian.PutUint32(mem[12:], 87040)
	m := diagMsg(afInet, 1, []byte{127, 0, 0, 1}, []byte{10, 0, 0, 2}, 4001, 51000, 777,
		rtattr(inetDiagInfo, tcpInfoBytes(232)), rtattr(inetDiagCong, []byte("cubic\x00")), rtattr(inetDiagSkMeminfo, mem),
		rtattr(inetDiagMark, binary.NativeEndian.AppendUint32(nil, 0x1234)))
	var s Socket
	if err := parseDiagMsg(m, &s); err != nil {
		t.Fatal(err)
	}
	if s.Local != "127.0.0.1:4001" || s.Remote != "10.0.0.2:51000" || s.State != "established" || s.Inode != 777 || s.UID != 1000 ||
		s.RecvQ != 3 || s.SendQ != 4 || s.Congestion != "cubic" || s.TCPInfo == nil || s.Mem == nil || s.Mem.SndBuf != 87040 || s.Family != "inet" || s.Mark != 0x1234 {
		t.Fatalf("parsed %+v", s)
	}
	v6 := make([]byte, 16)
	v6[15] = 1
	if err := parseDiagMsg(diagMsg(afInet6, 10, v6, make([]byte, 16), 443, 0, 9), &s); err != nil {
		t.Fatal(err)
	}
	if s.Local != "[::1]:443" || s.State != "listen" || !s.Listener() {
		t.Fatalf("v6 %+v", s)
	}
	// Garbage: short messages, bad attribute lengths, unknown families fail
	// cleanly instead of producing a half-filled row.
	for name, b := range map[string][]byte{
		"short":    make([]byte, 40),
		"family":   diagMsg(99, 1, nil, nil, 1, 2, 3),
		"attr len": append(diagMsg(afInet, 1, nil, nil, 1, 2, 3), 0xff, 0x00, 0x02, 0x00),
	} {
		if err := parseDiagMsg(b, &Socket{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func nlmsg(typ, flags uint16, seq uint32, payload []byte) []byte {
	l := nlmsgHdrLen + len(payload)
	b := make([]byte, (l+3)&^3)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(l))
	ne.PutUint16(b[4:], typ)
	ne.PutUint16(b[6:], flags)
	ne.PutUint32(b[8:], seq)
	copy(b[nlmsgHdrLen:], payload)
	return b
}

func TestWalkNetlink(t *testing.T) {
	var n int
	count := func([]byte) error { n++; return nil }
	buf := append(nlmsg(sockDiagByFamily, 0, 1, []byte{1, 2, 3}), nlmsg(sockDiagByFamily, nlmFDumpIntr, 1, nil)...)
	buf = append(buf, nlmsg(sockDiagByFamily, 0, 9, nil)...) // stale sequence: ignored
	buf = append(buf, nlmsg(nlmsgDone, 0, 1, []byte{0, 0, 0, 0})...)
	done, intr, err := walkNetlink(buf, 1, count)
	if !done || !intr || err != nil || n != 2 {
		t.Fatalf("done %v intr %v err %v n %d", done, intr, err, n)
	}
	e := make([]byte, 4)
	binary.NativeEndian.PutUint32(e, uint32(0xffffffff)) // -EPERM
	if _, _, err := walkNetlink(nlmsg(nlmsgError, 0, 1, e), 1, count); !errors.Is(err, syscall.EPERM) {
		t.Errorf("error message: %v", err)
	}
	bad := nlmsg(sockDiagByFamily, 0, 1, nil)
	binary.NativeEndian.PutUint32(bad, 1<<20)
	if _, _, err := walkNetlink(bad, 1, count); err == nil {
		t.Error("a message longer than the buffer must fail")
	}
}

func TestSocketInode(t *testing.T) {
	for in, want := range map[string]uint64{"socket:[12345]": 12345, "socket:[0]": 0} {
		if v, ok := socketInode([]byte(in)); !ok || v != want {
			t.Errorf("%s: %d %v", in, v, ok)
		}
	}
	for _, in := range []string{"pipe:[1]", "socket:[]", "socket:[12a]", "/dev/null", "socket:[1"} {
		if _, ok := socketInode([]byte(in)); ok {
			t.Errorf("%s parsed as a socket", in)
		}
	}
}

func TestRequirements(t *testing.T) {
	if _, err := ParseRequirement("nodelay"); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRequirement("turbo"); !errors.Is(err, ErrUnknownOption) {
		t.Fatalf("unknown option: %v", err)
	}
	conn := &Socket{stateNum: stateEstablished, Options: &Options{NoDelay: false, Cork: true}}
	lst := &Socket{stateNum: stateListen, Options: &Options{FastOpenQLen: 5}}
	unknown := &Socket{stateNum: stateEstablished, OptionsError: "unknown (permission: x)"}
	nd, _ := ParseRequirement("nodelay")
	notCork, _ := ParseRequirement("!cork")
	fo, _ := ParseRequirement("fastopen")
	if nd.Applies(lst) || !nd.Applies(conn) || !fo.Applies(lst) || fo.Applies(conn) {
		t.Error("Applies: connection options on connections, fastopen on listeners")
	}
	if ok, why := nd.Check(conn); ok || why != "lacks nodelay" {
		t.Errorf("nodelay on a Nagle socket: %v %q", ok, why)
	}
	if ok, why := notCork.Check(conn); ok || why != "has cork" {
		t.Errorf("!cork on a corked socket: %v %q", ok, why)
	}
	if ok, _ := fo.Check(lst); !ok {
		t.Error("fastopen listener")
	}
	if ok, why := nd.Check(unknown); ok || !strings.HasPrefix(why, "cannot verify: unknown (permission") {
		t.Errorf("unknown options must not pass: %v %q", ok, why)
	}
}

func u32p(v uint32) *uint32 { return &v }
func u64p(v uint64) *uint64 { return &v }

func TestSummarize(t *testing.T) {
	small := &TCPInfo{SndMSS: 1448, DataSegsOut: u32p(40), BytesSent: u64p(4000), RTTus: 50, ATOus: 40000}
	big := &TCPInfo{SndMSS: 1448, DataSegsOut: u32p(40), BytesSent: u64p(40 * 1400)}
	few := &TCPInfo{SndMSS: 1448, DataSegsOut: u32p(3), BytesSent: u64p(300)}
	r := &Report{Sockets: []Socket{
		{PID: 10, Comm: "gw", stateNum: stateListen, Local: "0.0.0.0:4001", port: 4001, Options: &Options{FastOpenQLen: 16}},
		{PID: 10, Comm: "gw", stateNum: stateEstablished, port: 4001, Local: "10.0.0.1:4001", Remote: "10.0.0.9:5000", Options: &Options{}, TCPInfo: small},
		{PID: 10, Comm: "gw", stateNum: stateEstablished, port: 4001, Options: &Options{}, TCPInfo: big},
		{PID: 10, Comm: "gw", stateNum: stateEstablished, port: 4001, Options: &Options{}, TCPInfo: few},
		{PID: 10, Comm: "gw", stateNum: stateEstablished, port: 4001, Options: &Options{NoDelay: true}, TCPInfo: small},
		{PID: 11, Comm: "db", stateNum: stateEstablished, port: 5432, OptionsError: "unknown (permission: no)"},
		{PID: 0, stateNum: stateTimeWait},
	}}
	s := Summarize(r)
	if len(s.Processes) != 2 || s.Sockets != 7 {
		t.Fatalf("processes %+v", s.Processes)
	}
	gw := s.Process(10)
	if gw.Established != 4 || gw.OptionsKnown != 4 || gw.NoDelay != 1 || gw.SmallWrites != 1 || len(gw.Examples) != 1 ||
		len(gw.Listeners) != 1 || gw.Listeners[0].FastOpenQLen != 16 || len(gw.ByPort) != 1 || gw.ByPort[0].NoDelay != 1 {
		t.Fatalf("gw %+v", gw)
	}
	if ex := gw.Examples[0]; ex.BytesPerSegment != 100 || ex.Remote != "10.0.0.9:5000" {
		t.Errorf("example %+v", ex)
	}
	if s.Unread["permission"] != 1 || s.UnreadText() != "1 permission" {
		t.Errorf("unread %v", s.Unread)
	}
}

// memFS is an in-memory FS for the proxy parsers.
type memFS map[string]string

func (m memFS) ReadFile(p string) ([]byte, error) {
	if v, ok := m[p]; ok {
		return []byte(v), nil
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (m memFS) ReadDirNames(dir string) ([]string, error) {
	var out []string
	for k := range m {
		if path.Dir(k) == dir {
			out = append(out, path.Base(k))
		}
	}
	if len(out) == 0 {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: fs.ErrNotExist}
	}
	sort.Strings(out)
	return out, nil
}

func TestParseNginx(t *testing.T) {
	m := memFS{
		"/etc/nginx/nginx.conf": `
# comment { not a block
load_module modules/ngx_stream_module.so;
events { worker_connections 768; }
stream {
    tcp_nodelay off;
    include /etc/nginx/stream.d/*.conf;
    server { listen 127.0.0.1:4100 fastopen=64 reuseport; tcp_nodelay on; proxy_pass 127.0.0.1:5000; }
    server { listen 4101; proxy_pass "127.0.0.1:5000"; }
    server { listen 4102 udp; proxy_pass 127.0.0.1:5000; }
}
http {
    server { listen [::]:8080 fastopen=16; listen unix:/run/x.sock; server_name 'a b'; }
}`,
		"/etc/nginx/stream.d/game.conf": "server { listen [::1]:4103; proxy_pass 127.0.0.1:5000; }\n",
	}
	pc := ParseNginx(m, "/etc/nginx/nginx.conf")
	if len(pc.Errors) > 0 {
		t.Fatal(pc.Errors)
	}
	type row struct {
		ctx      string
		port     uint16
		fastopen int
		nodelay  bool
	}
	var got []row
	for _, l := range pc.Listeners {
		got = append(got, row{l.Context, l.Port, l.FastOpen, *l.NoDelay})
	}
	want := []row{
		{"stream", 4103, 0, false}, // included server inherits the stream block's off
		{"stream", 4100, 64, true}, // server overrides
		{"stream", 4101, 0, false}, // inherits off
		{"http", 8080, 16, true},   // http default on
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listeners (-want +got):\n%v\n%v", want, got)
	}
	if len(pc.Files) != 2 {
		t.Errorf("files %v", pc.Files)
	}
}

// TestParseNginxMalformed: a broken configuration is an error naming file
// and line, with no listeners (no half-read answers), never a crash.
func TestParseNginxMalformed(t *testing.T) {
	tests := map[string]struct {
		files memFS
		want  string
	}{
		"unclosed block": {memFS{"/n.conf": "stream {\n server { listen 1;\n"}, "/n.conf: unexpected end of file"},
		"stray brace":    {memFS{"/n.conf": "events {}\n}\n"}, "/n.conf:2: unexpected \"}\""},
		"no semicolon":   {memFS{"/n.conf": "stream { server { listen 1 } }"}, "/n.conf:1: directive \"listen\" is not terminated"},
		"open quote":     {memFS{"/n.conf": "http {\n server_name \"x;\n}"}, "/n.conf:2: unterminated quoted string"},
		"missing file":   {memFS{"/n.conf": "include /nope.conf;"}, "/nope.conf: file does not exist"},
		"no main file":   {memFS{}, "/n.conf: file does not exist"},
		"include loop":   {memFS{"/n.conf": "include /n.conf;"}, "more than"},
		"binary":         {memFS{"/n.conf": "\x00\xff{{;;"}, "/n.conf:1: unexpected"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pc := ParseNginx(tt.files, "/n.conf")
			if len(pc.Errors) == 0 || !strings.Contains(pc.Errors[0], tt.want) || len(pc.Listeners) != 0 {
				t.Errorf("errors %q listeners %v, want %q", pc.Errors, pc.Listeners, tt.want)
			}
		})
	}
}

func TestParseHAProxy(t *testing.T) {
	m := memFS{"/h.cfg": `
global
    daemon
defaults
    mode tcp
    timeout connect 1s
frontend game # comment
    bind 127.0.0.1:4200,127.0.0.1:4201 tfo
    default_backend be
frontend web
    mode http
    bind :8080
backend be
    server s1 127.0.0.1:5000 tfo
listen "admin"
    bind ipv4@0.0.0.0:9000
    bind unix@/run/h.sock
`}
	pc := ParseHAProxy(m, "/h.cfg")
	if len(pc.Errors) > 0 {
		t.Fatal(pc.Errors)
	}
	var got []string
	for _, l := range pc.Listeners {
		got = append(got, l.Context+" "+l.Addr+" "+l.Mode+" "+map[bool]string{true: "tfo", false: "-"}[l.FastOpen != 0])
	}
	want := []string{"frontend game 127.0.0.1:4200 tcp tfo", "frontend game 127.0.0.1:4201 tcp tfo", "frontend web :8080 http -", "listen admin 0.0.0.0:9000 tcp -"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q\nwant %q", got, want)
	}
	for name, cfg := range map[string]string{
		"outside section": "bind :80\n",
		"bad mode":        "frontend f\n mode udp\n",
		"no port":         "frontend f\n bind 127.0.0.1\n",
		"open quote":      "frontend \"f\n",
	} {
		pc := ParseHAProxy(memFS{"/h.cfg": cfg}, "/h.cfg")
		if len(pc.Errors) == 0 || !strings.HasPrefix(pc.Errors[0], "/h.cfg:") || len(pc.Listeners) != 0 {
			t.Errorf("%s: errors %q listeners %v", name, pc.Errors, pc.Listeners)
		}
	}
}

func TestProxyFromCmdline(t *testing.T) {
	tests := []struct {
		comm string
		argv []string
		kind string
		conf string
	}{
		{"nginx", []string{"nginx: master process /usr/sbin/nginx -g daemon on; master_process on;"}, "nginx", NginxConf},
		{"nginx", []string{"nginx: master process nginx -p /tmp/x -c conf/n.conf"}, "nginx", "/tmp/x/conf/n.conf"},
		{"nginx", []string{"nginx: worker process"}, "", ""},
		{"haproxy", []string{"haproxy", "-f", "/tmp/h.cfg", "-db"}, "haproxy", "/tmp/h.cfg"},
		{"haproxy", []string{"/usr/sbin/haproxy", "-Ws"}, "haproxy", HAProxyConf},
		{"sshd", []string{"sshd"}, "", ""},
	}
	for _, tt := range tests {
		kind, conf := ProxyFromCmdline(tt.comm, tt.argv)
		if kind != tt.kind || conf != tt.conf {
			t.Errorf("%v: %q %q, want %q %q", tt.argv, kind, conf, tt.kind, tt.conf)
		}
	}
}

func FuzzParseNginx(f *testing.F) {
	f.Add("stream { server { listen 1 fastopen=3; tcp_nodelay off; } }")
	f.Add("http { include x/*.conf; server { listen [::]:80; } }")
	f.Add("'\"{;}#\n")
	f.Fuzz(func(t *testing.T, s string) {
		pc := ParseNginx(memFS{"/n.conf": s, "/x/a.conf": s}, "/n.conf")
		if len(pc.Errors) > 0 && len(pc.Listeners) > 0 {
			t.Fatal("listeners reported from a configuration with errors")
		}
	})
}

func FuzzParseHAProxy(f *testing.F) {
	f.Add("frontend f\n mode tcp\n bind :80 tfo\n")
	f.Add("listen 'a b'\n bind 1.2.3.4:1-5\n")
	f.Fuzz(func(t *testing.T, s string) {
		pc := ParseHAProxy(memFS{"/h.cfg": s}, "/h.cfg")
		if len(pc.Errors) > 0 && len(pc.Listeners) > 0 {
			t.Fatal("listeners reported from a configuration with errors")
		}
	})
}

func FuzzDecodeDiag(f *testing.F) {
	f.Add(diagMsg(afInet, 1, []byte{127, 0, 0, 1}, []byte{127, 0, 0, 1}, 1, 2, 3, rtattr(inetDiagInfo, tcpInfoBytes(232))))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Socket
		_ = parseDiagMsg(b, &s)
		_, _, _ = walkNetlink(b, 1, func([]byte) error { return nil })
		if ti := DecodeTCPInfo(b); ti != nil && ti.Len != len(b) {
			t.Fatal("length")
		}
	})
}
