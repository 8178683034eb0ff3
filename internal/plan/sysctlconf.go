package plan

import (
	"fmt"
	"strings"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/knob"
	"github.com/lowlat/lowlat/internal/persist"
)

// bootOverrides says, on every sysctl row lowlat can set (Persist), a boot-time
// sysctl file that would set the same key after lowlat's --persist file
// (/etc/sysctl.d/zz-lowlat-<txn>.conf) to another value: with --persist the
// value would not survive a reboot. Which files follow lowlat's depends on
// the loader (host.SysctlConf): under systemd-sysctl a file whose name
// sorts after lowlat's, under procps' sysctl --system also /etc/sysctl.conf,
// which it reads after every file. lowlat's own files (older transactions,
// older names) are a stack of lowlat's changes, not a conflict. A
// configuration lowlat could not read is said to be unknown; facts without
// any (a capture from before lowlat read it) say nothing.
func bootOverrides(f *host.Facts, changes []Change) {
	c := f.SysctlConf
	if c == nil {
		return
	}
	loader := f.Loader()
	for i := range changes {
		ch := &changes[i]
		name, ok := strings.CutPrefix(ch.Knob, "sysctl/")
		if !ok || !ch.Supported {
			continue
		}
		if over := c.After(loader, persist.SysctlPrefix, name, persist.OwnSysctlFile); len(over) > 0 {
			if o := over[0]; knob.NormalizeSysctl(o.Value) != ch.Desired {
				ch.Persist = fmt.Sprintf("%s (line %d) sets %s = %s after lowlat's --persist file (%s reads it later): a persisted %s would not survive a reboot", o.File, o.Line, name, o.Value, loader, ch.Desired)
			}
		} else if len(c.Unreadable) > 0 {
			ch.Persist = fmt.Sprintf("whether a file read at boot after lowlat's --persist file sets %s is unknown: %s could not be read", name, strings.Join(c.Unreadable, ", "))
		}
	}
}
