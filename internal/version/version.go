// Package version reports which lowlat build is running. Every JSON result embeds
// it so a measurement or a journal can be traced to the binary that produced it.
package version

import "runtime/debug"

// Version is set at link time with -ldflags "-X github.com/lowlat/lowlat/internal/version.Version=v1.2.3".
// When unset it falls back to the module version or VCS revision from the build info.
var Version = ""

// String returns the version of this binary, never empty.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return "dev"
}
