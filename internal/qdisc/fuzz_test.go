package qdisc

import "testing"

// FuzzParse: Parse never panics, and whatever it accepts renders to a text
// that parses back to an equal spec.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"fq_codel limit 1000 target 5ms interval 100ms flows 2048 quantum 1514",
		"htb rate 1900kbit leaf { fq_codel target 8ms }",
		"mq children { 4*fq_codel; pfifo_fast @default }",
		"cake bandwidth 1900kbit besteffort nat split-gso",
		"netem delay 50ms 10ms loss random 1%",
		"prio bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1",
		"tbf rate 1950kbit burst 4096 latency 300ms",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := Parse(s)
		if err != nil {
			return
		}
		again, err := Parse(sp.String())
		if err != nil {
			t.Fatalf("%q parsed, but its rendering %q does not: %v", s, sp.String(), err)
		}
		if !Equal(again, sp) {
			t.Fatalf("round trip changed %q: %q -> %q", s, sp, again)
		}
	})
}
