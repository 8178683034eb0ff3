package cli

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitArgs(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
		err  string
	}{
		{"udp 10.0.0.1:7431 --interval 10ms", []string{"udp", "10.0.0.1:7431", "--interval", "10ms"}, ""},
		{"  load  'host name:1'\t--upload ", []string{"load", "host name:1", "--upload"}, ""},
		{`tcp h:1 --key "a \"b\" c\\"`, []string{"tcp", "h:1", "--key", `a "b" c\`}, ""},
		{`crr h:1 --key a\ b`, []string{"crr", "h:1", "--key", "a b"}, ""},
		{`udp "`, nil, "unterminated"},
		{`udp 'x`, nil, "unterminated"},
		{`udp x\`, nil, "trailing backslash"},
		{"", nil, ""},
	} {
		got, err := splitArgs(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("splitArgs(%q) = %q, %v; want error %q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitArgs(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestParseMeasurement: a --prove value is parsed with the probe's own flags
// and checks; every mistake is one usage line naming --prove.
func TestParseMeasurement(t *testing.T) {
	env, _, _ := testEnv()
	m, err := parseMeasurement(env, "--prove", "load 10.0.0.1:7431 --upload --idle 2s --duration 8s")
	if err != nil || m.kind != "load" || m.length != 10*time.Second || m.run == nil {
		t.Fatalf("load: %+v, %v", m, err)
	}
	// icmp: toward a host that runs no reflector, with ping's own flags.
	m, err = parseMeasurement(env, "--prove", "icmp 192.0.2.1 --interval 20ms --duration 3s --socket raw")
	if err != nil || m.kind != "icmp" || m.length != 3*time.Second || m.run == nil {
		t.Fatalf("icmp: %+v, %v", m, err)
	}
	if _, err := parseMeasurement(env, "--prove", "icmp"); err == nil || err.Error() != `--prove "icmp": missing HOST` {
		t.Errorf("icmp without a host: %v", err)
	}
	for _, spec := range []string{
		"", "ping 10.0.0.1:1", "udp", "udp a:1 b:2", "udp a:1 --interval", "udp a:1 --nosuch", "udp a:1 --json",
		"udp a:1 -o x.json", "udp a:1 --interval 0s", "tcp a:1 --rate 0", "crr a:1 --parallel 0", "load a:1 --flows 0", "udp 'a:1",
		"icmp", "icmp a b", "icmp a:7431", "icmp [::1]:7431", "icmp a --socket packet", "icmp a --interval 0s", "icmp a --json", "icmp a --rate 5",
	} {
		_, err := parseMeasurement(env, "--prove", spec)
		ee, ok := err.(*ExitError)
		if !ok || ee.Code != 2 || !strings.HasPrefix(err.Error(), "--prove ") || strings.Contains(err.Error(), "\n") {
			t.Errorf("parseMeasurement(%q) = %v, want one usage line naming --prove", spec, err)
		}
	}
}
