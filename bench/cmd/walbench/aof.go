package main

import (
	"fmt"

	"github.com/durawal/durawal/policy"
)

// aofResult is article 001: Redis appendfsync always / everysec / no.
type aofResult struct {
	Words []aofWord `json:"words"`
}

// aofWord holds every cell of one appendfsync word.
type aofWord struct {
	Word  string `json:"word"`
	Sync  *cell  `json:"synchronous"` // one goroutine, fixed count
	Batch *cell  `json:"batch"`       // one goroutine, AppendBatch, fixed count
	One   *cell  `json:"one"`         // 1 committer, fixed time
	Eight *cell  `json:"eight"`       // 8 committers, fixed time
}

// Article 001's figures (Redis 8.10.2, macOS SSD).
var article001 = map[string]struct{ p50, p99, max, mean, batch, one, eight, amp string }{
	"always":   {"2,707", "3,484", "9,370", "2,267", "72k", "424", "2,263", "×5.3"},
	"everysec": {"31", "99", "235", "34", "545k", "30,777", "87,857", "×2.9"},
	"no":       {"30", "51", "113", "33", "551k", "34,050", "88,866", "×2.6"},
}

var aofWords = []string{"always", "everysec", "no"}

// planAOF queues article 001's three measurements for each appendfsync word.
func planAOF(e *env, p *plan) *aofResult {
	c := e.cfg.counts
	res := &aofResult{}
	for _, word := range aofWords {
		pol, _ := policy.AppendFsync(word)
		w := aofWord{Word: word}
		name := "appendfsync " + word
		w.Sync = p.add(e, fmt.Sprintf("aof: %s, %d synchronous commits", word, c.aofCommits),
			spec{name: name, pol: pol, committers: 1, each: c.aofCommits, keepCDF: true})
		nb := aofBatches(e.cfg)
		w.Batch = p.add(e, fmt.Sprintf("aof: %s, %d batches of %d records", word, nb, c.aofBatch),
			spec{name: name + " batch", pol: pol, committers: 1, each: nb, batch: c.aofBatch})
		w.One = p.add(e, fmt.Sprintf("aof: %s, 1 committer for %s", word, c.aofClientTime),
			spec{name: name + " × 1", pol: pol, committers: 1, duration: c.aofClientTime})
		w.Eight = p.add(e, fmt.Sprintf("aof: %s, 8 committers for %s", word, c.aofClientTime),
			spec{name: name + " × 8", pol: pol, committers: 8, duration: c.aofClientTime})
		res.Words = append(res.Words, w)
	}
	return res
}

// aofBatches returns how many batches the batch run commits: as many as
// fit in 12% of a segment (at least 3), so that the window rolls no segment
// and does not overlap the zero-filling of the next one, which starts once
// an eighth of the segment is used.
// The run then measures the commit path, not segment preparation.
func aofBatches(cfg config) int {
	const frameOverhead = 32 // frame header and padding, at most
	perBatch := int64(cfg.counts.aofBatch) * int64(cfg.size+frameOverhead)
	return int(max(3, cfg.segment*12/100/perBatch))
}

