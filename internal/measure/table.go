package measure

import (
	"fmt"
	"io"
	"strings"
	"unicode"
)

// Table is a Markdown table built row by row, with an optional title and
// notes above it. Every column after the first whose cells all read as
// numbers ("10,209", "131 µs", "1.2×", "—") is right-aligned, in the text
// and in the Markdown alignment row, so figures line up by magnitude.
type Table struct {
	Title string   // "## Title" above the table when set
	Notes []string // paragraphs between the title and the table
	rows  [][]string
}

// NewTable returns a table with these column headers.
func NewTable(header ...string) *Table {
	return &Table{rows: [][]string{header}}
}

// Row adds a row; each cell is formatted with %v.
func (t *Table) Row(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	t.rows = append(t.rows, row)
}

// RowStrings adds a row of cells already formatted.
func (t *Table) RowStrings(cells ...string) {
	t.rows = append(t.rows, cells)
}

// Len returns the number of body rows.
func (t *Table) Len() int { return len(t.rows) - 1 }

// Fprint writes the table (after its title and notes, each followed by a
// blank line) to w with its columns padded to line up.
func (t *Table) Fprint(w io.Writer) {
	if t.Title != "" {
		fmt.Fprintf(w, "## %s\n\n", t.Title)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
	cols := len(t.rows[0])
	width := make([]int, cols)
	right := make([]bool, cols)
	for i := 1; i < cols; i++ {
		right[i] = len(t.rows) > 1
	}
	for r, row := range t.rows {
		for i, c := range row {
			if i >= cols {
				break
			}
			width[i] = max(width[i], len([]rune(c)), 3)
			if r > 0 && !numeric(c) {
				right[i] = false
			}
		}
	}
	line := func(cells []string, align bool) {
		var b strings.Builder
		b.WriteString("|")
		for i, wd := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", wd-len([]rune(c)))
			if align && right[i] {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(t.rows[0], false)
	sep := make([]string, cols)
	for i, wd := range width {
		if right[i] {
			sep[i] = strings.Repeat("-", wd-1) + ":"
		} else {
			sep[i] = strings.Repeat("-", wd)
		}
	}
	line(sep, false)
	for _, row := range t.rows[1:] {
		line(row, true)
	}
}

// numeric reports whether a cell reads as a figure: it starts with a digit
// (after an optional sign, "≤", "~" or "<") or is a dash for "none".
func numeric(c string) bool {
	c = strings.TrimSpace(c)
	if c == "" || c == "—" || c == "-" || c == "n/a" {
		return true
	}
	c = strings.TrimLeft(c, "+-−≤≥<>~≈ ")
	r := []rune(c)
	return len(r) > 0 && unicode.IsDigit(r[0])
}
