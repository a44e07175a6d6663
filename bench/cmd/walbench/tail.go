package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/durawal/durawal/policy"
)

// tailResult is article 000: throughput and tail latency of 16 committers.
type tailResult struct {
	Committers int           `json:"committers"`
	Duration   time.Duration `json:"duration_ns"`
	Levels     []*cell       `json:"levels"` // levels 1, 2, 0
	// Methods are the sync-method rows (-method), with 16 committers too.
	Methods []*cell `json:"methods,omitempty"`
}

const tailCommitters = 16

var tailLevels = []int{1, 2, 0}

// Article 000's figures (MySQL 8.0.35, Intel P5510 NVMe, sysbench
// oltp_update_non_index, 16 threads).
var article000 = map[int]struct{ tps, p50, p99 string }{
	1: {"1,750", "6.2", "41"},
	2: {"2,380", "4.8", "14"},
	0: {"—", "—", "—"}, // the article ran =0 only with O_DIRECT
}

// article000Direct are article 000's O_DIRECT rows.
var article000Direct = map[int]struct{ tps, p50, p99 string }{
	2: {"2,480", "4.6", "11"},
	0: {"2,510", "4.5", "11"},
}

// planTail queues 16 committers for a fixed time at levels 1, 2 and 0.
func planTail(e *env, p *plan) *tailResult {
	d := e.cfg.counts.tailTime
	res := &tailResult{Committers: tailCommitters, Duration: d}
	for _, level := range tailLevels {
		pol, _ := policy.InnoDB(level)
		res.Levels = append(res.Levels, p.add(e, fmt.Sprintf("tail: innodb=%d, %d committers for %s", level, tailCommitters, d),
			spec{name: fmt.Sprintf("innodb=%d × %d", level, tailCommitters), pol: pol, committers: tailCommitters, duration: d}))
	}
	res.Methods = e.planMethodRows(p, "tail", func(row methodRow) spec {
		return spec{name: fmt.Sprintf("%s × %d", row.label(), tailCommitters), committers: tailCommitters, duration: d}
	})
	return res
}

// tailTables renders article 000's table.
func tailTables(t *tailResult, disk *diskResult, rounds int) []table {
	tb := table{
		title: fmt.Sprintf("tail — %s — %d committers for %s at innodb = 1, 2, 0", art000.Short(), t.Committers, t.Duration),
		notes: []string{
			"Our committers do nothing but commit, so level 0 measures the log buffer, not a database. " +
				"Buffer-full waits are appends that had to write the log buffer first (Innodb_log_waits); " +
				"segment stalls are appends that waited for the next segment to be prepared.",
			"Article: sysbench oltp_update_non_index, 16 threads, median of 5; each transaction does real work, " +
				"so its rates are far lower. Its fdatasync: 0.42 ms mean, 1.8 ms p99. Its =0 row was measured only with O_DIRECT.",
			fsyncCountNote, roundsNote(rounds),
		},
		header: []string{"level", "commits/s", "p50 µs", "p99 µs", "p99.9 µs", "max µs", "fsyncs", "commits/fsync",
			"buffer-full waits", "rolls", "segment stalls", "slowest commits waited on",
			"article TPS", "article p50 ms", "article p99 ms"},
	}
	cells := append(slices.Clone(t.Levels), present(t.Methods)...)
	rows := spreadCells(cells, methodGroups(len(t.Levels), len(cells)), []col{
		{metric: "commits_per_sec", format: fmtRate}, {metric: "p50_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf},
		{metric: "p999_us", format: fmtUSf}, {metric: "max_us", format: fmtUSf},
		{metric: "fsyncs", format: fmtCount, noFlag: true}, {metric: "commits_per_fsync", format: fmtRatioOrDash},
		{metric: "buffer_full_waits", format: fmtCount, noFlag: true}, {metric: "rolls", format: fmtCount, noFlag: true},
		{metric: "segment_stalls", format: fmtCount, noFlag: true},
	})
	for i, c := range cells {
		r := c.first()
		level := levelOf(r)
		a := article000[level]
		label := fmt.Sprintf("innodb=%d", level)
		if i >= len(t.Levels) {
			label = strings.TrimSuffix(r.Name, fmt.Sprintf(" × %d", t.Committers))
			a = struct{ tps, p50, p99 string }{"—", "—", "—"}
			if d, ok := article000Direct[level]; ok && r.Method == "O_DIRECT" {
				a = d
			}
		}
		tb.rows = append(tb.rows, append(append([]string{label}, rows[i]...), c.Worst.String(), a.tps, a.p50, a.p99))
	}
	if m := present(t.Methods); len(m) > 0 {
		tb.notes = append(tb.notes, methodNote(m))
	}
	if disk != nil && disk.WriteSync != nil {
		tb.notes = append(tb.notes, fmt.Sprintf("This disk's write+%s: mean %s µs, p99 %s µs (medians of the rounds).",
			disk.Datasync, fmtUSf(disk.WriteSync.get("mean_us").Median), fmtUSf(disk.WriteSync.get("p99_us").Median)))
	}
	return []table{tb}
}
