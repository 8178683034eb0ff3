//go:build linux

// Package packages tests the .deb and .rpm that 'make package' builds
// (deploy/package): Debian's lintian and rpm read them, and the .deb is
// installed on this machine with dpkg, used, upgraded, removed and purged,
// with a transaction in force in a test namespace throughout.
package packages

import (
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/lowlat/lowlat/internal/testnet"
	"github.com/vishvananda/netlink"
)

func TestMain(m *testing.M) {
	testnet.Main(m, func() {
		if builtDir != "" {
			os.RemoveAll(builtDir)
		}
	})
}

const (
	v1, v2   = "0.1.0", "0.1.1"
	exe      = "/usr/bin/lowlat"
	stateDir = "/var/lib/lowlat"
)

// files is every path the packages install (besides the man pages, checked
// apart), by packager.
var files = map[string][]string{
	"common": {
		"/usr/bin/lowlat",
		"/etc/lowlat",
		"/etc/lowlat/monitor.toml",
		"/usr/lib/systemd/system/lowlat-boot.service",
		"/usr/lib/systemd/system/lowlat-reassert.service",
		"/usr/lib/systemd/system/lowlat-reassert.timer",
		"/usr/lib/systemd/system/lowlat-monitor.service",
		"/usr/lib/systemd/system/lowlat-autorate@.service",
		"/usr/share/bash-completion/completions/lowlat",
		"/usr/share/fish/vendor_completions.d/lowlat.fish",
		"/var/lib/lowlat",
	},
	"deb": {
		"/usr/share/zsh/vendor-completions/_lowlat",
		"/usr/share/doc/lowlat/copyright",
		"/usr/share/doc/lowlat/changelog.gz",
		"/usr/share/lintian/overrides/lowlat",
	},
	"rpm": {
		"/usr/share/zsh/site-functions/_lowlat",
	},
}

// TestPackages builds both versions' packages, checks them with lintian and
// rpm, and takes the .deb through install, upgrade, remove and purge on this
// machine.
func TestPackages(t *testing.T) {
	testnet.Heavy(t, "builds eight packages and installs one with dpkg")
	if os.Geteuid() != 0 {
		t.Skip("installs a package with dpkg: run as root (make test does)")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb", "lintian", "rpm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: make deps installs it (Debian packages dpkg, lintian, rpm)", tool)
		}
	}
	pkg1 := built(t)
	pkg2 := filepath.Join(t.TempDir(), v2)
	build(t, v2, pkg2, "amd64")

	t.Run("lintian", func(t *testing.T) {
		for _, arch := range []string{"amd64", "arm64"} {
			deb := filepath.Join(pkg1, "lowlat_"+v1+"_"+arch+".deb")
			// Every remaining warning is overridden, with its reason, in
			// deploy/package/lintian-overrides: any tag shown is a failure.
			out, code := run(t, "lintian", "--pedantic", "--fail-on", "error,warning,info,pedantic", deb)
			if code != 0 || len(lintianTags(out)) > 0 {
				t.Errorf("lintian %s: exit %d\n%s", filepath.Base(deb), code, out)
			}
		}
	})
	t.Run("deb", func(t *testing.T) { checkDebs(t, pkg1) })
	t.Run("rpm", func(t *testing.T) { checkRPMs(t, pkg1) })
	t.Run("lifecycle", func(t *testing.T) {
		lifecycle(t, filepath.Join(pkg1, "lowlat_"+v1+"_amd64.deb"), filepath.Join(pkg2, "lowlat_"+v2+"_amd64.deb"))
	})
	t.Run("rpm scriptlets", func(t *testing.T) {
		rpmScriptlets(t, filepath.Join(pkg1, "lowlat-"+v1+".x86_64.rpm"), filepath.Join(pkg2, "lowlat-"+v2+".x86_64.rpm"))
	})
}

var (
	builtOnce sync.Once
	builtDir  string
	builtErr  error
)

