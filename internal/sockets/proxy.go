package sockets

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
)

// FS reads configuration files: host.Root satisfies it, so proxy configs are
// read from the live host, a captured tree or a fixture alike.
type FS interface {
	ReadFile(path string) ([]byte, error)
	ReadDirNames(path string) ([]string, error)
}

// ProxyConfig is one nginx or HAProxy configuration and the TCP listeners it
// declares.
type ProxyConfig struct {
	Kind string `json:"kind"` // "nginx" or "haproxy"
	Path string `json:"path"`
	// PIDs are the running processes started with this configuration (from
	// their command lines); empty when the configuration was only found on
	// disk.
	PIDs      []int           `json:"pids,omitempty"`
	Files     []string        `json:"files,omitempty"`
	Listeners []ProxyListener `json:"listeners,omitempty"`
	// Errors are parse errors as "FILE:LINE: message". A configuration with
	// errors has no listeners: a half-read file would give wrong answers.
	Errors []string `json:"errors,omitempty"`
}

// ProxyListener is one listen (nginx) or bind (HAProxy) line.
type ProxyListener struct {
	// Context is "stream", "http", or HAProxy's "frontend NAME" / "listen NAME".
	Context string `json:"context"`
	Addr    string `json:"addr"` // as written
	Port    uint16 `json:"port"`
	// Mode is "tcp" or "http".
	Mode     string `json:"mode"`
	FastOpen int    `json:"fastopen"` // fastopen=N (nginx), tfo (HAProxy: -1, queue from the sysctl)
	// NoDelay is nginx's effective tcp_nodelay (default on); HAProxy has no
	// such setting, so it is nil there and the live sockets tell.
	NoDelay *bool  `json:"nodelay,omitempty"`
	File    string `json:"file"`
	Line    int    `json:"line"`
}

// Default configuration paths of the Debian/RHEL packages.
const (
	NginxConf   = "/etc/nginx/nginx.conf"
	HAProxyConf = "/etc/haproxy/haproxy.cfg"
)

// Parse limits: configurations are small; a loop of includes or a huge
// glob must not make doctor hang or eat memory.
const (
	maxConfigFiles = 256
	maxIncludeNest = 16
	maxConfigBytes = 8 << 20
)

// ReadProxies reads the nginx and HAProxy configurations in use: those named
// on the command lines of running proxies (procs, cmdlines by pid) and the
// packages' default files when they exist.
func ReadProxies(fsys FS, procs []ProxyProcess) []ProxyConfig {
	type key struct{ kind, path string }
	found := map[key]*ProxyConfig{}
	var order []key
	add := func(kind, p string, pid int) {
		k := key{kind, p}
		c := found[k]
		if c == nil {
			c = &ProxyConfig{Kind: kind, Path: p}
			found[k] = c
			order = append(order, k)
		}
		if pid != 0 {
			c.PIDs = append(c.PIDs, pid)
		}
	}
	for _, p := range procs {
		add(p.Kind, p.ConfigPath, p.PID)
	}
	for _, d := range []struct{ kind, path string }{{"nginx", NginxConf}, {"haproxy", HAProxyConf}} {
		if _, ok := found[key{d.kind, d.path}]; ok {
			continue
		}
		if _, err := fsys.ReadFile(d.path); err == nil {
			add(d.kind, d.path, 0)
		}
	}
	var out []ProxyConfig
	for _, k := range order {
		c := found[k]
		var pc *ProxyConfig
		switch k.kind {
		case "nginx":
			pc = ParseNginx(fsys, k.path)
		default:
			pc = ParseHAProxy(fsys, k.path)
		}
		pc.PIDs = c.PIDs
		out = append(out, *pc)
	}
	return out
}

// ProxyProcess is a running proxy and the configuration it was started with.
type ProxyProcess struct {
	Kind       string
	PID        int
	ConfigPath string
}

// ProxyFromCmdline recognises an nginx master or HAProxy process from its
// command line and returns the configuration file it reads ("" when it is
// not one). nginx rewrites its title to "nginx: master process ARGS".
func ProxyFromCmdline(comm string, argv []string) (kind, conf string) {
	if len(argv) == 1 && strings.Contains(argv[0], " ") {
		argv = strings.Fields(argv[0])
	}
	switch comm {
	case "nginx":
		if len(argv) < 3 || argv[0] != "nginx:" || argv[1] != "master" {
			return "", "" // workers hold no path; the master names it
		}
		args := argv[3:]
		conf, prefix := "", ""
		for i := 0; i < len(args); i++ {
			switch {
			case args[i] == "-c" && i+1 < len(args):
				conf = args[i+1]
				i++
			case args[i] == "-p" && i+1 < len(args):
				prefix = args[i+1]
				i++
			}
		}
		switch {
		case conf == "":
			conf = NginxConf
		case !path.IsAbs(conf) && prefix != "":
			conf = path.Join(prefix, conf)
		}
		return "nginx", conf
	case "haproxy":
		for i := 0; i+1 < len(argv); i++ {
			if argv[i] == "-f" {
				return "haproxy", argv[i+1]
			}
		}
		return "haproxy", HAProxyConf
	}
	return "", ""
}

