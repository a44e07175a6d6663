package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/durawal/durawal/internal/measure"
)

// report is everything one run measured; -json writes it whole.
type report struct {
	Header  header        `json:"header"`
	Disk    *diskResult   `json:"disk,omitempty"`
	Levels  *levelsResult `json:"levels,omitempty"`
	AOF     *aofResult    `json:"aof,omitempty"`
	Cliff   *cliffResult  `json:"cliff,omitempty"`
	Tail    *tailResult   `json:"tail,omitempty"`
	Queue   *queueResult  `json:"queue,omitempty"`
	Long    *longResult   `json:"long,omitempty"`
	Rounds  int           `json:"rounds"`
	Checks  []check       `json:"counter_checks"`
	Elapsed time.Duration `json:"elapsed_ns"`

	// Servers is the servers experiment (Redis and MariaDB beside durawal).
	Servers *serversResult `json:"servers,omitempty"`
	// Bandwidth and Prepare are the experiments of those names.
	Bandwidth *bandwidthResult `json:"bandwidth,omitempty"`
	Prepare   *prepareResult   `json:"prepare,omitempty"`
}

// table is one Markdown table with a title and notes above it.
type table struct {
	title  string
	notes  []string
	header []string
	rows   [][]string
}

// write renders t as a Markdown section (measure.Table: figures
// right-aligned), followed by a blank line.
func (t table) write(w io.Writer) {
	mt := measure.NewTable(t.header...)
	mt.Title, mt.Notes = t.title, t.notes
	for _, r := range t.rows {
		mt.RowStrings(r...)
	}
	mt.Fprint(w)
	fmt.Fprintln(w)
}

// fmtUS formats a duration in microseconds: one decimal below 100 µs.
func fmtUS(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 100 {
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return fmtInt(int(us + 0.5))
}

// fmtCount formats a count (a median may be fractional) with thousands
// separators.
func fmtCount(x float64) string { return fmtInt(int64(x + 0.5)) }

// fmtFloat1 formats x with one decimal.
// From 100 on it is a whole number with thousands separators.
func fmtFloat1(x float64) string {
	if x >= 100 {
		return fmtCount(x)
	}
	return strconv.FormatFloat(x, 'f', 1, 64)
}

// fmtUSf formats microseconds as fmtUS does.
func fmtUSf(x float64) string { return fmtUS(time.Duration(x * float64(time.Microsecond))) }

// fmtRatioOrDash is fmtRatio, or "—" for 0 (no fsyncs).
func fmtRatioOrDash(x float64) string {
	if x == 0 {
		return "—"
	}
	return fmtRatio(x)
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fmtMS formats a duration in milliseconds with one decimal.
func fmtMS(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 1, 64)
}

// fmtRate formats a rate per second with thousands separators.
func fmtRate(r float64) string { return fmtInt(int(r + 0.5)) }

// fmtRatio formats a ratio with two significant decimals.
func fmtRatio(r float64) string {
	if r >= 1000 {
		return fmtRate(r)
	}
	if r >= 10 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// fmtInt formats n with thousands separators: 10,209.
func fmtInt[N int | int64 | uint64](n N) string { return measure.Thousands(int64(n)) }

// writeHeader prints the machine and build the figures belong to.
func writeHeader(w io.Writer, h header) {
	fmt.Fprintf(w, "# walbench — the articles' durability experiments, rerun on this disk\n\n")
	rows := [][2]string{
		{"machine", fmt.Sprintf("%s, %d cores, %s", h.CPU, h.Cores, h.OS)},
		{"load average", h.LoadAvg},
		{"go", h.GoVersion},
		{"directory", h.Dir},
		{"filesystem", h.FSType},
		{"block device", h.Device},
		{"durawal", h.Version},
		{"record size", fmt.Sprintf("%d bytes", h.RecordSize)},
		{"segment size", fmt.Sprintf("%s (allocated or zero-filled before use, or recycled after RemoveBefore)", fmtBytes(h.SegmentSize))},
		{"mode", h.Mode},
		{"rounds", fmt.Sprintf("%d, interleaved", h.Rounds)},
		{"started", h.Started.Format(time.RFC3339)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "- %s: %s\n", r[0], r[1])
	}
	for _, warn := range h.Warnings {
		fmt.Fprintf(w, "- **warning**: %s\n", warn)
	}
	fmt.Fprintln(w)
	writeSources(w)
	writeReadingGuide(w, h.Rounds)
}

// writeReadingGuide explains, once, what every table's cells mean.
func writeReadingGuide(w io.Writer, rounds int) {
	fmt.Fprintf(w, "How to read the tables:\n\n")
	fmt.Fprintf(w, "- Columns headed \"article\" are the article's own figures, measured on its "+
		"hardware with its database: compare the shape, not the numbers.\n")
	if rounds > 1 {
		fmt.Fprintf(w, "- Every cell was measured %d times, in interleaved rounds (round 1 runs every cell in order, "+
			"round 2 in reverse, and so on), so that a drifting disk slows every cell alike. %s\n", rounds, flagNote)
	}
	fmt.Fprintf(w, "- %s\n", fsyncCountNote)
	fmt.Fprintf(w, "- %s\n\n", causesNote)
}

// writeChecks prints the counter cross-check summary.
func writeChecks(w io.Writer, rep *report) {
	bad := 0
	var fsyncs uint64
	for _, c := range rep.Checks {
		fsyncs += c.Fsyncs
		if !c.Agree {
			bad++
		}
	}
	fmt.Fprintf(w, "## counters\n\n")
	if bad == 0 {
		fmt.Fprintf(w, "wal.Stats fsync and directory-sync counts agreed with the system calls counted by "+
			"faultfs.Counter for all %d logs (%s fsyncs in all, Open to Close).\n\n", len(rep.Checks), fmtInt(fsyncs))
	} else {
		fmt.Fprintf(w, "**warning**: wal.Stats disagreed with the faultfs.Counter syscall count for %d of %d logs; "+
			"see the warnings on stderr and counter_checks in -json.\n\n", bad, len(rep.Checks))
	}
	fmt.Fprintf(w, "Total run time %s.\n", rep.Elapsed.Round(100*time.Millisecond))
}

// fmtBytes formats a byte count in binary units.
func fmtBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// writeJSON writes rep as indented JSON.
func writeJSON(w io.Writer, rep *report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
