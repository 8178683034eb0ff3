package probe

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseDSCP reads a DSCP name (EF, VA, CS0..CS7, AF11..AF43, case-insensitive)
// or a number 0..63 (decimal, or 0x.. hex).
func ParseDSCP(s string) (int, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	switch {
	case u == "" || u == "0":
		return 0, nil
	case u == "EF":
		return 46, nil
	case u == "VA":
		return 44, nil
	case len(u) == 3 && strings.HasPrefix(u, "CS") && u[2] >= '0' && u[2] <= '7':
		return int(u[2]-'0') * 8, nil
	case len(u) == 4 && strings.HasPrefix(u, "AF") && u[2] >= '1' && u[2] <= '4' && u[3] >= '1' && u[3] <= '3':
		return int(u[2]-'0')*8 + int(u[3]-'0')*2, nil
	}
	n, err := strconv.ParseInt(s, 0, 32)
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("dscp %q: want EF, CS0..CS7, AF11..AF43, VA or a number 0..63", s)
	}
	return int(n), nil
}

// DSCPName names a DSCP value the way ParseDSCP reads it: EF, VA, CSn, AFxy,
// or the number for values without a name.
func DSCPName(d int) string {
	switch {
	case d == 46:
		return "EF"
	case d == 44:
		return "VA"
	case d >= 0 && d < 64 && d%8 == 0:
		return "CS" + strconv.Itoa(d/8)
	case d/8 >= 1 && d/8 <= 4 && d%8 >= 2 && d%8 <= 6 && d%2 == 0:
		return "AF" + strconv.Itoa(d/8) + strconv.Itoa(d%8/2)
	}
	return strconv.Itoa(d)
}

// DSCPReport says how the probes were marked and how the marking came back.
// The reflector answers every probe with the DSCP it arrived with, and says in
// the reply which one that was, so a rewrite on the way out shows in
// ReflectorReceived and one on the way back in Received.
type DSCPReport struct {
	// Sent is the marking the probes left with.
	Sent string `json:"sent"`
	// ReflectorReceived is the marking the probes reached the reflector with
	// (most common value; "" when the reflector did not report it).
	ReflectorReceived string `json:"reflector_received"`
	// Received is the marking the replies arrived here with (most common
	// value; "" when the kernel did not report it).
	Received string `json:"received"`
	// Changed counts replies whose marking, at either end, was not Sent.
	Changed int64 `json:"changed"`
}

// dscpCounts tallies markings by value.
type dscpCounts [64]int64

// mode returns the most common value's name, or "" when nothing was counted.
func (c *dscpCounts) mode() string {
	best, n := -1, int64(0)
	for v, k := range c {
		if k > n {
			best, n = v, k
		}
	}
	if best < 0 {
		return ""
	}
	return DSCPName(best)
}
