package host

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// diff returns "" when want and got are deeply equal, else both as JSON in
// the (-want +got) form the project's tests use.
func diff(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	var b strings.Builder
	b.WriteString("(-want +got)\n")
	wl, gl := strings.Split(string(w), "\n"), strings.Split(string(g), "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var a, c string
		if i < len(wl) {
			a = wl[i]
		}
		if i < len(gl) {
			c = gl[i]
		}
		if a == c {
			b.WriteString("  " + a + "\n")
			continue
		}
		if i < len(wl) {
			b.WriteString("- " + a + "\n")
		}
		if i < len(gl) {
			b.WriteString("+ " + c + "\n")
		}
	}
	return b.String()
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"", nil, false},
		{"\n", nil, false},
		{"0", []int{0}, false},
		{"0-3,8,10-11\n", []int{0, 1, 2, 3, 8, 10, 11}, false},
		{"10-11,0-1", []int{0, 1, 10, 11}, false},
		{"0,0,1", []int{0, 1}, false},
		{"0-9,20-29", []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29}, false},
		{"3-1", nil, true},
		{"a", nil, true},
		{"1,", nil, true},
		{"0-15:2", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCPUList(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseCPUList(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diff(tt.want, got); d != "" {
				t.Errorf("ParseCPUList(%q) %s", tt.in, d)
			}
		})
	}
}

func TestFormatCPUList(t *testing.T) {
	tests := []struct {
		in   []int
		want string
	}{
		{nil, ""},
		{[]int{0}, "0"},
		{[]int{0, 1}, "0-1"},
		{[]int{11, 10, 8, 3, 2, 1, 0, 8}, "0-3,8,10-11"},
		{[]int{0, 2, 4}, "0,2,4"},
	}
	for _, tt := range tests {
		if got := FormatCPUList(tt.in); got != tt.want {
			t.Errorf("FormatCPUList(%v) = %q, want %q", tt.in, got, tt.want)
		}
		back, err := ParseCPUList(tt.want)
		if err != nil || FormatCPUList(back) != tt.want {
			t.Errorf("round trip %q: %v %v", tt.want, back, err)
		}
	}
}

func TestCPUMask(t *testing.T) {
	tests := []struct {
		name  string
		mask  string
		cpus  []int
		nbits int
		// format is the kernel's rendering for nbits (the mask read back).
		format string
	}{
		{"empty 2 cpus", "0", nil, 2, "0"},
		{"2 cpus", "3", []int{0, 1}, 2, "3"},
		{"40 cpus low", "00,00000003", []int{0, 1}, 40, "00,00000003"},
		{"40 cpus high", "ff,00000000", []int{32, 33, 34, 35, 36, 37, 38, 39}, 40, "ff,00000000"},
		{"64 cpus", "ffffffff,00000003", append([]int{0, 1}, seq(32, 63)...), 64, "ffffffff,00000003"},
		{"short groups accepted", "1,1", []int{0, 32}, 64, "00000001,00000001"},
		{"256 cpus node 2", "00000000,00000000,00000000,ffffffff,00000000,00000000,00000000,00000000",
			seq(128, 159), 256, "00000000,00000000,00000000,ffffffff,00000000,00000000,00000000,00000000"},
		{"no width", "00000001", []int{0}, 0, "00000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseCPUMask(tt.mask)
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(tt.cpus, got); d != "" {
				t.Errorf("ParseCPUMask(%q) %s", tt.mask, d)
			}
			if f := FormatCPUMask(tt.cpus, tt.nbits); f != tt.format {
				t.Errorf("FormatCPUMask(%v, %d) = %q, want %q", tt.cpus, tt.nbits, f, tt.format)
			}
		})
	}
	for _, bad := range []string{"g", "1,,1", "123456789", "0x3"} {
		if _, err := ParseCPUMask(bad); err == nil {
			t.Errorf("ParseCPUMask(%q) accepted", bad)
		}
	}
}

func seq(a, b int) []int {
	var out []int
	for i := a; i <= b; i++ {
		out = append(out, i)
	}
	return out
}

