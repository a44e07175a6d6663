package main

import (
	"fmt"
	"os"
	"time"

	"github.com/durawal/durawal/internal/measure"
)

// diskResult is the baseline: what this disk does without the log. Its
// cells hold one result per round, with the operations counted as commits.
type diskResult struct {
	File      string `json:"file"`
	WriteSync *cell  `json:"write_datasync"`
	Write     *cell  `json:"write"`
	// WriteSyncEnd repeats WriteSync once more after the last round (drift
	// check).
	WriteSyncEnd *result `json:"write_datasync_end,omitempty"`
	Datasync     string  `json:"datasync_call"`
	Size         int     `json:"size"`
}

// diskOp is one timed operation: its latency and its rate.
type diskOp struct {
	Ops       int
	Elapsed   time.Duration
	OpsPerSec float64
	Latency   measure.Summary
}

// asResult stores op in a result, operations as commits, so that disk
// cells summarise like the others.
func (op diskOp) asResult(name string, size int) result {
	return result{Name: name, Committers: 1, RecordSize: size, RecordsPer: 1, Commits: uint64(op.Ops),
		Elapsed: op.Elapsed, CommitsPerSec: op.OpsPerSec, RecordsPerSec: op.OpsPerSec, Latency: op.Latency}
}

// diskWarmup is how many untimed write+fdatasync calls precede the timed
// ones, so that the first timed call does not pay for the zero-fill's
// writeback.
const diskWarmup = 50

// planDisk queues, on a preallocated zero-filled file in the run directory,
// write(size)+fdatasync and a plain write(size) at consecutive offsets: the
// same I/O a commit at level 1 and at level 2 makes, without the log.
func planDisk(e *env, p *plan) *diskResult {
	c := e.cfg.counts
	res := &diskResult{
		File:     fmt.Sprintf("%d bytes, preallocated and zero-filled", int64(max(c.diskSyncs, c.diskWrites)+diskWarmup)*int64(e.cfg.size)),
		Datasync: datasyncName,
		Size:     e.cfg.size,
	}
	name := "write+" + datasyncName
	res.WriteSync = p.addFunc(name, fmt.Sprintf("disk: %d × write(%d B)+%s", c.diskSyncs, e.cfg.size, datasyncName),
		func() (result, error) {
			f, _, done, err := e.baselineFile(c.diskSyncs + diskWarmup)
			if err != nil {
				return result{}, err
			}
			defer done()
			op, err := e.timeWriteSync(f, c.diskSyncs)
			return op.asResult(name, e.cfg.size), err
		})
	res.Write = p.addFunc("write (page cache)", fmt.Sprintf("disk: %d × write(%d B)", c.diskWrites, e.cfg.size),
		func() (result, error) {
			f, _, done, err := e.baselineFile(c.diskWrites)
			if err != nil {
				return result{}, err
			}
			defer done()
			op, err := e.timeDiskOps(c.diskWrites, func(i int) error {
				_, err := f.WriteAt(e.rec, int64(i)*int64(e.cfg.size))
				return err
			})
			if err != nil {
				return result{}, fmt.Errorf("write: %w", err)
			}
			return op.asResult("write (page cache)", e.cfg.size), nil
		})
	return res
}

// runDiskAgain repeats the write+fdatasync baseline on a fresh file at the
// end of the run, to show how far the disk drifted meanwhile.
func runDiskAgain(e *env, d *diskResult) error {
	n := e.cfg.counts.diskSyncs
	f, _, done, err := e.baselineFile(n + diskWarmup)
	if err != nil {
		return err
	}
	defer done()
	e.progressf("disk: %d × write(%d B)+%s again (drift check)", n, e.cfg.size, datasyncName)
	op, err := e.timeWriteSync(f, n)
	if err != nil {
		return err
	}
	r := op.asResult("at the end", e.cfg.size)
	d.WriteSyncEnd = &r
	return nil
}