// ---- nginx ----

type ngxDirective struct {
	args  []string
	file  string
	line  int
	block []*ngxDirective // nil when the directive has no block
}

type ngxParser struct {
	fsys  FS
	files []string
}

// ParseNginx reads the nginx configuration at main, following includes.
func ParseNginx(fsys FS, main string) *ProxyConfig {
	pc := &ProxyConfig{Kind: "nginx", Path: main}
	p := &ngxParser{fsys: fsys}
	root, err := p.file(main, path.Dir(main), 0)
	pc.Files = p.files
	if err != nil {
		pc.Errors = append(pc.Errors, err.Error())
		return pc
	}
	pc.Listeners = nginxListeners(root)
	return pc
}

func (p *ngxParser) file(name, confDir string, depth int) ([]*ngxDirective, error) {
	if len(p.files) >= maxConfigFiles {
		return nil, fmt.Errorf("%s: more than %d configuration files", name, maxConfigFiles)
	}
	b, err := p.fsys.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, unwrapPath(err))
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", name, maxConfigBytes)
	}
	p.files = append(p.files, name)
	toks, err := ngxTokens(name, string(b))
	if err != nil {
		return nil, err
	}
	i := 0
	ds, err := p.block(toks, &i, name, confDir, depth, false)
	if err != nil {
		return nil, err
	}
	return ds, nil
}

type ngxTok struct {
	s     string
	line  int
	punct bool // ; { }
}

// ngxTokens splits nginx syntax: words, quoted strings, ; { } and # comments.
func ngxTokens(file, s string) ([]ngxTok, error) {
	var out []ngxTok
	line := 1
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == ';' || c == '{' || c == '}':
			out = append(out, ngxTok{s: string(c), line: line, punct: true})
			i++
		case c == '"' || c == '\'':
			start := line
			var b strings.Builder
			i++
			for {
				if i >= len(s) {
					return nil, fmt.Errorf("%s:%d: unterminated quoted string", file, start)
				}
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == c {
					i++
					break
				}
				if s[i] == '\n' {
					line++
				}
				b.WriteByte(s[i])
				i++
			}
			out = append(out, ngxTok{s: b.String(), line: start})
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n;{}\"'", rune(s[j])) {
				j++
			}
			out = append(out, ngxTok{s: s[i:j], line: line})
			i = j
		}
	}
	return out, nil
}

func (p *ngxParser) block(toks []ngxTok, i *int, file, confDir string, depth int, inBlock bool) ([]*ngxDirective, error) {
	var out []*ngxDirective
	var cur *ngxDirective
	for *i < len(toks) {
		t := toks[*i]
		*i++
		switch {
		case t.punct && t.s == ";":
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: unexpected \";\"", file, t.line)
			}
			if cur.args[0] == "include" {
				inc, err := p.include(cur, confDir, depth)
				if err != nil {
					return nil, err
				}
				out = append(out, inc...)
			} else {
				out = append(out, cur)
			}
			cur = nil
		case t.punct && t.s == "{":
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: unexpected \"{\"", file, t.line)
			}
			if depth+1 > 64 {
				return nil, fmt.Errorf("%s:%d: blocks nested too deep", file, t.line)
			}
			body, err := p.block(toks, i, file, confDir, depth, true)
			if err != nil {
				return nil, err
			}
			cur.block = body
			if cur.block == nil {
				cur.block = []*ngxDirective{}
			}
			out = append(out, cur)
			cur = nil
		case t.punct && t.s == "}":
			if cur != nil {
				return nil, fmt.Errorf("%s:%d: directive %q is not terminated by \";\"", file, cur.line, cur.args[0])
			}
			if !inBlock {
				return nil, fmt.Errorf("%s:%d: unexpected \"}\"", file, t.line)
			}
			return out, nil
		default:
			if cur == nil {
				cur = &ngxDirective{file: file, line: t.line}
			}
			cur.args = append(cur.args, t.s)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: unexpected end of file, expecting \";\" or \"}\"", file, cur.line)
	}
	if inBlock {
		return nil, fmt.Errorf("%s: unexpected end of file, expecting \"}\"", file)
	}
	return out, nil
}

