package report

import (
	"fmt"
	"html/template"
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
	// Bands are filled areas between two lines (a p50..p99 range over
	// time), drawn under the series.
	Bands []Band
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
	// Breaks makes a NaN point break the line (a gap) instead of being
	// skipped; Dashed draws the line dashed (a threshold).
	Breaks, Dashed bool
}

// Band fills the area between Lower and Upper, which share their x values
// point by point. A point whose y is NaN in either ends the band there; it
// resumes at the next point with both (a gap where there was no data).
type Band struct {
	Name         string
	Lower, Upper [][2]float64
	// Color is a CSS colour; Palette(i) when empty. The fill is translucent.
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

// finite says a coordinate can be drawn.
func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

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
	// A range that is not finite has no ticks (a point at ±Inf made the
	// loops below run until memory ran out), and no axis has more than
	// maxTicks.
	const maxTicks = 64
	var out []float64
	if !finite(s.lo) || !finite(s.hi) {
		return nil
	}
	if s.log {
		decades := s.hi - s.lo
		for e := s.lo; e <= s.hi+1e-9 && len(out) < maxTicks; e++ {
			base := math.Pow(10, e)
			out = append(out, base)
			if decades <= 2 && e < s.hi {
				out = append(out, 2*base, 5*base)
			}
		}
		return out
	}
	step := niceStep((s.hi - s.lo) / 5)
	for i := 0; i < maxTicks; i++ {
		v := s.lo + float64(i)*step
		if v > s.hi+step/1e6 {
			break
		}
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

// svgHTML draws a chart from its laid-out view. html/template escapes every
// text and attribute value; the coordinates are numbers formatted by f1.
const svgHTML = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{.W}} {{.H}}" width="{{.W}}" height="{{.H}}" role="img" class="chart">` +
	`<title>{{.Title}}</title><rect x="0" y="0" width="{{.W}}" height="{{.H}}" fill="#fff"/>` +
	`{{if .Title}}<text x="{{.TitleX}}" y="17" class="ct">{{.Title}}</text>{{end}}` +
	`{{range .Ticks}}<line x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}" class="grid"/><text x="{{.TX}}" y="{{.TY}}" class="{{.Class}}">{{.Label}}</text>{{end}}` +
	`<rect x="{{.Frame.X}}" y="{{.Frame.Y}}" width="{{.Frame.W}}" height="{{.Frame.H}}" class="frame"/>` +
	`{{with .XLabel}}<text x="{{.X}}" y="{{.Y}}" class="xl">{{.Text}}</text>{{end}}` +
	`{{with .YLabel}}<text transform="translate(14 {{.Y}}) rotate(-90)" class="yl">{{.Text}}</text>{{end}}` +
	`<clipPath id="{{.Clip}}"><rect x="{{.ClipRect.X}}" y="{{.ClipRect.Y}}" width="{{.ClipRect.W}}" height="{{.ClipRect.H}}"/></clipPath>` +
	`{{range .Marks}}<line x1="{{.X1}}" y1="{{.Y1}}" x2="{{.X2}}" y2="{{.Y2}}" class="mark"/><text x="{{.TX}}" y="{{.TY}}" class="ml">{{.Label}}</text>{{end}}` +
	`<g clip-path="url(#{{.Clip}})">{{range .Bands}}<path d="{{.Path}}" fill="{{.Color}}" fill-opacity="0.22" stroke="none"/>{{end}}{{range .Series}}` +
	`{{if .Dots}}<g fill="{{.Color}}">{{range .Points}}<circle cx="{{index . 0}}" cy="{{index . 1}}" r="1.6"/>{{end}}</g>` +
	`{{else if .Path}}<path d="{{.Path}}" fill="none" stroke="{{.Color}}" stroke-width="2"{{if .Dashed}} stroke-dasharray="6 4"{{end}}/>{{end}}` +
	`{{range .Markers}}<path d="{{.}}" class="lost"/>{{end}}{{end}}</g>` +
	`{{range .Legend}}<rect x="{{.RX}}" y="{{.RY}}" width="14" height="4" fill="{{.Color}}"/><text x="{{.TX}}" y="{{.TY}}" class="lg">{{.Name}}</text>{{end}}` +
	`</svg>`

var svgTemplate = template.Must(template.New("svg").Parse(svgHTML))

// svgView is a chart laid out in pixels, every coordinate formatted.
type svgView struct {
	W, H           int
	Title, TitleX  string
	Ticks, Marks   []svgRule
	Frame          svgRect
	XLabel, YLabel *svgText
	Clip           string
	ClipRect       svgRect
	Bands          []svgSeries
	Series         []svgSeries
	Legend         []svgLegend
}

// svgRule is a line with its label: a grid line and its tick, or a mark.
type svgRule struct {
	X1, Y1, X2, Y2 string
	TX, TY, Class  string
	Label          string
}

type svgRect struct{ X, Y, W, H string }

type svgText struct{ X, Y, Text string }

type svgSeries struct {
	Color string
	// Dots are points drawn as dots; Path the line through them otherwise.
	Dots    bool
	Points  [][2]string
	Path    string
	Dashed  bool
	Markers []string // the d of each cross
}

type svgLegend struct{ RX, RY, Color, TX, TY, Name string }

// SVG renders the chart as a standalone <svg> element (no scripts, no
// external references).
func (c Chart) SVG() string {
	var b strings.Builder
	if err := svgTemplate.Execute(&b, c.layout()); err != nil {
		// The template and its data are ours: an error is a bug.
		panic("report: svg template: " + err.Error())
	}
	return b.String()
}

// layout places the chart's parts in pixels.
func (c Chart) layout() *svgView {
	w, h := c.Width, c.Height
	if w == 0 {
		w = 640
	}
	if h == 0 {
		h = 300
	}
	const ml, mr, mt = 64.0, 30.0, 28.0
	legendRows := (len(c.Bands) + len(c.Series) + 2) / 3
	mb := 46.0 + 18*float64(legendRows)
	x0, x1, y0, y1 := ml, float64(w)-mr, float64(h)-mb, mt

	// Domains from the data where not given.
	xlo, xhi, ylo, yhi := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if (c.LogX && p[0] <= 0) || (c.LogY && p[1] <= 0) || !finite(p[0]) || !finite(p[1]) {
				continue
			}
			xlo, xhi = math.Min(xlo, p[0]), math.Max(xhi, p[0])
			ylo, yhi = math.Min(ylo, p[1]), math.Max(yhi, p[1])
		}
		for _, m := range s.Markers {
			xlo, xhi = math.Min(xlo, m), math.Max(xhi, m)
		}
	}
	for _, b := range c.Bands {
		for _, p := range append(append([][2]float64(nil), b.Lower...), b.Upper...) {
			if (c.LogX && p[0] <= 0) || (c.LogY && p[1] <= 0) || !finite(p[0]) || !finite(p[1]) {
				continue
			}
			xlo, xhi = math.Min(xlo, p[0]), math.Max(xhi, p[0])
			ylo, yhi = math.Min(ylo, p[1]), math.Max(yhi, p[1])
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

	v := &svgView{W: w, H: h, Title: c.Title, TitleX: f1(x0)}
	// Grid and ticks.
	for _, t := range xs.ticks() {
		x := xs.px(t)
		if x < x0-0.5 || x > x1+0.5 {
			continue
		}
		v.Ticks = append(v.Ticks, svgRule{X1: f1(x), Y1: f1(y1), X2: f1(x), Y2: f1(y0), TX: f1(x), TY: f1(y0 + 15), Class: "tx", Label: FormatNumber(t) + c.XUnit})
	}
	for _, t := range ys.ticks() {
		y := ys.px(t)
		if y > y0+0.5 || y < y1-0.5 {
			continue
		}
		v.Ticks = append(v.Ticks, svgRule{X1: f1(x0), Y1: f1(y), X2: f1(x1), Y2: f1(y), TX: f1(x0 - 6), TY: f1(y + 4), Class: "ty", Label: FormatNumber(t) + c.YUnit})
	}
	v.Frame = svgRect{X: f1(x0), Y: f1(y1), W: f1(x1 - x0), H: f1(y0 - y1)}
	if c.XLabel != "" {
		v.XLabel = &svgText{X: f1((x0 + x1) / 2), Y: f1(y0 + 32), Text: c.XLabel}
	}
	if c.YLabel != "" {
		v.YLabel = &svgText{Y: f1((y0 + y1) / 2), Text: c.YLabel}
	}
	v.Clip = fmt.Sprintf("c%x", hashString(c.Title+c.XLabel+c.YLabel+strconv.Itoa(len(c.Series))))
	v.ClipRect = svgRect{X: f1(x0), Y: f1(y1 - 4), W: f1(x1 - x0), H: f1(y0 - y1 + 8)}
	for _, m := range c.Marks {
		x := xs.px(m.X)
		if x < x0 || x > x1 {
			continue
		}
		v.Marks = append(v.Marks, svgRule{X1: f1(x), Y1: f1(y1), X2: f1(x), Y2: f1(y0), TX: f1(x + 4), TY: f1(y1 + 12), Label: m.Label})
	}
	// Bands: one closed path per run of points with both edges.
	for i, b := range c.Bands {
		bv := svgSeries{Color: b.Color}
		if bv.Color == "" {
			bv.Color = Palette(len(c.Series) + i)
		}
		ok := func(p [2]float64) bool {
			return finite(p[0]) && finite(p[1]) && !(c.LogX && p[0] <= 0) && !(c.LogY && p[1] <= 0)
		}
		var d strings.Builder
		n := min(len(b.Lower), len(b.Upper))
		for j := 0; j < n; {
			if !ok(b.Lower[j]) || !ok(b.Upper[j]) {
				j++
				continue
			}
			k := j
			for k < n && ok(b.Lower[k]) && ok(b.Upper[k]) {
				k++
			}
			for m := j; m < k; m++ { // along the lower edge, back along the upper
				cmd := "L"
				if m == j {
					cmd = "M"
				}
				fmt.Fprintf(&d, "%s%s %s", cmd, f1(xs.px(b.Lower[m][0])), f1(ys.px(b.Lower[m][1])))
			}
			for m := k - 1; m >= j; m-- {
				fmt.Fprintf(&d, "L%s %s", f1(xs.px(b.Upper[m][0])), f1(ys.px(b.Upper[m][1])))
			}
			d.WriteString("Z")
			j = k
		}
		bv.Path = d.String()
		v.Bands = append(v.Bands, bv)
	}
	// Series.
	for i, s := range c.Series {
		sv := svgSeries{Color: s.Color, Dots: c.Dots}
		if sv.Color == "" {
			sv.Color = Palette(i)
		}
		sv.Dashed = s.Dashed
		pts := make([][2]float64, 0, len(s.Points))
		var breaks map[int]bool // indexes in pts that start a new line
		for _, p := range s.Points {
			if (c.LogX && p[0] <= 0) || (c.LogY && p[1] <= 0) || !finite(p[0]) || !finite(p[1]) {
				if s.Breaks {
					if breaks == nil {
						breaks = map[int]bool{}
					}
					breaks[len(pts)] = true
				}
				continue
			}
			pts = append(pts, p)
		}
		if c.Dots {
			for _, p := range pts {
				sv.Points = append(sv.Points, [2]string{f1(xs.px(p[0])), f1(ys.px(p[1]))})
			}
		} else if len(pts) > 0 {
			var d strings.Builder
			for j, p := range pts {
				x, y := xs.px(p[0]), ys.px(p[1])
				switch {
				case j == 0 || breaks[j]:
					fmt.Fprintf(&d, "M%s %s", f1(x), f1(y))
				case c.Step:
					fmt.Fprintf(&d, "H%sV%s", f1(x), f1(y))
				default:
					fmt.Fprintf(&d, "L%s %s", f1(x), f1(y))
				}
			}
			sv.Path = d.String()
		}
		for _, m := range s.Markers {
			sv.Markers = append(sv.Markers, fmt.Sprintf("M%s %sl6 6m0 -6l-6 6", f1(xs.px(m)-3), f1(y1+2)))
		}
		v.Series = append(v.Series, sv)
	}
	// Legend below the plot, three entries a row: bands, then series.
	entry := func(i int, name, color string) {
		lx := x0 + float64(i%3)*(x1-x0)/3
		ly := y0 + 46 + 18*float64(i/3)
		v.Legend = append(v.Legend, svgLegend{RX: f1(lx), RY: f1(ly - 7), Color: color, TX: f1(lx + 20), TY: f1(ly - 2), Name: name})
	}
	for i, b := range c.Bands {
		entry(i, b.Name, v.Bands[i].Color)
	}
	for i, s := range c.Series {
		name := s.Name
		if len(s.Markers) > 0 {
			name += fmt.Sprintf(" (%d lost: ×)", len(s.Markers))
		}
		entry(len(c.Bands)+i, name, v.Series[i].Color)
	}
	return v
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