// baselineFile creates a zero-filled, synced file of n records in a fresh
// subdirectory and returns it with its size and a function that removes it.
func (e *env) baselineFile(n int) (*os.File, int64, func(), error) {
	dir := e.subdir("disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, 0, nil, err
	}
	f, err := os.Create(dir + "/baseline")
	if err != nil {
		os.RemoveAll(dir)
		return nil, 0, nil, err
	}
	done := func() { f.Close(); os.RemoveAll(dir) }
	// Zero-fill and sync first, as the log does with its spares where
	// commits write or sync, so that
	// fdatasync flushes data only, never size or extent changes.
	fileSize := int64(n) * int64(e.cfg.size)
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < fileSize; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), fileSize-off)], off); err != nil {
			done()
			return nil, 0, nil, err
		}
	}
	if err := f.Sync(); err != nil { // the zero-fill and the file size, durable
		done()
		return nil, 0, nil, err
	}
	return f, fileSize, done, nil
}

// timeWriteSync times n write+fdatasync calls after diskWarmup untimed ones.
func (e *env) timeWriteSync(f *os.File, n int) (diskOp, error) {
	op := func(i int) error {
		if _, err := f.WriteAt(e.rec, int64(i)*int64(e.cfg.size)); err != nil {
			return err
		}
		return datasync(f) // the record just written, durable: one commit's I/O
	}
	for i := range diskWarmup {
		if err := op(i); err != nil {
			return diskOp{}, fmt.Errorf("write+%s: %w", datasyncName, err)
		}
	}
	res, err := e.timeDiskOps(n, func(i int) error { return op(diskWarmup + i) })
	if err != nil {
		return diskOp{}, fmt.Errorf("write+%s: %w", datasyncName, err)
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

// diskCols are the columns of the disk tables.
var diskCols = []col{
	{head: "p50 µs", metric: "p50_us", format: fmtUSf},
	{head: "p99 µs", metric: "p99_us", format: fmtUSf},
	{head: "mean µs", metric: "mean_us", format: fmtUSf},
	{head: "ops/s", metric: "commits_per_sec", format: fmtRate},
}

// diskTables renders the baseline.
func diskTables(d *diskResult, rounds int) []table {
	t := table{
		title: "disk — the baseline: this directory's disk without the log",
		notes: []string{
			fmt.Sprintf("One goroutine, %d-byte writes at consecutive offsets of a file of %s. "+
				"A level-1 commit on one goroutine cannot go faster than write+%s; "+
				"group commit is how many goroutines do.", d.Size, d.File, d.Datasync),
			roundsNote(rounds),
		},
		header: []string{"operation", "ops", "p50 µs", "p99 µs", "mean µs", "ops/s"},
	}
	cells := []*cell{d.WriteSync, d.Write}
	rows := spreadCells(cells, []string{"a", "b"}, diskCols) // two operations, not neighbours
	for i, c := range cells {
		t.rows = append(t.rows, append([]string{c.Name, fmtInt(c.first().Commits)}, rows[i]...))
	}
	return []table{t}
}

// diskDriftTable compares the baseline in each round and at the end.
func diskDriftTable(d *diskResult) table {
	t := table{
		title: fmt.Sprintf("disk — write+%s in each round and again at the end (drift check)", d.Datasync),
		notes: []string{"Virtual and shared disks drift; the rounds are interleaved so that drift reaches every cell alike. " +
			"Read ratios against the baseline of the same round."},
		header: []string{"when", "ops", "p50 µs", "p99 µs", "mean µs", "ops/s"},
	}
	row := func(name string, r result) {
		t.rows = append(t.rows, []string{name, fmtInt(r.Commits), fmtUS(r.Latency.P50),
			fmtUS(r.Latency.P99), fmtUS(r.Latency.Mean), fmtRate(r.CommitsPerSec)})
	}
	for i, r := range d.WriteSync.Rounds {
		row(fmt.Sprintf("round %d", i+1), r)
	}
	if d.WriteSyncEnd != nil {
		row("at the end", *d.WriteSyncEnd)
	}
	return t
}
