package main

import (
	"fmt"

	"github.com/durawal/durawal/policy"
)

// levelsResult is article 004: counting fsyncs under InnoDB's three levels.
type levelsResult struct {
	Single []result `json:"single"` // levels 1, 2, 0 on one goroutine
	Eight  result   `json:"eight"`  // level 1 over 8 goroutines
	// Methods are the sync-method rows (-method), on one goroutine.
	Methods []result `json:"methods,omitempty"`
}

// Article 004's figures (MySQL 8.4, data on tmpfs), for the same rows.
var article004 = map[int]struct{ fsyncs, ms, rate string }{
	1: {"10,209", "1,302", "7,680"},
	2: {"4", "963", "10,384"},
	0: {"1", "559", "17,889"},
}

// runLevels commits the same number of records on one goroutine under
// innodb_flush_log_at_trx_commit = 1, 2, 0, then over 8 goroutines at 1.
func runLevels(e *env) (*levelsResult, error) {
	n := e.cfg.counts.levelCommits
	res := &levelsResult{}
	for _, level := range []int{1, 2, 0} {
		pol, err := policy.InnoDB(level)
		if err != nil {
			return nil, err
		}
		e.progressf("levels: innodb=%d, 1 goroutine, %d commits", level, n)
		r, err := e.measureRun(spec{name: fmt.Sprintf("innodb=%d", level), pol: pol, committers: 1, each: n, keepCDF: true})
		if err != nil {
			return nil, err
		}
		res.Single = append(res.Single, r)
	}
	pol, _ := policy.InnoDB(1)
	e.progressf("levels: innodb=1, 8 goroutines, %d commits", n)
	r, err := e.measureRun(spec{name: "innodb=1 × 8", pol: pol, committers: 8, each: n / 8})
	if err != nil {
		return nil, err
	}
	res.Eight = r
	res.Methods, err = e.runMethodRows("levels", func(row methodRow) spec {
		return spec{name: row.label(), committers: 1, each: n}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// levelsTables renders article 004's two tables.
func levelsTables(l *levelsResult, disk *diskResult) []table {
	n := 0
	if len(l.Single) > 0 {
		n = int(l.Single[0].Commits)
	}
	t1 := table{
		title: fmt.Sprintf("levels (article 004) — %s commits on one goroutine, innodb_flush_log_at_trx_commit = 1, 2, 0", fmtInt(n)),
		notes: []string{"fsyncs are wal.Stats.Fsyncs during the commits (Innodb_os_log_fsyncs), not counting the sync at Close. " +
			"Article: MySQL 8.4, 10,000 autocommit INSERTs, data on tmpfs."},
		header: []string{"level", "fsyncs", "elapsed ms", "commits/s", "fsyncs/commit",
			"article fsyncs", "article ms", "article commits/s"},
	}
	for i, r := range l.Single {
		level := []int{1, 2, 0}[i]
		a := article004[level]
		t1.rows = append(t1.rows, []string{fmt.Sprintf("innodb=%d", level), fmtInt(r.Fsyncs), fmtMS(r.Elapsed),
			fmtRate(r.CommitsPerSec), fmtRatio(r.FsyncsPerCommit), a.fsyncs, a.ms, a.rate})
	}
	for _, r := range l.Methods {
		t1.rows = append(t1.rows, []string{r.Name, fmtInt(r.Fsyncs), fmtMS(r.Elapsed),
			fmtRate(r.CommitsPerSec), fmtRatio(r.FsyncsPerCommit), "—", "—", "—"})
	}
	if len(l.Methods) > 0 {
		t1.notes = append(t1.notes, methodNote(l.Methods))
	}
	if disk != nil && len(l.Single) > 0 {
		t1.notes = append(t1.notes, fmt.Sprintf("innodb=1 on one goroutine ran at %.2f× this disk's write+%s rate (%s/s).",
			l.Single[0].CommitsPerSec/disk.WriteSync.OpsPerSec, disk.Datasync, fmtRate(disk.WriteSync.OpsPerSec)))
	}
	e := l.Eight
	amp := ""
	if len(l.Single) > 0 && l.Single[0].CommitsPerSec > 0 {
		amp = "×" + fmtRatio(e.CommitsPerSec/l.Single[0].CommitsPerSec)
	}
	t2 := table{
		title: fmt.Sprintf("levels (article 004) — %s commits over 8 goroutines (%s each) at innodb=1 (group commit)",
			fmtInt(e.Commits), fmtInt(e.Commits/8)),
		notes: []string{"Full durability: every commit returns after the fdatasync covering it; concurrent commits share it."},
		header: []string{"run", "fsyncs", "commits/s", "commits/fsync", "vs 1 goroutine", "mean group",
			"article fsyncs", "article commits/s", "article commits/fsync", "article vs 1"},
		rows: [][]string{{"innodb=1 × 8", fmtInt(e.Fsyncs), fmtRate(e.CommitsPerSec), fmtRatio(e.CommitsPerFsync), amp,
			fmtRatio(e.GroupSizeMean), "3,688", "17,990", "2.7", "×2.3"}},
	}
	return []table{t1, t2}
}
