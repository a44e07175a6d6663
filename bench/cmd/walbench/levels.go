package main

import (
	"fmt"
	"slices"

	"github.com/durawal/durawal/policy"
)

// levelsResult is article 004: counting fsyncs under InnoDB's three levels.
type levelsResult struct {
	Single []*cell `json:"single"` // levels 1, 2, 0 on one goroutine
	Eight  *cell   `json:"eight"`  // level 1 over 8 goroutines
	// Methods are the sync-method rows (-method), on one goroutine.
	Methods []*cell `json:"methods,omitempty"`
}

// Article 004's figures (MySQL 8.4, data on tmpfs), for the same rows.
var article004 = map[int]struct{ fsyncs, ms, rate string }{
	1: {"10,209", "1,302", "7,680"},
	2: {"4", "963", "10,384"},
	0: {"1", "559", "17,889"},
}

// planLevels queues the same number of commits on one goroutine under
// innodb_flush_log_at_trx_commit = 1, 2, 0, then over 8 goroutines at 1.
func planLevels(e *env, p *plan) *levelsResult {
	n := e.cfg.counts.levelCommits
	res := &levelsResult{}
	for _, level := range []int{1, 2, 0} {
		pol, _ := policy.InnoDB(level)
		res.Single = append(res.Single, p.add(e, fmt.Sprintf("levels: innodb=%d, 1 goroutine, %d commits", level, n),
			spec{name: fmt.Sprintf("innodb=%d", level), pol: pol, committers: 1, each: n, keepCDF: true}))
	}
	pol, _ := policy.InnoDB(1)
	res.Eight = p.add(e, fmt.Sprintf("levels: innodb=1, 8 goroutines, %d commits", n),
		spec{name: "innodb=1 × 8", pol: pol, committers: 8, each: n / 8})
	res.Methods = e.planMethodRows(p, "levels", func(row methodRow) spec {
		return spec{name: row.label(), committers: 1, each: n}
	})
	return res
}

// fsyncCountNote is how every table counts fsyncs.
const fsyncCountNote = "fsyncs are wal.Stats.Fsyncs over the commits only: from after Open to the last commit's return, " +
	"so neither the syncs that prepare the first segment nor the final sync at Close are counted " +
	"(the examples/ lessons count the same way)."

// levelsTables renders article 004's two tables.
func levelsTables(l *levelsResult, disk *diskResult, rounds int) []table {
	n := 0
	if len(l.Single) > 0 {
		n = int(l.Single[0].first().Commits)
	}
	cols := []col{
		{head: "fsyncs", metric: "fsyncs", format: fmtCount},
		{head: "elapsed ms", metric: "elapsed_ms", format: fmtFloat1},
		{head: "commits/s", metric: "commits_per_sec", format: fmtRate},
		{head: "fsyncs/commit", metric: "fsyncs_per_commit", format: fmtRatio},
	}
	cells := append(slices.Clone(l.Single), present(l.Methods)...)
	rows := spreadCells(cells, methodGroups(len(l.Single), len(cells)), cols)
	t1 := table{
		title: fmt.Sprintf("levels — %s — %s commits on one goroutine, innodb_flush_log_at_trx_commit = 1, 2, 0",
			art004.Short(), fmtInt(n)),
		notes: []string{fsyncCountNote + " " +
			"Article: 10,000 autocommit INSERTs on one connection, counted with Innodb_os_log_fsyncs."},
		header: []string{"level", "fsyncs", "elapsed ms", "commits/s", "fsyncs/commit",
			"article fsyncs", "article ms", "article commits/s"},
	}
	for i, c := range cells {
		a := []string{"—", "—", "—"}
		if i < len(l.Single) {
			x := article004[[]int{1, 2, 0}[i]]
			a = []string{x.fsyncs, x.ms, x.rate}
		}
		t1.rows = append(t1.rows, append(append([]string{c.Name}, rows[i]...), a...))
	}
	if m := present(l.Methods); len(m) > 0 {
		t1.notes = append(t1.notes, methodNote(m))
	}
	if disk != nil && len(l.Single) > 0 && disk.WriteSync != nil {
		r := ratioSpread(l.Single[0], disk.WriteSync, "commits_per_sec")
		t1.notes = append(t1.notes, fmt.Sprintf("innodb=1 on one goroutine ran at %s× this disk's write+%s rate "+
			"(ratio taken within each round).", fmtSpread(r, fmtRatio, false), disk.Datasync))
	}
	t1.notes = append(t1.notes, roundsNote(rounds))
	e := l.Eight
	t2 := table{
		title: fmt.Sprintf("levels — %s — %s commits over 8 goroutines (%s each) at innodb=1 (group commit)",
			art004.Short(), fmtInt(e.first().Commits), fmtInt(e.first().Commits/8)),
		notes: []string{"Full durability: every commit returns after the fdatasync covering it; concurrent commits share it. " +
			"\"vs 1 goroutine\" is taken within each round.", roundsNote(rounds)},
		header: []string{"run", "fsyncs", "commits/s", "commits/fsync", "vs 1 goroutine", "mean group",
			"article fsyncs", "article commits/s", "article commits/fsync", "article vs 1"},
	}
	r := spreadCells([]*cell{e}, nil, []col{
		{head: "fsyncs", metric: "fsyncs", format: fmtCount},
		{head: "commits/s", metric: "commits_per_sec", format: fmtRate},
		{head: "commits/fsync", metric: "commits_per_fsync", format: fmtRatio},
	})[0]
	amp := "—"
	if len(l.Single) > 0 {
		amp = "×" + fmtSpread(ratioSpread(e, l.Single[0], "commits_per_sec"), fmtRatio, false)
	}
	t2.rows = [][]string{append(append([]string{"innodb=1 × 8"}, r...), amp,
		fmtSpread(e.get("group_size_mean"), fmtRatio, false), "3,688", "17,990", "2.7", "×2.3")}
	return []table{t1, t2}
}
