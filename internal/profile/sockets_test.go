package profile

import (
	"strings"
	"testing"
)

func TestSocketsBlocks(t *testing.T) {
	p, err := Parse("gw.toml", []byte(`name = "gw"
[[sockets]]
match = "port:7000"
nodelay = true
initcwnd = 40
why = "two small writes"

[[sockets]]
match = "port:7001"
congestion = "bbr"

[sysctl]
"net.core.somaxconn" = 4096
`))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range p.Settings {
		got = append(got, s.Key+"="+s.Value+" ("+s.Why+")")
	}
	want := []string{
		"sockets.port:7000/nodelay=1 (two small writes)",
		"sockets.port:7000/initcwnd=40 (two small writes)",
		"sockets.port:7001/congestion=bbr (TCP_CONGESTION: the congestion control algorithm)",
		"sysctl.net.core.somaxconn=4096 ()",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("settings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	r, err := Resolve(p, map[string]string{"sockets.port:7000/initcwnd": "20"})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Has("sockets") || r.Settings[1].Value != "20" {
		t.Errorf("--set sockets.port:7000/initcwnd=20: %+v", r.Settings[1])
	}
	if _, err := Resolve(p, map[string]string{"sockets.port:7000/initcwnd": "0"}); err == nil || !strings.Contains(err.Error(), "positive integer") {
		t.Errorf("--set initcwnd=0: %v", err)
	}
}

func TestSocketsBlockErrors(t *testing.T) {
	for body, want := range map[string]string{
		"[[sockets]]\nnodelay = true\n":                                                                             "gw.toml:2:3: [[sockets]] needs match",
		"[[sockets]]\nmatch = \"port:7000\"\n":                                                                      "sets no option",
		"[[sockets]]\nmatch = \"port:7000\"\ncork = true\n":                                                         `gw.toml:4:1: [[sockets]]: unknown socket option "cork"`,
		"[[sockets]]\nmatch = \"port:0\"\nnodelay = true\n":                                                         `gw.toml:3:9: socket selector "port:0"`,
		"[[sockets]]\nmatch = \"port:7000\"\ninitcwnd = 0\n":                                                        "gw.toml:4:12: initcwnd: want a positive integer",
		"[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\nnodelay = false\n":                                     `duplicate key "nodelay"`,
		"[[sockets]]\nmatch = \"port:7000\"\nnodelay = true\n[[sockets]]\nmatch = \"port:7000\"\nnodelay = false\n": "sockets.port:7000/nodelay is set twice",
		"[[routes]]\nx = 1\n":      "used only for [[sockets]]",
		"[sockets]\nnodelay = 1\n": "written as [[sockets]] blocks",
	} {
		_, err := Parse("gw.toml", []byte("name = \"gw\"\n"+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}
