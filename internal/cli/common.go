package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/lowlat/lowlat/internal/host"
	"github.com/lowlat/lowlat/internal/journal"
)

// listFlag is a repeatable flag that also splits on commas (--iface eth0,eth1).
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }
func (l *listFlag) Type() string   { return "list" }
func (l *listFlag) Set(v string) error {
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			*l = append(*l, p)
		}
	}
	return nil
}

// setFlag collects --set key=value pairs.
type setFlag map[string]string

func (s setFlag) String() string { return "" }
func (s setFlag) Type() string   { return "key=value" }
func (s setFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want key=value, got %q", v)
	}
	s[strings.TrimSpace(k)] = val
	return nil
}

// factsSource are the flags that say which host to look at.
type factsSource struct {
	from string
	root string
	// sockets asks the live gather for the socket audit (doctor, capture).
	sockets bool
}

func (s *factsSource) register(fs *pflag.FlagSet) {
	fs.StringVar(&s.from, "from", "", "read a snapshot written by 'lowlat capture' instead of this host")
	fs.StringVar(&s.root, "root", "", "read a captured /proc, /sys and /etc tree at `DIR` instead of this host")
}

func (s *factsSource) load(ctx context.Context) (*host.Facts, error) {
	switch {
	case s.from != "" && s.root != "":
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("--from and --root are alternatives; give one")}
	case s.from != "":
		f, err := host.Load(s.from)
		if err != nil {
			// A capture that is missing, malformed or too new: bad input.
			return nil, &ExitError{Code: ExitUsage, Err: err}
		}
		f.Source = "capture:" + s.from
		return f, nil
	}
	src, err := host.OpenRoot(s.root)
	if err != nil {
		return nil, &ExitError{Code: ExitUsage, Err: err} // no such tree, or a broken one
	}
	src.Sockets = s.sockets
	return host.Gather(ctx, src)
}

// live reports whether the facts are this host's own.
func (s *factsSource) live() bool { return s.from == "" && (s.root == "" || s.root == "/") }

// journalPath returns --journal, else $LOWLAT_JOURNAL, else the default.
func journalPath(env *Env, flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := env.Getenv("LOWLAT_JOURNAL"); v != "" {
		return v
	}
	return journal.DefaultPath
}

func requireRoot(cmd string) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s: must run as root: it writes sysctls, qdiscs and routes (nothing was changed)", cmd)
	}
	return nil
}

// truncate shortens s for table cells.
func truncate(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
