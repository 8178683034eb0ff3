package lab

import (
	"fmt"
	"time"

	"github.com/lowlat/lowlat/internal/passive"
)

// PassiveLook is what a scenario measures of its real traffic in the
// kernel, and the figures it reports beside the active ones.
type PassiveLook struct {
	// Server: in the server namespace; else the client's.
	Server  bool
	Config  passive.Config
	Figures []PassiveFigure
}

// PassiveFigure is one derived figure: a statistic of the series whose
// keys start with Prefix and end with Suffix (a device's queues merged),
// in ms.
type PassiveFigure struct {
	Name   string // derived.<Name>
	Prefix string // of the series' keys (passive.Series.Key)
	Stat   func(*passive.Hist) time.Duration
	Suffix string
}

func p50(h *passive.Hist) time.Duration { return h.Quantile(0.5) }
func p99(h *passive.Hist) time.Duration { return h.Quantile(0.99) }

// mean is exact: the kernel keeps the values' sum.
func mean(h *passive.Hist) time.Duration { return h.Mean() }

// passiveRTT looks at the TCP RTT samples of port's connections, ns-side.
func passiveRTT(server bool, port uint16) *PassiveLook {
	key := fmt.Sprintf("rtt tcp/%d", port)
	return &PassiveLook{Server: server, Config: passive.Config{TCP: true, Ports: []passive.Port{{Proto: "tcp", Port: port}}},
		Figures: []PassiveFigure{{Name: "passive_rtt_p50_ms", Prefix: key, Stat: p50}, {Name: "passive_rtt_p99_ms", Prefix: key, Stat: p99}}}
}

// passiveEgress looks at the queueing of every packet leaving the server's
// NIC (all its queues), and apart at the game flow's (DSCP EF): runbook
// 000's server queueing, as watch --dscp EF reads it in production.
func passiveEgress() *PassiveLook {
	dev := "egress " + ServerIf + " "
	return &PassiveLook{Server: true, Config: passive.Config{Egress: true, Devices: []string{ServerIf}, DSCP: []int{46}},
		Figures: []PassiveFigure{
			{Name: "passive_egress_p50_ms", Prefix: dev, Stat: p50},
			{Name: "passive_egress_p99_ms", Prefix: dev, Stat: p99},
			{Name: "passive_egress_ef_p99_ms", Prefix: dev, Suffix: " dscp:EF", Stat: p99},
		}}
}

// passiveFirstBytes times the server's delivery of the first 300 KB and
// 1 MB of each connection its port accepts.
func passiveFirstBytes(port uint16) *PassiveLook {
	k := func(n string) string { return fmt.Sprintf("first_bytes tcp/%d %s", port, n) }
	return &PassiveLook{Server: true, Config: passive.Config{TCP: true, Ports: []passive.Port{{Proto: "tcp", Port: port}}, FirstBytes: []uint64{300_000, 1_000_000}},
		Figures: []PassiveFigure{{Name: "passive_first_300k_ms", Prefix: k("300KB"), Stat: mean}, {Name: "passive_first_1m_ms", Prefix: k("1MB"), Stat: mean}}}
}
