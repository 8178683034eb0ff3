// Package report renders lowlat's results for people and for scripts: aligned text
// tables (colour only on a terminal), indented JSON, and a progress line for long
// runs. Commands build plain data and hand it here; nothing in this package decides
// what a result means.
package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// JSON writes v as indented JSON followed by a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write json: %w", err)
	}
	return nil
}

// Style names a semantic colour; the renderer maps it to ANSI only on a TTY.
type Style int

// Styles used across commands. Plain is the zero value.
const (
	Plain Style = iota
	Good
	Warn
	Bad
	Dim
	Bold
)

var ansi = map[Style]string{Good: "\x1b[32m", Warn: "\x1b[33m", Bad: "\x1b[31m", Dim: "\x1b[2m", Bold: "\x1b[1m"}

// Cell is one table cell: text plus an optional style.
type Cell struct {
	Text  string
	Style Style
}

// C is shorthand for an unstyled cell.
func C(s string) Cell { return Cell{Text: s} }

// S is shorthand for a styled cell.
func S(s string, st Style) Cell { return Cell{Text: s, Style: st} }

// Table is a header and rows rendered with aligned columns.
type Table struct {
	Header []string
	Rows   [][]Cell
}

// Add appends a row of cells.
func (t *Table) Add(cells ...Cell) { t.Rows = append(t.Rows, cells) }

// AddStrings appends a row of unstyled cells.
func (t *Table) AddStrings(cells ...string) {
	row := make([]Cell, len(cells))
	for i, c := range cells {
		row[i] = C(c)
	}
	t.Rows = append(t.Rows, row)
}

// Render writes the table. With color false no escape sequence is written, so the
// output is safe to pipe and to compare in golden files.
func (t *Table) Render(w io.Writer, color bool) error {
	ncol := len(t.Header)
	for _, r := range t.Rows {
		ncol = max(ncol, len(r))
	}
	width := make([]int, ncol)
	for i, h := range t.Header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c.Text))
		}
	}
	var b strings.Builder
	line := func(cells []Cell) {
		var sb strings.Builder
		for i, c := range cells {
			text := c.Text
			if i < len(cells)-1 {
				text += strings.Repeat(" ", width[i]-utf8.RuneCountInString(c.Text)+2)
			}
			if color && c.Style != Plain {
				// Colour only the text, not the padding, so columns stay aligned.
				pad := text[len(c.Text):]
				text = ansi[c.Style] + c.Text + "\x1b[0m" + pad
			}
			sb.WriteString(text)
		}
		b.WriteString(strings.TrimRight(sb.String(), " "))
		b.WriteByte('\n')
	}
	if len(t.Header) > 0 {
		h := make([]Cell, len(t.Header))
		for i, s := range t.Header {
			h[i] = S(strings.ToUpper(s), Bold)
		}
		line(h)
	}
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Paint wraps s in the style's escape codes when color is true.
func Paint(s string, st Style, color bool) string {
	if !color || st == Plain {
		return s
	}
	return ansi[st] + s + "\x1b[0m"
}
