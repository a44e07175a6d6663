package main

import (
	"fmt"

	"github.com/durawal/durawal/policy"
)

// aofResult is article 001: Redis appendfsync always / everysec / no.
type aofResult struct {
	Words []aofWord `json:"words"`
}

// aofWord holds every run of one appendfsync word.
type aofWord struct {
	Word    string `json:"word"`
	Sync    result `json:"synchronous"` // one goroutine, fixed count
	Batch   result `json:"batch"`       // one goroutine, AppendBatch, fixed time
	One     result `json:"one"`         // 1 committer, fixed time
	Eight   result `json:"eight"`       // 8 committers, fixed time
	Delayed uint64 `json:"delayed_writes"`
	Postpon uint64 `json:"postponed_writes"`
}

// Article 001's figures (Redis 8, macOS SSD).
var article001 = map[string]struct{ p50, p99, max, mean, batch, one, eight, amp string }{
	"always":   {"2,707", "3,484", "9,370", "2,267", "72k", "424", "2,263", "×5.3"},
	"everysec": {"31", "99", "235", "34", "545k", "30,777", "87,857", "×2.9"},
	"no":       {"30", "51", "113", "33", "551k", "34,050", "88,866", "×2.6"},
}

var aofWords = []string{"always", "everysec", "no"}

// runAOF runs article 001's three measurements for each appendfsync word.
func runAOF(e *env) (*aofResult, error) {
	c := e.cfg.counts
	res := &aofResult{}
	for _, word := range aofWords {
		pol, err := policy.AppendFsync(word)
		if err != nil {
			return nil, err
		}
		w := aofWord{Word: word}
		name := "appendfsync " + word
		e.progressf("aof: %s, %d synchronous commits", word, c.aofCommits)
		if w.Sync, err = e.measureRun(spec{name: name, pol: pol, committers: 1, each: c.aofCommits, keepCDF: true}); err != nil {
			return nil, err
		}
		nb := aofBatches(e.cfg)
		e.progressf("aof: %s, %d batches of %d records", word, nb, c.aofBatch)
		if w.Batch, err = e.measureRun(spec{name: name + " batch", pol: pol, committers: 1, each: nb, batch: c.aofBatch}); err != nil {
			return nil, err
		}
		e.progressf("aof: %s, 1 then 8 committers for %s each", word, c.aofClientTime)
		if w.One, err = e.measureRun(spec{name: name + " × 1", pol: pol, committers: 1, duration: c.aofClientTime}); err != nil {
			return nil, err
		}
		if w.Eight, err = e.measureRun(spec{name: name + " × 8", pol: pol, committers: 8, duration: c.aofClientTime}); err != nil {
			return nil, err
		}
		for _, r := range []result{w.Sync, w.Batch, w.One, w.Eight} {
			w.Delayed += r.DelayedWrites
			w.Postpon += r.PostponedWrites
		}
		res.Words = append(res.Words, w)
	}
	return res, nil
}

// aofBatches returns how many batches the batch run commits: as many as
// fit in 45% of a segment, so that the window rolls no segment and does not
// overlap the zero-filling of the next one (which starts at half a segment).
// The run then measures the commit path, not segment preparation.
func aofBatches(cfg config) int {
	const frameOverhead = 32 // frame header and padding, at most
	perBatch := int64(cfg.counts.aofBatch) * int64(cfg.size+frameOverhead)
	return int(max(3, cfg.segment*45/100/perBatch))
}

// aofTables renders article 001's tables.
func aofTables(a *aofResult, disk *diskResult) []table {
	if len(a.Words) == 0 {
		return nil
	}
	n := a.Words[0].Sync.Commits
	lat := table{
		title: fmt.Sprintf("aof (article 001) — %s synchronous commits on one goroutine, latency µs", fmtInt(n)),
		notes: []string{"Article: Redis 8 on a macOS SSD, one client, 3,000 synchronous SETs (its always latency " +
			"includes macOS's F_FULLFSYNC)."},
		header: []string{"appendfsync", "p50", "p99", "max", "mean", "fsyncs/commit",
			"article p50", "article p99", "article max", "article mean"},
	}
	batch := table{
		title: fmt.Sprintf("aof (article 001) — batches of %s records per commit (AppendBatch), one goroutine",
			fmtInt(a.Words[0].Batch.RecordsPer)),
		notes: []string{"A batch waits once, for its last record, like a pipelined batch in one Redis event-loop turn. " +
			"The batches fit in half a segment, so no segment is rolled or zero-filled while they run; " +
			"MB/s counts record payload."},
		header: []string{"appendfsync", "records/s", "MB/s", "batch p50 µs", "batch p99 µs", "fsyncs", "batches", "article records/s"},
	}
	clients := table{
		title:  "aof (article 001) — 1 vs 8 concurrent committers, fixed time",
		notes:  []string{"Under always, 8 committers share each fdatasync (group commit); the article saw ×5.3."},
		header: []string{"appendfsync", "1: commits/s", "8: commits/s", "8 vs 1", "8: commits/fsync", "article 1", "article 8", "article 8 vs 1"},
	}
	delayed := table{
		title: "aof (article 001) — postponed and delayed writes (Redis aof_delayed_fsync)",
		notes: []string{"everysec postpones a commit's write while a background fsync runs and forces it after 2 s, " +
			"counting a delayed write. A disk that keeps up shows 0, as the article's did."},
		header: []string{"appendfsync", "postponed writes", "delayed writes", "article aof_delayed_fsync"},
	}
	for _, w := range a.Words {
		ar := article001[w.Word]
		s := w.Sync.Latency
		lat.rows = append(lat.rows, []string{w.Word, fmtUS(s.P50), fmtUS(s.P99), fmtUS(s.Max), fmtUS(s.Mean),
			fmtRatio(w.Sync.FsyncsPerCommit), ar.p50, ar.p99, ar.max, ar.mean})
		batch.rows = append(batch.rows, []string{w.Word, fmtRate(w.Batch.RecordsPerSec),
			fmtRatio(w.Batch.RecordsPerSec * float64(w.Batch.RecordSize) / 1e6), fmtUS(w.Batch.Latency.P50),
			fmtUS(w.Batch.Latency.P99), fmtInt(w.Batch.Fsyncs), fmtInt(w.Batch.Commits), ar.batch})
		amp := ""
		if w.One.CommitsPerSec > 0 {
			amp = "×" + fmtRatio(w.Eight.CommitsPerSec/w.One.CommitsPerSec)
		}
		cpf := "—"
		if w.Eight.Fsyncs > 0 {
			cpf = fmtRatio(w.Eight.CommitsPerFsync)
		}
		clients.rows = append(clients.rows, []string{w.Word, fmtRate(w.One.CommitsPerSec), fmtRate(w.Eight.CommitsPerSec),
			amp, cpf, ar.one, ar.eight, ar.amp})
		delayed.rows = append(delayed.rows, []string{w.Word, fmtInt(w.Postpon), fmtInt(w.Delayed), "0"})
	}
	if disk != nil {
		lat.notes = append(lat.notes, fmt.Sprintf("This disk's write+%s alone: p50 %s µs, p99 %s µs.",
			disk.Datasync, fmtUS(disk.WriteSync.Latency.P50), fmtUS(disk.WriteSync.Latency.P99)))
	}
	return []table{lat, batch, clients, delayed}
}
