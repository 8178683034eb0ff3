package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The example shipped for /etc/lowlat/monitor.toml loads.
func TestExampleConfig(t *testing.T) {
	c, err := LoadConfig("../../deploy/monitor/monitor.toml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != DefaultListen || c.DoctorInterval != 10*time.Minute || len(c.Targets) != 2 {
		t.Fatalf("got %+v", c)
	}
	hk := c.Targets[0]
	if hk.Name != "edge-hk" || hk.Kind != "udp" || hk.Interval != 50*time.Millisecond || hk.DSCP != 46 || hk.SLO != 30*time.Millisecond || hk.Labels["region"] != "hk" || hk.Timeout != 2*time.Second {
		t.Errorf("edge-hk: %+v", hk)
	}
	if got := strings.Join(c.LabelNames(), ","); got != "region,role" {
		t.Errorf("label names %q", got)
	}
}

// The minimal config of the issue, with defaults filled.
func TestMinimalConfig(t *testing.T) {
	c, err := ParseConfig("m.toml", []byte(`listen = "127.0.0.1:9431"
[[target]]
name = "edge-hk"
kind = "udp"
address = "203.0.113.7:7431"
interval = "50ms"
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Targets) != 1 || c.Targets[0].Size != 0 || c.Targets[0].Timeout != 2*time.Second {
		t.Errorf("%+v", c.Targets)
	}
}

// rate is the interval said as probes per second.
func TestConfigRate(t *testing.T) {
	head := "[[target]]\nname = \"a\"\nkind = \"udp\"\naddress = \"10.0.0.1:7431\"\n"
	for text, want := range map[string]time.Duration{"rate = 20\n": 50 * time.Millisecond, "rate = 0.5\n": 2 * time.Second, "rate = 100\n": 10 * time.Millisecond, "rate = 0.002\n": 500 * time.Second} {
		c, err := ParseConfig("m.toml", []byte(head+text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got := c.Targets[0].Interval; got != want {
			t.Errorf("%q: interval %s, want %s", text, got, want)
		}
	}
}

// Every refusal is one line that starts with file:line:col and names the key.
func TestConfigErrors(t *testing.T) {
	key := filepath.Join(t.TempDir(), "empty.key")
	if err := os.WriteFile(key, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	head := "[[target]]\nname = \"a\"\nkind = \"udp\"\naddress = \"10.0.0.1:7431\"\n"
	pathHead := "[[target]]\nname = \"p\"\nkind = \"path\"\naddress = \"10.0.0.1\"\n"
	for _, tt := range []struct{ name, text, want string }{
		{"syntax", "listen = \n", "m.toml:1:10: TOML syntax"},
		{"unknown top key", "listn = \"x\"\n", `m.toml:1:1: unknown key "listn"`},
		{"unknown table", "[target]\n", "m.toml:1:2: unknown table [target]"},
		{"unknown target key", head + "intervall = \"1s\"\n", `m.toml:5:1: unknown key "intervall" in [[target]]`},
		{"wrong type", head + "interval = 50\n", "m.toml:5:12: interval: want a duration string"},
		{"bad duration", head + "interval = \"50 ms\"\n", `m.toml:5:12: interval: "50 ms": want a duration`},
		{"interval too short", head + "interval = \"1ms\"\n", `m.toml:5:12: target "a": interval 1ms: must be at least 10ms`},
		{"bad kind", "[[target]]\nname = \"a\"\nkind = \"http\"\n", `m.toml:3:8: kind: "http": want one of udp, tcp, crr, icmp, path`},
		{"missing address", "[[target]]\nname = \"a\"\nkind = \"udp\"\n", `m.toml:1:3: target "a": address missing`},
		{"no port", "[[target]]\nname = \"a\"\nkind = \"tcp\"\naddress = \"10.0.0.1\"\n", `m.toml:4:11: target "a": address "10.0.0.1": want host:port`},
		{"duplicate name", head + head, `m.toml:6:8: target "a": name already used at line 1`},
		{"key twice", head + "size = 1\nsize = 2\n", "m.toml:6:1: size set twice"},
		{"bad dscp", head + "dscp = \"XX\"\n", "m.toml:5:8: dscp:"},
		{"reserved label", head + "labels = { target = \"x\" }\n", `m.toml:5:12: label "target": reserved`},
		{"bad label", head + "labels = { \"a-b\" = \"x\" }\n", `m.toml:5:12: label "a-b": want a Prometheus label name`},
		{"label not string", head + "labels = { a = 1 }\n", `m.toml:5:16: label "a": want a string`},
		{"empty key file", head + "key_file = \"" + key + "\"\n", `m.toml:5:12: target "a": key_file ` + key + " is empty"},
		{"bad listen", "listen = \"9431\"\n", `m.toml:1:10: listen: "9431": want host:port`},
		{"doctor too often", "doctor_interval = \"5s\"\n", "m.toml:1:19: doctor_interval: 5s: at least 1m"},
		{"empty autorate_dir", "autorate_dir = \"\"\n", "m.toml:1:16: autorate_dir: empty: leave the key out for /run/lowlat/autorate"},
		{"autorate_dir not string", "autorate_dir = 1\n", "m.toml:1:16: autorate_dir: want a string, got an integer"},
		{"rate and interval", head + "interval = \"1s\"\nrate = 20\n", "m.toml:6:8: rate: interval is already set at line 5: give interval or rate, not both"},
		{"interval and rate", head + "rate = 20\ninterval = \"1s\"\n", "m.toml:6:12: interval: rate is already set at line 5"},
		{"rate zero", head + "rate = 0\n", "m.toml:5:8: rate: 0: want probes per second, more than 0"},
		{"rate string", head + "rate = \"20Hz\"\n", "m.toml:5:8: rate: want a number (probes per second), got a string"},
		{"rate too high", head + "rate = 1000\n", "m.toml:5:8: rate: 1000: at most 100 probes per second (an interval of 10ms)"},
		{"rate inf", head + "rate = inf\n", "m.toml:5:8: rate: inf: want probes per second, a finite number more than 0"},
		{"rate +inf", head + "rate = +inf\n", "m.toml:5:8: rate: +inf: want probes per second, a finite number"},
		{"rate -inf", head + "rate = -inf\n", "m.toml:5:8: rate: -inf: want probes per second, a finite number"},
		{"rate nan", head + "rate = nan\n", "m.toml:5:8: rate: nan: want probes per second, a finite number"},
		{"rate absurdly high", head + "rate = 1e12\n", "m.toml:5:8: rate: 1e12: at most 100 probes per second"},
		{"rate absurdly low", head + "rate = 1e-300\n", "m.toml:5:8: rate: 1e-300: at least 0.001667 probes per second (an interval of 10m0s)"},
		{"rate too low", head + "rate = 0.001\n", "m.toml:5:8: rate: 0.001: at least 0.001667 probes per second"},
		{"rate negative", head + "rate = -5\n", "m.toml:5:8: rate: -5: want probes per second, more than 0"},
		{"rate past float64", head + "rate = 1e400\n", "m.toml:5:8: rate: 1e400: want a number"},
		{"slo negative", head + "slo_p99 = \"-1ms\"\n", `m.toml:5:11: slo_p99: "-1ms": want a duration`},
		{"path too often", pathHead + "interval = \"1s\"\n", `m.toml:5:12: target "p": interval 1s: a path target runs 10 probes per hop each time; at least 10s`},
		{"path with size", pathHead + "size = 100\n", `m.toml:5:8: target "p": size does not apply to a path target`},
		{"passive bad dscp", "[passive]\ndevices = [\"eth0\"]\ndscp = [\"EF\", \"XX\"]\n", `m.toml:3:1: dscp: dscp "XX": want EF`},
		{"passive dscp twice", "[passive]\ndevices = [\"eth0\"]\ndscp = [\"EF\", \"46\"]\n", `m.toml:1:2: [passive]: dscp EF named twice`},
		{"passive dscp without devices", "[passive]\nports = [\"tcp/443\"]\ndscp = [\"EF\"]\n", `m.toml:1:2: [passive]: dscp classes split egress`},
		{"path with icmp port", "[[target]]\nname = \"p\"\nkind = \"path\"\naddress = \"10.0.0.1:99999\"\n", `m.toml:4:11: target "p": probe path: 10.0.0.1:99999: bad port`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("m.toml", []byte(tt.text))
			if err == nil {
				t.Fatalf("accepted:\n%s", tt.text)
			}
			if !strings.HasPrefix(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q\nwant a line starting %q", err, tt.want)
			}
		})
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig("/nonexistent/monitor.toml")
	if err == nil || err.Error() != "/nonexistent/monitor.toml: read: no such file or directory" {
		t.Errorf("got %v", err)
	}
}

// A path target takes a bare host and measures every minute by default.
func TestPathTargetConfig(t *testing.T) {
	c, err := ParseConfig("m.toml", []byte("[[target]]\nname = \"edge\"\nkind = \"path\"\naddress = \"192.0.2.1\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	tg := c.Targets[0]
	pc := tg.PathConfig()
	if tg.Interval != DefaultPathInterval || tg.Timeout != time.Second || pc.Target != "192.0.2.1" || pc.Count != PathCount || pc.Interval != PathRound {
		t.Errorf("target %+v, path config %+v", tg, pc)
	}
}