func TestParseSelection(t *testing.T) {
	tests := []struct {
		in      string
		sel     string
		choices []string
	}{
		{"always madvise [never]\n", "never", []string{"always", "madvise", "never"}},
		{"[always] madvise never", "always", []string{"always", "madvise", "never"}},
		{"always defer defer+madvise [madvise] never", "madvise", []string{"always", "defer", "defer+madvise", "madvise", "never"}},
		{"none [mq-deadline] kyber bfq \n", "mq-deadline", []string{"none", "mq-deadline", "kyber", "bfq"}},
		{"noop deadline [cfq]", "cfq", []string{"noop", "deadline", "cfq"}},
		{"none\n", "none", []string{"none"}},
	}
	for _, tt := range tests {
		sel, choices := ParseSelection(tt.in)
		if sel != tt.sel || !reflect.DeepEqual(choices, tt.choices) {
			t.Errorf("ParseSelection(%q) = %q %q, want %q %q", tt.in, sel, choices, tt.sel, tt.choices)
		}
	}
}

func TestParseKernelRelease(t *testing.T) {
	tests := []struct {
		in                  string
		major, minor, patch int
		wantErr             bool
	}{
		{"3.10.0-1160.el7.x86_64", 3, 10, 0, false},
		{"6.1.0-18-amd64", 6, 1, 0, false},
		{"5.15.0-1034-azure", 5, 15, 0, false},
		{"5.14.0-362.el9.x86_64", 5, 14, 0, false},
		{"5.4.278-1.el7.elrepo.x86_64", 5, 4, 278, false},
		{"6.18.44-fc-v669\n", 6, 18, 44, false},
		{"6.8-rc1", 6, 8, 0, false},
		{"4.19.0+", 4, 19, 0, false},
		{"6.8", 6, 8, 0, false},
		{"linux", 0, 0, 0, true},
		{"6", 0, 0, 0, true},
	}
	for _, tt := range tests {
		maj, min, patch, err := ParseKernelRelease(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseKernelRelease(%q) error %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if maj != tt.major || min != tt.minor || patch != tt.patch {
			t.Errorf("ParseKernelRelease(%q) = %d.%d.%d, want %d.%d.%d", tt.in, maj, min, patch, tt.major, tt.minor, tt.patch)
		}
	}
}

func TestParseKernelConfig(t *testing.T) {
	in := `#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.1.0 Kernel Configuration
#
CONFIG_NET_SCHED=y
CONFIG_NET_SCH_HTB=m
# CONFIG_NET_SCH_CAKE is not set
CONFIG_DEFAULT_TCP_CONG="cubic"
CONFIG_LOCALVERSION=""
CONFIG_HZ=250
`
	got, err := parseKernelConfig(strings.NewReader(in), keptConfig)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"CONFIG_NET_SCHED": "y", "CONFIG_NET_SCH_HTB": "m", "CONFIG_NET_SCH_CAKE": "n",
		"CONFIG_DEFAULT_TCP_CONG": "cubic", "CONFIG_HZ": "250",
	}
	if d := diff(want, got); d != "" {
		t.Error(d)
	}
}

func TestParseShellVars(t *testing.T) {
	in := `# irqbalance is a daemon process that distributes interrupts across
#IRQBALANCE_BANNED_CPUS=
IRQBALANCE_BANNED_CPUS="00000000,00000003"
export IRQBALANCE_ARGS='--policyscript=/etc/irq.sh'
IRQBALANCE_ONESHOT=yes # once
ENABLED="1"
not a line
1BAD=x
IRQBALANCE_BANNED_CPULIST=0-1,128-129
`
	got := parseShellVars([]byte(in))
	want := map[string]string{
		"IRQBALANCE_BANNED_CPUS":    "00000000,00000003",
		"IRQBALANCE_ARGS":           "--policyscript=/etc/irq.sh",
		"IRQBALANCE_ONESHOT":        "yes",
		"ENABLED":                   "1",
		"IRQBALANCE_BANNED_CPULIST": "0-1,128-129",
	}
	if d := diff(want, got); d != "" {
		t.Error(d)
	}
}

