//go:build linux

package packages

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// standInSystemctl stands in for systemctl while the maintainer scripts
// run: this machine runs no systemd, and a test must not start or stop its
// services. It acts on a list of loaded units ("NAME active|inactive") as
// systemd acts on the verbs the scripts use, glob patterns included, and
// logs each effect with the maintainer script that caused it (dpkg's
// DPKG_MAINTSCRIPT_NAME, or rpm), that script's arguments (its shell's
// command line) and the lowlat version installed at that moment. It runs
// under dash and under busybox sh (the rpm test's root).
const standInSystemctl = `#!/bin/sh
set -f
units=@UNITS@
log=@LOG@
who=${DPKG_MAINTSCRIPT_NAME:-rpm}
verb= pats=
for a; do
	case $a in
	-*) ;;
	*) if [ -z "$verb" ]; then verb=$a; else pats="$pats $a"; fi ;;
	esac
done
set -- $(tr '\0' ' ' </proc/$PPID/cmdline 2>/dev/null)
[ $# -ge 2 ] && shift 2
args=$*
v=$(/usr/bin/lowlat version 2>/dev/null) && v=${v#lowlat } && v=${v%% *} || v=none
echo "call $verb$pats|$who|$args|$v" >>"$log"
rc=0
: >"$units.new"
while read -r unit st; do
	for p in $pats; do
		case $unit in
		$p)
			case $verb in
			try-restart) if [ "$st" = active ]; then echo "restart $unit|$who|$args|$v" >>"$log"; fi ;;
			start | restart | reload-or-restart) echo "$verb $unit|$who|$args|$v" >>"$log"; st=active ;;
			stop) if [ "$st" = active ]; then echo "stop $unit|$who|$args|$v" >>"$log"; fi; st=inactive ;;
			enable | disable | mask | unmask) echo "$verb $unit|$who|$args|$v" >>"$log" ;;
			is-active) [ "$st" = active ] || rc=3 ;;
			esac
			break
			;;
		esac
	done
	echo "$unit $st" >>"$units.new"
done <"$units"
mv "$units.new" "$units"
exit $rc
`

// fakeSystemd is the stand-in's state: the loaded units and the log, in a
// directory of the test (dir) that the scripts see as seen (the same path,
// or the path inside the rpm test's root).
type fakeSystemd struct {
	script, units, log string
}

// newFakeSystemd writes the stand-in into dir, which the maintainer scripts
// see at seen.
func newFakeSystemd(t *testing.T, dir, seen string) *fakeSystemd {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := strings.NewReplacer("@UNITS@", filepath.Join(seen, "units"), "@LOG@", filepath.Join(seen, "log"))
	sd := &fakeSystemd{script: filepath.Join(dir, "systemctl"), units: filepath.Join(dir, "units"), log: filepath.Join(dir, "log")}
	if err := os.WriteFile(sd.script, []byte(r.Replace(standInSystemctl)), 0o755); err != nil {
		t.Fatal(err)
	}
	sd.set(t, nil)
	return sd
}

// lowlatUnits are the package's units and instances a host may have loaded,
// and one unit that is not lowlat's: every test state names them all.
var lowlatUnits = []string{
	"lowlat-monitor.service", "lowlat-autorate@up0.service", "lowlat-autorate@eth9.service",
	"lowlat-boot.service", "lowlat-reassert.service", "lowlat-reassert.timer", "ssh.service",
}

