package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

func testPage() *Page {
	c := Chart{Title: "RTT <CDF> & more", XLabel: "rtt", XUnit: " ms", YLabel: "fraction", LogX: true, Step: true, YMin: 0, YMax: 1,
		Series: []Series{
			{Name: "base<line>", Points: [][2]float64{{0.05, 0}, {1, 0.2}, {4000, 0.9}, {5000, 1}}},
			{Name: "fix & co", Points: [][2]float64{{20, 0}, {30, 1}}, Markers: []float64{25}},
		},
		Marks: []Mark{{X: 100, Label: "load"}}}
	t := &Table{Header: []string{"variant", "after"}}
	t.Add(C("a<b>"), S("12 ms", Good))
	return &Page{Title: "lab <report>", Subtitle: "s", Footer: "f", Sections: []Section{{
		ID: "x", Title: "scenario", Badge: "PASS", BadgeStyle: Good, Paragraphs: []string{"p & q"},
		Facts: [][2]string{{"kernel", "6.1"}}, Table: t, Charts: []SectionChart{{Chart: c, Caption: "cap", Wide: true}}, Notes: []string{"n"},
	}}}
}

// The page must open offline and anywhere: no scripts, nothing loaded from
// a URL, every text escaped.
func TestWriteHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := WriteHTML(&b, testPage()); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url(http", "<link", "a<b>", "base<line>", "lab <report>"} {
		if strings.Contains(s, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	// The only URL is the SVG namespace, which is a name, not a fetch.
	urls := regexp.MustCompile(`https?://[^"' )]+`).FindAllString(s, -1)
	for _, u := range urls {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("external reference %s", u)
		}
	}
	for _, want := range []string{"<!DOCTYPE html>", "Content-Security-Policy", "<svg", "a&lt;b&gt;", "fix &amp; co (1 lost: ×)", `class="badge s1"`, `class="s1 num"`} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestChartScales(t *testing.T) {
	s := newScale(0.05, 5000, 0, 600, true)
	if s.lo != -2 || s.hi != 4 {
		t.Errorf("log domain %g..%g, want decades -2..4", s.lo, s.hi)
	}
	ticks := s.ticks()
	if len(ticks) != 7 || ticks[0] != 0.01 || ticks[6] != 10000 {
		t.Errorf("log ticks %v", ticks)
	}
	l := newScale(0, 23.4, 0, 100, false)
	if got := l.ticks(); got[0] != 0 || got[len(got)-1] < 23.4 {
		t.Errorf("linear ticks %v", got)
	}
	for in, want := range map[float64]string{0: "0", 0.05: "0.05", 5: "5", 2.5: "2.5", 10000: "10k", 1000: "1000"} {
		if got := FormatNumber(in); got != want {
			t.Errorf("FormatNumber(%g) = %q, want %q", in, got, want)
		}
	}
}

func TestThinKeepsSpikes(t *testing.T) {
	var pts [][2]float64
	for i := 0; i < 1000; i++ {
		pts = append(pts, [2]float64{float64(i), 1})
	}
	pts[537][1] = 99
	out := Thin(pts, 50)
	if len(out) > 52 || out[0][0] != 0 || out[len(out)-1][0] != 999 {
		t.Fatalf("thinned to %d points, ends %v %v", len(out), out[0], out[len(out)-1])
	}
	found := false
	for _, p := range out {
		found = found || p[1] == 99
	}
	if !found {
		t.Error("the spike was thinned away")
	}
}