// include expands an include directive (a path or a glob, relative to the
// directory of the main configuration file, as nginx resolves it).
func (p *ngxParser) include(d *ngxDirective, confDir string, depth int) ([]*ngxDirective, error) {
	if len(d.args) != 2 {
		return nil, fmt.Errorf("%s:%d: include takes one argument", d.file, d.line)
	}
	if depth+1 > maxIncludeNest {
		return nil, fmt.Errorf("%s:%d: includes nested more than %d deep", d.file, d.line, maxIncludeNest)
	}
	pat := d.args[1]
	if !path.IsAbs(pat) {
		pat = path.Join(confDir, pat)
	}
	var names []string
	if strings.ContainsAny(pat, "*?[") {
		dir, base := path.Split(pat)
		ents, err := p.fsys.ReadDirNames(path.Clean(dir))
		if err != nil {
			return nil, nil // nginx accepts a glob that matches nothing
		}
		sort.Strings(ents)
		for _, e := range ents {
			if ok, err := path.Match(base, e); err != nil {
				return nil, fmt.Errorf("%s:%d: include %q: %v", d.file, d.line, d.args[1], err)
			} else if ok {
				names = append(names, path.Join(dir, e))
			}
		}
	} else {
		names = []string{pat}
	}
	var out []*ngxDirective
	for _, n := range names {
		ds, err := p.file(n, confDir, depth+1)
		if err != nil {
			return nil, err
		}
		out = append(out, ds...)
	}
	return out, nil
}

// nginxListeners extracts the listen lines of stream and http servers with
// their effective tcp_nodelay (server overrides stream/http; default on).
func nginxListeners(root []*ngxDirective) []ProxyListener {
	var out []ProxyListener
	for _, top := range root {
		if top.block == nil || (top.args[0] != "stream" && top.args[0] != "http") {
			continue
		}
		ctx := top.args[0]
		mode := "tcp"
		if ctx == "http" {
			mode = "http"
		}
		outer := nodelayIn(top.block, true)
		for _, srv := range top.block {
			if srv.args[0] != "server" || srv.block == nil {
				continue
			}
			nd := nodelayIn(srv.block, outer)
			for _, l := range srv.block {
				if l.args[0] != "listen" || len(l.args) < 2 {
					continue
				}
				pl, ok := nginxListen(l, ctx, mode)
				if !ok {
					continue
				}
				v := nd
				pl.NoDelay = &v
				out = append(out, pl)
			}
		}
	}
	return out
}

func nodelayIn(ds []*ngxDirective, def bool) bool {
	v := def
	for _, d := range ds {
		if d.args[0] == "tcp_nodelay" && len(d.args) == 2 {
			v = d.args[1] == "on"
		}
	}
	return v
}

// nginxListen parses "listen ADDR [params]"; UDP and unix listeners are not
// TCP and are skipped.
func nginxListen(d *ngxDirective, ctx, mode string) (ProxyListener, bool) {
	pl := ProxyListener{Context: ctx, Addr: d.args[1], Mode: mode, File: d.file, Line: d.line}
	if strings.HasPrefix(pl.Addr, "unix:") {
		return pl, false
	}
	port, ok := listenPort(pl.Addr, 80)
	if !ok {
		return pl, false
	}
	pl.Port = port
	for _, a := range d.args[2:] {
		switch {
		case a == "udp":
			return pl, false
		case strings.HasPrefix(a, "fastopen="):
			n, err := strconv.Atoi(strings.TrimPrefix(a, "fastopen="))
			if err == nil {
				pl.FastOpen = n
			}
		}
	}
	return pl, true
}

// listenPort returns the port of "80", "*:80", "1.2.3.4:80", "[::]:80",
// "host:80", or def for an address without one.
func listenPort(a string, def uint16) (uint16, bool) {
	if n, err := strconv.ParseUint(a, 10, 16); err == nil {
		return uint16(n), true
	}
	if strings.HasPrefix(a, "[") {
		end := strings.Index(a, "]")
		if end < 0 {
			return 0, false
		}
		rest := a[end+1:]
		if rest == "" {
			return def, true
		}
		a = "x" + rest
	}
	i := strings.LastIndex(a, ":")
	if i < 0 {
		return def, true
	}
	n, err := strconv.ParseUint(a[i+1:], 10, 16)
	if err != nil {
		return 0, false
	}
	return uint16(n), true
}