// set makes the units in active active and the others inactive, and
// empties the log.
func (sd *fakeSystemd) set(t *testing.T, active []string) {
	t.Helper()
	var b strings.Builder
	for _, u := range lowlatUnits {
		st := "inactive"
		if slices.Contains(active, u) {
			st = "active"
		}
		b.WriteString(u + " " + st + "\n")
	}
	if err := os.WriteFile(sd.units, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sd.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// effects returns what the stand-in did since the last set or effects, as
// sorted "VERB UNIT|SCRIPT|ARGS|VERSION" lines, and every call it took (for
// the failure message); it empties the log.
func (sd *fakeSystemd) effects(t *testing.T) (effects []string, calls string) {
	t.Helper()
	b, err := os.ReadFile(sd.log)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l != "" && !strings.HasPrefix(l, "call ") {
			effects = append(effects, l)
		}
	}
	sort.Strings(effects)
	if err := os.WriteFile(sd.log, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return effects, string(b)
}

// checkEffects compares the stand-in's effects since the last check with
// want (sorted).
func (sd *fakeSystemd) checkEffects(t *testing.T, step string, want ...string) {
	t.Helper()
	got, calls := sd.effects(t)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: systemd saw (-want +got):\n%s\nevery systemctl call:\n%s", step, diffSets(want, got), calls)
	}
}

// diffSets says which of want got lacks (-) and which of got want lacks (+).
func diffSets(want, got []string) string {
	var b strings.Builder
	for _, w := range want {
		if !slices.Contains(got, w) {
			b.WriteString("-" + w + "\n")
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			b.WriteString("+" + g + "\n")
		}
	}
	return b.String()
}

// dpkg runs dpkg as if systemd ran this machine, for dpkg and its
// maintainer scripts alone: in a mount namespace of their own, with
// /run/systemd/system present (what the scripts test) and the stand-in
// over /usr/bin/systemctl; a policy-rc.d this machine may have (make deps
// puts one there while it installs) is replaced by one that allows.
func (sd *fakeSystemd) dpkg(t *testing.T, args ...string) string {
	t.Helper()
	allow := filepath.Join(filepath.Dir(sd.script), "policy-rc.d")
	if err := os.WriteFile(allow, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const setup = `set -e
run=/run/systemd; [ -d $run ] || run=/run
mount -t tmpfs lowlat-test $run
mkdir -p /run/systemd/system
mount --bind "$0" /usr/bin/systemctl
if [ -e /usr/sbin/policy-rc.d ]; then mount --bind "$1" /usr/sbin/policy-rc.d; fi
shift
exec dpkg "$@"`
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", setup, sd.script, allow}, args...)...)
	out, code := runCmd(t, cmd)
	if code != 0 {
		t.Fatalf("dpkg %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// rpmScriptlets takes the rpm through install, upgrade and erase in a root
// of its own (rpm --root): the scriptlets run there, chrooted, under busybox
// sh, with the stand-in systemctl and /run/systemd/system, and with /proc
// and /dev/null from this machine.
func rpmScriptlets(t *testing.T, rpm1, rpm2 string) {
	root := t.TempDir()
	for _, d := range []string{"bin", "usr/bin", "run/systemd/system", "dev", "proc", "var/tmp", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, "cp", "/bin/busybox", filepath.Join(root, "bin/busybox"))
	for _, applet := range []string{"sh", "tr", "mv", "sed", "rm", "rmdir", "cat", "mkdir"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", applet)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "dev/null"), nil, 0o666); err != nil {
		t.Fatal(err)
	}
	sd := newFakeSystemd(t, filepath.Join(root, "standin"), "/standin")
	if err := os.Symlink("/standin/systemctl", filepath.Join(root, "usr/bin/systemctl")); err != nil {
		t.Fatal(err)
	}
	rpm := func(args ...string) {
		t.Helper()
		const setup = `set -e
mount -t proc proc "$0/proc"
mount --bind /dev/null "$0/dev/null"
exec rpm --root "$0" "$@"`
		cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "sh", "-c", setup, root}, args...)...)
		if out, code := runCmd(t, cmd); code != 0 {
			t.Fatalf("rpm %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	rpm("--initdb")

	rpm("-i", "--nodeps", rpm1)
	sd.checkEffects(t, "rpm -i (install)")

	sd.set(t, []string{"lowlat-monitor.service", "lowlat-autorate@up0.service", "lowlat-boot.service", "lowlat-reassert.timer", "ssh.service"})
	rpm("-U", "--nodeps", rpm2)
	// The outgoing package's %postun (argument 1), with the new files in
	// place, restarts what runs and nothing else.
	sd.checkEffects(t, "rpm -U (upgrade)",
		"restart lowlat-monitor.service|rpm|1|"+v2,
		"restart lowlat-autorate@up0.service|rpm|1|"+v2)

	rpm("-e", "--nodeps", "lowlat")
	sd.checkEffects(t, "rpm -e (erase)",
		"stop lowlat-monitor.service|rpm|0|"+v2,
		"stop lowlat-autorate@up0.service|rpm|0|"+v2,
		"disable lowlat-monitor.service|rpm|0|"+v2)
}
