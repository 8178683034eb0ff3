package cli

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/lowlat/lowlat/internal/probe"
	"github.com/lowlat/lowlat/internal/qdisc"
)

func init() {
	register(&command{name: "reflector", summary: "answer lowlat probes (UDP and TCP on one port); safe to leave running", order: 61, run: runReflector})
}

// DefaultPort is where the reflector listens unless told otherwise.
const DefaultPort = "7431"

func runReflector(ctx context.Context, env *Env, args []string) error {
	fs := flagSet(env, "reflector", "reflector [--listen :"+DefaultPort+"] [--key-file FILE] [--min-interval 10ms] [--max-clients 20000] [--max-sessions-per-ip 16] [--max-conns-per-ip 64] [--allow-load [--load-rate 100mbit] [--load-duration 2m]]")
	listen := fs.String("listen", ":"+DefaultPort, "`ADDR` to serve UDP and TCP on (same port number)")
	key := fs.String("key", "", "shared HMAC key (visible in ps: prefer $LOWLAT_KEY or --key-file)")
	keyFile := fs.String("key-file", "", "read the shared HMAC key from `FILE`")
	minInterval := fs.Duration("min-interval", 10*time.Millisecond, "shortest average UDP probe interval a session may use")
	maxClients := fs.Int("max-clients", 20000, "concurrent UDP sessions plus TCP connections")
	perIP := fs.Int("max-sessions-per-ip", 16, "concurrent UDP sessions from one source address or IPv6 /64 (0: no cap)")
	connsPerIP := fs.Int("max-conns-per-ip", 64, "concurrent TCP connections from one source address or IPv6 /64, key holders included (0: no cap; raise it for probe tcp with many connections)")
	maxSize := fs.Int("max-size", 65507, "largest UDP probe or TCP request/response message, bytes")
	maxResponse := fs.Int("max-response", 64<<20, "largest CRR response, bytes")
	maxDuration := fs.Duration("max-duration", 24*time.Hour, "longest test (session or connection)")
	idle := fs.Duration("idle-timeout", time.Minute, "end sessions and connections silent this long")
	allowLoad := fs.Bool("allow-load", false, "let peers without a key use the bulk modes (probe load, CRR above 64 KiB), capped by --load-rate and --load-duration")
	loadRate := fs.String("load-rate", "100mbit", "with --allow-load: bulk `RATE` per client address (or IPv6 /64) and direction, in tc units (kbit, mbit, gbit)")
	loadDuration := fs.Duration("load-duration", 2*time.Minute, "with --allow-load: longest load flow of a peer without a key")
	quiet := fs.Bool("quiet", false, "do not log refusals")
	pos, err := parse(fs, args)
	if err != nil {
		return helpOK(err)
	}
	if err := positional(fs, pos, 0, 0, ""); err != nil {
		return err
	}
	k, err := readKey(env, *key, *keyFile)
	if err != nil {
		return err
	}
	switch {
	case *minInterval <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: min-interval %s: must be positive", *minInterval)}
	case *maxClients <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-clients %d: must be positive", *maxClients)}
	case *maxSize < 80 || *maxSize > 65507:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-size %d: must be 80..65507", *maxSize)}
	case *maxResponse < 16 || *maxResponse > probe.MaxResponse:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-response %d: must be 16..%d", *maxResponse, probe.MaxResponse)}
	case *perIP < 0 || *connsPerIP < 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-sessions-per-ip and max-conns-per-ip must be 0 (no cap) or positive")}
	case *maxDuration <= 0 || *idle <= 0 || *loadDuration <= 0:
		return &ExitError{Code: 2, Err: fmt.Errorf("reflector: max-duration, idle-timeout and load-duration must be positive")}
	}
	lr, err := qdisc.ParseRate(*loadRate)
	if err == nil && (lr == 0 || lr > math.MaxInt64) {
		err = fmt.Errorf("%s: must be above 0", *loadRate)
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
	cfg := probe.ReflectorConfig{Key: k, MinInterval: *minInterval, MaxClients: *maxClients, MaxSessionsPerIP: noCap(*perIP), MaxConnsPerIP: noCap(*connsPerIP),
		MaxSize: *maxSize, MaxResponse: *maxResponse, MaxDuration: *maxDuration, IdleTimeout: *idle,
		AllowLoad: *allowLoad, LoadRate: int64(lr), LoadDuration: *loadDuration}
	if !*quiet {
		cfg.Logf = func(format string, args ...any) {
			fmt.Fprintf(env.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format(time.RFC3339)}, args...)...)
		}
	}
	if err := probe.RaiseFileLimit(*maxClients); err != nil {
		fmt.Fprintf(env.Stderr, "reflector: warning: %v\n", err)
	}
	r := probe.NewReflector(cfg)
	if err := r.Listen(ctx, *listen); err != nil {
		return err
	}
	auth := "no key: anyone may probe"
	if len(k) > 0 {
		auth = "HMAC-SHA256 key required"
	}
	fmt.Fprintf(env.Stderr, "lowlat reflector listening on %s (udp+tcp), %s, max clients %d\n", r.Addr(), auth, *maxClients)
	fmt.Fprintf(env.Stderr, "lowlat reflector: %s\n", r.Policy())
	if err := r.Serve(ctx); err != nil {
		return fmt.Errorf("reflector: %w", err)
	}
	st := r.Stats()
	fmt.Fprintf(env.Stderr, "lowlat reflector stopped: %d udp sessions, %d tcp connections, %d refused\n", st.UDPSessions, st.TCPAccepted, st.Refused)
	return nil
}
