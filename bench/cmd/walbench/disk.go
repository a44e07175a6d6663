package main

import (
	"fmt"
	"os"
	"time"

	"github.com/durawal/durawal/internal/measure"
)

// diskResult is the baseline: what this disk does without the log.
type diskResult struct {
	File      string `json:"file"`
	WriteSync diskOp `json:"write_datasync"`
	// WriteSyncEnd repeats WriteSync at the end of the run (drift check).
	WriteSyncEnd *diskOp `json:"write_datasync_end,omitempty"`
	Write        diskOp  `json:"write"`
	Datasync     string  `json:"datasync_call"`
	Size         int     `json:"size"`
}

// diskOp is one timed operation: its latency and its rate.
type diskOp struct {
	Ops       int             `json:"ops"`
	Elapsed   time.Duration   `json:"elapsed_ns"`
	OpsPerSec float64         `json:"ops_per_sec"`
	Latency   measure.Summary `json:"latency"`
}

// diskWarmup is how many untimed write+fdatasync calls precede the timed
// ones, so that the first timed call does not pay for the zero-fill's
// writeback.
const diskWarmup = 50

// runDisk times, on a preallocated zero-filled file in the run directory,
// write(size)+fdatasync and a plain write(size) at consecutive offsets: the
// same I/O a commit at level 1 and at level 2 makes, without the log.
func runDisk(e *env) (*diskResult, error) {
	c := e.cfg.counts
	f, fileSize, done, err := e.baselineFile(max(c.diskSyncs, c.diskWrites) + diskWarmup)
	if err != nil {
		return nil, err
	}
	defer done()
	res := &diskResult{
		File:     fmt.Sprintf("%d bytes, preallocated and zero-filled", fileSize),
		Datasync: datasyncName,
		Size:     e.cfg.size,
	}
	e.progressf("disk: %d × write(%d B)+%s", c.diskSyncs, e.cfg.size, datasyncName)
	if res.WriteSync, err = e.timeWriteSync(f, c.diskSyncs); err != nil {
		return nil, err
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
	d.WriteSyncEnd = &op
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
	// Zero-fill and sync first, as the log does with its segments, so that
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

// diskDriftTable compares the baseline at the start and at the end.
func diskDriftTable(d *diskResult) table {
	t := table{
		title:  fmt.Sprintf("disk — write+%s again at the end (drift check)", d.Datasync),
		notes:  []string{"Virtual and shared disks drift; read ratios against whichever baseline is nearer in time."},
		header: []string{"when", "ops", "p50 µs", "p99 µs", "mean µs", "ops/s"},
	}
	for _, r := range []struct {
		name string
		op   *diskOp
	}{{"at the start", &d.WriteSync}, {"at the end", d.WriteSyncEnd}} {
		if r.op == nil {
			continue
		}
		t.rows = append(t.rows, []string{r.name, fmtInt(r.op.Ops), fmtUS(r.op.Latency.P50),
			fmtUS(r.op.Latency.P99), fmtUS(r.op.Latency.Mean), fmtRate(r.op.OpsPerSec)})
	}
	return t
}