// aofTables renders article 001's tables.
func aofTables(a *aofResult, disk *diskResult, rounds int) []table {
	if len(a.Words) == 0 {
		return nil
	}
	n := a.Words[0].Sync.first().Commits
	lat := table{
		title: fmt.Sprintf("aof — %s — %s synchronous commits on one goroutine, latency µs", art001.Short(), fmtInt(n)),
		notes: []string{"Article: one client, 3,000 synchronous SETs (its always latency includes macOS's F_FULLFSYNC).",
			roundsNote(rounds)},
		header: []string{"appendfsync", "p50", "p99", "p99.9", "max", "mean", "fsyncs/commit", "slowest commits waited on",
			"article p50", "article p99", "article max", "article mean"},
	}
	batch := table{
		title: fmt.Sprintf("aof — %s — batches of %s records per commit (AppendBatch), one goroutine",
			art001.Short(), fmtInt(a.Words[0].Batch.first().RecordsPer)),
		notes: []string{"A batch waits once, for its last record, like a pipelined batch in one Redis event-loop turn. " +
			"The batches fit in an eighth of a segment (at least 3 run; with a large -size they may pass it), so no segment is rolled or prepared while they run; " +
			"MB/s counts record payload.", roundsNote(rounds)},
		header: []string{"appendfsync", "records/s", "MB/s", "batch p50 µs", "batch p99 µs", "fsyncs", "batches", "article records/s"},
	}
	clients := table{
		title: fmt.Sprintf("aof — %s — 1 vs 8 concurrent committers, fixed time", art001.Short()),
		notes: []string{"Under always, 8 committers share each fdatasync (group commit); the article saw ×5.3. " +
			"\"8 vs 1\" is taken within each round.", roundsNote(rounds)},
		header: []string{"appendfsync", "1: commits/s", "8: commits/s", "8 vs 1", "8: commits/fsync", "article 1", "article 8", "article 8 vs 1"},
	}
	delayed := table{
		title: fmt.Sprintf("aof — %s — postponed and delayed writes (Redis aof_delayed_fsync)", art001.Short()),
		notes: []string{"everysec postpones a commit's write while a background fsync runs and forces it after 2 s, " +
			"counting a delayed write. A disk that keeps up shows 0, as the article's did. Summed over all runs and rounds."},
		header: []string{"appendfsync", "postponed writes", "delayed writes", "article aof_delayed_fsync"},
	}
	var syncs, batches, ones, eights []*cell
	for _, w := range a.Words {
		syncs, batches, ones, eights = append(syncs, w.Sync), append(batches, w.Batch), append(ones, w.One), append(eights, w.Eight)
	}
	latRows := spreadCells(syncs, nil, []col{
		{metric: "p50_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf}, {metric: "p999_us", format: fmtUSf},
		{metric: "max_us", format: fmtUSf}, {metric: "mean_us", format: fmtUSf},
		{metric: "fsyncs_per_commit", format: fmtRatio, noFlag: true},
	})
	batchRows := spreadCells(batches, nil, []col{
		{metric: "records_per_sec", format: fmtRate}, {metric: "payload_mb_per_sec", format: fmtRatio},
		{metric: "p50_us", format: fmtUSf}, {metric: "p99_us", format: fmtUSf},
		{metric: "fsyncs", format: fmtCount, noFlag: true}, {metric: "commits", format: fmtCount, noFlag: true},
	})
	oneRows := spreadCells(ones, nil, []col{{metric: "commits_per_sec", format: fmtRate}})
	eightRows := spreadCells(eights, nil, []col{{metric: "commits_per_sec", format: fmtRate},
		{metric: "commits_per_fsync", format: fmtRatioOrDash, noFlag: true}})
	for i, w := range a.Words {
		ar := article001[w.Word]
		lat.rows = append(lat.rows, append(append([]string{w.Word}, latRows[i]...),
			w.Sync.Worst.String(), ar.p50, ar.p99, ar.max, ar.mean))
		batch.rows = append(batch.rows, append(append([]string{w.Word}, batchRows[i]...), ar.batch))
		amp := "×" + fmtSpread(ratioSpread(w.Eight, w.One, "commits_per_sec"), fmtRatio, false)
		clients.rows = append(clients.rows, []string{w.Word, oneRows[i][0], eightRows[i][0], amp, eightRows[i][1],
			ar.one, ar.eight, ar.amp})
		var postponed, delays uint64
		for _, c := range []*cell{w.Sync, w.Batch, w.One, w.Eight} {
			for _, r := range c.Rounds {
				postponed += r.PostponedWrites
				delays += r.DelayedWrites
			}
		}
		delayed.rows = append(delayed.rows, []string{w.Word, fmtInt(postponed), fmtInt(delays), "0"})
	}
	if disk != nil && disk.WriteSync != nil {
		lat.notes = append(lat.notes, fmt.Sprintf("This disk's write+%s alone: p50 %s µs, p99 %s µs (medians of the rounds).",
			disk.Datasync, fmtUSf(disk.WriteSync.get("p50_us").Median), fmtUSf(disk.WriteSync.get("p99_us").Median)))
	}
	return []table{lat, batch, clients, delayed}
}
