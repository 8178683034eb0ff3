package lab

import "time"

// Options tune a run.
type Options struct {
	// ID names the run: namespaces are NSPrefix+ID+"-client" and so on.
	// Empty picks a random one.
	ID string
	// Variants limits the run to these variants (the baseline always runs).
	Variants []string
	// Progress receives a Step whenever the run moves on; nil discards.
	Progress func(Step)
	// Environment is recorded in the result: "host" (default) or
	// "qemu-tcg" (set by lab vm for the guest's run).
	Environment string
	// Scale multiplies every measurement duration (1 when 0); tests and the
	// benchmark may shorten a run, never below the probes' minimums.
	Scale float64
	// Lowlat is the lowlat binary that runs a client application of its own
	// (App.OwnProcess); empty means this executable, which is lowlat when
	// "lowlat lab" runs (a test binary must name one).
	Lowlat string
	// CakeAutorate is a cake-autorate checkout (the directory holding
	// cake-autorate.sh), for variants whose autorate is that peer.
	CakeAutorate string
}

func (o *Options) dur(d time.Duration) time.Duration {
	if o.Scale <= 0 {
		return d
	}
	return time.Duration(float64(d) * o.Scale)
}

func (o *Options) step(s Step) {
	if o.Progress != nil {
		o.Progress(s)
	}
}

// CleanReport lists what Clean removed and what it left because a run is
// still going.
type CleanReport struct {
	Namespaces []string `json:"namespaces"`
	Processes  []int    `json:"processes"`
	TempDirs   []string `json:"temp_dirs"`
	States     []string `json:"states"`
	// Cgroups are client applications' cgroups (App.OwnProcess).
	Cgroups []string `json:"cgroups"`
	// Sockops are the sock_ops selectors removed, "namespace: selector".
	Sockops []string `json:"sockops"`
	// Files are autorate's policy, pid and state files of the lab's
	// client interface.
	Files []string `json:"files"`
	// Running are runs left alone: their process is still alive.
	Running []string `json:"running,omitempty"`
	Errors  []string `json:"errors,omitempty"`
}
