package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// Frames valid in an earlier use of the same bytes must never validate in
// the current one (format version 6: a use ID per use of a segment file, an
// epoch per stretch of the log between cuts and Opens). These tests are the
// two sequences that brought such frames back before.

// TestUndoneRollFramesNotAdoptedThroughKeptFile (issue case 1): a roll
// reused a kept file K and wrote frames into it; a power loss undid the
// rename and K's new header (and the finished segment P's last write) but
// kept K's frames. Open finds the log cleanly closed, adopts K, and the
// next roll reuses K for the same LSNs. Without a use ID in every frame's
// checksum the frames of the undone roll, valid at those LSNs, followed the
// new ones: records that never returned came back after acknowledged ones.
//
// The power loss is built by hand from a process-crash image of run 2 (the
// state KeepRandomSubsetOfBlocks(512, 29) left in the original report): K
// renamed back to its kept name with its first block restored, P's last
// block restored.
func TestUndoneRollFramesNotAdoptedThroughKeptFile(t *testing.T) {
	// Run 2's batch returns once written (SyncNever): the crash image
	// below undoes what a power loss may undo of it.
	for _, run2 := range []policy.Policy{policy.SyncNever()} {
		t.Run(run2.String(), func(t *testing.T) {
			const rec = 300
			opts := wal.Options{SegmentSize: 4 << 10, RecycleSegments: 2, Policy: policy.SyncEveryCommit()}
			mem := vfs.NewMem()

			// Run 1: segments, a checkpoint that keeps two files, then
			// the last segment filled to one record short of a roll.
			l := openLog(t, mem, opts)
			var want [][]byte
			var lsns []wal.LSN
			for i := 0; l.Stats().Rolls < 4; i++ {
				r := record(1, i, rec)
				lsn, err := l.Append(r)
				require.NoError(t, err)
				want, lsns = append(want, r), append(lsns, lsn)
			}
			_, err := l.RemoveBefore(lsns[len(lsns)-1])
			require.NoError(t, err)
			want = want[len(want)-1:]
			// Fill the last segment P to one record short of a roll: 12
			// frames of 328 bytes fit the 4,008 bytes a 4 KiB segment
			// gives frames.
			segs := segments(t, mem)
			pFirst, err := strconv.ParseUint(strings.TrimSuffix(segs[len(segs)-1], ".wal"), 10, 64)
			require.NoError(t, err)
			for i := 0; int64(l.AppendedLSN()-wal.LSN(pFirst))/wal.FrameSize(rec) < 11; i++ {
				r := record(2, i, rec)
				_, err := l.Append(r)
				require.NoError(t, err)
				want = append(want, r)
			}
			require.Equal(t, uint64(4), l.Stats().Rolls)
			require.NoError(t, l.Close())
			keptNames := kept(t, mem)
			require.NotEmpty(t, keptNames, "RemoveBefore kept files for reuse")
			p := segs[len(segs)-1]
			pBefore := fileBytes(t, mem, p)
			keptBefore := map[string][]byte{}
			for _, k := range keptNames {
				keptBefore[k] = fileBytes(t, mem, k)
			}

			// Run 2: one batch rolls into a kept file; then a crash.
			o2 := opts
			o2.Policy = run2
			l2 := openLog(t, mem, o2)
			batch := make([][]byte, 11)
			for i := range batch {
				batch[i] = record(3, i, rec)
			}
			_, err = l2.AppendBatchContext(context.Background(), batch)
			require.NoError(t, err)
			img := mem.ProcessCrash()
			l2.Close()

			// The power loss: the roll's rename and K's header undone, P's
			// last write lost, K's frames kept.
			segs2 := segments(t, img)
			require.Greater(t, len(segs2), len(segs), "run 2 rolled")
			newSeg := segs2[len(segs2)-1]
			var reused string
			for _, k := range keptNames {
				if _, err := img.Open(filepath.Join(logDir, k)); err != nil {
					reused = k
				}
			}
			require.NotEmpty(t, reused, "the roll reused a kept file")
			kb := fileBytes(t, img, newSeg)
			copy(kb[:512], keptBefore[reused][:512])
			require.NoError(t, img.Rename(filepath.Join(logDir, newSeg), filepath.Join(logDir, reused)))
			setFile(t, img, reused, kb)
			setFile(t, img, p, pBefore)
			for _, s := range segs2[len(segs):] {
				if s != newSeg {
					require.NoError(t, img.Remove(filepath.Join(logDir, s)))
				}
			}
			require.NoError(t, img.SyncDir(logDir))

			// Run 3: the same record size again lands the roll on the
			// same LSN; two records go into the reused file; a crash.
			l3 := openLog(t, img, opts)
			require.True(t, l3.Recovered().Clean, "run 1's end frame is back")
			for i := 0; i < 40; i++ {
				r := record(4, i, rec)
				_, err := l3.Append(r)
				require.NoError(t, err)
				want = append(want, r)
				if l3.Stats().Rolls > 0 && i > 2 {
					break
				}
			}
			img3 := img.ProcessCrash()
			l3.Close()

			_, got, _ := replay(t, img3, opts)
			require.Equal(t, len(want), len(got), "records after the crash: those of runs 1 and 3 only")
			for i := range want {
				require.True(t, bytes.Equal(want[i], got[i]), "record %d", i)
			}
		})
	}
}

