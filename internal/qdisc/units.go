package qdisc

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Units follow tc(8): times in us/ms/s, rates in bit/kbit/mbit/gbit (decimal,
// bits per second), sizes in bytes with optional k/m suffixes (binary, as tc does
// for "kb" and "mb"). Canonical strings are what Format* return, so a value read
// back from the kernel and the same value written in a profile compare equal.

// ParseTime parses "5ms", "100us", "1s", "1.5ms" (a bare number is microseconds,
// as in tc).
func ParseTime(s string) (time.Duration, error) {
	num, unit := splitUnit(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad time %q (want e.g. 5ms, 300us, 1s)", s)
	}
	var mult float64
	switch strings.ToLower(unit) {
	case "", "us", "usec", "usecs":
		mult = float64(time.Microsecond)
	case "ms", "msec", "msecs":
		mult = float64(time.Millisecond)
	case "s", "sec", "secs":
		mult = float64(time.Second)
	default:
		return 0, fmt.Errorf("bad time %q: unknown unit %q (want us, ms or s)", s, unit)
	}
	d := v * mult
	if d > float64(math.MaxUint32)*float64(time.Microsecond) {
		return 0, fmt.Errorf("bad time %q: too large", s)
	}
	return time.Duration(math.Round(d/1000) * 1000), nil
}

// FormatTime renders d in the largest unit that represents it exactly.
func FormatTime(d time.Duration) string {
	us := d.Microseconds()
	switch {
	case us != 0 && us%1_000_000 == 0:
		return strconv.FormatInt(us/1_000_000, 10) + "s"
	case us != 0 && us%1000 == 0:
		return strconv.FormatInt(us/1000, 10) + "ms"
	default:
		return strconv.FormatInt(us, 10) + "us"
	}
}

// ParseRate parses a rate into bits per second: "2mbit", "1950kbit", "10gbit",
// "100000bit", "2Mbit". A bare number is bits per second. Byte-based "bps" units
// are accepted as tc does (kbps = kilobytes/s).
func ParseRate(s string) (uint64, error) {
	num, unit := splitUnit(s)
	mult := map[string]uint64{
		"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12,
		"bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9,
		"k": 1e3, "m": 1e6, "g": 1e9,
	}[strings.ToLower(unit)]
	if mult == 0 {
		if _, err := strconv.ParseFloat(num, 64); err != nil {
			return 0, fmt.Errorf("bad rate %q (want e.g. 2mbit, 1950kbit)", s)
		}
		return 0, fmt.Errorf("bad rate %q: unknown unit %q (want bit, kbit, mbit, gbit)", s, unit)
	}
	// Whole numbers exactly (a rate read from the kernel can need all 64 bits).
	if n, err := strconv.ParseUint(num, 10, 64); err == nil {
		if n > maxRate/mult {
			return 0, fmt.Errorf("bad rate %q: too large", s)
		}
		return n * mult, nil
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad rate %q (want e.g. 2mbit, 1950kbit)", s)
	}
	r := v * float64(mult)
	if r >= maxRate {
		return 0, fmt.Errorf("bad rate %q: too large", s)
	}
	return uint64(math.Round(r)), nil
}

// maxRate is the largest rate in bits per second: the kernel keeps rates in
// bytes per second in 64 bits.
const maxRate = math.MaxUint64 / 8

// FormatRate renders bits per second in the largest decimal unit that is exact.
func FormatRate(bps uint64) string {
	switch {
	case bps != 0 && bps%1e9 == 0:
		return strconv.FormatUint(bps/1e9, 10) + "gbit"
	case bps != 0 && bps%1e6 == 0:
		return strconv.FormatUint(bps/1e6, 10) + "mbit"
	case bps != 0 && bps%1e3 == 0:
		return strconv.FormatUint(bps/1e3, 10) + "kbit"
	default:
		return strconv.FormatUint(bps, 10) + "bit"
	}
}

// ParseSize parses a size in bytes: "4096", "4k"/"4kb" (4096), "32m"/"32mb",
// "1g". Like tc, "kbit"/"mbit" sizes are bits.
func ParseSize(s string) (uint64, error) {
	num, unit := splitUnit(s)
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("bad size %q (want bytes, e.g. 4096 or 32mb)", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
		"kbit": 1024 / 8.0, "mbit": (1 << 20) / 8.0, "gbit": (1 << 30) / 8.0,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("bad size %q: unknown unit %q (want b, kb, mb, gb)", s, unit)
	}
	r := v * mult
	if r > math.MaxUint32*float64(1<<16) {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return uint64(math.Round(r)), nil
}

// FormatSize renders bytes as a plain integer (canonical, unambiguous).
func FormatSize(b uint64) string { return strconv.FormatUint(b, 10) }

func splitUnit(s string) (num, unit string) {
	s = strings.TrimSpace(s)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') && s[i-1] != '.' {
		i--
	}
	return s[:i], s[i:]
}
