package host

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
)

// cpuHeader parses the "CPU0 CPU1 ..." header of /proc/interrupts and
// /proc/softirqs into CPU ids. The header names only online (interrupts) or
// possible (softirqs) CPUs, so ids can have gaps.
func cpuHeader(line []byte) ([]int, error) {
	var ids []int
	for f := range bytes.FieldsSeq(line) {
		n, ok := bytes.CutPrefix(f, []byte("CPU"))
		if !ok {
			return nil, fmt.Errorf("header: unexpected %q", f)
		}
		id, err := strconv.Atoi(string(n))
		if err != nil {
			return nil, fmt.Errorf("header: bad cpu %q", f)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("header: no CPU columns")
	}
	return ids, nil
}

// parseUintField parses a decimal field without allocating.
func parseUintField(f []byte) (uint64, bool) {
	if len(f) == 0 || len(f) > 20 {
		return 0, false
	}
	var n uint64
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// nextField returns the next space-separated field of s and the rest.
func nextField(s []byte) (field, rest []byte) {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	j := i
	for j < len(s) && !isSpace(s[j]) {
		j++
	}
	return s[i:j], s[j:]
}

// parseInterrupts parses /proc/interrupts. Counts are indexed by CPU id (the
// header may skip offline CPUs; their counts are 0). Rows without per-CPU
// columns (ERR, MIS) have a single count. After the counts, numbered rows carry
// the chip, an optional hwirq (with "-edge"/"-fasteoi" on x86 since 4.x, or a
// separate "Level"/"Edge" word on ARM), and the action names; 3.10 kernels glue
// the flow to the chip ("IR-PCI-MSI-edge") and print no hwirq. Named rows (NMI,
// LOC, ...) have Num -1 and their description in Desc.
func parseInterrupts(b []byte) ([]IRQ, error) {
	header, rest, _ := bytes.Cut(b, []byte("\n"))
	ids, err := cpuHeader(header)
	if err != nil {
		return nil, fmt.Errorf("/proc/interrupts: %w", err)
	}
	width := 0
	for _, id := range ids {
		width = max(width, id+1)
	}
	var irqs []IRQ
	lineNo := 1
	for line := range bytes.Lines(rest) {
		lineNo++
		line = bytes.TrimRight(line, "\n")
		label, after, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			return nil, fmt.Errorf("/proc/interrupts line %d: no label", lineNo)
		}
		label = bytes.TrimSpace(label)
		q := IRQ{Num: -1, Node: -1}
		if n, ok := parseUintField(label); ok {
			q.Num = int(n)
		} else {
			q.Name = string(label)
		}
		// Counts: up to one per header column; fewer for ERR/MIS.
		var counts []uint64
		s := after
		for len(counts) < len(ids) {
			f, r := nextField(s)
			v, ok := parseUintField(f)
			if !ok {
				break
			}
			counts = append(counts, v)
			s = r
		}
		if len(counts) == len(ids) {
			q.Counts = make([]uint64, width)
			for i, id := range ids {
				q.Counts[id] = counts[i]
			}
		} else {
			q.Counts = counts
		}
		tail := bytes.TrimSpace(s)
		if q.Num < 0 {
			q.Desc = string(tail)
			irqs = append(irqs, q)
			continue
		}
		chip, r := nextField(tail)
		q.Chip = string(chip)
		if f, r2 := nextField(r); isHWIRQ(f) {
			q.HWIRQ = string(f)
			r = r2
			if t, r3 := nextField(r); string(t) == "Level" || string(t) == "Edge" {
				q.HWIRQ += " " + string(t)
				r = r3
			}
		}
		q.Name = strings.Join(strings.Fields(string(r)), " ")
		irqs = append(irqs, q)
	}
	return irqs, nil
}

// isHWIRQ reports whether f looks like the hwirq column: digits, optionally
// followed by "-flow" ("1048576-edge", "5-fasteoi", "27").
func isHWIRQ(f []byte) bool {
	i := 0
	for i < len(f) && f[i] >= '0' && f[i] <= '9' {
		i++
	}
	if i == 0 {
		return false
	}
	if i == len(f) {
		return true
	}
	if f[i] != '-' || i+1 == len(f) {
		return false
	}
	for _, c := range f[i+1:] {
		if !(c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

// parseSoftirqs parses /proc/softirqs into name -> per-CPU counts indexed by
// CPU id.
func parseSoftirqs(b []byte) (map[string][]uint64, error) {
	header, rest, _ := bytes.Cut(b, []byte("\n"))
	ids, err := cpuHeader(header)
	if err != nil {
		return nil, fmt.Errorf("/proc/softirqs: %w", err)
	}
	width := 0
	for _, id := range ids {
		width = max(width, id+1)
	}
	out := map[string][]uint64{}
	for line := range bytes.Lines(rest) {
		label, after, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		counts := make([]uint64, width)
		s := after
		for i := range ids {
			f, r := nextField(s)
			v, ok := parseUintField(f)
			if !ok {
				return nil, fmt.Errorf("/proc/softirqs %s: bad count %q", bytes.TrimSpace(label), f)
			}
			counts[ids[i]] = v
			s = r
		}
		out[string(bytes.TrimSpace(label))] = counts
	}
	return out, nil
}

// Column positions in /proc/net/softnet_stat. 3.10 prints 10 columns
// (processed, dropped, time_squeeze, five zeros, cpu_collision, received_rps),
// 3.11 adds flow_limit_count, 5.10 adds backlog length and the CPU id, 6.x adds
// input and process queue lengths.
const (
	softnetReceivedRPS = 9
	softnetFlowLimit   = 10
	softnetCPU         = 12
)

// parseSoftnet parses /proc/net/softnet_stat (hex columns, one row per online
// CPU). Kernels before 5.10 do not print the CPU id; those rows get CPU -1 and
// the caller maps row i to the i-th online CPU.
func parseSoftnet(b []byte) ([]SoftnetCPU, error) {
	var rows []SoftnetCPU
	for line := range bytes.Lines(b) {
		var cols []uint64
		for f := range bytes.FieldsSeq(line) {
			v, err := strconv.ParseUint(string(f), 16, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/softnet_stat row %d: bad column %q", len(rows), f)
			}
			cols = append(cols, v)
		}
		if len(cols) == 0 {
			continue
		}
		if len(cols) < 3 {
			return nil, fmt.Errorf("/proc/net/softnet_stat row %d: %d columns", len(rows), len(cols))
		}
		s := SoftnetCPU{CPU: -1, Processed: cols[0], Dropped: cols[1], TimeSqueeze: cols[2]}
		if len(cols) > softnetReceivedRPS {
			s.ReceivedRPS = cols[softnetReceivedRPS]
		}
		if len(cols) > softnetFlowLimit {
			s.FlowLimitCount = cols[softnetFlowLimit]
		}
		if len(cols) > softnetCPU {
			s.CPU = int(cols[softnetCPU])
		}
		rows = append(rows, s)
	}
	return rows, nil
}

// parseSNMP parses /proc/net/snmp or /proc/net/netstat: pairs of lines, a
// header "Tcp: RtoAlgorithm RtoMin ..." then the values "Tcp: 1 200 ...".
// Every counter is kept, including ones newer than lowlat, and values may be
// negative (Tcp MaxConn is -1). Results are merged into m.
func parseSNMP(b []byte, m map[string]map[string]int64) error {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines)%2 != 0 {
		return fmt.Errorf("odd number of lines (%d)", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		hp, hrest, ok1 := bytes.Cut(lines[i], []byte(":"))
		vp, vrest, ok2 := bytes.Cut(lines[i+1], []byte(":"))
		if !ok1 || !ok2 || !bytes.Equal(hp, vp) {
			return fmt.Errorf("line %d: header and values do not pair", i+1)
		}
		names := bytes.Fields(hrest)
		vals := bytes.Fields(vrest)
		if len(names) != len(vals) {
			return fmt.Errorf("%s: %d names, %d values", hp, len(names), len(vals))
		}
		sec := m[string(hp)]
		if sec == nil {
			sec = make(map[string]int64, len(names))
			m[string(hp)] = sec
		}
		for j, n := range names {
			v, err := strconv.ParseInt(string(vals[j]), 10, 64)
			if err != nil {
				// Some counters are unsigned 64-bit and can exceed int64.
				u, uerr := strconv.ParseUint(string(vals[j]), 10, 64)
				if uerr != nil {
					return fmt.Errorf("%s %s: bad value %q", hp, n, vals[j])
				}
				v = int64(u)
			}
			sec[string(n)] = v
		}
	}
	return nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
