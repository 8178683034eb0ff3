package doctor

// A finding's Source names the section of docs/runbooks.md that tells the
// field runbook it comes from: the problem, the figures measured before and
// after, and what lowlat does not copy from it.
const (
	runbook000 = "docs/runbooks.md#000-cross-border-game-server"
	runbook001 = "docs/runbooks.md#001-small-tcp-messages-and-nagle"
	runbook002 = "docs/runbooks.md#002-interrupt-and-queue-placement"
	runbook003 = "docs/runbooks.md#003-bufferbloat-behind-a-capped-uplink"
	runbook004 = "docs/runbooks.md#004-time-to-first-frame-on-a-streaming-edge"
)
