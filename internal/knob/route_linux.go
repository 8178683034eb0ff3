//go:build linux

package knob

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/lowlat/lowlat/internal/route"
	"golang.org/x/sys/unix"
)

// routeKnob is one metric of one route. Its value is the metric as a decimal
// number, "0" meaning unset (the kernel default: initcwnd 10 since 2.6.39).
type routeKnob struct {
	id     string
	key    route.Key
	metric string
}

func newRoute(sys *System, rest string) (Knob, error) {
	key, metric, err := parseRouteID(rest)
	if err != nil {
		return nil, err
	}
	return &routeKnob{id: "route/" + rest, key: key, metric: metric}, nil
}

func (k *routeKnob) ID() string                          { return k.id }
func (k *routeKnob) Satisfied(live, desired string) bool { return live == desired }
func (k *routeKnob) Validate(v string) error             { return ValidateRouteMetric(v) }

func (k *routeKnob) Read(ctx context.Context) (string, error) {
	found, err := route.Find(k.key)
	if err != nil {
		return "", fmt.Errorf("%s: %w", k.id, err)
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%s: no such route: %w", k.id, ErrNotSupported)
	case 1:
		return strconv.FormatUint(uint64(found[0].Metrics[route.MetricByName[k.metric]]), 10), nil
	}
	return "", fmt.Errorf("%s: %d routes share this destination; name one as dst@metric", k.id, len(found))
}

func (k *routeKnob) Write(ctx context.Context, value string) error {
	if err := ValidateRouteMetric(value); err != nil {
		return fmt.Errorf("%s: %w", k.id, err)
	}
	n, _ := strconv.ParseUint(value, 10, 32)
	if err := route.SetMetric(k.key, route.MetricByName[k.metric], uint32(n)); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%s: %w", k.id, ErrNotSupported)
		}
		return fmt.Errorf("%s: set %s: %w", k.id, value, err)
	}
	return nil
}
