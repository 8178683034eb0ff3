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
		"fq limit 10000 horizon_drop orphan_mask 511 timer_slack 20us attr 16:0102 handle 8001:",
		"cake unlimited rtt 100ms nat wash attr 12:00000000 attr 33019:080001002a000000 handle 5:",
		"pfifo limit 99 stab 0200ffff140000000200000040000000ff07000000020000 handle 5:",
		"mq handle 7: children { pfifo limit 11 handle 71:; 2*pfifo_fast @default }",
		"htb rate 1mbit burst 15360 prio 3 overhead 20 mpu 64 atm direct_qlen 33 handle 5: leaf { pfifo limit 30 handle 15: }",
		"sfq limit 127 flows 128 depth 127 headdrop red 401f000060ea00000612000133333333 handle 5:",
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
		// Unmanaged values equal nothing, themselves included (Equal).
		if again.String() != sp.String() || (sp.Managed() && !Equal(again, sp)) {
			t.Fatalf("round trip changed %q: %q -> %q", s, sp, again)
		}
	})
}
