package knob

import (
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// IFBName is the IFB device lowlat creates for ingress shaping of iface, named as
// sqm-scripts does ("ifb4eth0") and kept within IFNAMSIZ.
func IFBName(iface string) string {
	name := "ifb4" + iface
	if len(name) <= 15 {
		return name
	}
	var h uint32 = 2166136261
	for i := 0; i < len(iface); i++ {
		h = (h ^ uint32(iface[i])) * 16777619
	}
	return fmt.Sprintf("ifb4%s%04x", iface[:7], h&0xffff)
}

// parseQdiscID splits "eth0/root" or "eth0/ingress".
func parseQdiscID(rest string) (iface, where string, err error) {
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", fmt.Errorf("qdisc knob %q: want qdisc/<iface>/root or qdisc/<iface>/ingress", rest)
	}
	iface, where = rest[:i], rest[i+1:]
	if where != "root" && where != "ingress" {
		return "", "", fmt.Errorf("qdisc knob %q: want root or ingress, not %q", rest, where)
	}
	if len(iface) > 15 || strings.ContainsAny(iface, "/ ") {
		return "", "", fmt.Errorf("qdisc knob %q: bad interface name %q", rest, iface)
	}
	return iface, where, nil
}

// QdiscSatisfied compares qdisc values: qdisc specs by qdisc.Satisfies, and the
// ingress knob's Absent marker literally.
func QdiscSatisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	l, err1 := qdisc.Parse(live)
	d, err2 := qdisc.Parse(desired)
	if err1 != nil || err2 != nil {
		return false
	}
	return qdisc.Satisfies(l, d)
}

// QdiscSame is exact equality (qdisc.Equal): for two values read by this
// lowlat, every option, preserved attribute, size table and handle must match;
// a value journaled by an older lowlat is compared on what it recorded.
func QdiscSame(a, b string) bool {
	if a == Absent || b == Absent {
		return a == b
	}
	x, err1 := qdisc.Parse(a)
	y, err2 := qdisc.Parse(b)
	return err1 == nil && err2 == nil && qdisc.Equal(x, y)
}

// ValidateQdisc rejects a value that is not a qdisc spec lowlat can write.
func ValidateQdisc(v string, ingress bool) error {
	if v == Absent && ingress {
		return nil
	}
	s, err := qdisc.Parse(v)
	if err != nil {
		return err
	}
	if !s.Managed() {
		return fmt.Errorf("%q is marked @unmanaged: lowlat cannot recreate it exactly", v)
	}
	return nil
}
