package main

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Every measured configuration (a cell of a table) runs once per round.
// The rounds are interleaved: round 1 runs every cell of every experiment in
// order, round 2 in reverse order, round 3 in order again, and so on (A B C,
// C B A, A B C), so that a disk whose speed drifts during the run slows every
// cell alike instead of whichever happened to run last. Tables print each
// figure as the median of the rounds with its range, and flag a figure whose
// range is wider than its distance from a neighbouring row's median: the
// order of those two rows is not settled by this run.

// spread is one figure's median and range over the rounds of a cell.
type spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf returns the median, minimum and maximum of xs (the median of an
// even count is the mean of the middle two). It is the zero spread for no xs.
// NaN marks a round where the figure is undefined (commits per fsync with
// no fsync) and is left out.
func spreadOf(xs []float64) spread {
	s := slices.DeleteFunc(slices.Clone(xs), math.IsNaN)
	if len(s) == 0 {
		return spread{}
	}
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	return spread{Median: m, Min: s[0], Max: s[n-1]}
}

// width is the range max − min.
func (s spread) width() float64 { return s.Max - s.Min }

// unsettled reports, for each entry of col (adjacent rows of one table
// column, in row order), whether its range is wider than the distance
// between its median and a neighbour's median. Rows with different group
// keys are not neighbours; groups may be nil (one group).
func unsettled(col []spread, groups []string) []bool {
	flags := make([]bool, len(col))
	same := func(i, j int) bool { return groups == nil || groups[i] == groups[j] }
	for i, s := range col {
		for _, j := range []int{i - 1, i + 1} {
			if j < 0 || j >= len(col) || !same(i, j) {
				continue
			}
			d := s.Median - col[j].Median
			if d < 0 {
				d = -d
			}
			if s.width() > d {
				flags[i] = true
			}
		}
	}
	return flags
}

// flagMark follows a figure whose order against its neighbour is unsettled.
const flagMark = "*"

// flagNote explains flagMark under a table that uses it.
const flagNote = "Figures are the median of the rounds with the range (min–max) in brackets. " +
	"A * marks a figure whose range is wider than its distance from the median of the row next to it " +
	"in the same group: which of the two is larger is not settled by this run."

// fmtSpread formats s with f as "median [min–max]", or just the median when
// every round gave the same figure, followed by flagMark if flagged.
func fmtSpread(s spread, f func(float64) string, flagged bool) string {
	out := f(s.Median)
	if lo, hi := f(s.Min), f(s.Max); lo != out || hi != out {
		out += " [" + lo + "–" + hi + "]"
	}
	if flagged {
		out += flagMark
	}
	return out
}

// metric names a figure of a result that tables and -json show as a spread.
type metric struct {
	name string
	of   func(result) float64
}

// metrics are the figures of every cell summarised over its rounds.
var figures = []metric{
	{"commits_per_sec", func(r result) float64 { return r.CommitsPerSec }},
	{"records_per_sec", func(r result) float64 { return r.RecordsPerSec }},
	{"payload_mb_per_sec", func(r result) float64 { return r.RecordsPerSec * float64(r.RecordSize) / 1e6 }},
	{"elapsed_ms", func(r result) float64 { return ms(r.Elapsed) }},
	{"p50_us", func(r result) float64 { return us(r.Latency.P50) }},
	{"p95_us", func(r result) float64 { return us(r.Latency.P95) }},
	{"p99_us", func(r result) float64 { return us(r.Latency.P99) }},
	{"p999_us", func(r result) float64 { return us(r.Latency.P999) }},
	{"max_us", func(r result) float64 { return us(r.Latency.Max) }},
	{"mean_us", func(r result) float64 { return us(r.Latency.Mean) }},
	{"fsyncs", func(r result) float64 { return float64(r.Fsyncs) }},
	{"commits_per_fsync", func(r result) float64 {
		if r.Fsyncs == 0 {
			return math.NaN() // undefined, not zero
		}
		return r.CommitsPerFsync
	}},
	{"fsyncs_per_commit", func(r result) float64 { return r.FsyncsPerCommit }},
	{"group_size_mean", func(r result) float64 { return r.GroupSizeMean }},
	{"buffer_full_waits", func(r result) float64 { return float64(r.BufferFullWaits) }},
	{"rolls", func(r result) float64 { return float64(r.Rolls) }},
	{"segment_stalls", func(r result) float64 { return float64(r.SegmentStalls) }},
	{"postponed_writes", func(r result) float64 { return float64(r.PostponedWrites) }},
	{"delayed_writes", func(r result) float64 { return float64(r.DelayedWrites) }},
	{"commits", func(r result) float64 { return float64(r.Commits) }},
	// The long experiment's figures; NaN (left out) for other cells.
	{"payload_mib_per_sec", longFigure(func(r result, _ *longFigures) float64 {
		return r.RecordsPerSec * float64(r.RecordSize) / (1 << 20)
	})},
	{"p9999_us", longFigure(func(_ result, l *longFigures) float64 { return us(l.P9999) })},
	{"over_10ms", longFigure(func(_ result, l *longFigures) float64 { return float64(l.Over10ms) })},
	{"stalls_over_10ms", longFigure(func(_ result, l *longFigures) float64 { return float64(l.Stalls) })},
	{"stalls_during_preparation", longFigure(func(_ result, l *longFigures) float64 { return float64(l.StallsInPrepare) })},
	{"prepare_share_pct", longFigure(func(_ result, l *longFigures) float64 { return 100 * l.PrepareShare })},
	{"over_100ms", longFigure(func(_ result, l *longFigures) float64 { return float64(l.Over100ms) })},
	{"segments_recycled", longFigure(func(_ result, l *longFigures) float64 { return float64(l.Recycled) })},
	{"seal_waits", longFigure(func(_ result, l *longFigures) float64 { return float64(l.SealWaits) })},
	{"segments_allocated", longFigure(func(_ result, l *longFigures) float64 { return float64(l.Allocated) })},
	{"prepare_ms_per_segment", longFigure(func(_ result, l *longFigures) float64 {
		if l.Prepared == 0 {
			return math.NaN()
		}
		return ms(l.PrepareTime) / float64(l.Prepared)
	})},
	{"write_amplification", longFigure(func(_ result, l *longFigures) float64 {
		if l.WA.Ratio == 0 {
			return math.NaN() // not measured here
		}
		return l.WA.Ratio
	})},
	{"write_amplification_second_half", longFigure(func(_ result, l *longFigures) float64 {
		if l.WASecond.Ratio == 0 {
			return math.NaN()
		}
		return l.WASecond.Ratio
	})},
}

// longFigure adapts a figure of the long experiment: NaN for other cells.
func longFigure(f func(result, *longFigures) float64) func(result) float64 {
	return func(r result) float64 {
		if r.Long == nil {
			return math.NaN()
		}
		return f(r, r.Long)
	}
}

// cell is one measured configuration, run once per round.
type cell struct {
	Name string `json:"name"`
	// Spread holds every metric's median and range over the rounds.
	Spread map[string]spread `json:"spread"`
	// Worst says what the slowest commits of every round waited on.
	Worst *tailCauses `json:"worst_commits,omitempty"`
	// Rounds are the figures of each round, in round order.
	Rounds []result `json:"rounds"`
}

// get returns the spread of the named metric; it panics on an unknown name,
// which is a programming error.
func (c *cell) get(name string) spread {
	s, ok := c.Spread[name]
	if !ok {
		panic("walbench: no metric " + name)
	}
	return s
}

// first returns the first round's result, for the fields that are the same
// in every round (name, policy, method, committers, record size).
func (c *cell) first() result {
	if len(c.Rounds) == 0 {
		return result{}
	}
	return c.Rounds[0]
}

// summarise computes c.Spread and c.Worst from c.Rounds.
func (c *cell) summarise() {
	c.Spread = make(map[string]spread, len(figures))
	for _, m := range figures {
		xs := make([]float64, len(c.Rounds))
		for i, r := range c.Rounds {
			xs[i] = m.of(r)
		}
		c.Spread[m.name] = spreadOf(xs)
	}
	c.Worst = mergeCauses(c.Rounds)
}

// ratioSpread is the spread over rounds of num's metric divided by den's,
// each ratio taken within one round (the disk drifts between rounds).
func ratioSpread(num, den *cell, name string) spread {
	var xs []float64
	of := metricFunc(name)
	for i := range min(len(num.Rounds), len(den.Rounds)) {
		if d := of(den.Rounds[i]); d > 0 {
			xs = append(xs, of(num.Rounds[i])/d)
		}
	}
	return spreadOf(xs)
}

func metricFunc(name string) func(result) float64 {
	for _, m := range figures {
		if m.name == name {
			return m.of
		}
	}
	panic("walbench: no metric " + name)
}

// job measures one cell once.
type job struct {
	what string // progress line
	run  func() (result, error)
	into *cell
	// skip is set when the cell cannot run here (a sync method the
	// filesystem refuses); later rounds leave it out.
	skip bool
}

// plan is every job of every experiment, in the order of round 1.
type plan struct {
	jobs []*job
}

// add queues a job that measures s into a new cell and returns the cell.
func (p *plan) add(e *env, what string, s spec) *cell {
	c := &cell{Name: s.name}
	p.jobs = append(p.jobs, &job{what: what, run: func() (result, error) { return e.measureRun(s) }, into: c})
	return c
}

// addFunc queues a job with its own measurement.
func (p *plan) addFunc(name, what string, run func() (result, error)) *cell {
	c := &cell{Name: name}
	p.jobs = append(p.jobs, &job{what: what, run: run, into: c})
	return c
}

// runRounds runs every job once per round, odd rounds in plan order and
// even rounds in reverse, then summarises every cell. skipped reports a
// job whose error means "cannot run here" (its cell stays empty, with a
// warning) rather than a failed run.
func (e *env) runRounds(p *plan, skipped func(j *job, err error) bool) error {
	rounds := e.cfg.rounds
	for r := range rounds {
		order := slices.Clone(p.jobs)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, j := range order {
			if j.skip {
				continue
			}
			if err := e.ctx.Err(); err != nil {
				return err
			}
			e.progressf("round %d/%d: %s", r+1, rounds, j.what)
			res, err := j.run()
			if err != nil {
				if skipped != nil && skipped(j, err) {
					j.skip = true
					j.into.Rounds = nil
					continue
				}
				return err
			}
			j.into.Rounds = append(j.into.Rounds, res)
		}
	}
	for _, j := range p.jobs {
		if !j.skip {
			j.into.summarise()
		}
	}
	return nil
}

// col is a table column drawn from the cells' spreads.
type col struct {
	head   string
	metric string
	format func(float64) string
	// noFlag leaves the column unflagged (counts that are not compared).
	noFlag bool
}

// spreadCells renders one row per cell: the label, then each column's
// spread (flagged against the neighbouring rows of the same group).
func spreadCells(cells []*cell, groups []string, cols []col) [][]string {
	rows := make([][]string, len(cells))
	for _, c := range cols {
		vals := make([]spread, len(cells))
		for i, cl := range cells {
			vals[i] = cl.get(c.metric)
		}
		flags := unsettled(vals, groups)
		for i := range cells {
			rows[i] = append(rows[i], fmtSpread(vals[i], c.format, flags[i] && !c.noFlag))
		}
	}
	return rows
}

// anyFlagged reports whether any rendered cell carries flagMark.
func anyFlagged(rows [][]string) bool {
	for _, r := range rows {
		for _, c := range r {
			if strings.HasSuffix(c, flagMark) {
				return true
			}
		}
	}
	return false
}

// roundsNote says, under each table, how many rounds its figures come from;
// the header explains the brackets and the * once (writeReadingGuide).
func roundsNote(rounds int) string {
	if rounds == 1 {
		return "One round (-rounds 1): no ranges, nothing flagged."
	}
	return fmt.Sprintf("Median [min–max] of %d interleaved rounds; * = not settled against the neighbouring row.", rounds)
}
