package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/internal/measure"
)

// cell is one measured run: one library, mode and writer count.
type cell struct {
	Lib        string  `json:"lib"`
	Mode       string  `json:"mode"`
	Writers    int     `json:"writers"`
	Round      int     `json:"round"`
	Commits    int64   `json:"commits"`
	Seconds    float64 `json:"seconds"`
	PerSec     float64 `json:"commits_per_sec"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	Syncs      int64   `json:"syncs"` // library counter over the timed window, -1 without one
	SyncsPerOp float64 `json:"syncs_per_commit"`
	VFSSyncs   int64   `json:"vfs_syncs,omitempty"` // durawal: the faultfs.Counter's view
	Err        string  `json:"error,omitempty"`
}

// record returns a size-byte record starting with a unique, findable tag.
func record(size int, writer, seq int) []byte {
	rec := make([]byte, size)
	for i := range rec {
		rec[i] = byte('a' + i%26)
	}
	copy(rec, fmt.Sprintf("w%03d-%010d|", writer, seq))
	return rec
}

// runCell opens a fresh log in dir, lets writers goroutines commit size-byte
// records for d (or each commits perWriter records when perWriter > 0),
// closes the log, and removes dir.
func runCell(l *lib, dir string, m mode, writers, size int, d time.Duration, perWriter int) cell {
	c := cell{Lib: l.name, Mode: m.String(), Writers: writers}
	defer os.RemoveAll(dir)
	lg, err := l.open(dir, m)
	if err != nil {
		c.Err = err.Error()
		return c
	}
	// Warm-up: one commit, so the first segment and goroutines exist.
	if err := lg.Append(record(size, 999, 0)); err != nil {
		lg.Close()
		c.Err = err.Error()
		return c
	}
	syncs0 := lg.Syncs()
	var vfs0 int64
	if dl, ok := lg.(*durawalLog); ok {
		vfs0 = dl.vfsSyncs()
	}
	var commits atomic.Int64
	ld := measure.Load{Workers: writers, Each: perWriter, For: d}
	if perWriter > 0 {
		ld.For = 0
	}
	recs := make([][]byte, writers)
	for w := range recs {
		recs[w] = record(size, w, 0)
	}
	run, firstErr := measure.Drive(context.Background(), ld, func(_ context.Context, w, i int) error {
		rec := recs[w]
		copy(rec, fmt.Sprintf("w%03d-%010d|", w, i))
		if err := lg.Append(rec); err != nil {
			return err
		}
		commits.Add(1)
		return nil
	})
	elapsed, lats := run.Elapsed, run.Latencies
	syncs1 := lg.Syncs()
	if dl, ok := lg.(*durawalLog); ok {
		c.VFSSyncs = dl.vfsSyncs() - vfs0
	}
	if err := lg.Close(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		c.Err = firstErr.Error()
	}
	slices.Sort(lats)
	c.Commits = commits.Load()
	c.Seconds = elapsed.Seconds()
	c.PerSec = float64(c.Commits) / c.Seconds
	c.P50us = float64(measure.Percentile(lats, 50)) / 1e3
	c.P99us = float64(measure.Percentile(lats, 99)) / 1e3
	c.Syncs = -1
	if syncs0 >= 0 {
		c.Syncs = syncs1 - syncs0
		if c.Commits > 0 {
			c.SyncsPerOp = float64(c.Syncs) / float64(c.Commits)
		}
	}
	return c
}
