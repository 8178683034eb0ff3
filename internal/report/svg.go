package report

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Chart is a line chart drawn as inline SVG: RTT CDFs (x = RTT, y =
// fraction of samples at or below it) and RTT over time (x = seconds).
type Chart struct {
	Title          string
	XLabel, YLabel string
	// XUnit and YUnit are appended to tick labels ("ms", "s", "%").
	XUnit, YUnit string
	LogX, LogY   bool
	// Domains; zero values mean "from the data".
	XMin, XMax, YMin, YMax float64
	Series                 []Series
	// Marks are labelled vertical lines (phase starts).
	Marks []Mark
	// Step draws each series as a staircase (for CDFs).
	Step bool
	// Dots draws each point as a dot instead of joining them with a line
	// (for samples over time).
	Dots bool
	// Width and Height in pixels; 640×300 when zero.
	Width, Height int
}

// Series is one named line. Markers are points drawn as crosses along the
// top edge at their x (e.g. lost probes).
type Series struct {
	Name    string
	Points  [][2]float64
	Markers []float64
	// Color is a CSS colour; Palette(i) when empty.
	Color string
}

// Mark is a vertical line at X with a label.
type Mark struct {
	X     float64
	Label string
}

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf", "#e377c2"}

// Palette returns the i-th series colour.
func Palette(i int) string { return palette[i%len(palette)] }

type scale struct {
	lo, hi float64 // domain (log10 of it when log)
	a, b   float64 // pixel range
	log    bool
}

func (s scale) px(v float64) float64 {
	if s.log {
		if v <= 0 {
			v = math.Pow(10, s.lo)
		}
		v = math.Log10(v)
	}
	if s.hi == s.lo {
		return (s.a + s.b) / 2
	}
	return s.a + (v-s.lo)/(s.hi-s.lo)*(s.b-s.a)
}

// newScale fits [lo, hi] (data units) to pixels [a, b], on decades when log.
func newScale(lo, hi, a, b float64, log bool) scale {
	if log {
		if lo <= 0 {
			lo = hi / 1000
		}
		if hi <= 0 {
			lo, hi = 0.1, 1
		}
		l, h := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if h <= l {
			h = l + 1
		}
		return scale{lo: l, hi: h, a: a, b: b, log: true}
	}
	if hi <= lo {
		hi = lo + 1
	}
	step := niceStep((hi - lo) / 5)
	return scale{lo: math.Floor(lo/step) * step, hi: math.Ceil(hi/step) * step, a: a, b: b}
}

func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// ticks returns tick values in data units.
func (s scale) ticks() []float64 {
	var out []float64
	if s.log {
		decades := s.hi - s.lo
		for e := s.lo; e <= s.hi+1e-9; e++ {
			base := math.Pow(10, e)
			out = append(out, base)
			if decades <= 2 && e < s.hi {
				out = append(out, 2*base, 5*base)
			}
		}
		return out
	}
	step := niceStep((s.hi - s.lo) / 5)
	for v := s.lo; v <= s.hi+step/1e6; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

// FormatNumber prints an axis value compactly: 0.05, 0.5, 5, 50, 500, 5k.
func FormatNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case v == 0:
		return "0"
	case a >= 10000:
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	case a >= 1:
		return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 2, 64)
}

func f1(x float64) string { return strconv.FormatFloat(math.Round(x*10)/10, 'f', -1, 64) }

