package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// blockKnob is a block device's request queue: "block/nvme0n1/queue" with
// values like "scheduler=none nr_requests=1023 rq_affinity=2". The three are
// one knob because they are not independent: switching the scheduler resets
// nr_requests to the new elevator's default (and, with "none", caps it at the
// hardware tag depth), so they must be written in this order, and restored in
// it too, for a rollback to be exact. A desired value may name only some of
// them; the others are left as they are.
type blockKnob struct {
	sys *System
	dev string
}

// blockParams are the queue files, in the order they are written.
var blockParams = []string{"scheduler", "nr_requests", "rq_affinity"}

func newBlock(sys *System, rest string) (Knob, error) {
	dev, what, ok := strings.Cut(rest, "/")
	if !ok || what != "queue" || !ValidIfname(dev) {
		return nil, fmt.Errorf("block knob %q: want block/<device>/queue", rest)
	}
	return &blockKnob{sys: sys, dev: dev}, nil
}

func (k *blockKnob) ID() string { return "block/" + k.dev + "/queue" }

func (k *blockKnob) file(name string) string {
	return k.sys.path("/sys/block/" + k.dev + "/queue/" + name)
}

// ParseBlockValue parses "scheduler=none nr_requests=1023".
func ParseBlockValue(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range strings.Fields(v) {
		name, val, ok := strings.Cut(f, "=")
		if !ok || val == "" {
			return nil, fmt.Errorf("bad block queue setting %q (want name=value)", f)
		}
		switch name {
		case "scheduler":
		case "nr_requests", "rq_affinity":
			if _, err := strconv.ParseUint(val, 10, 32); err != nil {
				return nil, fmt.Errorf("bad %s %q", name, val)
			}
		default:
			return nil, fmt.Errorf("unknown block queue setting %q (known: %s)", name, strings.Join(blockParams, ", "))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s given twice", name)
		}
		out[name] = val
	}
	if len(out) == 0 {
		return nil, errors.New("empty block queue value")
	}
	return out, nil
}

// FormatBlockValue writes settings in the canonical order.
func FormatBlockValue(m map[string]string) string {
	var parts []string
	for _, p := range blockParams {
		if v, ok := m[p]; ok {
			parts = append(parts, p+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

func (k *blockKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	_, err := ParseBlockValue(v)
	return err
}

func (k *blockKnob) Read(ctx context.Context) (string, error) {
	if _, err := os.Stat(k.sys.path("/sys/block/" + k.dev)); errors.Is(err, fs.ErrNotExist) {
		return Absent, nil
	}
	m := map[string]string{}
	for _, p := range blockParams {
		b, err := os.ReadFile(k.file(p))
		if err != nil {
			return "", fmt.Errorf("%s: read %s: %w", k.ID(), p, wrapNotExist(err))
		}
		m[p] = SelectedWord(string(b))
	}
	return FormatBlockValue(m), nil
}

func (k *blockKnob) Write(ctx context.Context, value string) error {
	if value == Absent {
		if _, err := os.Stat(k.sys.path("/sys/block/" + k.dev)); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s: %s exists again: cannot set %s", k.ID(), k.dev, Absent)
	}
	want, err := ParseBlockValue(value)
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	if _, err := os.Stat(k.sys.path("/sys/block/" + k.dev)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w: %s is gone", k.ID(), ErrNoDevice, k.dev)
	}
	for _, p := range blockParams {
		v, ok := want[p]
		if !ok {
			continue
		}
		if p == "scheduler" {
			// Re-selecting the current elevator still resets nr_requests
			// on some kernels: only switch when it differs.
			if b, err := os.ReadFile(k.file(p)); err == nil && SelectedWord(string(b)) == v {
				continue
			}
		}
		if err := writeExisting(k.file(p), v); err != nil {
			if errors.Is(err, syscall.EINVAL) {
				return fmt.Errorf("%s: write %s=%s: the kernel refuses it (%w; nr_requests cannot exceed the hardware queue depth with scheduler none)", k.ID(), p, v, err)
			}
			return fmt.Errorf("%s: write %s=%s: %w", k.ID(), p, v, err)
		}
	}
	return nil
}

// Satisfied: every setting the desired value names has that value.
func (k *blockKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	l, err1 := ParseBlockValue(live)
	d, err2 := ParseBlockValue(desired)
	if err1 != nil || err2 != nil {
		return false
	}
	for name, v := range d {
		if l[name] != v {
			return false
		}
	}
	return true
}

// Same is exact (all three settings). A vanished device is not "restored":
// see Vanished.
func (k *blockKnob) Same(a, b string) bool {
	x, err1 := ParseBlockValue(a)
	y, err2 := ParseBlockValue(b)
	if err1 != nil || err2 != nil || len(x) != len(y) {
		return a == b
	}
	keys := make([]string, 0, len(x))
	for key := range x {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if x[key] != y[key] {
			return false
		}
	}
	return true
}
