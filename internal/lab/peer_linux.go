package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/lowlat/lowlat/internal/qdisc"
)

// startCakeAutorate runs cake-autorate in the client namespace on the
// shaper the variant's fix installed, from the rate that shaper has, and
// waits until it has started its pingers. It must find cake: it drives nothing else.
func startCakeAutorate(e *env, a *AutorateRun) (*autorateChild, error) {
	if err := checkPeer(a, e.opts.CakeAutorate); err != nil {
		return nil, err
	}
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
	// cake-autorate takes its instance's name from config.NAME.sh.
	confPath := filepath.Join(dir, "config.lab.sh")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	c := &autorateChild{logPath: filepath.Join(dir, "cake-autorate.lab.log"), summarize: cakeAutorateSummary}
	if c.log, err = os.Create(filepath.Join(dir, "stdout")); err != nil {
		return nil, err
	}
	// It reads the interface's counters from /sys/class/net, which shows
	// the namespace of whoever mounted /sys: it gets a mount namespace of
	// its own with a /sys of the client's network namespace, as
	// "ip netns exec" would give it.
	c.cmd = exec.Command("bash", "-c", `mount -t sysfs sysfs /sys && exec bash "$0" "$@"`,
		filepath.Join(e.opts.CakeAutorate, "cake-autorate.sh"), confPath)
	c.cmd.Env = append(os.Environ(), "CAKE_AUTORATE_SCRIPT_PREFIX="+e.opts.CakeAutorate)
	c.cmd.Stdout, c.cmd.Stderr = c.log, c.log
	// Its own process group, so that its pingers go with it.
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Unshareflags: syscall.CLONE_NEWNS}
	e.phase("start "+a.String(), 0)
	if err := e.t.Client.Do(c.cmd.Start); err != nil {
		c.log.Close()
		return nil, fmt.Errorf("start cake-autorate: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, _ := os.ReadFile(c.logPath); strings.Contains(string(b), "Started cake-autorate") {
			c.done = make(chan struct{})
			go func() {
				if err := <-exited; err != nil {
					c.err = fmt.Errorf("cake-autorate: %v: %s", err, tail(c.logPath))
				}
				close(c.done)
			}()
			return c, nil
		}
		select {
		case werr := <-exited:
			c.log.Close()
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			return nil, fmt.Errorf("cake-autorate exited at start: %v: %s %s", werr, tail(c.logPath), tail(c.log.Name()))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			c.log.Close()
			return nil, fmt.Errorf("cake-autorate: not started after 15 s: %s %s", tail(c.logPath), tail(c.log.Name()))
		}
	}
}
