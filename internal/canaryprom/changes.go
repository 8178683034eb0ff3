package canaryprom

import (
	"context"
	"fmt"
	"sort"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// Changes is what a host's own journal says changed during the windows:
// the lowlat transactions its monitor exported as in force
// (lowlat_transaction_info, one series per transaction) at each step
// where it read the journal (lowlat_journal_read_successful 1).
type Changes struct {
	// Known: the host's monitor read its journal at some step.
	Known bool
	// Gone are transactions in force at some step of the window before
	// and no longer at the window's last known step: an earlier change,
	// since rolled back, in what would be the host's baseline.
	Gone []string
	// Moved are transactions that came or went between two known steps of
	// either window.
	Moved []string
}

// Changes reads, for the hosts sel selects, which lowlat transactions
// were in force at each step of the window and of the window before (two
// range queries), and returns each host's Changes and Prometheus's
// warnings. A host whose monitor never said whether it read its journal
// is not in the map.
func (r Reader) Changes(ctx context.Context, sel Selector, w Window) (map[string]Changes, []string, error) {
	n := w.Steps()
	start := w.End.Add(-time.Duration(2*n-1) * w.Step)
	rng := v1.Range{Start: start, End: w.End, Step: w.Step}
	query := func(expr string) (model.Matrix, []string, error) {
		val, warnings, _, err := r.API.QueryRange(ctx, expr, rng)
		if err != nil {
			return nil, nil, fmt.Errorf("prometheus %s: query the hosts' transactions: %w", r.Address, err)
		}
		mat, ok := val.(model.Matrix)
		if !ok {
			return nil, nil, fmt.Errorf("prometheus %s: query the hosts' transactions: a %s, not a matrix", r.Address, val.Type())
		}
		return mat, warnings, nil
	}
	s := sel.String()
	readOK, w1, err := query(fmt.Sprintf("max by (%s) (lowlat_journal_read_successful{%s})", r.HostLabel, s))
	if err != nil {
		return nil, nil, err
	}
	txns, w2, err := query(fmt.Sprintf("count by (%s, txn) (lowlat_transaction_info{%s})", r.HostLabel, s))
	if err != nil {
		return nil, nil, err
	}
	known := map[string][]bool{}
	for _, ss := range readOK {
		host := string(ss.Metric[model.LabelName(r.HostLabel)])
		before, after := steps(ss, start, w.Step, n)
		k := make([]bool, 2*n)
		for i, v := range append(before, after...) {
			k[i] = v == 1
		}
		known[host] = k
	}
	present := map[string]map[string][]bool{}
	for _, ss := range txns {
		host := string(ss.Metric[model.LabelName(r.HostLabel)])
		txn := string(ss.Metric["txn"])
		before, after := steps(ss, start, w.Step, n)
		p := make([]bool, 2*n)
		for i, v := range append(before, after...) {
			p[i] = v > 0
		}
		if present[host] == nil {
			present[host] = map[string][]bool{}
		}
		present[host][txn] = p
	}
	out := map[string]Changes{}
	for host, k := range known {
		last, any := -1, false
		for i, ok := range k {
			if ok {
				any = true
				if i >= n {
					last = i
				}
			}
		}
		if !any {
			continue
		}
		c := Changes{Known: true}
		for txn, p := range present[host] {
			first := -1
			for i, ok := range k {
				if !ok {
					continue
				}
				if first < 0 {
					first = i
				}
				if p[i] != p[first] {
					c.Moved = append(c.Moved, txn)
					break
				}
			}
			for i := range n {
				if k[i] && p[i] && last >= 0 && !p[last] {
					c.Gone = append(c.Gone, txn)
					break
				}
			}
		}
		sort.Strings(c.Gone)
		sort.Strings(c.Moved)
		out[host] = c
	}
	return out, append(w1, w2...), nil
}
