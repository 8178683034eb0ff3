package lab

import (
	"strings"

	"github.com/lowlat/lowlat/internal/passive"
)

// watchPassive measures a variant's real traffic in the kernel, as lowlat
// watch would on a production host, during the scenario's measurement. It
// returns the function that ends it and adds the figures to vr: the rows
// under metrics.passive, the headline figures under derived (passive_*),
// beside the active probes' ones. A kernel that refuses it leaves a note,
// never a zero.
func watchPassive(e *env, vr *VariantResult) (stop func()) {
	look := e.sc.Passive
	if look == nil {
		return func() {}
	}
	ns := e.t.Client
	if look.Server {
		ns = e.t.Server
	}
	var s *passive.Session
	if err := ns.Do(func() error {
		var err error
		s, err = passive.Open(look.Config)
		return err
	}); err != nil {
		vr.Notes = append(vr.Notes, "passive figures not measured: "+err.Error())
		return func() {}
	}
	first, err := s.Snapshot()
	if err != nil {
		s.Close()
		vr.Notes = append(vr.Notes, "passive figures not measured: "+err.Error())
		return func() {}
	}
	return func() {
		defer s.Close()
		last, err := s.Snapshot()
		if err != nil {
			vr.Notes = append(vr.Notes, "passive figures not measured: "+err.Error())
			return
		}
		d := last.At.Sub(first.At)
		diff := last.Sub(first)
		rows := passive.Summarize(diff, d)
		var kept []passive.Row
		for _, r := range rows {
			if r.Count > 0 || r.Unavailable != "" {
				kept = append(kept, r)
			}
		}
		derived, _ := vr.Metrics["derived"].(map[string]float64)
		if derived == nil {
			derived = map[string]float64{}
			vr.Metrics["derived"] = derived
		}
		for _, f := range look.Figures {
			var h passive.Hist
			for i := range diff.Series {
				if k := diff.Series[i].Key(); strings.HasPrefix(k, f.Prefix) && strings.HasSuffix(k, f.Suffix) {
					h.Add(&diff.Series[i].Hist)
				}
			}
			if h.Count() > 0 {
				derived[f.Name] = round3(float64(f.Stat(&h)) / 1e6)
			}
		}
		vr.Metrics["passive"] = map[string]any{"seconds": round3(d.Seconds()), "hooks": s.Hooks, "series": kept}
		for _, why := range s.Unavailable {
			vr.Notes = append(vr.Notes, "passive: "+why)
		}
	}
}
