package testnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// Chromium returns the headless browser that renders lowlat's HTML pages
// in tests, or skips: a missing browser fails the test when
// LOWLAT_VM_REQUIRED is set (as 'make test' sets it), so the browser check
// is never skipped in CI.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("LOWLAT_VM_REQUIRED") != "" {
		t.Fatal("chromium not found (apt-get install chromium); LOWLAT_VM_REQUIRED makes the browser check mandatory")
	}
	t.Skip("chromium not found (apt-get install chromium)")
	return ""
}

// ChromiumArgs are the flags a headless run needs here: no sandbox (root),
// nothing fetched in the background (the network is closed), a fresh
// profile under dir, and a window of w×h pixels.
func ChromiumArgs(dir string, w, h int) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--hide-scrollbars", "--window-size=" + strconv.Itoa(w) + "," + strconv.Itoa(h)}
}