// ---- HAProxy ----

// ParseHAProxy reads an HAProxy configuration file: frontend and listen
// sections' bind lines with their mode (defaults sections are inherited).
func ParseHAProxy(fsys FS, file string) *ProxyConfig {
	pc := &ProxyConfig{Kind: "haproxy", Path: file}
	b, err := fsys.ReadFile(file)
	if err != nil {
		pc.Errors = append(pc.Errors, fmt.Sprintf("%s: %v", file, unwrapPath(err)))
		return pc
	}
	if len(b) > maxConfigBytes {
		pc.Errors = append(pc.Errors, fmt.Sprintf("%s: larger than %d bytes", file, maxConfigBytes))
		return pc
	}
	pc.Files = []string{file}
	section, name := "", ""
	defMode, mode := "tcp", "tcp"
	var binds []ProxyListener
	flush := func() {
		for _, l := range binds {
			l.Mode = mode
			pc.Listeners = append(pc.Listeners, l)
		}
		binds = nil
	}
	for n, raw := range strings.Split(string(b), "\n") {
		line := n + 1
		f, err := haproxyFields(raw)
		if err != nil {
			pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: %v", file, line, err))
			continue
		}
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "global", "defaults", "frontend", "backend", "listen", "resolvers", "peers", "userlist", "mailers", "program", "http-errors", "ring", "cache":
			flush()
			if section == "defaults" {
				defMode = mode
			}
			section, name = f[0], ""
			if len(f) > 1 {
				name = f[1]
			}
			if (section == "frontend" || section == "listen" || section == "backend") && name == "" {
				pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: %s section without a name", file, line, section))
			}
			mode = defMode
			continue
		}
		if section == "" {
			pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: %q outside any section", file, line, f[0]))
			continue
		}
		switch f[0] {
		case "mode":
			if len(f) != 2 || (f[1] != "tcp" && f[1] != "http") {
				pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: mode wants tcp or http", file, line))
				continue
			}
			mode = f[1]
		case "bind":
			if section != "frontend" && section != "listen" {
				continue // peers and others bind too; not client listeners
			}
			if len(f) < 2 {
				pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: bind without an address", file, line))
				continue
			}
			tfo := 0
			for _, a := range f[2:] {
				if a == "tfo" {
					tfo = -1
				}
			}
			for _, addr := range strings.Split(f[1], ",") {
				if strings.HasPrefix(addr, "unix@") || strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "abns@") {
					continue
				}
				addr = strings.TrimPrefix(strings.TrimPrefix(addr, "ipv4@"), "ipv6@")
				port, ok := haproxyPort(addr)
				if !ok {
					pc.Errors = append(pc.Errors, fmt.Sprintf("%s:%d: bind %q: no port", file, line, addr))
					continue
				}
				binds = append(binds, ProxyListener{Context: section + " " + name, Addr: addr, Port: port, FastOpen: tfo, File: file, Line: line})
			}
		}
	}
	flush()
	if len(pc.Errors) > 0 {
		pc.Listeners = nil
	}
	return pc
}

// haproxyFields splits a configuration line into words, honouring quotes,
// backslash escapes and # comments.
func haproxyFields(s string) ([]string, error) {
	var out []string
	var b strings.Builder
	in := false
	var quote byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				b.WriteByte(c)
			}
		case c == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
			in = true
		case c == '"' || c == '\'':
			quote = c
			in = true
		case c == '#':
			i = len(s)
		case c == ' ' || c == '\t' || c == '\r':
			if in {
				out = append(out, b.String())
				b.Reset()
				in = false
			}
		default:
			b.WriteByte(c)
			in = true
		}
	}
	if quote != 0 {
		return nil, errors.New("unterminated quote")
	}
	if in {
		out = append(out, b.String())
	}
	return out, nil
}

// haproxyPort returns the port of "ADDR:PORT" or ":PORT" (a range's first).
func haproxyPort(a string) (uint16, bool) {
	i := strings.LastIndex(a, ":")
	if i < 0 {
		return 0, false
	}
	p := a[i+1:]
	if j := strings.Index(p, "-"); j >= 0 {
		p = p[:j]
	}
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, false
	}
	return uint16(n), true
}

// unwrapPath drops the path of a *fs.PathError (the caller names it).
func unwrapPath(err error) error {
	var pe interface{ Unwrap() error }
	if errors.As(err, &pe) {
		if u := pe.Unwrap(); u != nil {
			return u
		}
	}
	return err
}