// built returns the directory holding version v1's packages, every
// architecture, building them once for all the tests of this package.
func built(t *testing.T) string {
	t.Helper()
	builtOnce.Do(func() {
		builtDir, builtErr = os.MkdirTemp("", "lowlat-packages-")
		if builtErr == nil {
			builtErr = buildErr(v1, builtDir)
		}
	})
	if builtErr != nil {
		t.Fatal(builtErr)
	}
	return builtDir
}

// build runs the packages' build script for version into out.
func build(t *testing.T, version, out string, arches ...string) {
	t.Helper()
	if err := buildErr(version, out, arches...); err != nil {
		t.Fatal(err)
	}
}

func buildErr(version, out string, arches ...string) error {
	root, err := filepath.Abs("../..")
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(root, "deploy/package/build.sh"), append([]string{version, out}, arches...)...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build.sh %s: %v\n%s", version, err, b)
	}
	return nil
}

// run runs a command and returns its combined output and exit code.
func run(t *testing.T, name string, args ...string) (string, int) {
	t.Helper()
	return runCmd(t, exec.Command(name, args...))
}

func runCmd(t *testing.T, cmd *exec.Cmd) (string, int) {
	t.Helper()
	b, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(b), 0
	case errors.As(err, &ee):
		return string(b), ee.ExitCode()
	}
	t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	return "", 0
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, code := run(t, name, args...)
	if code != 0 {
		t.Fatalf("%s %s: exit %d\n%s", name, strings.Join(args, " "), code, out)
	}
	return out
}

// lintianTags returns lintian's tag lines (E:, W:, I:, P:, X:, O: are
// overridden ones and do not count).
func lintianTags(out string) []string {
	var tags []string
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 2 && l[1] == ':' && strings.ContainsRune("EWIPX", rune(l[0])) {
			tags = append(tags, l)
		}
	}
	return tags
}

func checkDebs(t *testing.T, dir string) {
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		deb := filepath.Join(dir, "lowlat_"+v1+"_"+arch+".deb")
		for field, want := range map[string]string{"Package": "lowlat", "Version": v1, "Architecture": arch} {
			if got := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, field)); got != want {
				t.Errorf("%s: %s %q, want %q", filepath.Base(deb), field, got, want)
			}
		}
		// The static binary needs no libc: no Depends at all.
		if got := strings.TrimSpace(mustRun(t, "dpkg-deb", "-f", deb, "Depends")); got != "" {
			t.Errorf("%s: Depends %q", filepath.Base(deb), got)
		}
		if got := strings.TrimSpace(mustRun(t, "dpkg-deb", "--info", deb, "conffiles")); got != "/etc/lowlat/monitor.toml" {
			t.Errorf("%s: conffiles %q", filepath.Base(deb), got)
		}
		listing := mustRun(t, "dpkg-deb", "-c", deb)
		paths, modes := debListing(listing)
		checkFiles(t, filepath.Base(deb), paths, append(slices.Clone(files["common"]), files["deb"]...))
		if modes["/var/lib/lowlat"] != "drwx------" {
			t.Errorf("%s: /var/lib/lowlat is %s, want drwx------", filepath.Base(deb), modes["/var/lib/lowlat"])
		}
		if modes["/usr/bin/lowlat"] != "-rwxr-xr-x" {
			t.Errorf("%s: /usr/bin/lowlat is %s", filepath.Base(deb), modes["/usr/bin/lowlat"])
		}
		// The binary is for the package's architecture, and static.
		x := t.TempDir()
		mustRun(t, "dpkg-deb", "-x", deb, x)
		f, err := elf.Open(filepath.Join(x, exe))
		if err != nil {
			t.Fatal(err)
		}
		if f.Machine != machine {
			t.Errorf("%s: binary for %v, want %v", filepath.Base(deb), f.Machine, machine)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s: binary has an interpreter: not static", filepath.Base(deb))
			}
		}
		f.Close()
	}
}

