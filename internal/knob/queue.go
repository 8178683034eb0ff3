package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/lowlat/lowlat/internal/host"
)

// queueKnob is a per-queue steering file below /sys/class/net/IF/queues:
// "queue/eth0/rx-0/rps_cpus", "queue/eth0/tx-3/xps_cpus",
// "queue/eth0/rx-0/rps_flow_cnt".
//
// rps_cpus and xps_cpus take a hex bitmap in comma-separated 32-bit groups,
// most significant first ("ffffffff,00000003"); a CPU list such as runbook
// 002's "2-9" is rejected with EINVAL, and a list that happens to be valid hex
// ("2", "2,3") silently selects other CPUs. Values are therefore written as
// masks, and a mask is compared by the CPUs it selects, whatever its width.
// rps_flow_cnt reads back rounded up to a power of two.
type queueKnob struct {
	sys   *System
	iface string
	queue string // rx-0, tx-3
	file  string // rps_cpus, xps_cpus, rps_flow_cnt
}

// QueueID returns the knob ID of a queue file.
func QueueID(iface, queue, file string) string {
	return "queue/" + iface + "/" + queue + "/" + file
}

func newQueue(sys *System, rest string) (Knob, error) {
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || !ValidIfname(parts[0]) {
		return nil, fmt.Errorf("queue knob %q: want queue/<iface>/<rx-N|tx-N>/<rps_cpus|rps_flow_cnt|xps_cpus>", rest)
	}
	iface, q, file := parts[0], parts[1], parts[2]
	kind, num, ok := strings.Cut(q, "-")
	if n, err := strconv.Atoi(num); !ok || err != nil || n < 0 || strconv.Itoa(n) != num {
		return nil, fmt.Errorf("queue knob %q: bad queue %q", rest, q)
	}
	switch {
	case kind == "rx" && (file == "rps_cpus" || file == "rps_flow_cnt"):
	case kind == "tx" && file == "xps_cpus":
	default:
		return nil, fmt.Errorf("queue knob %q: %s has no %s (rx-N: rps_cpus, rps_flow_cnt; tx-N: xps_cpus)", rest, q, file)
	}
	return &queueKnob{sys: sys, iface: iface, queue: q, file: file}, nil
}

func (k *queueKnob) ID() string { return QueueID(k.iface, k.queue, k.file) }

func (k *queueKnob) path() string {
	return k.sys.path("/sys/class/net/" + k.iface + "/queues/" + k.queue + "/" + k.file)
}

func (k *queueKnob) isMask() bool { return k.file != "rps_flow_cnt" }

func (k *queueKnob) Validate(v string) error {
	if v == Absent {
		return nil
	}
	if k.isMask() {
		if _, err := host.ParseCPUMask(v); err != nil {
			return fmt.Errorf("%w (write CPU sets as hex masks in 32-bit groups, e.g. 00000000,000003fc for CPUs 2-9)", err)
		}
		return nil
	}
	if n, err := strconv.ParseUint(v, 10, 32); err != nil || n > 1<<30 {
		return fmt.Errorf("bad rps_flow_cnt %q", v)
	}
	return nil
}

func (k *queueKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.path())
	if errors.Is(err, fs.ErrNotExist) {
		if _, derr := os.Stat(k.sys.path("/sys/class/net/" + k.iface)); errors.Is(derr, fs.ErrNotExist) {
			return Absent, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: read: %w", k.ID(), wrapNotExist(err))
	}
	return strings.TrimSpace(string(b)), nil
}

func (k *queueKnob) Write(ctx context.Context, value string) error {
	if err := k.Validate(value); err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	if value == Absent {
		if _, err := os.Stat(k.sys.path("/sys/class/net/" + k.iface)); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s: %s exists again: cannot set %s", k.ID(), k.iface, Absent)
	}
	if _, err := os.Stat(k.sys.path("/sys/class/net/" + k.iface)); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w: interface %s is gone", k.ID(), ErrNoDevice, k.iface)
	}
	if err := writeExisting(k.path(), value+"\n"); err != nil {
		if errors.Is(err, syscall.EINVAL) && k.isMask() {
			return fmt.Errorf("%s: write %s: the kernel rejects the mask (a CPU beyond nr_cpu_ids, or XPS on a device with traffic classes): %w", k.ID(), value, err)
		}
		return fmt.Errorf("%s: write %s: %w", k.ID(), value, err)
	}
	return nil
}

// Satisfied compares masks by the CPUs they select and flow counts as the
// kernel rounds them.
func (k *queueKnob) Satisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	if k.isMask() {
		l, err1 := host.ParseCPUMask(live)
		d, err2 := host.ParseCPUMask(desired)
		return err1 == nil && err2 == nil && slices.Equal(l, d)
	}
	l, err1 := strconv.ParseUint(live, 10, 32)
	d, err2 := strconv.ParseUint(desired, 10, 32)
	return err1 == nil && err2 == nil && l == RoundFlowCnt(d)
}

// Same is Satisfied both ways. A vanished interface is not "restored": see
// Vanished.
func (k *queueKnob) Same(a, b string) bool { return k.Satisfied(a, b) && k.Satisfied(b, a) }

// RoundFlowCnt is what rps_flow_cnt reads back after writing n: the table size,
// n rounded up to a power of two (0 stays 0).
func RoundFlowCnt(n uint64) uint64 {
	if n <= 1 {
		return n
	}
	return 1 << (64 - bits.LeadingZeros64(n-1))
}
