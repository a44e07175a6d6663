package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/durawal/durawal/policy"
)

// The bandwidth experiment: large records against what the device can
// write. Each record size runs the log under SyncEveryCommit with 1 and 8
// committers and under SyncNever with 1, and, on the same filesystem in
// the same rounds, the raw loops the log is held against: a sequential
// write of the same records with no sync (the page cache's and device's
// ceiling for SyncNever), write+fdatasync of one record (for one durable
// committer) and of eight records at once (what one group of eight
// committers costs the device at best). Not in the default run; -exp
// bandwidth.

// bandwidthSizes are the record sizes, in bytes.
var bandwidthSizes = []int{4 << 10, 64 << 10, 1 << 20}

// bandwidthGroup is the committer count of the grouped SyncEveryCommit
// row, and the records per write of its raw counterpart.
const bandwidthGroup = 8

// Default and -quick payload volume of each cell.
const (
	defaultBandwidthVolume = 64 << 20
	quickBandwidthVolume   = 4 << 20
)

// targetBandwidth is the target: the log's MB/s at 64 KiB and
// larger records against the raw loop's.
const targetBandwidth = 0.9

// bandwidthRow is one record size: the log's cells and the raw loops'.
type bandwidthRow struct {
	Size     int   `json:"record_size"`
	Sync1    *cell `json:"sync_every_commit_x1"`
	Sync8    *cell `json:"sync_every_commit_x8"`
	Never1   *cell `json:"sync_never_x1"`
	RawWrite *cell `json:"raw_write"`
	RawSync1 *cell `json:"raw_write_fdatasync"`
	RawSync8 *cell `json:"raw_write_fdatasync_x8_records"`
}

// bandwidthResult is the experiment: one row per record size.
type bandwidthResult struct {
	Volume int64           `json:"volume_bytes"`
	Rows   []*bandwidthRow `json:"rows"`
}

// planBandwidth queues, for each record size, the log cells and the raw
// loops, each writing the same volume.
func planBandwidth(e *env, p *plan) *bandwidthResult {
	vol := int64(defaultBandwidthVolume)
	if e.cfg.quick {
		vol = quickBandwidthVolume
	}
	res := &bandwidthResult{Volume: vol}
	for _, size := range bandwidthSizes {
		n := int(max(vol/int64(size), bandwidthGroup))
		row := &bandwidthRow{Size: size}
		sz := fmtBytes(int64(size))
		logCell := func(name string, pol policy.Policy, committers int) *cell {
			return p.add(e, fmt.Sprintf("bandwidth: %s, %s records, %s", name, sz, fmtBytes(vol)),
				spec{name: name, pol: pol, committers: committers, each: n / committers, size: size,
					syncAtEnd: pol.Kind() == policy.KindSyncNever})
		}
		row.Sync1 = logCell("=1 × 1", policy.SyncEveryCommit(), 1)
		row.Sync8 = logCell(fmt.Sprintf("=1 × %d", bandwidthGroup), policy.SyncEveryCommit(), bandwidthGroup)
		row.Never1 = logCell("SyncNever × 1", policy.SyncNever(), 1)
		row.RawWrite = p.addFunc("raw write, "+datasyncName+" at the end", fmt.Sprintf("bandwidth: raw write, %s records, %s", sz, fmtBytes(vol)),
			func() (result, error) {
				return e.rawBandwidth("raw write, "+datasyncName+" at the end", size, 1, n, false)
			})
		row.RawSync1 = p.addFunc("raw write+"+datasyncName, fmt.Sprintf("bandwidth: raw write+%s, %s records, %s", datasyncName, sz, fmtBytes(vol)),
			func() (result, error) { return e.rawBandwidth("raw write+"+datasyncName, size, 1, n, true) })
		name8 := fmt.Sprintf("raw write of %d records+%s", bandwidthGroup, datasyncName)
		row.RawSync8 = p.addFunc(name8, fmt.Sprintf("bandwidth: %s, %s records, %s", name8, sz, fmtBytes(vol)),
			func() (result, error) { return e.rawBandwidth(name8, size, bandwidthGroup, n/bandwidthGroup, true) })
		res.Rows = append(res.Rows, row)
	}
	return res
}

