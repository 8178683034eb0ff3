package host

// CoalesceParams are the ethtool -C names of the interrupt coalescing
// parameters, in struct ethtool_coalesce order. LiveEthtool's Coalesce and
// SetCoalesce key their maps by them; Ethtool.Coalesce holds a subset.
var CoalesceParams = []string{
	"rx-usecs", "rx-frames", "rx-usecs-irq", "rx-frames-irq",
	"tx-usecs", "tx-frames", "tx-usecs-irq", "tx-frames-irq",
	"stats-block-usecs", "adaptive-rx", "adaptive-tx",
	"pkt-rate-low", "rx-usecs-low", "rx-frames-low", "tx-usecs-low", "tx-frames-low",
	"pkt-rate-high", "rx-usecs-high", "rx-frames-high", "tx-usecs-high", "tx-frames-high",
	"sample-interval",
}

// factCoalesce are the coalescing parameters Gather records per NIC.
var factCoalesce = []string{"rx-usecs", "rx-frames", "tx-usecs", "tx-frames", "adaptive-rx", "adaptive-tx"}

// FeatureState is one offload feature as ethtool -k shows it: on or off, and
// whether the driver lets it change (false is ethtool's "[fixed]").
type FeatureState struct {
	Active     bool
	Changeable bool
}
