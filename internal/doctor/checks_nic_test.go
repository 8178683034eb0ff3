package doctor

import (
	"errors"
	"github.com/lowlat/lowlat/internal/host"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNICChecksOnFixtures(t *testing.T) {
	tests := []struct {
		host    string
		want    map[string]string
		notWant []string
	}{
		// Runbook 002's box: 40 queues all on CPU 0, NET_RX on CPU 0,
		// port.rx_dropped since boot, adaptive coalescing.
		{"dual-i40e-nvme", map[string]string{"nic-queues-exceed-cpus": Warn, "softirq-imbalance": Warn, "nic-drops": Info, "nic-coalesce-high": Info},
			[]string{"nic-lro-on", "irq-smt-siblings", "nic-numa-remote"}},
		// mlx5 spreads 63 vectors over all 64 threads: SMT siblings both busy.
		{"epyc-25g", map[string]string{"irq-smt-siblings": Warn, "nic-queues-exceed-cpus": Warn, "nic-drops": Info},
			[]string{"nic-lro-on", "softirq-imbalance"}},
		{"centos7-3.10", map[string]string{"nic-lro-on": Warn, "irq-smt-siblings": Warn, "nic-drops": Info}, nil},
		{"virtio-vm", nil, []string{"nic-lro-on", "irq-smt-siblings", "nic-queues-exceed-cpus", "softirq-imbalance", "nic-numa-remote"}},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			rep := Run(fixture(t, tt.host), Options{})
			got := ids(rep)
			for id, sev := range tt.want {
				f, ok := got[id]
				if !ok {
					t.Errorf("missing %s", id)
					continue
				}
				if f.Severity != sev || f.Fix == "" || len(f.Evidence) == 0 {
					t.Errorf("%s: %+v", id, f)
				}
			}
			for _, id := range tt.notWant {
				if f, ok := got[id]; ok {
					t.Errorf("unexpected %s: %s", id, f.Summary)
				}
			}
			// A capture cannot be sampled, and says so.
			if f, ok := got["nic-drops"]; ok && (!strings.HasPrefix(f.Evidence["sampled"], "not sampled: the facts are from root:") || !strings.Contains(f.Summary, "not sampled")) {
				t.Errorf("nic-drops on a capture: %+v", f)
			}
		})
	}
}

type fakeSampler struct {
	s     *Sample
	err   error
	calls int
}

func (f *fakeSampler) Sample(ifaces []string, window time.Duration) (*Sample, error) {
	f.calls++
	return f.s, f.err
}

// sampled returns doctor options that sample with s.
func sampled(s Sampler) Options { return Options{Sampler: s, SampleWindow: time.Second} }

// TestNICChecksSampled: live facts go through the sampler once, and what it
// saw becomes findings: drops now, ksoftirqd busy, application threads on the
// wrong node.
func TestNICChecksSampled(t *testing.T) {
	f := fixture(t, "dual-i40e-nvme")
	f.Source = "live"
	fs := &fakeSampler{s: &Sample{Window: time.Second,
		NICDeltas: map[string]map[string]uint64{"eth0": {"port.rx_dropped": 40, "rx_packets": 100000, "rx_xdp_drops": 9}},
		Ksoftirqd: map[int]float64{0: 0.9, 1: 0.01},
		Threads:   []ThreadLoad{{PID: 900, TID: 901, Comm: "gateway", Share: 0.95, CPU: 12}, {PID: 900, TID: 902, Comm: "gateway", Share: 0.8, CPU: 13}},
	}}
	rep := Run(f, sampled(fs))
	if fs.calls != 1 {
		t.Errorf("sampled %d times, want once for all checks", fs.calls)
	}
	var drops, ksoft, remote *Finding
	for i, x := range rep.Findings {
		switch {
		case x.ID == "nic-drops":
			drops = &rep.Findings[i]
		case x.ID == "softirq-imbalance" && strings.Contains(x.Summary, "ksoftirqd"):
			ksoft = &rep.Findings[i]
		case x.ID == "nic-numa-remote":
			remote = &rep.Findings[i]
		}
	}
	if drops == nil || drops.Severity != Warn || !strings.Contains(drops.Summary, "port.rx_dropped +40/s") || strings.Contains(drops.Summary, "xdp") {
		t.Errorf("drops now: %+v", drops)
	}
	if ksoft == nil || !strings.Contains(ksoft.Summary, "ksoftirqd/0 90%") || strings.Contains(ksoft.Summary, "ksoftirqd/1") {
		t.Errorf("ksoftirqd: %+v", ksoft)
	}
	if remote == nil || !strings.Contains(remote.Summary, "node 1") || !strings.Contains(remote.Evidence["busiest"], "gateway[901] 95% on cpu12 (node 1)") {
		t.Errorf("NUMA-remote threads: %+v", remote)
	}

	// A sampler that fails: the checks go on and say why.
	f2 := fixture(t, "dual-i40e-nvme")
	f2.Source = "live"
	rep = Run(f2, sampled(&fakeSampler{err: errors.New("ethtool socket: permission denied")}))
	if d := ids(rep)["nic-drops"]; !strings.Contains(d.Evidence["sampled"], "not sampled: ethtool socket: permission denied") {
		t.Errorf("failed sample: %+v", d)
	}
}

