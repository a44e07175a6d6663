package main

import (
	"fmt"
	"os"
	"time"

	"github.com/durawal/durawal/bench/internal/measure"
)

// diskResult is the baseline: what this disk does without the log.
type diskResult struct {
	File      string `json:"file_bytes_note"`
	WriteSync diskOp `json:"write_datasync"`
	Write     diskOp `json:"write"`
	Datasync  string `json:"datasync_call"`
	Size      int    `json:"size"`
}

// diskOp is one timed operation: its latency and its rate.
type diskOp struct {
	Ops       int             `json:"ops"`
	Elapsed   time.Duration   `json:"elapsed_ns"`
	OpsPerSec float64         `json:"ops_per_sec"`
	Latency   measure.Summary `json:"latency"`
}

// runDisk times, on a preallocated zero-filled file in the run directory,
// write(size)+fdatasync and a plain write(size) at consecutive offsets: the
// same I/O a commit at level 1 and at level 2 makes, without the log.
func runDisk(e *env) (*diskResult, error) {
	c := e.cfg.counts
	n := max(c.diskSyncs, c.diskWrites)
	dir := e.subdir("disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(dir + "/baseline")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Zero-fill and sync first, as the log does with its segments, so that
	// fdatasync flushes data only, never size or extent changes.
	fileSize := int64(n) * int64(e.cfg.size)
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < fileSize; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), fileSize-off)], off); err != nil {
			return nil, err
		}
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	res := &diskResult{
		File:     fmt.Sprintf("%d bytes, preallocated and zero-filled", fileSize),
		Datasync: datasyncName,
		Size:     e.cfg.size,
	}

	e.progressf("disk: %d × write(%d B)+%s", c.diskSyncs, e.cfg.size, datasyncName)
	if res.WriteSync, err = e.timeDiskOps(c.diskSyncs, func(i int) error {
		if _, err := f.WriteAt(e.rec, int64(i)*int64(e.cfg.size)); err != nil {
			return err
		}
		return datasync(f)
	}); err != nil {
		return nil, fmt.Errorf("write+%s: %w", datasyncName, err)
	}

	e.progressf("disk: %d × write(%d B)", c.diskWrites, e.cfg.size)
	if res.Write, err = e.timeDiskOps(c.diskWrites, func(i int) error {
		_, err := f.WriteAt(e.rec, int64(i)*int64(e.cfg.size))
		return err
	}); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	return res, nil
}

// timeDiskOps runs op n times on this goroutine and times each call.
func (e *env) timeDiskOps(n int, op func(i int) error) (diskOp, error) {
	rec := measure.NewRecorder(n)
	start := time.Now()
	for i := range n {
		if i%256 == 0 && e.ctx.Err() != nil {
			return diskOp{}, e.ctx.Err()
		}
		if err := rec.Time(func() error { return op(i) }); err != nil {
			return diskOp{}, err
		}
	}
	elapsed := time.Since(start)
	return diskOp{
		Ops:       n,
		Elapsed:   elapsed,
		OpsPerSec: float64(n) / elapsed.Seconds(),
		Latency:   measure.Summarize(measure.Merge(rec)),
	}, nil
}

// diskTables renders the baseline.
func diskTables(d *diskResult) []table {
	t := table{
		title: "disk — the baseline: this directory's disk without the log",
		notes: []string{
			fmt.Sprintf("One goroutine, %d-byte writes at consecutive offsets of a file of %s. "+
				"A level-1 commit on one goroutine cannot go faster than write+%s; "+
				"group commit is how many goroutines do.", d.Size, d.File, d.Datasync),
		},
		header: []string{"operation", "ops", "p50 µs", "p99 µs", "mean µs", "ops/s"},
	}
	for _, r := range []struct {
		name string
		op   diskOp
	}{{"write+" + d.Datasync, d.WriteSync}, {"write (page cache)", d.Write}} {
		t.rows = append(t.rows, []string{r.name, fmtInt(r.op.Ops), fmtUS(r.op.Latency.P50),
			fmtUS(r.op.Latency.P99), fmtUS(r.op.Latency.Mean), fmtRate(r.op.OpsPerSec)})
	}
	return []table{t}
}
