package host

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"strings"
)

// ParseCPUList parses a kernel CPU list such as "0-3,8,10-11" (the format of
// smp_affinity_list, cpulist, isolated, thread_siblings_list). An empty or
// blank list is no CPUs. Ranges with a stride ("0-15:2") are not produced by
// the files lowlat reads and are rejected.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("cpu list %q: bad cpu %q", s, part)
		}
		b := a
		if isRange {
			b, err = strconv.Atoi(hi)
			if err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return normCPUs(cpus), nil
}

// normCPUs sorts and de-duplicates a CPU set.
func normCPUs(cpus []int) []int {
	if len(cpus) == 0 {
		return nil
	}
	sort.Ints(cpus)
	out := cpus[:1]
	for _, c := range cpus[1:] {
		if c != out[len(out)-1] {
			out = append(out, c)
		}
	}
	return out
}

// FormatCPUList writes a CPU set the way the kernel prints lists: sorted, with
// runs of two or more as ranges ("0-3,8,10-11"). Order and duplicates in cpus
// do not matter.
func FormatCPUList(cpus []int) string {
	cs := normCPUs(append([]int(nil), cpus...))
	var b strings.Builder
	for i := 0; i < len(cs); {
		j := i
		for j+1 < len(cs) && cs[j+1] == cs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cs[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cs[j]))
		}
		i = j + 1
	}
	return b.String()
}

// ParseCPUMask parses a hex CPU bitmap in comma-separated 32-bit groups, most
// significant group first, as in rps_cpus, xps_cpus and smp_affinity
// ("ffffffff,00000003" is CPUs 0, 1 and 32-63). Groups may be shorter than eight
// digits (the kernel prints the top group only as wide as nr_cpu_ids needs).
func ParseCPUMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	groups := strings.Split(s, ",")
	var cpus []int
	for i, g := range groups {
		if g == "" || len(g) > 8 {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		v, err := strconv.ParseUint(g, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: bad group %q", s, g)
		}
		base := 32 * (len(groups) - 1 - i)
		for v != 0 {
			b := bits.TrailingZeros64(v)
			cpus = append(cpus, base+b)
			v &^= 1 << b
		}
	}
	return normCPUs(cpus), nil
}

// FormatCPUMask writes a CPU set as the kernel prints a cpumask of nbits bits
// (nr_cpu_ids): 32-bit groups of eight hex digits separated by commas, most
// significant first, the top group only as wide as nbits needs ("3" for 2 CPUs,
// "ff,ffffffff" for 40). With nbits <= 0 the width is just enough for the
// highest CPU, in whole groups. Write the nr_cpu_ids width: 6.x kernels refuse
// a mask with more groups than that (EOVERFLOW).
func FormatCPUMask(cpus []int, nbits int) string {
	maxCPU := -1
	for _, c := range cpus {
		maxCPU = max(maxCPU, c)
	}
	if nbits <= 0 {
		nbits = (maxCPU/32 + 1) * 32
	}
	nbits = max(nbits, maxCPU+1)
	topDigits := 8
	if r := nbits % 32; r != 0 {
		topDigits = (r + 3) / 4
	}
	ngroups := (nbits + 31) / 32
	words := make([]uint32, ngroups)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	var b strings.Builder
	for i := ngroups - 1; i >= 0; i-- {
		if i == ngroups-1 {
			fmt.Fprintf(&b, "%0*x", topDigits, words[i])
			continue
		}
		fmt.Fprintf(&b, ",%08x", words[i])
	}
	return b.String()
}

// ParseSelection parses a sysfs multiple-choice file such as THP's
// "always madvise [never]" or a block scheduler "none [mq-deadline] kyber",
// returning the bracketed word and every choice in order. A file without
// brackets (a plain value) is its own selection.
func ParseSelection(s string) (selected string, choices []string) {
	for f := range strings.FieldsSeq(s) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			f = f[1 : len(f)-1]
			selected = f
		}
		choices = append(choices, f)
	}
	if selected == "" && len(choices) == 1 {
		selected = choices[0]
	}
	return selected, choices
}

// ParseKernelRelease extracts major, minor and patch from a kernel release
// string (uname -r): "3.10.0-1160.el7.x86_64", "6.1.0-18-amd64",
// "5.15.0-1034-azure", "6.8-rc1". A missing patch level is 0.
func ParseKernelRelease(rel string) (major, minor, patch int, err error) {
	nums := [3]int{}
	s := strings.TrimSpace(rel)
	for i := 0; i < 3; i++ {
		j := 0
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		if j == 0 {
			if i < 2 {
				return 0, 0, 0, fmt.Errorf("kernel release %q: no version number", rel)
			}
			break
		}
		nums[i], _ = strconv.Atoi(s[:j])
		s = s[j:]
		if i < 2 {
			if !strings.HasPrefix(s, ".") {
				if i == 1 {
					break
				}
				return 0, 0, 0, fmt.Errorf("kernel release %q: no minor version", rel)
			}
			s = s[1:]
		}
	}
	return nums[0], nums[1], nums[2], nil
}

// parseKernelConfig reads a kernel .config, keeping the options for which keep
// returns true. "# CONFIG_X is not set" is recorded as "n" so that "the config
// says no" differs from "the option does not exist in this kernel". String
// values lose their quotes.
func parseKernelConfig(r io.Reader, keep func(string) bool) (map[string]string, error) {
	cfg := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "# "); ok {
			if name, ok = strings.CutSuffix(name, " is not set"); ok && keep(name) {
				cfg[name] = "n"
			}
			continue
		}
		name, val, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(name, "CONFIG_") || !keep(name) {
			continue
		}
		if uq, err := strconv.Unquote(val); err == nil {
			val = uq
		}
		cfg[name] = val
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// parseShellVars reads a sourced shell config such as /etc/default/irqbalance:
// KEY=value lines, optionally quoted and optionally prefixed with "export".
// Comments, blank lines and anything that is not a plain assignment are
// skipped; a later assignment wins, as in the shell.
func parseShellVars(b []byte) map[string]string {
	vars := map[string]string{}
	for line := range bytes.Lines(b) {
		s := strings.TrimSpace(string(line))
		if s == "" || s[0] == '#' {
			continue
		}
		s = strings.TrimPrefix(s, "export ")
		key, val, ok := strings.Cut(s, "=")
		if !ok || !isShellName(key) {
			continue
		}
		vars[key] = shellValue(val)
	}
	return vars
}

func isShellName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// shellValue unquotes a simple shell word: "x", 'x' or x, dropping a trailing
// comment after an unquoted value.
func shellValue(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 1 && (v[0] == '"' || v[0] == '\'') {
		q := v[0]
		if end := strings.IndexByte(v[1:], q); end >= 0 {
			return v[1 : 1+end]
		}
		return v[1:]
	}
	if i := strings.Index(v, " #"); i >= 0 {
		v = v[:i]
	}
	if i := strings.IndexAny(v, " \t"); i >= 0 {
		v = v[:i]
	}
	return v
}

// trimValue turns a sysfs or procfs file into its value: surrounding
// whitespace removed, inner runs of whitespace (tcp_rmem's tabs, multi-line
// files) collapsed to one space, the way profiles and knobs spell values.
func trimValue(b []byte) string {
	s := strings.TrimSpace(string(b))
	if strings.IndexAny(s, "\t\n ") < 0 {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// atoiTrim parses a decimal integer file.
func atoiTrim(b []byte) (int, error) {
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
