package profile

import "testing"

// FuzzParse: any file either parses or yields an error with a position; it
// never panics.
func FuzzParse(f *testing.F) {
	for _, n := range BuiltinNames() {
		b, _ := builtinFS.ReadFile("builtin/" + n + ".toml")
		f.Add(b)
	}
	f.Add([]byte("[sysctl]\n\"net.core.somaxconn\" = 1\n"))
	f.Add([]byte("extends = \"game-udp\"\n[qdisc.root]\nvalue = \"fq_codel\"\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse("fuzz.toml", b)
		if err != nil {
			return
		}
		if p.Extends == "" {
			Resolve(p, nil)
		}
	})
}
