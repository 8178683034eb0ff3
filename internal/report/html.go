package report

import (
	"fmt"
	"html"
	"io"
	"strings"
)

// Page is a self-contained HTML report: inline CSS and inline SVG charts,
// no scripts, no fonts or images fetched from anywhere, so it can be mailed,
// archived and opened offline.
type Page struct {
	Title    string
	Subtitle string
	Sections []Section
	Footer   string
}

// Section is one block of a page: a heading with a badge, paragraphs, a
// key/value list, a table, charts and notes.
type Section struct {
	ID         string
	Title      string
	Badge      string
	BadgeStyle Style
	Paragraphs []string
	Facts      [][2]string
	Table      *Table
	// Charts are laid out in a grid, Wide ones across the whole width.
	Charts []SectionChart
	Notes  []string
}

// SectionChart is a chart with an optional caption.
type SectionChart struct {
	Chart   Chart
	Caption string
	Wide    bool
}

const pageCSS = `
:root{--fg:#1b1f24;--muted:#5b6570;--line:#d8dee4;--good:#1a7f37;--bad:#cf222e;--warn:#9a6700;--bg:#f6f8fa}
*{box-sizing:border-box}
body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{padding:24px 32px 8px}
h1{font-size:24px;margin:0 0 4px}
.sub{color:var(--muted);margin:0}
main{padding:0 32px 32px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:20px 24px;margin:16px 0}
h2{font-size:19px;margin:0 0 8px;display:flex;gap:12px;align-items:center;flex-wrap:wrap}
.badge{font-size:12px;font-weight:700;letter-spacing:.04em;padding:2px 8px;border-radius:12px;border:1px solid currentColor}
.s1{color:var(--good)}.s2{color:var(--warn)}.s3{color:var(--bad)}.s4{color:var(--muted)}.s5{font-weight:700}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;margin:12px 0}
dt{color:var(--muted)}dd{margin:0}
table{border-collapse:collapse;width:100%;margin:12px 0;font-size:13.5px}
th,td{text-align:left;padding:5px 8px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-weight:600;color:var(--muted);text-transform:lowercase;background:var(--bg)}
td.num{font-variant-numeric:tabular-nums;white-space:nowrap}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:12px;margin:12px 0}
figure{margin:0;border:1px solid var(--line);border-radius:6px;padding:6px;background:#fff}
figure.wide{grid-column:1/-1}
figcaption{color:var(--muted);font-size:12.5px;padding:2px 4px}
svg.chart{width:100%;height:auto;display:block}
svg .ct{font-size:13px;font-weight:600;fill:#1b1f24}
svg .tx{font-size:11px;fill:#5b6570;text-anchor:middle}
svg .ty{font-size:11px;fill:#5b6570;text-anchor:end}
svg .xl,svg .yl{font-size:12px;fill:#1b1f24;text-anchor:middle}
svg .lg{font-size:12px;fill:#1b1f24}
svg .ml{font-size:11px;fill:#9a6700}
svg .grid{stroke:#e6eaef;stroke-width:1}
svg .frame{fill:none;stroke:#aab4be;stroke-width:1}
svg .mark{stroke:#9a6700;stroke-width:1.2;stroke-dasharray:4 3}
svg .lost{stroke:#cf222e;stroke-width:1.6;fill:none}
ul.notes{color:var(--muted);font-size:13px;padding-left:20px}
footer{color:var(--muted);font-size:12px;padding:0 32px 24px}
`

// WriteHTML renders the page.
func WriteHTML(w io.Writer, p *Page) error {
	var b strings.Builder
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1">` + "\n")
	// No network: nothing on the page may load from anywhere.
	b.WriteString(`<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">` + "\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n", e(p.Title), pageCSS)
	fmt.Fprintf(&b, "<header><h1>%s</h1>", e(p.Title))
	if p.Subtitle != "" {
		fmt.Fprintf(&b, `<p class="sub">%s</p>`, e(p.Subtitle))
	}
	b.WriteString("</header>\n<main>\n")
	for _, s := range p.Sections {
		if s.ID != "" {
			fmt.Fprintf(&b, `<section id="%s">`, e(s.ID))
		} else {
			b.WriteString("<section>")
		}
		fmt.Fprintf(&b, "<h2>%s", e(s.Title))
		if s.Badge != "" {
			fmt.Fprintf(&b, ` <span class="badge s%d">%s</span>`, s.BadgeStyle, e(s.Badge))
		}
		b.WriteString("</h2>\n")
		for _, para := range s.Paragraphs {
			fmt.Fprintf(&b, "<p>%s</p>\n", e(para))
		}
		if len(s.Facts) > 0 {
			b.WriteString("<dl>")
			for _, f := range s.Facts {
				fmt.Fprintf(&b, "<dt>%s</dt><dd>%s</dd>", e(f[0]), e(f[1]))
			}
			b.WriteString("</dl>\n")
		}
		if s.Table != nil {
			writeHTMLTable(&b, s.Table)
		}
		if len(s.Charts) > 0 {
			b.WriteString(`<div class="charts">`)
			for _, c := range s.Charts {
				cls := ""
				if c.Wide {
					cls = ` class="wide"`
				}
				fmt.Fprintf(&b, "<figure%s>%s", cls, c.Chart.SVG())
				if c.Caption != "" {
					fmt.Fprintf(&b, "<figcaption>%s</figcaption>", e(c.Caption))
				}
				b.WriteString("</figure>\n")
			}
			b.WriteString("</div>\n")
		}
		if len(s.Notes) > 0 {
			b.WriteString(`<ul class="notes">`)
			for _, n := range s.Notes {
				fmt.Fprintf(&b, "<li>%s</li>", e(n))
			}
			b.WriteString("</ul>\n")
		}
		b.WriteString("</section>\n")
	}
	b.WriteString("</main>\n")
	if p.Footer != "" {
		fmt.Fprintf(&b, "<footer>%s</footer>\n", e(p.Footer))
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHTMLTable(b *strings.Builder, t *Table) {
	e := html.EscapeString
	b.WriteString("<table><thead><tr>")
	for _, h := range t.Header {
		fmt.Fprintf(b, "<th>%s</th>", e(h))
	}
	b.WriteString("</tr></thead><tbody>")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range r {
			cls := ""
			if c.Style != Plain {
				cls = fmt.Sprintf("s%d", c.Style)
			}
			if isNumeric(c.Text) {
				cls = strings.TrimSpace(cls + " num")
			}
			if cls != "" {
				fmt.Fprintf(b, `<td class="%s">%s</td>`, cls, e(c.Text))
			} else {
				fmt.Fprintf(b, "<td>%s</td>", e(c.Text))
			}
		}
		b.WriteString("</tr>")
	}
	b.WriteString("</tbody></table>\n")
}

func isNumeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' && len(s) > 1)
}
