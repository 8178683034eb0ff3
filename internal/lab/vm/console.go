package vm

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// console parses the guest's serial console line by line: it forwards plain
// lines to the caller's writer, keeps the command's own output, and decodes
// the markers and file transfers /init prints.
type console struct {
	nonce string
	live  io.Writer // may be nil
	begin time.Time

	all    bytes.Buffer // every non-transfer line
	output bytes.Buffer // lines between START and EXIT

	firmware  bool // no kernel output seen yet
	started   bool
	bootTime  time.Duration
	exited    bool
	exitCode  int
	timedOut  bool
	guestErr  string
	done      bool
	files     map[string][]byte
	fileErrs  []string
	cur       *incomingFile
	doneEvent chan struct{}
}

type incomingFile struct {
	name string
	size int64
	sum  string
	b64  strings.Builder
}

func newConsole(nonce string, live io.Writer, begin time.Time) *console {
	return &console{nonce: nonce, live: live, begin: begin, firmware: true, files: map[string][]byte{}, doneEvent: make(chan struct{})}
}

// run reads r to EOF.
func (c *console) run(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			c.line(line)
		}
		if err != nil {
			return
		}
	}
}

func (c *console) emit(s string) {
	c.all.WriteString(s)
	if c.started && !c.exited {
		c.output.WriteString(s)
	}
	if c.live != nil && !(c.firmware && isFirmwareNoise(s)) {
		io.WriteString(c.live, s)
	}
}

// isFirmwareNoise matches what SeaBIOS prints on the serial port before the
// kernel starts; Result.Console keeps it, the live console does not.
func isFirmwareNoise(s string) bool {
	return strings.HasPrefix(s, "SeaBIOS (version") || strings.HasPrefix(s, "Booting from ROM")
}

// line handles one line including its newline (the last line may lack it).
func (c *console) line(raw string) {
	nl := strings.HasSuffix(raw, "\n")
	s := strings.TrimRight(raw, "\r\n")
	if c.cur != nil {
		if f, ok := c.marker(s, markerFileEnd); ok && len(f) == 0 {
			c.finishFile()
			return
		}
		// Only base64 belongs here; anything else (a kernel message that got
		// through) is shown and the checksum decides.
		if isBase64Line(s) {
			c.cur.b64.WriteString(s)
			return
		}
	}
	if c.firmware {
		// SeaBIOS ends "Booting from ROM.." without a newline, so the kernel's
		// first line follows on the same one.
		if rest, ok := strings.CutPrefix(ansiRE.ReplaceAllString(s, ""), "Booting from ROM.."); ok {
			c.all.WriteString("Booting from ROM..\n")
			s = rest
		}
		if strings.HasPrefix(s, "[") || strings.Contains(s, markerPrefix) {
			c.firmware = false
		}
	}
	idx := strings.Index(s, markerPrefix)
	if idx < 0 {
		c.emitLine(s, nl)
		return
	}
	// Text before a marker (a command output line without its newline) is
	// output.
	if idx > 0 {
		c.emitLine(s[:idx], true)
		s = s[idx:]
	}
	switch {
	case c.is(s, markerStart):
		c.started = true
		c.bootTime = time.Since(c.begin)
	case c.is(s, markerExit):
		f, _ := c.marker(s, markerExit)
		if len(f) == 1 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				c.exited, c.exitCode = true, n
			}
		}
	case c.is(s, markerTimeout):
		c.timedOut = true
	case c.is(s, markerError):
		f, _ := c.marker(s, markerError)
		c.guestErr = strings.Join(f, " ")
	case c.is(s, markerFileEnd):
		// An end without a start: ignore.
	case c.is(s, markerFile):
		c.startFile(s)
	case c.is(s, markerDone):
		if !c.done {
			c.done = true
			close(c.doneEvent)
		}
	default:
		c.emitLine(s, nl)
	}
}

func (c *console) emitLine(s string, nl bool) {
	if strings.IndexByte(s, 0x1b) >= 0 {
		s = ansiRE.ReplaceAllString(s, "") // SeaBIOS clears the screen
	}
	if nl {
		s += "\n"
	}
	c.emit(s)
}

// marker splits a marker line of the given kind carrying this run's nonce
// into its fields after the nonce.
func (c *console) marker(s, kind string) ([]string, bool) {
	f := strings.Fields(s)
	if len(f) < 2 || f[0] != kind || f[1] != c.nonce {
		return nil, false
	}
	return f[2:], true
}

func (c *console) is(s, kind string) bool {
	_, ok := c.marker(s, kind)
	return ok
}

func (c *console) startFile(s string) {
	// @@LOWLAT-FILE nonce size sum path (the path may contain spaces).
	parts := strings.SplitN(s, " ", 5)
	if len(parts) != 5 {
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("bad file header %q", s))
		return
	}
	size, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("bad file header %q", s))
		return
	}
	c.cur = &incomingFile{name: parts[4], size: size, sum: parts[3]}
}

func (c *console) finishFile() {
	f := c.cur
	c.cur = nil
	data, err := base64.StdEncoding.DecodeString(f.b64.String())
	switch {
	case err != nil:
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("/out/%s: base64: %v", f.name, err))
		return
	case int64(len(data)) != f.size:
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("/out/%s: got %d bytes, guest sent %d", f.name, len(data), f.size))
		return
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != f.sum {
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("/out/%s: sha256 mismatch (console corrupted the transfer)", f.name))
		return
	}
	name := path.Clean(f.name)
	if !isLocalSlashPath(name) {
		c.fileErrs = append(c.fileErrs, fmt.Sprintf("/out/%s: refusing a path outside /out", f.name))
		return
	}
	c.files[name] = data
}

// ansiRE matches terminal escape sequences: CSI sequences and ESC c.
var ansiRE = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|c)`)

func isLocalSlashPath(p string) bool {
	return p != "" && p != "." && !path.IsAbs(p) && p != ".." && !strings.HasPrefix(p, "../")
}

func isBase64Line(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if !(ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '+' || ch == '/' || ch == '=') {
			return false
		}
	}
	return true
}

// tail returns the last n lines of everything the console showed.
func (c *console) tail(n int) string {
	s := strings.TrimRight(c.all.String(), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// panicLine returns the kernel's "Kernel panic - not syncing: …" line, if the
// console showed one.
func (c *console) panicLine() string {
	all := c.all.String()
	i := strings.Index(all, "Kernel panic")
	if i < 0 {
		return ""
	}
	line, _, _ := strings.Cut(all[i:], "\n")
	return line
}