// failNextSegmentSync returns an injector for mem that, once armed is set,
// makes the next sync of a segment file fail as Linux's does after a lost
// writeback (MemFS.FailNextSync: the written pages marked clean, the disk
// keeping the old bytes).
func failNextSegmentSync(mem *vfs.MemFS) (faultfs.Injector, *atomic.Bool) {
	armed := new(atomic.Bool)
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, ".wal") && armed.CompareAndSwap(true, false) {
			mem.FailNextSync(syscall.EIO)
		}
		return nil
	}), armed
}

// TestFailedCutZeroingDoesNotResurrectCutRecords (issue case 2): the sync
// after TruncateFrom's zeroing fails (EIO), so the zeros are in the page
// cache only, marked clean (fsyncgate); the process crashes; Open finishes
// the recorded cut but sees zeros already and writes none; a new record is
// appended and acknowledged at the cut; power loss. The cut records are
// still on the disk after it, at their own LSNs: without the epoch rule
// they came back after the new record (R0..R4, N5, R6..R9).
func TestFailedCutZeroingDoesNotResurrectCutRecords(t *testing.T) {
	mem := vfs.NewMem()
	inj, armed := failNextSegmentSync(mem)
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 64 << 10, Policy: policy.SyncEveryCommit()}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range 10 {
		r := record(0, i, 100)
		lsn, err := l.Append(r)
		require.NoError(t, err)
		recs, lsns = append(recs, r), append(lsns, lsn)
	}
	armed.Store(true)
	err = l.TruncateFrom(lsns[5])
	require.ErrorIs(t, err, wal.ErrPoisoned, "the sync after the zeroing fails")
	img := mem.ProcessCrash()
	l.Close()

	o2 := wal.Options{FS: img, SegmentSize: 64 << 10, Policy: policy.SyncEveryCommit()}
	l2, err := wal.Open(logDir, o2)
	require.NoError(t, err)
	_, got := readAll(t, l2, 0)
	require.Equal(t, recs[:5], got, "the cut is finished")
	n5 := record(1, 5, 100)
	lsn, err := l2.Append(n5)
	require.NoError(t, err)
	require.Equal(t, lsns[5], lsn)
	lost := img.PowerLoss(vfs.DropAll())
	l2.Close()

	o3 := o2
	o3.FS = lost
	l3, err := wal.Open(logDir, o3)
	require.NoError(t, err)
	gotLSNs, got := readAll(t, l3, 0)
	require.NoError(t, l3.Close())
	require.Equal(t, append(append([][]byte{}, recs[:5]...), n5), got,
		"after the power loss: %d records at LSNs %v; R6..R9 were cut", len(got), gotLSNs)
}

