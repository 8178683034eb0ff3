package doctor

import "github.com/lowlat/lowlat/internal/runbooks"

// A finding's Source names the section of docs/runbooks.md that tells the
// field runbook it comes from: the problem, the figures measured before and
// after, and what lowlat does not copy from it.
const (
	runbook000 = runbooks.R000
	runbook001 = runbooks.R001
	runbook002 = runbooks.R002
	runbook003 = runbooks.R003
	runbook004 = runbooks.R004
)
