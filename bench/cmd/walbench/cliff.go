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
	Name string   `json:"name"`
	Runs []result `json:"runs"` // one per entry of cliffCommitters
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

// runCliff runs every setting at 1, 8, 16 and 32 committers, each making
// the same number of commits.
func runCliff(e *env) (*cliffResult, error) {
	each := e.cfg.counts.cliffPerCommitter
	res := &cliffResult{PerCommitter: each}
	for _, s := range cliffSettings {
		pol, err := policy.InnoDB(s.level)
		if err != nil {
			return nil, err
		}
		cfg := cliffConfig{Name: s.name}
		e.progressf("cliff: %s, %v committers × %d commits", s.name, cliffCommitters, each)
		for _, n := range cliffCommitters {
			r, err := e.measureRun(spec{name: fmt.Sprintf("%s × %d", s.name, n), pol: pol, gc: s.gc, committers: n, each: each})
			if err != nil {
				return nil, err
			}
			cfg.Runs = append(cfg.Runs, r)
		}
		res.Configs = append(res.Configs, cfg)
	}
	return res, nil
}

// cliffTables renders article 002's table.
func cliffTables(c *cliffResult) []table {
	t := table{
		title: fmt.Sprintf("cliff (article 002) — commit latency µs, 1/8/16/32 committers × %s commits each", fmtInt(c.PerCommitter)),
		notes: []string{
			"innodb=1 uses the default queue (adaptive merge wait on); \"plain leader/follower\" turns that wait off " +
				"(groupcommit.Options.DisableAdaptiveWait); \"delay 500µs/10\" is binlog_group_commit_sync_delay=500, " +
				"_no_delay_count=10 (groupcommit.SyncStageWait, MaxBatch 10).",
			"Article: MySQL slow-log INSERTs, 10 per connection, at its default durability; its p50/p95 are in ms, " +
				"printed beside our innodb=1 rows. Its fix: innodb=2, sync_binlog=100 and the 500 µs delay.",
		},
		header: []string{"setting", "committers", "p50", "p95", "p99", "max", "commits/fsync", "commits/s",
			"article p50 ms", "article p95 ms"},
	}
	for _, cfg := range c.Configs {
		for _, r := range cfg.Runs {
			ap50, ap95 := "", ""
			if cfg.Name == "innodb=1" {
				a := article002[r.Committers]
				ap50, ap95 = a.p50, a.p95
			}
			cpf := "—"
			if r.Fsyncs > 0 {
				cpf = fmtRatio(r.CommitsPerFsync)
			}
			l := r.Latency
			t.rows = append(t.rows, []string{cfg.Name, fmtInt(r.Committers), fmtUS(l.P50), fmtUS(l.P95), fmtUS(l.P99),
				fmtUS(l.Max), cpf, fmtRate(r.CommitsPerSec), ap50, ap95})
		}
	}
	return []table{t}
}