// TestFailedCutZeroingRaftShape is case 2 through the shape Raft gives it:
// the entries after the cut are re-appended with the same sizes (a
// follower re-receiving entries of a new term), so every old frame begins
// exactly where a new one ends. After the power loss the log must hold the
// new entries and nothing of the old suffix.
func TestFailedCutZeroingRaftShape(t *testing.T) {
	mem := vfs.NewMem()
	inj, armed := failNextSegmentSync(mem)
	entry := func(term, index int) []byte {
		return []byte(fmt.Sprintf("term %d index %02d %s", term, index, strings.Repeat("e", 40)))
	}
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 64 << 10, Policy: policy.SyncEveryCommit()}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	var lsns []wal.LSN
	for i := 1; i <= 10; i++ {
		lsn, err := l.Append(entry(1, i))
		require.NoError(t, err)
		lsns = append(lsns, lsn)
	}
	armed.Store(true)
	require.ErrorIs(t, l.TruncateFrom(lsns[5]), wal.ErrPoisoned) // drops indexes 6..10
	img := mem.ProcessCrash()
	l.Close()

	l2, err := wal.Open(logDir, wal.Options{FS: img, SegmentSize: 64 << 10})
	require.NoError(t, err)
	_, err = l2.Append(entry(2, 6))
	require.NoError(t, err)
	lost := img.PowerLoss(vfs.DropAll())
	l2.Close()

	l3, err := wal.Open(logDir, wal.Options{FS: lost, SegmentSize: 64 << 10})
	require.NoError(t, err)
	_, got := readAll(t, l3, 0)
	require.NoError(t, l3.Close())
	var want [][]byte
	for i := 1; i <= 5; i++ {
		want = append(want, entry(1, i))
	}
	want = append(want, entry(2, 6))
	require.Equal(t, want, got, "index 7 of term 1 must not follow index 6 of term 2")
}

// TestFirstLSNPastEndRefused: a first-lsn record past the log's end (a
// restored or copied file; the log never writes one) must not make Open
// remove segments on its word.
func TestFirstLSNPastEndRefused(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	for i := 0; l.Stats().Rolls < 4; i++ {
		_, err := l.Append(record(0, i, 100))
		require.NoError(t, err)
	}
	end := l.AppendedLSN()
	require.NoError(t, l.Close())
	before := segments(t, mem)

	f, err := mem.OpenReadWrite(filepath.Join(logDir, "first-lsn"), vfs.Fdatasync)
	require.NoError(t, err)
	_, err = f.WriteAt(lsnRecord(end+100000), 0)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	_, err = wal.Open(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	_, err = wal.OpenReadOnly(logDir, opts)
	require.ErrorIs(t, err, wal.ErrCorrupt)
	require.Equal(t, before, segments(t, mem), "no segment removed on the word of a record that contradicts them")
}

// lsnRecord returns the 16-byte content of first-lsn or truncate-lsn
// recording lsn.
func lsnRecord(lsn wal.LSN) []byte {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b[0:8], uint64(lsn))
	binary.LittleEndian.PutUint64(b[8:16], xxhash.Sum64(b[0:8]))
	return b
}

// TestEpochReadErrorIsTheFilesystems: an I/O error reading the epoch record
// is the filesystem's error, not corruption (first-lsn and truncate-lsn:
// TestEIOReadingFirstLSNIsNotCorruption and the next, in recover_test.go).
func TestEpochReadErrorIsTheFilesystems(t *testing.T) {
	mem := vfs.NewMem()
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 64 << 10})
	require.NoError(t, err)
	require.NoError(t, l.Close())
	_, err = wal.Open(logDir, wal.Options{FS: faultfs.Inject(mem, failReadsOf("epoch")), SegmentSize: 64 << 10})
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, wal.ErrCorrupt, "an I/O error is not damage")
}
