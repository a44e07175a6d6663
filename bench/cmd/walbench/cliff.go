package main

import (
	"fmt"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/policy"
)

// cliffResult is article 002: commit latency as committers pile up.
type cliffResult struct {
	PerCommitter int           `json:"commits_per_committer"`
	Configs      []cliffConfig `json:"configs"`
}

// cliffConfig is one durability setting run at every committer count.
type cliffConfig struct {
	Name string  `json:"name"`
	Runs []*cell `json:"runs"` // one per entry of cliffCommitters
}

var cliffCommitters = []int{1, 8, 16, 32}

// Article 002's figures (MySQL, 1/8/16/32 connections × 10 INSERTs).
var article002 = map[int]struct{ p50, p95 string }{
	1: {"10", "17"}, 8: {"15", "20"}, 16: {"17", "1,040"}, 32: {"18", "1,050"},
}

// cliffSetting is one row group of the cliff table.
type cliffSetting struct {
	name  string
	level int
	gc    groupcommit.Options
}

var cliffSettings = []cliffSetting{
	{name: "innodb=1", level: 1},
	{name: "innodb=1 plain leader/follower", level: 1, gc: groupcommit.Options{DisableAdaptiveWait: true}},
	{name: "innodb=1 + delay 500µs/10", level: 1, gc: groupcommit.Options{
		Delay: 500 * time.Microsecond, MaxBatch: 10, Style: groupcommit.SyncStageWait}},
	{name: "innodb=2", level: 2},
}

// planCliff queues every setting at 1, 8, 16 and 32 committers, each
// making the same number of commits.
func planCliff(e *env, p *plan) *cliffResult {
	each := e.cfg.counts.cliffPerCommitter
	res := &cliffResult{PerCommitter: each}
	for _, s := range cliffSettings {
		pol, _ := policy.InnoDB(s.level)
		cfg := cliffConfig{Name: s.name}
		for _, n := range cliffCommitters {
			cfg.Runs = append(cfg.Runs, p.add(e, fmt.Sprintf("cliff: %s, %s × %d commits", s.name, committers(n), each),
				spec{name: fmt.Sprintf("%s × %d", s.name, n), pol: pol, gc: s.gc, committers: n, each: each}))
		}
		res.Configs = append(res.Configs, cfg)
	}
	return res
}

