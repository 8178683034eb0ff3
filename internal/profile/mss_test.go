package profile

import (
	"strings"
	"testing"
)

// TestCappedUplinkClampMSS: clamp-mss is off unless set; auto, a byte
// count, or the whole setting with its target can be given; bad input is
// an error naming the --set or the file position.
func TestCappedUplinkClampMSS(t *testing.T) {
	p, _ := Builtin("capped-uplink")
	tests := []struct {
		name  string
		sets  map[string]string
		want  string
		clamp bool
		err   string
	}{
		{name: "default off", sets: map[string]string{"rate": "2mbit"}, want: "off target=4ms"},
		{name: "auto", sets: map[string]string{"rate": "2mbit", "clamp-mss": "auto"}, want: "auto target=4ms", clamp: true},
		{name: "bytes", sets: map[string]string{"rate": "2mbit", "clamp-mss": "1200"}, want: "1200 target=4ms", clamp: true},
		{name: "off", sets: map[string]string{"rate": "2mbit", "clamp-mss": "off"}, want: "off target=4ms"},
		{name: "target through the setting", sets: map[string]string{"rate": "2mbit", "mss.clamp": "auto target=3ms"}, want: "auto target=3ms", clamp: true},
		{name: "word", sets: map[string]string{"rate": "2mbit", "clamp-mss": "sometimes"}, err: "--set clamp-mss=sometimes: clamp \"sometimes\": want auto, off or a byte count"},
		{name: "too small", sets: map[string]string{"rate": "2mbit", "clamp-mss": "500"}, err: "--set clamp-mss=500: clamp 500 bytes: want 536 to 65495"},
		{name: "target in the parameter", sets: map[string]string{"rate": "2mbit", "clamp-mss": "auto target=3ms"}, err: "--set clamp-mss=auto target=3ms: want auto, off or a byte count, one word"},
		{name: "bad target", sets: map[string]string{"rate": "2mbit", "mss.clamp": "auto target=1h"}, err: "--set mss.clamp=auto target=1h: target \"1h\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Resolve(p, tt.sets)
			if tt.err != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
					t.Fatalf("Resolve = %v, want an error starting %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			s := r.settingByKey("mss.clamp")
			if s == nil || s.Value != tt.want || s.Section != "mss" || s.Name != "clamp" {
				t.Fatalf("mss.clamp = %+v, want %q", s, tt.want)
			}
			if r.ClampsMSS() != tt.clamp {
				t.Errorf("ClampsMSS = %v", r.ClampsMSS())
			}
		})
	}
}

func TestMSSSettingInFiles(t *testing.T) {
	for _, tt := range []struct{ file, err string }{
		{"[mss.clamp]\nvalue = \"sometimes\"\n", "f.toml:2:9: mss.clamp: clamp \"sometimes\""},
		{"[mss.other]\nvalue = \"auto\"\n", "unknown mss setting \"other\" (known: clamp)"},
		{"[params.c]\ntype = \"mss\"\ndefault = \"often\"\n", "parameter c default: clamp \"often\""},
	} {
		if _, err := Parse("f.toml", []byte(tt.file)); err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%q: %v, want %q", tt.file, err, tt.err)
		}
	}
	p, err := Parse("f.toml", []byte("[params.c]\ntype = \"mss\"\ndefault = \"auto\"\n[mss.clamp]\nvalue = \"${c} target=2ms\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Resolve(p, nil)
	if err != nil || len(r.Settings) != 1 || r.Settings[0].Value != "auto target=2ms" {
		t.Fatalf("Resolve = %+v, %v", r, err)
	}
}
