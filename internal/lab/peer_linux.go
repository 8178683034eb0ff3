package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// startCakeAutorate runs cake-autorate in the client namespace on the
// shaper the variant's fix installed, from the rate that shaper has, and
// waits until it has started its pingers. It must find cake: it drives
// nothing else. Run has checked the checkout and the programs it needs.
func startCakeAutorate(e *env, a *AutorateRun) (*autorateChild, error) {
	var sh qdisc.Shaper
	if err := e.t.Client.Do(func() error {
		l, err := netlink.LinkByName(ClientIf)
		if err != nil {
			return err
		}
		sh, err = qdisc.ReadShaper(l.Attrs().Index)
		return err
	}); err != nil {
		return nil, fmt.Errorf("cake-autorate: the client's shaper: %w", err)
	}
	if sh.Kind != "cake" {
		return nil, fmt.Errorf("cake-autorate drives only cake, and this kernel's capped-uplink shaper is %s (run it with 'lowlat lab vm')", sh.Kind)
	}
	dir := filepath.Join(e.tmp, "cake-autorate-"+e.v.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf, err := cakeAutorateConfig(a, sh.RateBps, dir)
	if err != nil {
		return nil, err
	}
	// cake-autorate takes its instance's name from config.NAME.sh, and
	// names its log after it; it keeps the log before its start's rotation
	// as .old.
	confPath := filepath.Join(dir, "config.lab.sh")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logPath, outPath := filepath.Join(dir, "cake-autorate.lab.log"), filepath.Join(dir, "stdout")
	c := &autorateChild{logs: []string{logPath + ".old", logPath, outPath}, summarize: cakeAutorateSummary}
	// It reads the interface's counters from /sys/class/net, which shows
	// the namespace of whoever mounted /sys: it gets a mount namespace of
	// its own with a /sys of the client's network namespace, as
	// "ip netns exec" would give it.
	c.cmd = exec.Command("bash", "-c", `mount -t sysfs sysfs /sys && exec bash "$0" "$@"`,
		filepath.Join(e.opts.CakeAutorate, "cake-autorate.sh"), confPath)
	c.cmd.Env = append(os.Environ(), "CAKE_AUTORATE_SCRIPT_PREFIX="+e.opts.CakeAutorate)
	// Its own process group, so that its pingers go with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	if err := c.start(e, a, outPath, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Contains(string(b), "Started cake-autorate")
	}); err != nil {
		return nil, err
	}
	return c, nil
}