// cliffTables renders article 002's table and the adaptive-versus-plain
// comparison.
func cliffTables(c *cliffResult, rounds int) []table {
	t := table{
		title: fmt.Sprintf("cliff — %s — commit latency µs, 1/8/16/32 committers × %s commits each",
			art002.Short(), fmtInt(c.PerCommitter)),
		notes: []string{
			"innodb=1 uses the default queue (adaptive merge wait on); \"plain leader/follower\" turns that wait off " +
				"(groupcommit.Options.DisableAdaptiveWait); \"delay 500µs/10\" is binlog_group_commit_sync_delay=500, " +
				"_no_delay_count=10 (groupcommit.SyncStageWait, MaxBatch 10).",
			"Article: MySQL slow-log INSERTs, 10 per connection, at its default durability; its p50/p95 are in ms, " +
				"printed beside our innodb=1 rows. Its fix: innodb=2, sync_binlog=100 and the 500 µs delay.",
			"Neighbours for the * flag are the rows of the same setting (one committer count up or down).",
			roundsNote(rounds),
		},
		header: []string{"setting", "committers", "p50", "p95", "p99", "p99.9", "max", "commits/fsync", "commits/s",
			"slowest commits waited on", "article p50 ms", "article p95 ms"},
	}
	var cells []*cell
	var groups []string
	for _, cfg := range c.Configs {
		for _, r := range cfg.Runs {
			cells = append(cells, r)
			groups = append(groups, cfg.Name)
		}
	}
	rows := spreadCells(cells, groups, []col{
		{metric: "p50_us", format: fmtUSf}, {metric: "p95_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf},
		{metric: "p999_us", format: fmtUSf}, {metric: "max_us", format: fmtUSf},
		{metric: "commits_per_fsync", format: fmtRatioOrDash}, {metric: "commits_per_sec", format: fmtRate},
	})
	for i, r := range cells {
		ap50, ap95 := "", ""
		n := r.first().Committers
		if groups[i] == "innodb=1" {
			a := article002[n]
			ap50, ap95 = a.p50, a.p95
		}
		t.rows = append(t.rows, append(append([]string{groups[i], fmtInt(n)}, rows[i]...), r.Worst.String(), ap50, ap95))
	}
	out := []table{t}
	if at := adaptiveTable(c, rounds); at != nil {
		out = append(out, *at)
	}
	return out
}

// adaptiveTable compares the default queue (adaptive merge wait) with the
// plain leader/follower queue in the cliff runs at 8, 16 and 32 committers.
func adaptiveTable(c *cliffResult, rounds int) *table {
	var adaptive, plain *cliffConfig
	for i := range c.Configs {
		switch c.Configs[i].Name {
		case "innodb=1":
			adaptive = &c.Configs[i]
		case "innodb=1 plain leader/follower":
			plain = &c.Configs[i]
		}
	}
	if adaptive == nil || plain == nil {
		return nil
	}
	var a, p []*cell
	for i, n := range cliffCommitters {
		if n >= 8 && i < len(adaptive.Runs) && i < len(plain.Runs) {
			a, p = append(a, adaptive.Runs[i]), append(p, plain.Runs[i])
		}
	}
	t := compareQueues("cliff — adaptive merge wait vs plain leader/follower queue at innodb=1 (ratios within each round)", a, p, rounds)
	t.notes = append(t.notes, "For a closer look, -exp queue runs only these cells, more commits each: "+
		"go run ./bench/cmd/walbench -exp queue -rounds 9.")
	return &t
}

// compareQueues renders, committer count by committer count, adaptive ÷
// plain ratios taken within each round.
func compareQueues(title string, adaptive, plain []*cell, rounds int) table {
	t := table{
		title: title,
		notes: []string{
			"Each ratio is adaptive ÷ plain, taken within one round (the two ran back to back in every round); " +
				"below 1 the adaptive queue is lower. The adaptive leader waits a little (at most a quarter of the measured " +
				"fsync time) for the committers the last group released, so one fsync covers both cohorts. " +
				"\"p99 worse\" counts the rounds in which the adaptive queue's p99 was higher.",
			roundsNote(rounds),
		},
		header: []string{"committers", "p50 adaptive ÷ plain", "p99 adaptive ÷ plain", "p99.9 adaptive ÷ plain",
			"p99 adaptive µs", "p99 plain µs", "commits/fsync adaptive", "commits/fsync plain",
			"commits/s adaptive ÷ plain", "p99 worse"},
	}
	for i := range min(len(adaptive), len(plain)) {
		a, p := adaptive[i], plain[i]
		worse, n := 0, min(len(a.Rounds), len(p.Rounds))
		for r := range n {
			if a.Rounds[r].Latency.P99 > p.Rounds[r].Latency.P99 {
				worse++
			}
		}
		t.rows = append(t.rows, []string{fmtInt(a.first().Committers),
			fmtSpread(ratioSpread(a, p, "p50_us"), fmtRatio, false),
			fmtSpread(ratioSpread(a, p, "p99_us"), fmtRatio, false),
			fmtSpread(ratioSpread(a, p, "p999_us"), fmtRatio, false),
			fmtSpread(a.get("p99_us"), fmtUSf, false), fmtSpread(p.get("p99_us"), fmtUSf, false),
			fmtSpread(a.get("commits_per_fsync"), fmtRatio, false), fmtSpread(p.get("commits_per_fsync"), fmtRatio, false),
			fmtSpread(ratioSpread(a, p, "commits_per_sec"), fmtRatio, false),
			fmt.Sprintf("%d of %d rounds", worse, n)})
	}
	return t
}

// committers says "1 committer" or "n committers".
func committers(n int) string {
	if n == 1 {
		return "1 committer"
	}
	return fmt.Sprintf("%d committers", n)
}
