package pathprobe

import (
	"context"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Run measures the path to cfg.Target. Bad input, an unresolvable target and
// a socket the user may not open are errors; an unreachable destination is
// not (the hops end at the last one that answered, Reached is false).
func Run(ctx context.Context, cfg Config) (*Result, error) {
	port, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	addr, err := resolve(ctx, cfg.Target)
	if err != nil {
		return nil, err
	}
	flow := cfg.Flow
	if flow == 0 {
		flow = flowFor(cfg.Proto, addr, port)
	}
	res := &Result{Target: cfg.Target, Address: addr.String(), Proto: cfg.Proto, Count: cfg.Count, Interval: cfg.Interval, Started: time.Now().UTC()}
	if cfg.Proto != ICMP {
		res.Port = port
	}
	start := time.Now()
	var raw []rawHop
	var destTTL int
	var out runOut
	if cfg.Proto == TCP {
		raw, destTTL, out, err = runTCP(ctx, &cfg, addr, port, flow)
	} else {
		raw, destTTL, out, err = runDatagram(ctx, &cfg, addr, port, flow)
	}
	if err != nil {
		return nil, err
	}
	res.Flow, res.FlowLabel, res.Socket = out.flow, int(out.label), out.socket
	res.Reached = destTTL > 0
	res.Hops = summarize(raw, destTTL)
	res.Verdict, res.JitterFrom = judge(res.Hops, res.Reached)
	if cfg.Names {
		names(ctx, res.Hops)
	}
	res.Seconds = round2(time.Since(start).Seconds())
	return res, ctx.Err()
}

// resolve finds the target's address: the first the resolver gives, IPv4
// before IPv6 when it gives both (as ping does).
func resolve(ctx context.Context, target string) (netip.Addr, error) {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		host = target
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Unmap(), nil
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(rctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		if err == nil {
			err = fmt.Errorf("no address")
		}
		return netip.Addr{}, fmt.Errorf("%w: cannot resolve %s: %v", ErrConfig, host, unwrapDNS(err))
	}
	for _, a := range addrs {
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
	}
	return addrs[0], nil
}

func unwrapDNS(err error) error {
	if de, ok := err.(*net.DNSError); ok {
		return fmt.Errorf("%s", de.Err)
	}
	return err
}

// flowFor derives the flow ID from the destination, so that runs to one
// target hash onto the same equal-cost path and their hops compare: a source
// port in 33000..60999 or an echo identifier.
func flowFor(proto string, addr netip.Addr, port int) int {
	h := fnv.New32a()
	h.Write([]byte(proto))
	h.Write(addr.AsSlice())
	h.Write([]byte{byte(port >> 8), byte(port)})
	return 33000 + int(h.Sum32()%28000)
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, t *time.Timer, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t.Reset(d)
	select {
	case <-ctx.Done():
		if !t.Stop() {
			<-t.C
		}
		return false
	case <-t.C:
		return true
	}
}

// names looks up each hop's reverse name, all at once, bounded.
func names(ctx context.Context, hops []Hop) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range hops {
		if hops[i].Address == "" {
			continue
		}
		wg.Add(1)
		go func(h *Hop) {
			defer wg.Done()
			if n, err := net.DefaultResolver.LookupAddr(ctx, h.Address); err == nil && len(n) > 0 {
				h.Name = n[0]
			}
		}(&hops[i])
	}
	wg.Wait()
}
