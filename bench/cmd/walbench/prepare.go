package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// The prepare experiment: how a segment file is made ready, and what that
// costs every later fdatasync. Each way of preparing a file of one
// segment's size is followed, in the same cell, by write+fdatasync of
// small records at consecutive offsets into it (what durable commits do
// to a new segment), so the table shows a preparation's own price (its
// time and the device bytes it writes) beside the price it leaves to the
// commits. Not in the default run; -exp prepare (on XFS too: -dir on an
// XFS mount).

// prepareWays are the preparations compared, in table order.
var prepareWays = []string{"zero-fill", "fallocate", "fallocate ZERO_RANGE", "fallocate + zeros ahead"}

// prepareWrites are the write sizes of the fdatasync loop: one 1 KiB
// commit, and a group of 16 of them.
var prepareWrites = []int{1 << 10, 16 << 10}

// Default and -quick write+fdatasync counts per cell.
const (
	defaultPrepareOps = 2000
	quickPrepareOps   = 100
)

// Zeros ahead, as the log writes them into an allocated segment where
// commits sync: a MiB at a time in 64 KiB writes, once the frames come
// within half a MiB of where the zeros end, each MiB handed to writeback
// at once.
const (
	aheadStep  = 1 << 20
	aheadChunk = 64 << 10
)

// prepareResult is the experiment: one cell per way and write size.
type prepareResult struct {
	Segment int64                       `json:"segment_size"`
	Ops     int                         `json:"ops"`
	Device  string                      `json:"device"`
	Cells   map[string]map[int]*cell    `json:"cells"`
	Extra   map[string]map[int][]prepEx `json:"extra"`
}

// prepEx is what a prepare cell measured besides its fdatasync loop.
type prepEx struct {
	PrepareTime time.Duration `json:"prepare_ns"`
	PrepareDev  uint64        `json:"prepare_device_bytes"`
	LoopDev     uint64        `json:"loop_device_bytes"`
	Payload     uint64        `json:"payload_bytes"`
}

// planPrepare queues one cell per way and write size.
func planPrepare(e *env, p *plan) *prepareResult {
	ops := defaultPrepareOps
	if e.cfg.quick {
		ops = quickPrepareOps
	}
	dev, na := openDevCounter(e.root)
	res := &prepareResult{Segment: e.cfg.segment, Ops: ops, Device: "n/a: " + na,
		Cells: map[string]map[int]*cell{}, Extra: map[string]map[int][]prepEx{}}
	if dev != nil {
		res.Device = dev.String()
	}
	for _, way := range prepareWays {
		res.Cells[way] = map[int]*cell{}
		res.Extra[way] = map[int][]prepEx{}
		for _, size := range prepareWrites {
			name := fmt.Sprintf("%s, %s writes", way, fmtBytes(int64(size)))
			res.Cells[way][size] = p.addFunc(name, "prepare: "+name, func() (result, error) {
				r, ex, err := e.prepareCell(way, size, ops, dev, na)
				if err == nil {
					res.Extra[way][size] = append(res.Extra[way][size], ex)
				}
				return r, err
			})
		}
	}
	return res
}

// errNoAllocate marks a way the filesystem cannot do.
var errNoAllocate = errors.New("the filesystem cannot allocate")

// prepareCell prepares a file of one segment's size the given way, syncs
// it, then times ops write(size)+fdatasync at consecutive offsets.
func (e *env) prepareCell(way string, size, ops int, dev *devCounter, na string) (result, prepEx, error) {
	var ex prepEx
	dir := e.subdir("prepare")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return result{}, ex, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "segment"))
	if err != nil {
		return result{}, ex, err
	}
	defer f.Close()
	segSize := e.cfg.segment
	wa := startWA(dev, na)
	t0 := time.Now()
	switch way {
	case "zero-fill":
		err = writeZerosAt(f, 0, segSize)
	case "fallocate", "fallocate + zeros ahead":
		err = allocate(f, segSize, false)
	case "fallocate ZERO_RANGE":
		err = allocate(f, segSize, true)
	}
	if err == nil {
		err = f.Sync()
	}
	ex.PrepareTime = time.Since(t0)
	if err != nil {
		return result{}, ex, fmt.Errorf("prepare %s: %w", way, err)
	}
	ex.PrepareDev = wa.finish(1).DeviceBytes
	rec := makeRecord(size)
	ahead := way == "fallocate + zeros ahead"
	var zeroTo int64
	loop := startWA(dev, na)
	op, err := e.timeDiskOps(ops, func(i int) error {
		off := int64(i) * int64(size) % segSize
		if _, err := f.WriteAt(rec, off); err != nil {
			return err
		}
		if end := off + int64(size); ahead && end+aheadStep/2 > zeroTo && zeroTo < segSize {
			from := max(zeroTo, (end+4095)&^4095) // from the page after the record's, as the log does
			to := min(from+aheadStep, segSize)
			if err := writeZerosAt(f, from, to); err != nil {
				return err
			}
			if err := writeback(f, from, to-from); err != nil {
				return err
			}
			zeroTo = to
		}
		return datasync(f)
	})
	if err != nil {
		return result{}, ex, fmt.Errorf("%s: write+%s: %w", way, datasyncName, err)
	}
	ex.Payload = uint64(ops) * uint64(size)
	ex.LoopDev = loop.finish(ex.Payload).DeviceBytes
	r := op.asResult(way, size)
	r.Fsyncs = uint64(ops)
	return r, ex, nil
}

