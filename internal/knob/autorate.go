package knob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/lowlat/lowlat/internal/atomicfile"
	"github.com/lowlat/lowlat/internal/autorate"
)

// autorateKnob is lowlat autorate's policy for one interface
// ("autorate/eth0"): the policy file autorate.PolicyPath(iface), whose
// content is the canonical autorate.Policy string, or Absent. Only the
// policy is journaled; the rate the daemon moves is not (the root qdisc
// knob tolerates it, see QdiscRootSatisfied).
//
// Writing Absent removes the policy and stops the daemon named in
// autorate.PIDPath(iface), waiting until it has exited: on SIGTERM the
// daemon sets the shaper back to its base rate, and a rollback restores the
// qdisc right after, which must not race with a daemon still at work.
type autorateKnob struct {
	sys   *System
	iface string
}

// AutorateID returns the knob ID of iface's autorate policy.
func AutorateID(iface string) string { return "autorate/" + iface }

func newAutorate(sys *System, iface string) (Knob, error) {
	if len(iface) > 15 || strings.ContainsAny(iface, "/ ") {
		return nil, fmt.Errorf("autorate knob %q: want autorate/<iface>", iface)
	}
	return &autorateKnob{sys: sys, iface: iface}, nil
}

func (k *autorateKnob) ID() string { return AutorateID(k.iface) }

// autorateStopTimeout is how long writing Absent waits for the daemon to
// exit after SIGTERM (a variable so tests can shorten it).
var autorateStopTimeout = 5 * time.Second

// Read returns the policy file's content, trimmed, or Absent when there is
// none. A policy file that is gone while its daemon still runs (a removal
// whose stop failed, or was cut short) reads as a value of its own, so a
// rollback that retries writes Absent again and stops the daemon.
func (k *autorateKnob) Read(ctx context.Context) (string, error) {
	b, err := os.ReadFile(k.sys.path(autorate.PolicyPath(k.iface)))
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: read %s: %w", k.ID(), autorate.PolicyPath(k.iface), err)
	}
	pid, err := k.daemonPID()
	if err != nil {
		return "", err
	}
	if pid > 0 {
		return fmt.Sprintf(orphanFormat, pid), nil
	}
	return Absent, nil
}

// orphanFormat is the value of a knob whose policy is gone while its daemon
// (the pid) still runs.
const orphanFormat = "<absent; daemon pid %d still runs>"

// Validate accepts Absent and a policy for this knob's interface.
func (k *autorateKnob) Validate(v string) error {
	_, err := k.parse(v)
	return err
}

func (k *autorateKnob) parse(v string) (autorate.Policy, error) {
	if v == Absent {
		return autorate.Policy{}, nil
	}
	p, err := autorate.ParsePolicy(v)
	if err != nil {
		return p, err
	}
	if p.Iface != k.iface {
		return p, fmt.Errorf("the policy is for %s, not %s", p.Iface, k.iface)
	}
	return p, nil
}

// Restorable refuses a previous value lowlat could not write back: a policy
// file that does not parse (written by hand), or a daemon running without
// one.
func (k *autorateKnob) Restorable(v string) error {
	var pid int
	if _, err := fmt.Sscanf(v, orphanFormat, &pid); err == nil {
		return fmt.Errorf("an autorate daemon (pid %d) runs for %s without a policy", pid, k.iface)
	}
	if err := k.Validate(v); err != nil {
		return fmt.Errorf("%s holds %q: %w", autorate.PolicyPath(k.iface), v, err)
	}
	return nil
}

// Fallback is no policy: no daemon moves the shaper.
func (k *autorateKnob) Fallback(string) string { return Absent }

// Write writes the policy in canonical form (atomically, mode 0644), or
// for Absent removes it and stops the daemon.
func (k *autorateKnob) Write(ctx context.Context, value string) error {
	p, err := k.parse(value)
	if err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	path := k.sys.path(autorate.PolicyPath(k.iface))
	if value == Absent {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: remove %s: %w", k.ID(), autorate.PolicyPath(k.iface), err)
		}
		if err := atomicfile.SyncDir(filepath.Dir(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: %w", k.ID(), err)
		}
		return k.stopDaemon(ctx)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("%s: %w", k.ID(), err)
	}
	if err := atomicfile.Write(path, []byte(p.String()+"\n"), 0o644); err != nil {
		return fmt.Errorf("%s: write %s: %w", k.ID(), autorate.PolicyPath(k.iface), err)
	}
	return nil
}

// daemonPID returns the pid of iface's running autorate daemon, 0 when none
// runs: no pid file, a pid that is gone (a zombie counts as gone: it has
// exited), or one that a process other than an autorate daemon has taken
// over since, or this very process.
func (k *autorateKnob) daemonPID() (int, error) {
	b, err := os.ReadFile(k.sys.path(autorate.PIDPath(k.iface)))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: read %s: %w", k.ID(), autorate.PIDPath(k.iface), err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: %s holds %q, not a pid (remove it if no autorate daemon runs for %s)", k.ID(), autorate.PIDPath(k.iface), strings.TrimSpace(string(b)), k.iface)
	}
	if pid == os.Getpid() || !autorateRuns(pid) {
		return 0, nil
	}
	return pid, nil
}

// stopDaemon sends iface's daemon SIGTERM and waits until it has exited.
func (k *autorateKnob) stopDaemon(ctx context.Context) error {
	pid, err := k.daemonPID()
	if err != nil || pid == 0 {
		return err
	}
	if err := terminate(pid); err != nil {
		return fmt.Errorf("%s: stop the autorate daemon of %s (pid %d): %w", k.ID(), k.iface, pid, err)
	}
	deadline := time.Now().Add(autorateStopTimeout)
	for processRuns(pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the autorate daemon of %s (pid %d) did not exit within %s of SIGTERM", k.ID(), k.iface, pid, autorateStopTimeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for the autorate daemon of %s (pid %d) to exit: %w", k.ID(), k.iface, pid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Satisfied compares policies by their canonical form; Absent only equals
// Absent.
func (k *autorateKnob) Satisfied(live, desired string) bool { return AutorateSatisfied(live, desired) }

// AutorateSatisfied reports whether a live autorate policy value meets a
// desired one: both parse and are the same policy, or both are Absent.
func AutorateSatisfied(live, desired string) bool {
	if live == Absent || desired == Absent {
		return live == desired
	}
	l, err1 := autorate.ParsePolicy(live)
	d, err2 := autorate.ParsePolicy(desired)
	return err1 == nil && err2 == nil && l.String() == d.String()
}

// readAutoratePolicy returns iface's policy on sys, if it has one that
// parses.
func readAutoratePolicy(sys *System, iface string) (autorate.Policy, bool) {
	b, err := os.ReadFile(sys.path(autorate.PolicyPath(iface)))
	if err != nil {
		return autorate.Policy{}, false
	}
	p, err := autorate.ParsePolicy(strings.TrimSpace(string(b)))
	if err != nil || p.Iface != iface {
		return autorate.Policy{}, false
	}
	return p, true
}

// autorateWords says what a policy value means, for Describe.
func autorateWords(v string) string {
	if v == Absent {
		return "off"
	}
	p, err := autorate.ParsePolicy(v)
	if err != nil {
		return v
	}
	_, d, _ := strings.Cut(p.Describe(), ": ")
	return d
}
