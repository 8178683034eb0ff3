package report

import (
	"bytes"
	"fmt"
	"html/template"
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

// pageHTML lays the page out. html/template escapes every text and
// attribute by its context; the charts are inserted as markup because
// Chart.SVG builds them from numbers and escapes each text it places.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; img-src data:">
<title>{{.Title}}</title>
<style>{{.CSS}}</style>
</head>
<body>
<header><h1>{{.Title}}</h1>{{with .Subtitle}}<p class="sub">{{.}}</p>{{end}}</header>
<main>
{{range .Sections -}}
{{if .ID}}<section id="{{.ID}}">{{else}}<section>{{end}}<h2>{{.Title}}{{if .Badge}} <span class="badge {{styleClass .BadgeStyle}}">{{.Badge}}</span>{{end}}</h2>
{{range .Paragraphs}}<p>{{.}}</p>
{{end -}}
{{with .Facts}}<dl>{{range .}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>
{{end -}}
{{with .Table}}<table><thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead><tbody>{{range .Rows}}<tr>{{range .}}{{with cellClass .}}<td class="{{.}}">{{else}}<td>{{end}}{{.Text}}</td>{{end}}</tr>{{end}}</tbody></table>
{{end -}}
{{with .Charts}}<div class="charts">{{range .}}<figure{{if .Wide}} class="wide"{{end}}>{{svg .Chart}}{{with .Caption}}<figcaption>{{.}}</figcaption>{{end}}</figure>
{{end}}</div>
{{end -}}
{{with .Notes}}<ul class="notes">{{range .}}<li>{{.}}</li>{{end}}</ul>
{{end -}}
</section>
{{end -}}
</main>
{{with .Footer}}<footer>{{.}}</footer>
{{end -}}
</body>
</html>
`

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"styleClass": styleClass,
	"cellClass":  cellClass,
	// The chart's SVG is built by Chart.SVG, which escapes every text it
	// places; it goes into the page as markup.
	"svg": func(c Chart) template.HTML { return template.HTML(c.SVG()) },
}).Parse(pageHTML))

// WriteHTML renders the page.
func WriteHTML(w io.Writer, p *Page) error {
	var b bytes.Buffer
	data := struct {
		*Page
		CSS template.CSS
	}{p, template.CSS(pageCSS)}
	if err := pageTemplate.Execute(&b, data); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// styleClass is the CSS class of a style: s1 (good) .. s5 (bold).
func styleClass(s Style) string { return fmt.Sprintf("s%d", s) }

// cellClass is a table cell's classes: its style, and num for figures
// (tabular digits, no wrapping).
func cellClass(c Cell) string {
	var cls []string
	if c.Style != Plain {
		cls = append(cls, styleClass(c.Style))
	}
	if isNumeric(c.Text) {
		cls = append(cls, "num")
	}
	return strings.Join(cls, " ")
}

func isNumeric(s string) bool {
	return s != "" && (s[0] >= '0' && s[0] <= '9' || s[0] == '-' && len(s) > 1)
}