// rawBandwidth writes ops writes of per records of size bytes each at
// consecutive offsets of a file in a fresh subdirectory, one goroutine,
// each followed by an fdatasync if sync. A synced loop writes into a file
// zero-filled and synced first (untimed), so that each fdatasync flushes
// data only; an unsynced one appends to a new, empty file and syncs it
// once at the end, inside the time: the device's sequential bandwidth.
// Records are counted as commits.
func (e *env) rawBandwidth(name string, size, per, ops int, sync bool) (result, error) {
	dir := e.subdir("bandwidth-raw")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	buf := makeRecord(size * per)
	total := int64(len(buf)) * int64(ops)
	if sync {
		if err := writeZerosAt(f, 0, total); err != nil {
			return result{}, err
		}
		if err := f.Sync(); err != nil {
			return result{}, err
		}
	}
	op, err := e.timeDiskOps(ops, func(i int) error {
		if _, err := f.WriteAt(buf, int64(i)*int64(len(buf))); err != nil {
			return err
		}
		if sync {
			return datasync(f)
		}
		return nil
	})
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	if !sync {
		t := time.Now()
		if err := datasync(f); err != nil {
			return result{}, fmt.Errorf("%s: %w", name, err)
		}
		op.Elapsed += time.Since(t)
	}
	r := op.asResult(name, size)
	r.Commits = uint64(ops * per)
	r.RecordsPer = per
	r.RecordsPerSec = float64(r.Commits) / op.Elapsed.Seconds()
	r.CommitsPerSec = float64(ops) / op.Elapsed.Seconds()
	r.Fsyncs = 1
	if sync {
		r.Fsyncs = uint64(ops)
	}
	return r, nil
}

// bandwidthTables renders the experiment: MB/s of each cell, and the log
// against its raw loop within each round.
func bandwidthTables(br *bandwidthResult, rounds int) []table {
	if br == nil {
		return nil
	}
	t := table{
		title: "bandwidth — large records against the device: payload MB/s",
		notes: []string{
			fmt.Sprintf("Each cell writes %[1]s of records of the size given, one fresh log (or raw file) per cell and round: "+
				"=1 is SyncEveryCommit, with 1 and %[2]d committers; SyncNever writes each commit and never syncs. "+
				"Raw loops on the same filesystem, one goroutine: raw write appends the records to a new file and syncs it once "+
				"at the end (the device's sequential bandwidth: SyncNever's ceiling, whose cell also ends with a Log.Sync); "+
				"raw write+%[3]s writes one record and syncs it (=1 × 1's); raw write of %[2]d records+%[3]s "+
				"writes %[2]d at once and syncs (what a group of %[2]d costs the device at best: =1 × %[2]d's), into files "+
				"zero-filled and synced first. MB/s counts payload bytes (10^6) up to the last commit's return (SyncNever: "+
				"its final sync's) or the raw loop's last write or sync; the log's includes its segment preparation and rolls.", fmtBytes(br.Volume), bandwidthGroup, datasyncName),
			fmt.Sprintf("÷ raw is the cell's MB/s over its raw loop's, taken within each round; the target is ≥ %.2f at 64 KiB "+
				"and above.", targetBandwidth),
			roundsNote(rounds),
		},
		header: []string{"record", "cell", "MB/s", "÷ raw", "raw loop", "raw MB/s", "p50 µs", "p99 µs", "fsyncs", "met"},
	}
	for _, row := range br.Rows {
		for _, pair := range []struct{ log, raw *cell }{
			{row.Sync1, row.RawSync1}, {row.Sync8, row.RawSync8}, {row.Never1, row.RawWrite},
		} {
			if len(pair.log.Rounds) == 0 || len(pair.raw.Rounds) == 0 {
				continue // interrupted
			}
			ratio := ratioSpread(pair.log, pair.raw, "payload_mb_per_sec")
			met := "—"
			if row.Size >= 64<<10 {
				met = verdict(ratio.Median >= targetBandwidth, ratio.Median > 0)
			}
			t.rows = append(t.rows, []string{fmtBytes(int64(row.Size)), pair.log.Name,
				fmtSpread(pair.log.get("payload_mb_per_sec"), fmtFloat1, false),
				fmtSpread(ratio, fmtRatio, false), pair.raw.Name,
				fmtSpread(pair.raw.get("payload_mb_per_sec"), fmtFloat1, false),
				fmtSpread(pair.log.get("p50_us"), fmtUSf, false), fmtSpread(pair.log.get("p99_us"), fmtUSf, false),
				fmtSpread(pair.log.get("fsyncs"), fmtCount, false), met})
		}
	}
	return []table{t}
}