// TestFailedSampleIsNotAPass: a check whose live sample failed, or lacked
// the source it reads, and that found nothing else is "not checked", never
// "passed" (it used to count as a pass).
func TestFailedSampleIsNotAPass(t *testing.T) {
	clean := func() *host.Facts {
		f := fixture(t, "dual-i40e-nvme")
		f.Source = "live"
		for i := range f.Interfaces {
			if f.Interfaces[i].Ethtool != nil {
				f.Interfaces[i].Ethtool.Stats = map[string]uint64{"rx_packets": 1}
			}
			f.Interfaces[i].Stats = nil
		}
		return f
	}
	base := Run(clean(), sampled(&fakeSampler{s: &Sample{Window: time.Second}}))
	// The sampled checks that pass with a good, quiet sample.
	var quiet []string
	for _, id := range []string{"nic-drops", "softirq-imbalance", "nic-numa-remote"} {
		if _, found := ids(base)[id]; !found {
			quiet = append(quiet, id)
		}
	}
	if len(quiet) < 2 {
		t.Fatalf("fixture: only %v pass with a quiet sample", quiet)
	}
	for name, s := range map[string]*fakeSampler{
		"sampler error":      {err: errors.New("ethtool socket: permission denied")},
		"threads unreadable": {s: &Sample{Window: time.Second, Errors: map[string]string{SourceThreads: "open /proc: permission denied", "ethtool:eth0": "no device"}}},
	} {
		rep := Run(clean(), sampled(s))
		for _, id := range quiet {
			f, ok := ids(rep)[id]
			if !ok || !f.NotChecked {
				t.Errorf("%s: %s = %+v, want a not-checked row", name, id, f)
			}
		}
		if n := len(quiet); rep.Checks.Passed != base.Checks.Passed-n || rep.Checks.NotChecked != base.Checks.NotChecked+n {
			t.Errorf("%s: passed %d not checked %d; with a good sample: passed %d not checked %d",
				name, rep.Checks.Passed, rep.Checks.NotChecked, base.Checks.Passed, base.Checks.NotChecked)
		}
	}
}

func TestDropCounter(t *testing.T) {
	for name, want := range map[string]bool{
		"rx_missed_errors": true, "rx_no_buffer_count": true, "rx_no_desc": true, "tx_timeout": true, "tx_timeout_count": true,
		"port.rx_dropped": true, "rx_out_of_buffer": true, "rx_discards_phy": true, "rx_queue_0_drops": true, "rx_no_dma_resources": true,
		"rx_fifo_errors": true, "rx_alloc_fail": true,
		"rx_packets": false, "tx_bytes": false, "rx_queue_0_xdp_drops": false, "rx_csum_unnecessary": false,
	} {
		if got := DropCounter(name); got != want {
			t.Errorf("DropCounter(%q) = %v", name, got)
		}
	}
}

// TestIRQBalanceBannedIRQs: after a placement, irqbalance only threatens the
// pinned interrupts it was not told to leave alone, and the running
// process's arguments count over a config file edited without a restart.
func TestIRQBalanceBannedIRQs(t *testing.T) {
	f := fixture(t, "dual-i40e-nvme")
	var nums []int
	for _, ifc := range f.Interfaces {
		if ifc.Physical() {
			for _, q := range f.DeviceIRQs(ifc.Name) {
				nums = append(nums, q.Num)
			}
		}
	}
	if len(nums) < 4 {
		t.Fatalf("fixture has %d NIC interrupts", len(nums))
	}
	pin := map[int]int{}
	for i, n := range nums {
		pin[n] = i % len(f.CPUs)
	}
	for i := range f.IRQs {
		if cpu, ok := pin[f.IRQs[i].Num]; ok {
			f.IRQs[i].Affinity = []int{cpu}
		}
	}
	f.IRQBalance.Running, f.IRQBalance.PID = true, 1234
	all := make([]string, 0, len(nums))
	for _, n := range nums {
		all = append(all, "--banirq="+strconv.Itoa(n))
	}
	tests := []struct {
		name    string
		args    []string
		config  string
		exposed []int // pinned interrupts expected in the warning; nil: no finding
	}{
		{"no bans", []string{"--foreground"}, "", nums},
		{"all banned", append([]string{"--foreground"}, all...), "", nil},
		{"all but the first, -i form", append([]string{"-i", strconv.Itoa(nums[1])}, all[2:]...), "", nums[:1]},
		{"config edited, not restarted", []string{"--foreground"}, strings.Join(all, " "), nums},
		{"no process arguments known: the config", nil, strings.Join(all, " "), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.IRQBalance.Args = tt.args
			f.IRQBalance.Config = map[string]string{"IRQBALANCE_ARGS": tt.config}
			got := checkIRQBalance(f, Options{})
			if tt.exposed == nil {
				if len(got) != 0 {
					t.Fatalf("every pinned interrupt is banned, yet: %+v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Severity != Warn {
				t.Fatalf("want one warning, got %+v", got)
			}
			ev := got[0].Evidence["pinned_irqs"]
			if n := strings.Count(ev, "->cpu"); n != len(tt.exposed) {
				t.Errorf("pinned_irqs lists %d interrupts, want %d: %s", n, len(tt.exposed), ev)
			}
			for _, n := range tt.exposed {
				if !strings.Contains(ev, strconv.Itoa(n)+"->cpu") {
					t.Errorf("pinned_irqs misses %d: %s", n, ev)
				}
			}
		})
	}
}
