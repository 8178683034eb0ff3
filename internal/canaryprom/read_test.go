package canaryprom

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// fakeAPI answers the reader's range and instant queries with fixed
// values, and records them.
type fakeAPI struct {
	v1.API
	matrix   model.Matrix
	vector   model.Vector
	warnings v1.Warnings
	queries  []string
}

func (f *fakeAPI) QueryRange(_ context.Context, q string, _ v1.Range, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	f.queries = append(f.queries, q)
	return f.matrix, f.warnings, nil, nil
}

func (f *fakeAPI) Query(_ context.Context, q string, _ time.Time, _ ...v1.Option) (model.Value, v1.Warnings, v1.Infos, error) {
	f.queries = append(f.queries, q)
	return f.vector, f.warnings, nil, nil
}

// stream is a series of labels with values at the steps of a window of
// n steps from start (the window before's first step is 0).
func stream(start time.Time, step time.Duration, labels map[string]string, vals ...float64) *model.SampleStream {
	ls := model.Metric{}
	for k, v := range labels {
		ls[model.LabelName(k)] = model.LabelValue(v)
	}
	s := &model.SampleStream{Metric: ls}
	for i, v := range vals {
		if !math.IsNaN(v) {
			s.Values = append(s.Values, model.SamplePair{Timestamp: model.TimeFromUnixNano(start.Add(time.Duration(i) * step).UnixNano()), Value: model.SampleValue(v)})
		}
	}
	return s
}

// TestReadParts: a host's series become one part per value of the
// metric's own labels; a host's quantile is native where it has the native
// histogram (its classic side dropped, no buckets), classic otherwise
// (with its buckets' bounds as the server has them); Prometheus's warnings
// are kept.
func TestReadParts(t *testing.T) {
	w := Window{End: time.Unix(1e9, 0), Length: 4 * time.Minute, Step: time.Minute}
	start := w.End.Add(-7 * time.Minute) // 2·4 steps, the last at End
	m, _ := ParseMetric("p99")
	near := map[string]string{"instance": "a", "target": "near", "kind": "udp", sideLabel: native}
	nearClassic := map[string]string{"instance": "a", "target": "near", "kind": "udp", sideLabel: classic}
	bNear := map[string]string{"instance": "b", "target": "near", "kind": "udp", sideLabel: classic}
	bFar := map[string]string{"instance": "b", "target": "far", "kind": "udp", sideLabel: classic}
	nan := math.NaN()
	api := &fakeAPI{
		matrix: model.Matrix{
			stream(start, w.Step, near, 1, 2, 3, 4, 5, 6, 7, 8),
			stream(start, w.Step, nearClassic, 9, 9, 9, 9, 9, 9, 9, 9),
			stream(start, w.Step, bNear, nan, nan, 3, 4, 5, 6, 7, 8),
			stream(start, w.Step, bFar, 1, 1, 1, 1, 2, 2, 2, 2),
			stream(start, w.Step, map[string]string{"target": "near", sideLabel: native}, 1, 1, 1, 1, 1, 1, 1, 1),
		},
		vector: model.Vector{
			{Metric: model.Metric{"instance": "b", "le": "0.01"}},
			{Metric: model.Metric{"instance": "b", "le": "1e-2"}}, // the same bound, written otherwise
			{Metric: model.Metric{"instance": "b", "le": "0.005"}},
			{Metric: model.Metric{"instance": "b", "le": "+Inf"}},
			{Metric: model.Metric{"instance": "a", "le": "0.005"}},
		},
		warnings: v1.Warnings{"store down"},
	}
	s, err := Reader{API: api, HostLabel: "instance", Address: "fake"}.Read(context.Background(), m, Selector{{"g", "=", "c"}}, w)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Hosts) != 2 || len(s.Hosts["a"]) != 1 || len(s.Hosts["b"]) != 2 {
		t.Fatalf("hosts %v, want a with one part, b with two", s.Hosts)
	}
	a := s.Hosts["a"][0]
	if a.Key != `target="near", kind="udp"` || a.Buckets != nil || s.Source["a"] != native ||
		!reflect.DeepEqual(a.Before, []float64{1, 2, 3, 4}) || !reflect.DeepEqual(a.After, []float64{5, 6, 7, 8}) {
		t.Errorf("host a (native and classic): %+v, source %q; want its native part alone, no buckets", a, s.Source["a"])
	}
	far, bn := s.Hosts["b"][0], s.Hosts["b"][1]
	if far.Key != `target="far", kind="udp"` || bn.Key != `target="near", kind="udp"` || s.Source["b"] != classic {
		t.Errorf("host b: parts %q, %q, source %q", far.Key, bn.Key, s.Source["b"])
	}
	for _, p := range s.Hosts["b"] {
		if !reflect.DeepEqual(p.Buckets, []float64{0.005, 0.01}) {
			t.Errorf("host b part %s: buckets %v, want [0.005 0.01]", p.Key, p.Buckets)
		}
	}
	if !math.IsNaN(bn.Before[0]) || bn.Before[2] != 3 {
		t.Errorf("host b near before %v", bn.Before)
	}
	if !reflect.DeepEqual(s.Warnings, []string{"store down", "store down"}) {
		t.Errorf("warnings %v, want both queries'", s.Warnings)
	}
	if len(api.queries) != 2 || !strings.Contains(api.queries[1], "group by (instance, le) (last_over_time(lowlat_probe_rtt_seconds_bucket{g=\"c\"}[8m]))") {
		t.Errorf("queries %q: want the steps, then the buckets' bounds over both windows", api.queries)
	}

	// Loss: lost and sent a step, summed by the judge.
	loss, _ := ParseMetric("loss")
	part := map[string]string{"instance": "a", "target": "edge", "kind": "udp"}
	lost, sent := map[string]string{sideLabel: "lost"}, map[string]string{sideLabel: "sent"}
	for k, v := range part {
		lost[k], sent[k] = v, v
	}
	api = &fakeAPI{matrix: model.Matrix{
		stream(start, w.Step, lost, 0, 0, 0, 0, 60, 0, 0, 1),
		stream(start, w.Step, sent, 200, 200, 200, 200, 200, 0, 200, 200),
	}}
	s, err = Reader{API: api, HostLabel: "instance", Address: "fake"}.Read(context.Background(), loss, Selector{{"g", "=", "c"}}, w)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Hosts["a"][0]
	if !reflect.DeepEqual(p.AfterNum, []float64{60, 0, 0, 1}) || !reflect.DeepEqual(p.AfterDen, []float64{200, 0, 200, 200}) ||
		!reflect.DeepEqual(p.BeforeDen, []float64{200, 200, 200, 200}) || p.After[0] != 0.3 || !math.IsNaN(p.After[1]) || s.Source["a"] != "" {
		t.Errorf("loss: %+v, want its counts a step and their ratios", p)
	}
	if len(api.queries) != 1 {
		t.Errorf("loss: %d queries, want 1", len(api.queries))
	}
}