// debListing reads dpkg-deb -c: path (without the leading ".") → mode.
func debListing(out string) ([]string, map[string]string) {
	var paths []string
	modes := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 {
			continue
		}
		p := strings.TrimSuffix(strings.TrimPrefix(f[len(f)-1], "."), "/")
		paths = append(paths, p)
		modes[p] = f[0]
	}
	return paths, modes
}

// checkFiles compares a package's files with want: every wanted path is
// there, and the only others are man pages (one per visible command,
// lowlat.1.gz among them) and the directories that hold them all.
func checkFiles(t *testing.T, pkg string, have, want []string) {
	t.Helper()
	dirs := map[string]bool{}
	for _, p := range want {
		for d := filepath.Dir(p); d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	dirs["/usr/share/man/man1"] = true
	var man int
	for _, p := range have {
		switch {
		case slices.Contains(want, p), dirs[p]:
		case strings.HasPrefix(p, "/usr/share/man/man1/lowlat") && strings.HasSuffix(p, ".1.gz"):
			man++
		case p == "" || p == "/usr/share/man" || p == "/usr/share":
		default:
			t.Errorf("%s: unexpected file %s", pkg, p)
		}
	}
	for _, p := range want {
		if !slices.Contains(have, p) {
			t.Errorf("%s: lacks %s", pkg, p)
		}
	}
	if !slices.Contains(have, "/usr/share/man/man1/lowlat.1.gz") || !slices.Contains(have, "/usr/share/man/man1/lowlat-apply.1.gz") || man < 20 {
		t.Errorf("%s: %d man pages, lowlat.1.gz and lowlat-apply.1.gz among them expected", pkg, man)
	}
}

func checkRPMs(t *testing.T, dir string) {
	for _, arch := range []string{"x86_64", "aarch64"} {
		p := filepath.Join(dir, "lowlat-"+v1+"."+arch+".rpm")
		info := mustRun(t, "rpm", "-qp", "--qf", "%{NAME}|%{VERSION}|%{ARCH}|%{LICENSE}|%{SUMMARY}|%{URL}", p)
		want := "lowlat|" + v1 + "|" + arch + "|Apache-2.0|Diagnose, tune, prove and watch network latency on servers|https://github.com/lowlat/lowlat"
		if info != want {
			t.Errorf("%s: rpm -qp --qf: %q\nwant %q", filepath.Base(p), info, want)
		}
		// rpm -qip is what an operator reads: it must name the package.
		if qi := mustRun(t, "rpm", "-qip", p); !strings.Contains(qi, "Name        : lowlat") || !strings.Contains(qi, "Architecture: "+arch) {
			t.Errorf("rpm -qip %s:\n%s", filepath.Base(p), qi)
		}
		list := strings.Fields(mustRun(t, "rpm", "-qlp", p))
		checkFiles(t, filepath.Base(p), list, append(slices.Clone(files["common"]), files["rpm"]...))
		if c := strings.TrimSpace(mustRun(t, "rpm", "-qpc", p)); c != "/etc/lowlat/monitor.toml" {
			t.Errorf("%s: config files %q", filepath.Base(p), c)
		}
		// %config(noreplace), and the journal's directory 0700.
		for _, l := range strings.Split(mustRun(t, "rpm", "-qp", "--qf", "[%{FILEFLAGS:fflags} %{FILEMODES:perms} %{FILENAMES}\n]", p), "\n") {
			f := strings.Fields(l)
			switch {
			case len(f) == 3 && f[2] == "/etc/lowlat/monitor.toml" && f[0] != "cn":
				t.Errorf("%s: monitor.toml flags %q, want cn (config, noreplace)", filepath.Base(p), f[0])
			case len(f) >= 2 && f[len(f)-1] == stateDir && f[len(f)-2] != "drwx------":
				t.Errorf("%s: %s is %s", filepath.Base(p), stateDir, f[len(f)-2])
			}
		}
		scripts := mustRun(t, "rpm", "-qp", "--scripts", p)
		for _, s := range []string{"postinstall scriptlet", "preuninstall scriptlet", "postuninstall scriptlet", "__removing"} {
			if !strings.Contains(scripts, s) {
				t.Errorf("%s: scripts lack %q", filepath.Base(p), s)
			}
		}
	}
}

// lifecycle installs deb1, uses it, applies a transaction in a namespace
// with the installed binary and the default journal, upgrades to deb2,
// removes and purges with the transaction in force, reinstalls, rolls back
// and purges again. dpkg runs as if systemd ran the machine, with a
// stand-in systemctl that shows what the maintainer scripts start, stop and
// restart, and in which phase.
func lifecycle(t *testing.T, deb1, deb2 string) {
	guardInstall(t)
	hostBefore := hostState(t)
	sdDir := t.TempDir()
	sd := newFakeSystemd(t, sdDir, sdDir)

	// Install: nothing is started, nothing on the host changes but the
	// package's own files.
	sd.dpkg(t, "-i", deb1)
	sd.checkEffects(t, "dpkg -i (install)")
	if v := mustRun(t, exe, "version"); !strings.Contains(v, v1) {
		t.Errorf("lowlat version after installing %s: %q", v1, v)
	}
	if out, code := run(t, exe, "doctor", "--json"); code != 0 || !json.Valid([]byte(out)) {
		t.Errorf("lowlat doctor --json: exit %d\n%s", code, out)
	}
	if diff := testnet.DiffLines(hostBefore, hostState(t)); diff != "" {
		t.Errorf("installing changed the host beyond the package's files:\n%s", diff)
	}
	if pids := running(t); len(pids) > 0 {
		t.Errorf("installing started %s: %v", exe, pids)
	}
	if fi, err := os.Stat(stateDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s after install: %v %v", stateDir, fi, err)
	}

	// A transaction in force, journaled in the default journal.
	ns := testnet.New(t)
	uplink(t, ns)
	before := ns.Snapshot(t, "up0")
	out, code := runCmd(t, ns.Command(exe, "apply", "--yes", "--json", "--profile", "capped-uplink", "--set", "rate=2mbit", "--set", "down=20mbit"))
	var res struct {
		Txn     string            `json:"txn"`
		Changed []json.RawMessage `json:"changes"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || res.Txn == "" || len(res.Changed) == 0 {
		t.Fatalf("apply with the installed binary: exit %d\n%s", code, out)
	}
	applied := ns.Snapshot(t, "up0")
	if applied == before {
		t.Fatal("apply changed nothing in the namespace")
	}
	// An operator's edit of the example config.
	const edit = "\n# edited by the operator\n"
	appendFile(t, "/etc/lowlat/monitor.toml", edit)

	// Upgrade: the journal and the transaction survive, the edit too. The
	// new postinst restarts the daemons that run (the monitor and one
	// autorate instance of two), with the new binary in place, and nothing
	// else.
	sd.set(t, []string{"lowlat-monitor.service", "lowlat-autorate@up0.service", "lowlat-boot.service", "lowlat-reassert.timer", "ssh.service"})
	sd.dpkg(t, "-i", deb2)
	sd.checkEffects(t, "dpkg -i (upgrade)",
		"restart lowlat-monitor.service|postinst|configure "+v1+"|"+v2,
		"restart lowlat-autorate@up0.service|postinst|configure "+v1+"|"+v2)
	if v := mustRun(t, exe, "version"); !strings.Contains(v, v2) {
		t.Errorf("lowlat version after upgrading to %s: %q", v2, v)
	}
	inForce(t, ns, res.Txn)
	if got := ns.Snapshot(t, "up0"); got != applied {
		t.Errorf("the upgrade changed the namespace:\n%s", testnet.DiffLines(applied, got))
	}
	if b, _ := os.ReadFile("/etc/lowlat/monitor.toml"); !strings.HasSuffix(string(b), edit) {
		t.Errorf("the upgrade replaced the operator's monitor.toml")
	}

	// Remove: the prerm stops the daemons that run, the tuning stays, and
	// the output says how to roll back.
	out = sd.dpkg(t, "--remove", "lowlat")
	sd.checkEffects(t, "dpkg --remove",
		"stop lowlat-monitor.service|prerm|remove|"+v2,
		"stop lowlat-autorate@up0.service|prerm|remove|"+v2,
		"disable lowlat-monitor.service|prerm|remove|"+v2)
	t.Logf("dpkg --remove with %s in force:\n%s", res.Txn, out)
	for _, want := range []string{"stay in force", res.Txn, "lowlat rollback --all"} {
		if !strings.Contains(out, want) {
			t.Errorf("dpkg --remove does not say %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(exe); err == nil {
		t.Errorf("%s is still there after removal", exe)
	}
	if got := ns.Snapshot(t, "up0"); got != applied {
		t.Errorf("the removal changed the namespace:\n%s", testnet.DiffLines(applied, got))
	}

	// Purge with the transaction in force: a loud warning, the journal kept.
	out = sd.dpkg(t, "--purge", "lowlat")
	sd.checkEffects(t, "dpkg --purge")
	t.Logf("dpkg --purge with %s in force:\n%s", res.Txn, out)
	if !strings.Contains(out, "WARNING: purge keeps "+stateDir) || !strings.Contains(out, res.Txn) {
		t.Errorf("dpkg --purge with a transaction in force does not warn:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(stateDir, "journal")); err != nil {
		t.Errorf("purge lost the journal of a transaction in force: %v", err)
	}
	if _, err := os.Stat("/etc/lowlat/monitor.toml"); err == nil {
		t.Errorf("purge left /etc/lowlat/monitor.toml")
	}

	// Reinstall, roll back from the kept journal, purge: all gone.
	sd.dpkg(t, "-i", deb2)
	sd.checkEffects(t, "dpkg -i (reinstall after purge)")
	inForce(t, ns, res.Txn)
	if out, code := runCmd(t, ns.Command(exe, "rollback", "--all")); code != 0 {
		t.Fatalf("rollback --all after reinstalling: exit %d\n%s", code, out)
	}
	if got := ns.Snapshot(t, "up0"); got != before {
		t.Errorf("rollback did not restore the namespace:\n%s", testnet.DiffLines(before, got))
	}
	out = sd.dpkg(t, "--purge", "lowlat")
	sd.checkEffects(t, "dpkg --purge (removes first; nothing runs)", "disable lowlat-monitor.service|prerm|remove|"+v2)
	if strings.Contains(out, "WARNING") || strings.Contains(out, "stay in force") {
		t.Errorf("purge with nothing in force warns:\n%s", out)
	}
	for _, p := range []string{stateDir, "/etc/lowlat", exe} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s is left after purge", p)
		}
	}
	if diff := testnet.DiffLines(hostBefore, hostState(t)); diff != "" {
		t.Errorf("after purge the host differs from before the install:\n%s", diff)
	}
}

// inForce checks that status, in the namespace, shows txn in force and no
// drift.
func inForce(t *testing.T, ns *testnet.NS, txn string) {
	t.Helper()
	out, code := runCmd(t, ns.Command(exe, "status", "--json"))
	var st struct {
		Active []struct{ ID string } `json:"active"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Active) != 1 || st.Active[0].ID != txn {
		t.Errorf("status: want %s in force and no drift, exit %d\n%s", txn, code, out)
	}
}

// uplink gives the namespace a veth with an address and a default route,
// as the profiles expect of a host.
func uplink(t *testing.T, ns *testnet.NS) {
	t.Helper()
	ns.Veth(t, "up0", "up1", nil, 1)
	if err := ns.Do(func() error {
		l, err := netlink.LinkByName("up0")
		if err != nil {
			return err
		}
		addr, _ := netlink.ParseAddr("10.79.0.2/24")
		if err := netlink.AddrAdd(l, addr); err != nil {
			return err
		}
		_, dst, _ := net.ParseCIDR("0.0.0.0/0")
		return netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Dst: dst, Gw: net.ParseIP("10.79.0.1")})
	}); err != nil {
		t.Fatal(err)
	}
}

