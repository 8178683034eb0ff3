package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
)

// cpufreqKnob is the scaling governor of every CPU that has cpufreq:
// "cpufreq/governor". Its value is one governor when all CPUs agree
// ("performance"), else each group of CPUs with theirs
// ("0-3:powersave;4-7:performance"), so a rollback restores a mixed setting
// exactly. Writing one word sets every CPU.
type cpufreqKnob struct{ sys *System }

func newCpufreq(sys *System, rest string) (Knob, error) {
	if rest != "governor" {
		return nil, fmt.Errorf("cpufreq knob %q: want cpufreq/governor", rest)
	}
	return &cpufreqKnob{sys: sys}, nil
}

func (k *cpufreqKnob) ID() string { return "cpufreq/governor" }

// governorFiles maps CPU ids to their scaling_governor file.
func (k *cpufreqKnob) governorFiles() (map[int]string, error) {
	base := k.sys.path("/sys/devices/system/cpu")
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("cpufreq: %w", wrapNotExist(err))
	}
	out := map[int]string{}
	for _, e := range ents {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu"))
		if err != nil || !strings.HasPrefix(e.Name(), "cpu") {
			continue
		}
		p := filepath.Join(base, e.Name(), "cpufreq", "scaling_governor")
		if _, err := os.Stat(p); err == nil {
			out[n] = p
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("cpufreq: %w: no CPU has a frequency governor (no cpufreq driver, typical in VMs)", ErrNotSupported)
	}
	return out, nil
}

// GovernorValue formats per-CPU governors as the knob reads them.
func GovernorValue(by map[int]string) string {
	groups := map[string][]int{}
	for cpu, g := range by {
		groups[g] = append(groups[g], cpu)
	}
	if len(groups) == 1 {
		for g := range groups {
			return g
		}
	}
	var parts []string
	for g, cpus := range groups {
		parts = append(parts, host.FormatCPUList(cpus)+":"+g)
	}
	sort.Slice(parts, func(i, j int) bool { return firstCPU(parts[i]) < firstCPU(parts[j]) })
	return strings.Join(parts, ";")
}

func firstCPU(part string) int {
	n, _ := strconv.Atoi(strings.FieldsFunc(part, func(r rune) bool { return r == '-' || r == ',' || r == ':' })[0])
	return n
}

// parseGovernors turns a value into per-CPU governors for the given CPUs.
func parseGovernors(v string, cpus map[int]string) (map[int]string, error) {
	out := map[int]string{}
	if !strings.ContainsAny(v, ":;") {
		if v == "" || strings.ContainsAny(v, " \t,") {
			return nil, fmt.Errorf("bad governor %q", v)
		}
		for c := range cpus {
			out[c] = v
		}
		return out, nil
	}
	for _, part := range strings.Split(v, ";") {
		list, g, ok := strings.Cut(part, ":")
		l, err := host.ParseCPUList(list)
		if !ok || err != nil || g == "" {
			return nil, fmt.Errorf("bad governor value %q (want NAME or CPULIST:NAME;...)", v)
		}
		for _, c := range l {
			out[c] = g
		}
	}
	return out, nil
}

func (k *cpufreqKnob) Validate(v string) error {
	_, err := parseGovernors(v, map[int]string{0: ""})
	return err
}

func (k *cpufreqKnob) Read(ctx context.Context) (string, error) {
	files, err := k.governorFiles()
	if err != nil {
		return "", err
	}
	by := map[int]string{}
	for cpu, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the CPU went offline
			}
			return "", fmt.Errorf("cpufreq cpu%d: read governor: %w", cpu, err)
		}
		by[cpu] = strings.TrimSpace(string(b))
	}
	return GovernorValue(by), nil
}

func (k *cpufreqKnob) Write(ctx context.Context, value string) error {
	files, err := k.governorFiles()
	if err != nil {
		return err
	}
	want, err := parseGovernors(value, files)
	if err != nil {
		return fmt.Errorf("cpufreq: %w", err)
	}
	cpus := make([]int, 0, len(want))
	for c := range want {
		cpus = append(cpus, c)
	}
	sort.Ints(cpus)
	for _, c := range cpus {
		p, ok := files[c]
		if !ok {
			continue
		}
		if err := writeExisting(p, want[c]+"\n"); err != nil {
			return fmt.Errorf("cpufreq cpu%d: write governor %q: %w (available: %s)", c, want[c], err, k.available(c))
		}
	}
	return nil
}

func (k *cpufreqKnob) available(cpu int) string {
	b, err := os.ReadFile(k.sys.path(fmt.Sprintf("/sys/devices/system/cpu/cpu%d/cpufreq/scaling_available_governors", cpu)))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// Satisfied compares per-CPU governors; a single word stands for every CPU
// the other value names.
func (k *cpufreqKnob) Satisfied(live, desired string) bool {
	lc, dc := strings.Contains(live, ":"), strings.Contains(desired, ":")
	if !lc && !dc {
		return live == desired
	}
	cpus := map[int]string{}
	for _, v := range []string{live, desired} {
		if strings.Contains(v, ":") {
			m, err := parseGovernors(v, nil)
			if err != nil {
				return false
			}
			for c := range m {
				cpus[c] = ""
			}
		}
	}
	l, err1 := parseGovernors(live, cpus)
	d, err2 := parseGovernors(desired, cpus)
	if err1 != nil || err2 != nil || len(l) != len(d) {
		return false
	}
	for c, g := range l {
		if d[c] != g {
			return false
		}
	}
	return true
}