// SVG renders the chart as a standalone <svg> element (no scripts, no
// external references).
func (c Chart) SVG() string {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 640
	}
	if h == 0 {
		h = 300
	}
	const ml, mr, mt = 64.0, 30.0, 28.0
	legendRows := (len(c.Series) + 2) / 3
	mb := 46.0 + 18*float64(legendRows)
	x0, x1, y0, y1 := ml, float64(w)-mr, float64(h)-mb, mt

	// Domains from the data where not given.
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if (c.LogX && p[0] <= 0) || (c.LogY && p[1] <= 0) || math.IsNaN(p[0]) || math.IsNaN(p[1]) {
				continue
			}
			xlo, xhi = math.Min(xlo, p[0]), math.Max(xhi, p[0])
			ylo, yhi = math.Min(ylo, p[1]), math.Max(yhi, p[1])
		}
		for _, m := range s.Markers {
			xlo, xhi = math.Min(xlo, m), math.Max(xhi, m)
		}
	}
	if math.IsInf(xlo, 1) {
		xlo, xhi, ylo, yhi = 0, 1, 0, 1
	}
	if c.XMin != 0 || c.XMax != 0 {
		xlo, xhi = c.XMin, c.XMax
	}
	if c.YMin != 0 || c.YMax != 0 {
		ylo, yhi = c.YMin, c.YMax
	}
	if !c.LogY && ylo > 0 && c.YMin == 0 {
		ylo = 0
	}
	xs := newScale(xlo, xhi, x0, x1, c.LogX)
	ys := newScale(ylo, yhi, y0, y1, c.LogY)

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" role="img" class="chart">`, w, h, w, h)
	fmt.Fprintf(&b, `<title>%s</title>`, html.EscapeString(c.Title))
	fmt.Fprintf(&b, `<rect x="0" y="0" width="%d" height="%d" fill="#fff"/>`, w, h)
	if c.Title != "" {
		fmt.Fprintf(&b, `<text x="%s" y="17" class="ct">%s</text>`, f1(x0), html.EscapeString(c.Title))
	}
	// Grid and ticks.
	for _, t := range xs.ticks() {
		x := xs.px(t)
		if x < x0-0.5 || x > x1+0.5 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="grid"/>`, f1(x), f1(y1), f1(x), f1(y0))
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="tx">%s</text>`, f1(x), f1(y0+15), html.EscapeString(FormatNumber(t)+c.XUnit))
	}
	for _, t := range ys.ticks() {
		y := ys.px(t)
		if y > y0+0.5 || y < y1-0.5 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="grid"/>`, f1(x0), f1(y), f1(x1), f1(y))
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="ty">%s</text>`, f1(x0-6), f1(y+4), html.EscapeString(FormatNumber(t)+c.YUnit))
	}
	fmt.Fprintf(&b, `<rect x="%s" y="%s" width="%s" height="%s" class="frame"/>`, f1(x0), f1(y1), f1(x1-x0), f1(y0-y1))
	if c.XLabel != "" {
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="xl">%s</text>`, f1((x0+x1)/2), f1(y0+32), html.EscapeString(c.XLabel))
	}
	if c.YLabel != "" {
		fmt.Fprintf(&b, `<text transform="translate(14 %s) rotate(-90)" class="yl">%s</text>`, f1((y0+y1)/2), html.EscapeString(c.YLabel))
	}
	clip := fmt.Sprintf("c%x", hashString(c.Title+c.XLabel+c.YLabel+strconv.Itoa(len(c.Series))))
	fmt.Fprintf(&b, `<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`, clip, f1(x0), f1(y1-4), f1(x1-x0), f1(y0-y1+8))
	for _, m := range c.Marks {
		x := xs.px(m.X)
		if x < x0 || x > x1 {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%s" y1="%s" x2="%s" y2="%s" class="mark"/>`, f1(x), f1(y1), f1(x), f1(y0))
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="ml">%s</text>`, f1(x+4), f1(y1+12), html.EscapeString(m.Label))
	}
	// Series.
	fmt.Fprintf(&b, `<g clip-path="url(#%s)">`, clip)
	for i, s := range c.Series {
		col := s.Color
		if col == "" {
			col = Palette(i)
		}
		pts := make([][2]float64, 0, len(s.Points))
		for _, p := range s.Points {
			if (c.LogX && p[0] <= 0) || (c.LogY && p[1] <= 0) || math.IsNaN(p[0]) || math.IsNaN(p[1]) {
				continue
			}
			pts = append(pts, p)
		}
		if c.Dots {
			fmt.Fprintf(&b, `<g fill="%s">`, html.EscapeString(col))
			for _, p := range pts {
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="1.6"/>`, f1(xs.px(p[0])), f1(ys.px(p[1])))
			}
			b.WriteString(`</g>`)
		} else if len(pts) > 0 {
			var d strings.Builder
			for j, p := range pts {
				x, y := xs.px(p[0]), ys.px(p[1])
				switch {
				case j == 0:
					fmt.Fprintf(&d, "M%s %s", f1(x), f1(y))
				case c.Step:
					fmt.Fprintf(&d, "H%sV%s", f1(x), f1(y))
				default:
					fmt.Fprintf(&d, "L%s %s", f1(x), f1(y))
				}
			}
			fmt.Fprintf(&b, `<path d="%s" fill="none" stroke="%s" stroke-width="2"/>`, d.String(), html.EscapeString(col))
		}
		for _, m := range s.Markers {
			x := xs.px(m)
			fmt.Fprintf(&b, `<path d="M%s %sl6 6m0 -6l-6 6" class="lost"/>`, f1(x-3), f1(y1+2))
		}
	}
	b.WriteString(`</g>`)
	// Legend below the plot, three entries a row.
	for i, s := range c.Series {
		col := s.Color
		if col == "" {
			col = Palette(i)
		}
		lx := x0 + float64(i%3)*(x1-x0)/3
		ly := y0 + 46 + 18*float64(i/3)
		fmt.Fprintf(&b, `<rect x="%s" y="%s" width="14" height="4" fill="%s"/>`, f1(lx), f1(ly-7), html.EscapeString(col))
		name := s.Name
		if len(s.Markers) > 0 {
			name += fmt.Sprintf(" (%d lost: ×)", len(s.Markers))
		}
		fmt.Fprintf(&b, `<text x="%s" y="%s" class="lg">%s</text>`, f1(lx+20), f1(ly-2), html.EscapeString(name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

func hashString(s string) uint32 {
	var h uint32 = 2166136261
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// Thin keeps at most n points of a series sorted by x, always the first and
// the last, and within each bucket the point with the largest y (so spikes
// survive thinning).
func Thin(pts [][2]float64, n int) [][2]float64 {
	if n <= 0 || len(pts) <= n {
		return pts
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
	out := make([][2]float64, 0, n+2)
	per := float64(len(pts)) / float64(n)
	for k := 0; k < n; k++ {
		lo, hi := int(float64(k)*per), int(float64(k+1)*per)
		if hi > len(pts) {
			hi = len(pts)
		}
		best := lo
		for i := lo; i < hi; i++ {
			if pts[i][1] > pts[best][1] {
				best = i
			}
		}
		if lo < hi {
			out = append(out, pts[best])
		}
	}
	if out[0] != pts[0] {
		out = append([][2]float64{pts[0]}, out...)
	}
	if out[len(out)-1] != pts[len(pts)-1] {
		out = append(out, pts[len(pts)-1])
	}
	return out
}
