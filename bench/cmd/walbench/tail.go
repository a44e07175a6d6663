package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/durawal/durawal/policy"
)

// tailResult is article 000: throughput and tail latency of 16 committers.
type tailResult struct {
	Committers int           `json:"committers"`
	Duration   time.Duration `json:"duration_ns"`
	Levels     []result      `json:"levels"` // levels 1, 2, 0
	// Methods are the sync-method rows (-method), with 16 committers too.
	Methods []result `json:"methods,omitempty"`
}

const tailCommitters = 16

var tailLevels = []int{1, 2, 0}

// Article 000's figures (MySQL 8.0.35, Intel P5510 NVMe, sysbench
// oltp_update_non_index, 16 threads).
var article000 = map[int]struct{ tps, p50, p99 string }{
	1: {"1,750", "6.2", "41"},
	2: {"2,380", "4.8", "14"},
	0: {"2,510 (+O_DIRECT)", "4.5", "11"},
}

// runTail runs 16 committers for a fixed time at levels 1, 2 and 0.
func runTail(e *env) (*tailResult, error) {
	d := e.cfg.counts.tailTime
	res := &tailResult{Committers: tailCommitters, Duration: d}
	for _, level := range tailLevels {
		pol, err := policy.InnoDB(level)
		if err != nil {
			return nil, err
		}
		e.progressf("tail: innodb=%d, %d committers for %s", level, tailCommitters, d)
		r, err := e.measureRun(spec{name: fmt.Sprintf("innodb=%d × %d", level, tailCommitters), pol: pol,
			committers: tailCommitters, duration: d, keepCDF: false})
		if err != nil {
			return nil, err
		}
		res.Levels = append(res.Levels, r)
	}
	var err error
	res.Methods, err = e.runMethodRows("tail", func(row methodRow) spec {
		return spec{name: fmt.Sprintf("%s × %d", row.label(), tailCommitters), committers: tailCommitters, duration: d}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// tailTables renders article 000's table.
func tailTables(t *tailResult, disk *diskResult) []table {
	tb := table{
		title: fmt.Sprintf("tail (article 000) — %d committers for %s at innodb = 1, 2, 0", t.Committers, t.Duration),
		notes: []string{
			"Our committers do nothing but commit, so level 0 measures the log buffer, not a database. " +
				"Buffer-full waits are appends that had to write the log buffer first (Innodb_log_waits); " +
				"segment stalls are appends that waited for the next segment to be zero-filled.",
			"Article: MySQL 8.0.35 on an Intel P5510 NVMe, sysbench oltp_update_non_index, 16 threads, " +
				"median of 5; each transaction does real work, so its rates are far lower. Its fdatasync: 0.42 ms mean, 1.8 ms p99.",
		},
		header: []string{"level", "commits/s", "p50 µs", "p99 µs", "max µs", "fsyncs", "commits/fsync", "buffer-full waits", "rolls", "segment stalls",
			"article TPS", "article p50 ms", "article p99 ms"},
	}
	for i, r := range t.Levels {
		a := article000[tailLevels[i]]
		cpf := "—"
		if r.Fsyncs > 0 {
			cpf = fmtRatio(r.CommitsPerFsync)
		}
		tb.rows = append(tb.rows, []string{fmt.Sprintf("innodb=%d", tailLevels[i]), fmtRate(r.CommitsPerSec),
			fmtUS(r.Latency.P50), fmtUS(r.Latency.P99), fmtUS(r.Latency.Max), fmtInt(r.Fsyncs), cpf,
			fmtInt(r.BufferFullWaits), fmtInt(r.Rolls), fmtInt(r.SegmentStalls), a.tps, a.p50, a.p99})
	}
	for _, r := range t.Methods {
		cpf := "—"
		if r.Fsyncs > 0 {
			cpf = fmtRatio(r.CommitsPerFsync)
		}
		a := struct{ tps, p50, p99 string }{"—", "—", "—"}
		if r.Method == "O_DIRECT" && levelOf(r) == 0 {
			a = article000[0] // the article's =0 row is with O_DIRECT
		}
		tb.rows = append(tb.rows, []string{strings.TrimSuffix(r.Name, fmt.Sprintf(" × %d", t.Committers)), fmtRate(r.CommitsPerSec),
			fmtUS(r.Latency.P50), fmtUS(r.Latency.P99), fmtUS(r.Latency.Max), fmtInt(r.Fsyncs), cpf,
			fmtInt(r.BufferFullWaits), fmtInt(r.Rolls), fmtInt(r.SegmentStalls), a.tps, a.p50, a.p99})
	}
	if len(t.Methods) > 0 {
		tb.notes = append(tb.notes, methodNote(t.Methods))
	}
	if disk != nil {
		tb.notes = append(tb.notes, fmt.Sprintf("This disk's write+%s: mean %s µs, p99 %s µs.",
			disk.Datasync, fmtUS(disk.WriteSync.Latency.Mean), fmtUS(disk.WriteSync.Latency.P99)))
	}
	return []table{tb}
}
