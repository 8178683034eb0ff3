package qdisc

import (
	"fmt"
	"strconv"
	"strings"
)

// Special parent handles (linux/pkt_sched.h).
const (
	HandleRoot    uint32 = 0xFFFFFFFF
	HandleIngress uint32 = 0xFFFFFFF1
)

// MakeHandle builds major:minor.
func MakeHandle(major, minor uint16) uint32 { return uint32(major)<<16 | uint32(minor) }

// FormatHandle renders a handle as tc does: "8001:" for a qdisc (minor 0),
// "8001:3" for a class, "root" and "ingress" for the special parents.
func FormatHandle(h uint32) string {
	switch h {
	case HandleRoot:
		return "root"
	case HandleIngress:
		return "ingress"
	}
	major, minor := h>>16, h&0xffff
	if minor == 0 {
		return fmt.Sprintf("%x:", major)
	}
	return fmt.Sprintf("%x:%x", major, minor)
}

// ParseHandle is the inverse of FormatHandle.
func ParseHandle(s string) (uint32, error) {
	switch s {
	case "root":
		return HandleRoot, nil
	case "ingress":
		return HandleIngress, nil
	}
	maj, min, ok := strings.Cut(s, ":")
	if !ok {
		return 0, fmt.Errorf("bad handle %q (want major:minor in hex)", s)
	}
	var a, b uint64
	var err error
	if maj != "" {
		if a, err = strconv.ParseUint(maj, 16, 16); err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
	}
	if min != "" {
		if b, err = strconv.ParseUint(min, 16, 16); err != nil {
			return 0, fmt.Errorf("bad handle %q", s)
		}
	}
	return uint32(a)<<16 | uint32(b), nil
}
