package txn

// crashAt is set only in builds with the lowlat_testhooks tag (see
// crash_testhooks.go): the integration tests kill -9 an apply at every point.
var crashAt func(stage string, n int)

func crashPoint(stage string, n int) {
	if crashAt != nil {
		crashAt(stage, n)
	}
}

// bootIDOverride pretends a reboot happened (test builds only).
var bootIDOverride string

// watchdogRootOverride is SpawnWatchdog's host root (test builds only).
var watchdogRootOverride string
