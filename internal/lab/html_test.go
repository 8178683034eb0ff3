package lab

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lowlat/lowlat/internal/report"
	"github.com/lowlat/lowlat/internal/testnet"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixtures are results of real runs (lab vm), kept to test the renderers.
func fixtures(t *testing.T) []*Result {
	t.Helper()
	paths, _ := filepath.Glob("testdata/results/*.json")
	if len(paths) == 0 {
		t.Fatal("no fixtures in testdata/results")
	}
	var rs []*Result
	for _, p := range paths {
		r, err := ReadResult(p)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	return rs
}

func TestWriteTextGolden(t *testing.T) {
	for _, r := range fixtures(t) {
		t.Run(r.Scenario, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteText(&b, r, false); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", r.Scenario+".txt")
			if *update {
				os.WriteFile(golden, b.Bytes(), 0o644)
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if b.String() != string(want) {
				t.Errorf("text differs from %s (go test -update to accept):\n%s", golden, b.String())
			}
			if strings.Contains(b.String(), "\x1b[") {
				t.Error("escape codes without colour")
			}
		})
	}
}

func TestPageHasEveryVariant(t *testing.T) {
	rs := fixtures(t)
	var b bytes.Buffer
	if err := WriteHTML(&b, rs); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	wantSVG := 0
	for _, r := range rs {
		wantSVG++ // the CDF
		for _, v := range r.Variants {
			wantSVG++
			if !strings.Contains(s, "RTT over time: "+v.Name) {
				t.Errorf("no time plot for %s/%s", r.Scenario, v.Name)
			}
		}
	}
	if n := strings.Count(s, "<svg "); n != wantSVG {
		t.Errorf("%d charts, want %d", n, wantSVG)
	}
	if strings.Contains(s, "<script") || regexp.MustCompile(`(src|href)=`).MatchString(s) {
		t.Error("the page loads something")
	}
}

// The HTML report renders in a real browser: headless Chromium takes a
// screenshot, which must show the charts (each variant's colour) and not be
// blank. LOWLAT_SCREENSHOT_DIR keeps the PNG for a person to look at.
func TestHTMLRendersInChromium(t *testing.T) {
	chrome := testnet.Chromium(t)
	dir := t.TempDir()
	page := filepath.Join(dir, "lab.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	rs := fixtures(t)[:1]
	if err := WriteHTML(f, rs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shot := filepath.Join(dir, "lab.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := testnet.ChromiumArgs(dir, 1280, 2600)
	cmd := exec.CommandContext(ctx, chrome, append(args, "--screenshot="+shot, "file://"+page)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	dom, err := exec.CommandContext(ctx, chrome, append(args, "--dump-dom", "file://"+page)...).Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom: %v", err)
	}
	if n := strings.Count(string(dom), "<svg "); n != 1+len(rs[0].Variants) {
		t.Errorf("the browser's DOM has %d charts, want %d", n, 1+len(rs[0].Variants))
	}
	if d := os.Getenv("LOWLAT_SCREENSHOT_DIR"); d != "" {
		b, _ := os.ReadFile(shot)
		os.WriteFile(filepath.Join(d, "lab-"+rs[0].Scenario+".png"), b, 0o644)
	}
	pf, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if w := img.Bounds().Dx(); w != 1280 {
		t.Errorf("screenshot %d px wide", w)
	}
	// Every variant's series colour must be on the page (its CDF line and
	// its time plot), and a good part of the page must not be background.
	counts := map[int]int{}
	ink := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			c := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if !(c.R > 240 && c.G > 240 && c.B > 240) {
				ink++
			}
			for i := range rs[0].Variants {
				if near(c, report.Palette(i)) {
					counts[i]++
				}
			}
		}
	}
	total := (b.Dx() / 2) * (b.Dy() / 2)
	if ink < total/50 {
		t.Errorf("the page looks blank: %d of %d sampled pixels are not background", ink, total)
	}
	for i, v := range rs[0].Variants {
		if counts[i] < 50 {
			t.Errorf("variant %s: its colour %s appears on %d sampled pixels: its charts did not render", v.Name, report.Palette(i), counts[i])
		}
	}
}

func near(c color.RGBA, hex string) bool {
	var r, g, b int
	for i, p := range []*int{&r, &g, &b} {
		v := hex[1+2*i : 3+2*i]
		for _, ch := range v {
			*p *= 16
			switch {
			case ch >= '0' && ch <= '9':
				*p += int(ch - '0')
			default:
				*p += int(ch-'a') + 10
			}
		}
	}
	d := func(a uint8, b int) int {
		if int(a) > b {
			return int(a) - b
		}
		return b - int(a)
	}
	return d(c.R, r)+d(c.G, g)+d(c.B, b) < 30
}

var _ image.Image
