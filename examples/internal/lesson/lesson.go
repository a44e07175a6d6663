// Package lesson is the small amount of machinery the teaching programs in
// examples/ share, so that each lesson's main.go can read as the lesson: a
// command-line wrapper (-dir, -quick), a latency recorder with percentiles,
// and a Markdown table printer. It uses nothing of the log itself.
package lesson

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durawal/durawal/internal/articles"
	"github.com/durawal/durawal/internal/measure"
)

// RunFunc is a lesson: it works in dir (which exists and is empty unless the
// user chose it) and writes its table and explanation to out. quick asks for
// small counts, for CI and smoke tests: the numbers are noisier but the table
// has the same rows.
type RunFunc func(ctx context.Context, dir string, quick bool, out io.Writer) error

// Pick returns short when quick is set and full otherwise.
func Pick[T any](quick bool, full, short T) T {
	if quick {
		return short
	}
	return full
}

// Main parses -dir and -quick, makes a fresh temporary directory unless -dir
// names one (and removes it afterwards), runs the lesson with os.Stdout, and
// exits with status 1 if it fails. Ctrl-C cancels the lesson's context.
func Main(run RunFunc) {
	dir := flag.String("dir", "", "directory to put the logs in (default: a fresh temporary directory, removed afterwards)")
	quick := flag.Bool("quick", false, "small counts, for CI: the same table, noisier numbers")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runIn(ctx, *dir, *quick, run); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func runIn(ctx context.Context, dir string, quick bool, run RunFunc) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "durawal-lesson-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return run(ctx, dir, quick, os.Stdout)
}

// Recorder collects latencies from many goroutines. The zero value is ready
// to use.
type Recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one latency.
func (r *Recorder) Add(d time.Duration) {
	r.mu.Lock()
	r.d = append(r.d, d)
	r.mu.Unlock()
}

// Count returns how many latencies were recorded.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.d)
}

// Percentile returns the p-th percentile (0 < p ≤ 100, nearest rank), or 0
// when nothing was recorded.
func (r *Recorder) Percentile(p float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	slices.Sort(r.d)
	return measure.Percentile(r.d, p)
}

// Table is the Markdown table every tool of this repository prints
// (numbers right-aligned); see [measure.Table].
type Table = measure.Table

// NewTable returns a table with these column headers.
func NewTable(header ...string) *Table { return measure.NewTable(header...) }

// Explain writes a blank line and then text wrapped at 80 columns: the
// lesson's paragraph of plain explanation.
func Explain(w io.Writer, text string) {
	fmt.Fprintln(w)
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 && n+1+len([]rune(word)) > 80 {
			fmt.Fprintln(w)
			n = 0
		} else if i > 0 {
			fmt.Fprint(w, " ")
			n++
		}
		fmt.Fprint(w, word)
		n += len([]rune(word))
	}
	fmt.Fprintln(w)
}

// Sources writes, after a blank line, one "Source:" line per article whose
// figures the lesson's table prints beside its own.
func Sources(w io.Writer, as ...articles.Article) {
	fmt.Fprintln(w)
	for _, a := range as {
		fmt.Fprintf(w, "Source: article %s\n", a.Cite())
	}
}

// OneLine returns text with every run of white space (the indentation and
// line breaks of a raw string literal) collapsed to one space, so that a
// lesson's paragraph can be built from pieces and tested as plain text.
func OneLine(text string) string {
	return strings.Join(strings.Fields(text), " ")
}

// Micros formats d in microseconds, e.g. "131 µs", or milliseconds above 10 ms.
func Micros(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	}
	return fmt.Sprintf("%d µs", d.Microseconds())
}

// PerSecond formats n events over d as a rate, e.g. "7,680/s".
func PerSecond(n int, d time.Duration) string {
	if d <= 0 {
		return "—"
	}
	return measure.Thousands(int64(float64(n)/d.Seconds())) + "/s"
}

// Load calls op total times, spread over clients goroutines that each call
// it one call at a time (like sysbench threads or redis-benchmark clients)
// and start together, and times every call ([measure.Drive]). It returns the
// wall time of the whole run, the latencies, and the first error, which
// stops the run.
func Load(ctx context.Context, clients, total int, op func(ctx context.Context) error) (time.Duration, *Recorder, error) {
	run, err := measure.Drive(ctx, measure.Load{Workers: clients, Total: total}, func(ctx context.Context, _, _ int) error {
		return op(ctx)
	})
	return run.Elapsed, &Recorder{d: run.Latencies}, err
}

// Rows parses the Markdown tables in out (as [Table.Fprint] writes them) and
// returns their body rows, cells trimmed, keyed by the first cell. Smoke
// tests use it to check a lesson's table.
func Rows(out string) map[string][]string {
	rows := map[string][]string{}
	header := true
	for line := range strings.Lines(out) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			header = true // the next table starts with its header
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header || strings.Trim(cells[0], "-") == "" {
			header = false
			continue
		}
		rows[cells[0]] = cells
	}
	return rows
}

// Number parses a cell such as "10,209", "0.0001" or "3,646/s" and returns
// its leading number, or -1 if it has none.
func Number(cell string) float64 {
	var f float64
	if _, err := fmt.Sscan(strings.ReplaceAll(cell, ",", ""), &f); err != nil {
		return -1
	}
	return f
}