func TestParseInterrupts(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []IRQ
	}{
		{
			name: "x86 6.x per-device MSI-X domain",
			in: `           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 38:          0       1163 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 52:        100          3 IR-PCI-MSIX-0000:3b:00.0    3-edge      i40e-eth0-TxRx-2
NMI:          0          0   Non-maskable interrupts
LOC:      19808      21563   Local timer interrupts
ERR:          0
MIS:          7
`,
			want: []IRQ{
				{Num: 24, Name: "ACPI:Ged", Chip: "IO-APIC", HWIRQ: "5-edge", Counts: []uint64{1, 0}, Node: -1},
				{Num: 38, Name: "virtio2-input.0", Chip: "PCI-MSIX-0000:00:03.0", HWIRQ: "1-edge", Counts: []uint64{0, 1163}, Node: -1},
				{Num: 52, Name: "i40e-eth0-TxRx-2", Chip: "IR-PCI-MSIX-0000:3b:00.0", HWIRQ: "3-edge", Counts: []uint64{100, 3}, Node: -1},
				{Num: -1, Name: "NMI", Desc: "Non-maskable interrupts", Counts: []uint64{0, 0}, Node: -1},
				{Num: -1, Name: "LOC", Desc: "Local timer interrupts", Counts: []uint64{19808, 21563}, Node: -1},
				{Num: -1, Name: "ERR", Counts: []uint64{0}, Node: -1},
				{Num: -1, Name: "MIS", Counts: []uint64{7}, Node: -1},
			},
		},
		{
			name: "x86 4.x/5.x hwirq numbers, shared line, no action",
			in: `            CPU0       CPU1       CPU2       CPU3       
   0:         35          0          0          0  IR-IO-APIC    2-edge      timer
  16:          0          0          0          0  IR-IO-APIC   16-fasteoi   ehci_hcd:usb1, uhci_hcd:usb2
  17:          0          0          0          0  IR-IO-APIC   17-fasteoi
  59:          0    1523094          0          0  IR-PCI-MSI 30932993-edge      i40e-eth0-TxRx-0
  90:          0          0          0        212  IR-PCI-MSI 48758785-edge      nvme0q1
`,
			want: []IRQ{
				{Num: 0, Name: "timer", Chip: "IR-IO-APIC", HWIRQ: "2-edge", Counts: []uint64{35, 0, 0, 0}, Node: -1},
				{Num: 16, Name: "ehci_hcd:usb1, uhci_hcd:usb2", Chip: "IR-IO-APIC", HWIRQ: "16-fasteoi", Counts: []uint64{0, 0, 0, 0}, Node: -1},
				{Num: 17, Chip: "IR-IO-APIC", HWIRQ: "17-fasteoi", Counts: []uint64{0, 0, 0, 0}, Node: -1},
				{Num: 59, Name: "i40e-eth0-TxRx-0", Chip: "IR-PCI-MSI", HWIRQ: "30932993-edge", Counts: []uint64{0, 1523094, 0, 0}, Node: -1},
				{Num: 90, Name: "nvme0q1", Chip: "IR-PCI-MSI", HWIRQ: "48758785-edge", Counts: []uint64{0, 0, 0, 212}, Node: -1},
			},
		},
		{
			name: "x86 3.10 flow glued to chip",
			in: `           CPU0       CPU1       
  0:        136          0   IO-APIC-edge      timer
 45:    4485566          0   IR-PCI-MSI-edge      eth0-TxRx-0
 46:          5          0  xen-pirq-msi       eth1-TxRx-1
NMI:          0          0   Non-maskable interrupts
`,
			want: []IRQ{
				{Num: 0, Name: "timer", Chip: "IO-APIC-edge", Counts: []uint64{136, 0}, Node: -1},
				{Num: 45, Name: "eth0-TxRx-0", Chip: "IR-PCI-MSI-edge", Counts: []uint64{4485566, 0}, Node: -1},
				{Num: 46, Name: "eth1-TxRx-1", Chip: "xen-pirq-msi", Counts: []uint64{5, 0}, Node: -1},
				{Num: -1, Name: "NMI", Desc: "Non-maskable interrupts", Counts: []uint64{0, 0}, Node: -1},
			},
		},
		{
			name: "arm64 GIC with Level/Edge column",
			in: `           CPU0       CPU1       
 11:      21345      20312     GICv3  27 Level     arch_timer
 64:        800          0   ITS-MSI 524288 Edge      eth0-TxRx-0
IPI0:      1520       1433       Rescheduling interrupts
`,
			want: []IRQ{
				{Num: 11, Name: "arch_timer", Chip: "GICv3", HWIRQ: "27 Level", Counts: []uint64{21345, 20312}, Node: -1},
				{Num: 64, Name: "eth0-TxRx-0", Chip: "ITS-MSI", HWIRQ: "524288 Edge", Counts: []uint64{800, 0}, Node: -1},
				{Num: -1, Name: "IPI0", Desc: "Rescheduling interrupts", Counts: []uint64{1520, 1433}, Node: -1},
			},
		},
		{
			name: "offline CPU missing from header",
			in: `           CPU0       CPU2       
 30:          4          9  IR-PCI-MSI 524288-edge      mlx5_comp0@pci:0000:3b:00.0
LOC:          1          2   Local timer interrupts
`,
			want: []IRQ{
				{Num: 30, Name: "mlx5_comp0@pci:0000:3b:00.0", Chip: "IR-PCI-MSI", HWIRQ: "524288-edge", Counts: []uint64{4, 0, 9}, Node: -1},
				{Num: -1, Name: "LOC", Desc: "Local timer interrupts", Counts: []uint64{1, 0, 2}, Node: -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseInterrupts([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
	if _, err := parseInterrupts([]byte("garbage\n")); err == nil {
		t.Error("parseInterrupts accepted a file without a CPU header")
	}
}

func TestParseSoftirqs(t *testing.T) {
	in := `                    CPU0       CPU1       
          HI:          0          0
      NET_RX:       1021       1120
BLOCK_IOPOLL:          0          3
`
	got, err := parseSoftirqs([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]uint64{"HI": {0, 0}, "NET_RX": {1021, 1120}, "BLOCK_IOPOLL": {0, 3}}
	if d := diff(want, got); d != "" {
		t.Error(d)
	}
}

func TestParseSoftnet(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []SoftnetCPU
	}{
		{"3.10 vanilla, 10 columns",
			"0018a3b7 00000000 00000012 00000000 00000000 00000000 00000000 00000000 00000000 00000004\n",
			[]SoftnetCPU{{CPU: -1, Processed: 0x18a3b7, TimeSqueeze: 0x12, ReceivedRPS: 4}}},
		{"3.11-5.9, 11 columns",
			"0018a3b7 00000001 00000012 00000000 00000000 00000000 00000000 00000000 00000000 00000004 00000002\n" +
				"00000010 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n",
			[]SoftnetCPU{{CPU: -1, Processed: 0x18a3b7, Dropped: 1, TimeSqueeze: 0x12, ReceivedRPS: 4, FlowLimitCount: 2}, {CPU: -1, Processed: 16}}},
		{"5.10+, 13 columns with cpu id",
			"0000000e 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n" +
				"00000680 00000000 00000003 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000003\n",
			[]SoftnetCPU{{CPU: 0, Processed: 14}, {CPU: 3, Processed: 0x680, TimeSqueeze: 3}}},
		{"6.x, 15 columns",
			"00000680 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000\n",
			[]SoftnetCPU{{CPU: 1, Processed: 0x680}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSoftnet([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if d := diff(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
	if _, err := parseSoftnet([]byte("zz 00\n")); err == nil {
		t.Error("accepted a bad column")
	}
}

func TestParseSNMP(t *testing.T) {
	snmp := `Ip: Forwarding DefaultTTL InReceives
Ip: 2 64 7087
Tcp: RtoAlgorithm MaxConn RetransSegs
Tcp: 1 -1 12
`
	netstat := `TcpExt: ListenOverflows ListenDrops TCPBacklogDrop TCPSomethingNew
TcpExt: 17 17 3 99
IpExt: InOctets
IpExt: 18446744073709551615
`
	m := map[string]map[string]int64{}
	if err := parseSNMP([]byte(snmp), m); err != nil {
		t.Fatal(err)
	}
	if err := parseSNMP([]byte(netstat), m); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int64{
		"Ip":     {"Forwarding": 2, "DefaultTTL": 64, "InReceives": 7087},
		"Tcp":    {"RtoAlgorithm": 1, "MaxConn": -1, "RetransSegs": 12},
		"TcpExt": {"ListenOverflows": 17, "ListenDrops": 17, "TCPBacklogDrop": 3, "TCPSomethingNew": 99},
		"IpExt":  {"InOctets": -1},
	}
	if d := diff(want, m); d != "" {
		t.Error(d)
	}
	for _, bad := range []string{"Ip: A B\nIp: 1\n", "Ip: A\nTcp: 1\n", "Ip: A\n"} {
		if err := parseSNMP([]byte(bad), map[string]map[string]int64{}); err == nil {
			t.Errorf("parseSNMP(%q) accepted", bad)
		}
	}
}

func TestParseIRQName(t *testing.T) {
	tests := []struct {
		name string
		want IRQOwner
		ok   bool
	}{
		{"i40e-eth0-TxRx-3", IRQOwner{Device: "eth0", Driver: "i40e", Role: "txrx", Queue: 3}, true},
		{"eth0-TxRx-3", IRQOwner{Device: "eth0", Role: "txrx", Queue: 3}, true},
		{"ice-ens1f0-TxRx-12", IRQOwner{Device: "ens1f0", Driver: "ice", Role: "txrx", Queue: 12}, true},
		{"eth1-rx-0", IRQOwner{Device: "eth1", Role: "rx", Queue: 0}, true},
		{"eth0-Tx-Rx-7", IRQOwner{Device: "eth0", Role: "txrx", Queue: 7}, true},
		{"i40e-0000:3b:00.0:misc", IRQOwner{Device: "0000:3b:00.0", Driver: "i40e", Role: "misc", Queue: -1}, true},
		{"mlx5_comp3@pci:0000:3b:00.0", IRQOwner{Device: "0000:3b:00.0", Driver: "mlx5", Role: "comp", Queue: 3}, true},
		{"mlx5_async@pci:0000:41:00.0", IRQOwner{Device: "0000:41:00.0", Driver: "mlx5", Role: "async", Queue: -1}, true},
		{"mlx5_async0@pci:0000:41:00.0", IRQOwner{Device: "0000:41:00.0", Driver: "mlx5", Role: "async", Queue: -1}, true},
		{"mlx4-1@0000:04:00.0", IRQOwner{Device: "0000:04:00.0", Driver: "mlx4", Role: "comp", Queue: 1}, true},
		{"virtio2-input.0", IRQOwner{Device: "virtio2", Driver: "virtio", Role: "input", Queue: 0}, true},
		{"virtio2-output.3", IRQOwner{Device: "virtio2", Driver: "virtio", Role: "output", Queue: 3}, true},
		{"virtio2-config", IRQOwner{Device: "virtio2", Driver: "virtio", Role: "config", Queue: -1}, true},
		{"virtio1-req.0", IRQOwner{Device: "virtio1", Driver: "virtio", Role: "req", Queue: 0}, true},
		{"nvme0q0", IRQOwner{Device: "nvme0", Driver: "nvme", Role: "admin", Queue: -1}, true},
		{"nvme0q4", IRQOwner{Device: "nvme0", Driver: "nvme", Role: "io", Queue: 4}, true},
		{"nvme0q0, nvme0q1", IRQOwner{Device: "nvme0", Driver: "nvme", Role: "admin", Queue: -1}, true},
		{"timer", IRQOwner{Queue: -1}, false},
		{"ACPI:Ged", IRQOwner{Queue: -1}, false},
		{"ahci[0000:00:17.0]", IRQOwner{Queue: -1}, false},
	}
	for _, tt := range tests {
		got, ok := ParseIRQName(tt.name)
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseIRQName(%q) = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSysctlPath(t *testing.T) {
	tests := []struct{ name, path string }{
		{"net.ipv4.tcp_rmem", "/proc/sys/net/ipv4/tcp_rmem"},
		{"net.ipv4.conf.eth0/100.rp_filter", "/proc/sys/net/ipv4/conf/eth0.100/rp_filter"},
		{"fs.file-max", "/proc/sys/fs/file-max"},
	}
	for _, tt := range tests {
		if got := SysctlPath(tt.name); got != tt.path {
			t.Errorf("SysctlPath(%q) = %q, want %q", tt.name, got, tt.path)
		}
	}
}

func TestTrimValue(t *testing.T) {
	for in, want := range map[string]string{
		"4096\t131072\t6291456\n": "4096 131072 6291456",
		"cubic\n":                 "cubic",
		"\n":                      "",
		"reno cubic bbr\n":        "reno cubic bbr",
	} {
		if got := trimValue([]byte(in)); got != want {
			t.Errorf("trimValue(%q) = %q, want %q", in, got, want)
		}
	}
}
