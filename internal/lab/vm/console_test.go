package vm

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// transfer renders the lines /init prints for one /out file.
func transfer(nonce, name string, data []byte, sum string) string {
	if sum == "" {
		s := sha256.Sum256(data)
		sum = hex.EncodeToString(s[:])
	}
	enc := base64.StdEncoding.EncodeToString(data)
	var b strings.Builder
	fmt.Fprintf(&b, "@@LOWLAT-FILE %s %d %s %s\r\n", nonce, len(data), sum, name)
	for len(enc) > 76 {
		b.WriteString(enc[:76] + "\r\n")
		enc = enc[76:]
	}
	if enc != "" {
		b.WriteString(enc + "\r\n")
	}
	fmt.Fprintf(&b, "@@LOWLAT-FILE-END %s\r\n", nonce)
	return b.String()
}

func TestConsoleProtocol(t *testing.T) {
	const n = "0123456789abcdef"
	big := bytes.Repeat([]byte("json {\"rtt\": 1.5}\n"), 40)
	stream := "\x1bc\x1b[?7l\x1b[2JSeaBIOS (version 1.16)\r\n" +
		"Booting from ROM..\x1bc\x1b[?7l\x1b[2J[    0.000000] Linux version 6.1.0\r\n" +
		"@@LOWLAT-START " + n + "\r\n" +
		"=== RUN   TestX\r\n" +
		"@@LOWLAT-EXIT ffffffffffffffff 0\r\n" + // another nonce: plain output
		"no newline at the end@@LOWLAT-EXIT " + n + " 7\r\n" +
		transfer(n, "report.json", big, "") +
		transfer(n, "sub dir/empty.txt", nil, "") +
		transfer(n, "bad.txt", []byte("abc"), strings.Repeat("0", 64)) +
		transfer(n, "../escape", []byte("x"), "") +
		"@@LOWLAT-DONE " + n + "\r\n" +
		"[    3.0] reboot: Power down\r\n"

	var live bytes.Buffer
	c := newConsole(n, &live, time.Now())
	c.run(strings.NewReader(stream))

	if !c.started || !c.exited || c.exitCode != 7 || !c.done || c.timedOut || c.guestErr != "" {
		t.Fatalf("state: started %v exited %v code %d done %v timedOut %v err %q", c.started, c.exited, c.exitCode, c.done, c.timedOut, c.guestErr)
	}
	wantOut := "=== RUN   TestX\n@@LOWLAT-EXIT ffffffffffffffff 0\nno newline at the end\n"
	if got := c.output.String(); got != wantOut {
		t.Errorf("output = %q, want %q", got, wantOut)
	}
	if got := live.String(); !strings.HasPrefix(got, "[    0.000000] Linux version 6.1.0\n") || strings.Contains(got, "@@LOWLAT-FILE") || strings.Contains(got, "anNvbi") || !strings.HasSuffix(got, "Power down\n") {
		t.Errorf("live console = %q", got)
	}
	if all := c.all.String(); !strings.HasPrefix(all, "SeaBIOS (version 1.16)\nBooting from ROM..\n[    0.000000] Linux") {
		t.Errorf("Console lost the firmware lines: %q", all)
	}
	if got := c.files["report.json"]; !bytes.Equal(got, big) {
		t.Errorf("report.json = %q", got)
	}
	if got, ok := c.files["sub dir/empty.txt"]; !ok || len(got) != 0 {
		t.Errorf("empty file: %q, %v", got, ok)
	}
	if _, ok := c.files["bad.txt"]; ok {
		t.Error("file with a bad checksum accepted")
	}
	if _, ok := c.files["../escape"]; ok {
		t.Error("path outside /out accepted")
	}
	if errs := strings.Join(c.fileErrs, "\n"); !strings.Contains(errs, "bad.txt: sha256 mismatch") || !strings.Contains(errs, "../escape") {
		t.Errorf("fileErrs = %q", errs)
	}
	select {
	case <-c.doneEvent:
	default:
		t.Error("doneEvent not closed")
	}
}

func TestConsoleGuestErrorAndTimeout(t *testing.T) {
	const n = "n1"
	c := newConsole(n, nil, time.Now())
	c.run(strings.NewReader("insmod: can't insert 'x.ko': invalid module format\n@@LOWLAT-ERROR n1 insmod /lib/modules/x.ko failed\n@@LOWLAT-DONE n1\n"))
	if c.guestErr != "insmod /lib/modules/x.ko failed" || c.started || !c.done {
		t.Errorf("guestErr %q started %v done %v", c.guestErr, c.started, c.done)
	}
	if !strings.Contains(c.tail(5), "invalid module format") {
		t.Errorf("tail = %q", c.tail(5))
	}

	c = newConsole(n, nil, time.Now())
	c.run(strings.NewReader("@@LOWLAT-START n1\nworking\n@@LOWLAT-TIMEOUT n1\n@@LOWLAT-EXIT n1 137\n@@LOWLAT-DONE n1\n"))
	if !c.timedOut || c.exitCode != 137 || c.output.String() != "working\n" {
		t.Errorf("timedOut %v code %d output %q", c.timedOut, c.exitCode, c.output.String())
	}
}

func TestShellQuoteRoundTrip(t *testing.T) {
	bb, err := findBusybox("")
	if err != nil {
		t.Skip(err)
	}
	for _, s := range []string{"", "plain", "it's", "a b\tc", `$HOME "x" \n`, "'''", "-n"} {
		out, err := runCmd(bb, "sh", "-c", "printf '%s' "+shellQuote(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if out != s {
			t.Errorf("shellQuote(%q) came back as %q", s, out)
		}
	}
}

func TestInitScript(t *testing.T) {
	p := initParams{
		nonce: "abc", hostname: "h", release: "6.1.0-1-amd64",
		modules: []string{"/lib/modules/6.1.0-1-amd64/kernel/lib/c.ko", "/lib/modules/6.1.0-1-amd64/kernel/a.ko"},
		dir:     "/src/internal/knob", env: []string{"PATH=/usr/bin", "X=it's"},
		args: []string{"/tests/knob.test", "-test.run", "TestIntegration|TestX"}, timeout: 90 * time.Second,
	}
	s, err := initScript(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"N=abc\n",
		"insmod '/lib/modules/6.1.0-1-amd64/kernel/lib/c.ko' || lowlat_fail",
		"env -i 'PATH=/usr/bin' 'X=it'\\''s' '/tests/knob.test' '-test.run' 'TestIntegration|TestX' </dev/null &",
		"cd '/src/internal/knob' ||",
		"sleep 90;",
		"poweroff -f",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("init script lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "kernel/lib/c.ko") > strings.Index(s, "kernel/a.ko") {
		t.Error("modules not loaded in the given order")
	}
	if bb, err := findBusybox(""); err == nil {
		if out, err := runCmd(bb, "sh", "-n", "-c", s); err != nil {
			t.Errorf("busybox sh -n: %v: %s", err, out)
		}
	}
	p.env = []string{"BAD-KEY=x"}
	if _, err := initScript(p); err == nil {
		t.Error("bad environment key accepted")
	}
	p.env, p.args = nil, nil
	if _, err := initScript(p); err == nil {
		t.Error("empty command accepted")
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/root"}, []string{"HOME=/tmp", "X=1"})
	if want := "PATH=/bin HOME=/tmp X=1"; strings.Join(got, " ") != want {
		t.Errorf("mergeEnv = %v, want %s", got, want)
	}
}

func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
