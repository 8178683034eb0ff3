package cli

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/qdisc"
)

// DefaultPort is where the reflector listens unless told otherwise.
const DefaultPort = "7431"

// reflectorOptions are reflector's flags.
type reflectorOptions struct {
	listen       string
	key          string
	keyFile      string
	minInterval  time.Duration
	maxClients   int
	perIP        int
	connsPerIP   int
	maxSize      int
	maxResponse  int
	maxDuration  time.Duration
	idle         time.Duration
	allowLoad    bool
	loadRate     string
	loadDuration time.Duration
	quiet        bool
}

func newReflectorCmd(env *Env) *cobra.Command {
	var o reflectorOptions
	cmd := &cobra.Command{
		Use:   "reflector",
		Short: "answer lowlat probes (UDP and TCP on one port); safe to leave running",
		Args:  noArgs,
		RunE:  runWith(env, &o, runReflector),
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", ":"+DefaultPort, "`ADDR` to serve UDP and TCP on (same port number)")
	f.StringVar(&o.key, "key", "", "shared HMAC key (visible in ps: prefer $LOWLAT_KEY or --key-file)")
	f.StringVar(&o.keyFile, "key-file", "", "read the shared HMAC key from `FILE`")
	f.DurationVar(&o.minInterval, "min-interval", 10*time.Millisecond, "shortest average UDP probe interval a session may use")
	f.IntVar(&o.maxClients, "max-clients", 20000, "concurrent UDP sessions plus TCP connections")
	f.IntVar(&o.perIP, "max-sessions-per-ip", 16, "concurrent UDP sessions from one source address or IPv6 /64 (0: no cap)")
	f.IntVar(&o.connsPerIP, "max-conns-per-ip", 64, "concurrent TCP connections from one source address or IPv6 /64, key holders included (0: no cap; raise it for probe tcp with many connections)")
	f.IntVar(&o.maxSize, "max-size", 65507, "largest UDP probe or TCP request/response message, bytes")
	f.IntVar(&o.maxResponse, "max-response", 64<<20, "largest CRR response, bytes")
	f.DurationVar(&o.maxDuration, "max-duration", 24*time.Hour, "longest test (session or connection)")
	f.DurationVar(&o.idle, "idle-timeout", time.Minute, "end sessions and connections silent this long")
	f.BoolVar(&o.allowLoad, "allow-load", false, "let peers without a key use the bulk modes (probe load, CRR above 64 KiB), capped by --load-rate and --load-duration")
	f.StringVar(&o.loadRate, "load-rate", "100mbit", "with --allow-load: bulk `RATE` per client address (or IPv6 /64) and direction, in tc units (kbit, mbit, gbit)")
	f.DurationVar(&o.loadDuration, "load-duration", 2*time.Minute, "with --allow-load: longest load flow of a peer without a key")
	f.BoolVar(&o.quiet, "quiet", false, "do not log refusals")
	return cmd
}

func runReflector(ctx context.Context, env *Env, o *reflectorOptions, args []string) error {
	k, err := readKey(env, o.key, o.keyFile)
	if err != nil {
		return err
	}
	switch {
	case o.minInterval <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: min-interval %s: must be positive", o.minInterval)}
	case o.maxClients <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-clients %d: must be positive", o.maxClients)}
	case o.maxSize < 80 || o.maxSize > 65507:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-size %d: must be 80..65507", o.maxSize)}
	case o.maxResponse < 16 || o.maxResponse > probe.MaxResponse:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-response %d: must be 16..%d", o.maxResponse, probe.MaxResponse)}
	case o.perIP < 0 || o.connsPerIP < 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-sessions-per-ip and max-conns-per-ip must be 0 (no cap) or positive")}
	case o.maxDuration <= 0 || o.idle <= 0 || o.loadDuration <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-duration, idle-timeout and load-duration must be positive")}
	}
	lr, err := qdisc.ParseRate(o.loadRate)
	if err == nil && (lr == 0 || lr > math.MaxInt64) {
		err = fmt.Errorf("%s: must be above 0", o.loadRate)
	}
	if err != nil {
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: load-rate: %w", err)}
	}
	noCap := func(n int) int {
		if n == 0 {
			return -1 // the library's "no cap"
		}
		return n
	}
	cfg := probe.ReflectorConfig{Key: k, MinInterval: o.minInterval, MaxClients: o.maxClients, MaxSessionsPerIP: noCap(o.perIP), MaxConnsPerIP: noCap(o.connsPerIP),
		MaxSize: o.maxSize, MaxResponse: o.maxResponse, MaxDuration: o.maxDuration, IdleTimeout: o.idle,
		AllowLoad: o.allowLoad, LoadRate: int64(lr), LoadDuration: o.loadDuration}
	if !o.quiet {
		cfg.Logf = func(format string, args ...any) {
			fmt.Fprintf(env.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, args...)...)
		}
	}
	if err := probe.RaiseFileLimit(o.maxClients); err != nil {
		fmt.Fprintf(env.Stderr, "reflector: warning: %v\n", err)
	}
	r := probe.NewReflector(cfg)
	if err := r.Listen(ctx, o.listen); err != nil {
		return err
	}
	auth := "no key: anyone may probe"
	if len(k) > 0 {
		auth = "HMAC-SHA256 key required"
	}
	fmt.Fprintf(env.Stderr, "lowlat reflector listening on %s (udp+tcp), %s, max clients %d\n", r.Addr(), auth, o.maxClients)
	fmt.Fprintf(env.Stderr, "lowlat reflector: %s\n", r.Policy())
	if err := r.Serve(ctx); err != nil {
		return fmt.Errorf("reflector: %w", err)
	}
	st := r.Stats()
	fmt.Fprintf(env.Stderr, "lowlat reflector stopped: %d udp sessions, %d tcp connections, %d refused\n", st.UDPSessions, st.TCPAccepted, st.Refused)
	return nil
}