// writeZerosAt writes zeros over f's bytes [from, to) in aheadChunk
// writes, as the log's zero-fill and its zeros ahead do.
func writeZerosAt(f *os.File, from, to int64) error {
	zeros := make([]byte, aheadChunk)
	for off := from; off < to; off += int64(len(zeros)) {
		if _, err := f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// prepareTables renders the experiment.
func prepareTables(pr *prepareResult, rounds int) []table {
	if pr == nil {
		return nil
	}
	t := table{
		title: "prepare — how a new segment is made ready, and what each later fdatasync pays for it",
		notes: []string{
			fmt.Sprintf("Each cell prepares a file of %s (the segment size), syncs it, then times %d write+%s of the size given "+
				"at consecutive offsets into it, one goroutine: a 1 KiB write is one durable commit, 16 KiB a group of 16. "+
				"zero-fill writes zeros in 64 KiB writes (PostgreSQL's wal_init_zero, the log's preparation where commits sync "+
				"today); fallocate reserves the blocks as unwritten extents (mode 0; ZERO_RANGE the same through "+
				"FALLOC_FL_ZERO_RANGE); fallocate + zeros ahead is fallocate, then, as the log now does in an allocated segment where "+
				"commits sync, zeros written a MiB at a time just ahead of the records (64 KiB writes, handed to writeback at once), "+
				"so that one sync per MiB converts the unwritten extents instead of every sync its own.",
				fmtBytes(pr.Segment), pr.Ops, datasyncName),
			"prepare ms is the preparation and its sync; device MB is what the block device (" + pr.Device + ") wrote meanwhile " +
				"(/proc/diskstats, after sync(2), every writer on the device counted); loop WA is the device bytes of the " +
				"write+" + datasyncName + " loop over its payload (journal commits and the zeros ahead included).",
			roundsNote(rounds),
		},
		header: []string{"preparation", "write", "prepare ms", "prepare device MB", datasyncName + " p50 µs", "p99 µs", "mean µs",
			"ops/s", "÷ zero-fill ops/s", "loop WA"},
	}
	for _, size := range prepareWrites {
		base := pr.Cells["zero-fill"][size]
		for _, way := range prepareWays {
			c := pr.Cells[way][size]
			if c == nil || len(c.Rounds) == 0 {
				continue // cannot run here, or interrupted
			}
			exs := pr.Extra[way][size]
			var pt, pd, wa []float64
			for _, x := range exs {
				pt = append(pt, ms(x.PrepareTime))
				pd = append(pd, float64(x.PrepareDev)/1e6)
				if x.Payload > 0 && x.LoopDev > 0 {
					wa = append(wa, float64(x.LoopDev)/float64(x.Payload))
				}
			}
			rel := "—"
			if base != nil && len(base.Rounds) > 0 {
				rel = fmtSpread(ratioSpread(c, base, "commits_per_sec"), fmtRatio, false)
			}
			waCol := "n/a"
			if len(wa) > 0 {
				waCol = fmtSpread(spreadOf(wa), func(x float64) string { return fmtRatio(x) + "×" }, false)
			}
			t.rows = append(t.rows, []string{way, fmtBytes(int64(size)),
				fmtSpread(spreadOf(pt), fmtFloat1, false), fmtSpread(spreadOf(pd), fmtFloat1, false),
				fmtSpread(c.get("p50_us"), fmtUSf, false), fmtSpread(c.get("p99_us"), fmtUSf, false),
				fmtSpread(c.get("mean_us"), fmtUSf, false), fmtSpread(c.get("commits_per_sec"), fmtRate, false),
				rel, waCol})
		}
	}
	return []table{t}
}
