package knob

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/lowlat/lowlat/internal/route"
)

// RouteID returns the knob ID of a route metric: "route/<dst>/<table>/<metric>",
// with dst as route.Route.DstString plus "@priority" when needed to tell apart
// routes sharing a destination.
func RouteID(dst string, table int, metric string) string {
	return "route/" + dst + "/" + route.TableName(table) + "/" + metric
}

// parseRouteID splits "default/main/initcwnd" or "10.0.0.0/24/main/initcwnd"
// from the right, since the destination itself may contain a slash.
func parseRouteID(rest string) (route.Key, string, error) {
	parts := strings.Split(rest, "/")
	if len(parts) < 3 {
		return route.Key{}, "", fmt.Errorf("route knob %q: want route/<dst>/<table>/<metric>", rest)
	}
	metric := parts[len(parts)-1]
	if _, ok := route.MetricByName[metric]; !ok {
		return route.Key{}, "", fmt.Errorf("route knob %q: unknown metric %q (known: initcwnd, initrwnd, quickack)", rest, metric)
	}
	table, err := route.ParseTable(parts[len(parts)-2])
	if err != nil {
		return route.Key{}, "", fmt.Errorf("route knob %q: %w", rest, err)
	}
	key, err := route.ParseKey(strings.Join(parts[:len(parts)-2], "/"), table)
	if err != nil {
		return route.Key{}, "", fmt.Errorf("route knob %q: %w", rest, err)
	}
	return key, metric, nil
}

// ValidateRouteMetric accepts 0 (unset: kernel default) .. 1024.
func ValidateRouteMetric(v string) error {
	n, err := strconv.ParseUint(v, 10, 32)
	if err != nil || n > 1024 {
		return fmt.Errorf("bad route metric value %q (want 0 for the kernel default, or 1..1024)", v)
	}
	return nil
}