// hostState is what installing must not change: the files under the
// directories where lowlat writes tuning (sysctl.d, systemd units, its
// state), with their modes and sizes, and this host's net.core and net.ipv4
// sysctls. The package's own files are left out.
func hostState(t *testing.T) string {
	t.Helper()
	var lines []string
	own := map[string]bool{}
	for _, p := range append(append(slices.Clone(files["common"]), files["deb"]...), "/usr/share/man/man1") {
		own[p] = true
	}
	for _, root := range []string{"/etc/sysctl.d", "/etc/systemd/system", "/usr/lib/systemd/system", "/etc/lowlat", stateDir} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || own[p] {
				return nil
			}
			lines = append(lines, fmt.Sprintf("%s %v %d", p, fi.Mode(), fi.Size()))
			return nil
		})
	}
	for _, d := range []string{"/proc/sys/net/core", "/proc/sys/net/ipv4"} {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() || strings.HasSuffix(e.Name(), "_key") {
				continue
			}
			if b, err := os.ReadFile(filepath.Join(d, e.Name())); err == nil {
				lines = append(lines, d+"/"+e.Name()+"="+strings.Join(strings.Fields(string(b)), " "))
			}
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// running lists the processes whose executable is the installed binary.
func running(t *testing.T) []string {
	t.Helper()
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if l, err := os.Readlink("/proc/" + e.Name() + "/exe"); err == nil && l == exe {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// guardInstall makes this machine's lowlat paths the test's own until it
// ends: whatever was there is moved aside (backup), and a package the test
// installed is purged before it is put back.
func guardInstall(t *testing.T) {
	t.Helper()
	if st := dpkgState(); st != "" && st != "not-installed" {
		t.Fatalf("a lowlat package is on this machine (dpkg: %s): this test installs and purges its own; remove it first", st)
	}
	backup(t)
	t.Cleanup(func() {
		if st := dpkgState(); st != "" && st != "not-installed" {
			if b, err := exec.Command("dpkg", "--purge", "lowlat").CombinedOutput(); err != nil {
				t.Errorf("cleanup: dpkg --purge lowlat: %v\n%s", err, b)
			}
		}
	})
}

// dpkgState is the lowlat package's state as dpkg has it ("installed",
// "config-files", "not-installed" after a purge it remembers, ...), "" when
// dpkg knows no lowlat.
func dpkgState() string {
	out, _ := exec.Command("dpkg-query", "-W", "-f", "${db:Status-Status}", "lowlat").Output()
	return strings.TrimSpace(string(out))
}

// backup moves aside whatever of the package's paths and lowlat's state
// this machine already has (a lowlat installed by hand, a journal), and
// puts it back when the test ends, after the package is purged.
func backup(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	paths := append(append(slices.Clone(files["common"]), files["deb"]...), "/usr/share/man/man1/lowlat.1.gz")
	var moved [][2]string
	for _, p := range paths {
		if p == "/etc/lowlat/monitor.toml" {
			continue // moved with /etc/lowlat
		}
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		to := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
		if err := os.Rename(p, to); err != nil {
			t.Fatalf("back up %s: %v", p, err)
		}
		moved = append(moved, [2]string{to, p})
	}
	t.Cleanup(func() {
		for _, p := range []string{stateDir, "/etc/lowlat"} {
			os.RemoveAll(p)
		}
		for _, m := range moved {
			os.RemoveAll(m[1])
			if err := os.Rename(m[0], m[1]); err != nil {
				t.Errorf("restore %s: %v", m[1], err)
			}
		}
	})
}
