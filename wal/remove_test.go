package wal_test

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRemoveBeforeDirSyncFailureKeepsListTrue: RemoveBefore
// removes a segment, then syncs the directory, and only then drops the
// segment from l.segs.firsts. When the directory sync fails, the file is gone
// but the log still lists it as its oldest segment, and the log is not
// poisoned (it keeps taking appends).
//
// Sequence: 60 records over several 4 KiB segments; the directory sync
// after the first removal fails, RemoveBefore returns the error. Then, with
// the filesystem healthy again: RemoveBefore(same LSN) fails again with
// "file does not exist", and so does every later call (it retries the
// Remove of the file already removed); NewReader(FirstLSN) returns a raw
// ENOENT from the filesystem instead of a Reader or ErrNotFound. Expected:
// the retry succeeds (or the error path keeps the list in step with the
// directory) and NewReader of the oldest kept LSN works.
func TestRemoveBeforeDirSyncFailureKeepsListTrue(t *testing.T) {
	mem := vfs.NewMem()
	var armed, removed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		if op.Kind == faultfs.OpRemove && strings.HasSuffix(op.Path, ".wal") {
			removed.Store(true)
		}
		if op.Kind == faultfs.OpSyncDir && removed.Load() {
			armed.Store(false)
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	defer l.Close()
	last := appendN(t, l, 0, 60, 300)[59]
	armed.Store(true)
	_, err := l.RemoveBefore(last)
	require.ErrorIs(t, err, syscall.EIO)

	// The filesystem works again.
	first := l.Recovered().FirstLSN
	kept, err := l.RemoveBefore(last)
	assert.NoError(t, err, "retrying RemoveBefore once the directory sync works")
	if err != nil {
		kept = first // what the log still reports as its oldest kept LSN
	}
	r, err := l.NewReader(kept)
	if assert.NoError(t, err, "a Reader from the oldest kept LSN %d", kept) {
		r.Close()
	}
	_, err = l.Append([]byte("still usable"))
	require.NoError(t, err)
}

// TestRemoveBeforeOnFullDisk (ZooKeeper/Kafka disk-full): when the disk
// is full, Append returns ErrNoSpace and the README says the log "works
// again once space is freed"; RemoveBefore is the log's own way to free
// space. But RemoveBefore first records the new start in first-lsn by
// writing a new file (first-lsn.wal.tmp) — which needs a free data block —
// and refuses to remove anything when that write fails. On a full disk it
// can never free space. Deleting the oldest segments by hand instead makes
// every later Open fail (first-lsn says they must be there). The log is
// stuck until the operator frees space elsewhere.
//
// Sequence: 4 KiB segments, 60 records (several segments); the disk fills
// (no file can be created: ENOSPC; writes into existing,
// preallocated segments still work); Append returns ErrNoSpace;
// RemoveBefore(an LSN in the last segment). Expected: old segments removed,
// space freed. Happens: RemoveBefore fails with ENOSPC and removes nothing.
func TestRemoveBeforeOnFullDisk(t *testing.T) {
	mem := vfs.NewMem()
	var full atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		// A full disk: no new file can be made, and no file created since
		// can grow. Writes into blocks that exist (a segment prepared
		// before, first-lsn) still work.
		if full.Load() && op.Kind == faultfs.OpCreate {
			return syscall.ENOSPC
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, NoSpaceTimeout: 50 * time.Millisecond, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	defer l.Close()
	last := appendN(t, l, 0, 60, 300)[59]
	before := len(segments(t, mem))
	full.Store(true)
	var err error
	for i := 0; err == nil && i < 100; i++ {
		_, err = l.Append(record(1, i, 300))
	}
	require.ErrorIs(t, err, wal.ErrNoSpace, "the disk is full")

	_, err = l.RemoveBefore(last)
	require.NoError(t, err, "RemoveBefore on a full disk: the only way the log offers to free space")
	require.Less(t, len(segments(t, mem)), before)
}

// TestCloseWaitsForRemoveBefore (concurrency, low): RemoveBefore
// checks l.closed once and then removes files under segsMu, which Close
// never takes. Close returns, and releases the directory lock, while a
// RemoveBefore is still deleting segments. A second Log opened on the
// directory in that window (the lock is free) lists the segments, and the
// first Log's RemoveBefore then deletes files out from under it: its oldest
// segment is gone and NewReader(Recovered().FirstLSN) fails with a raw
// ENOENT.
//
// Sequence: several 4 KiB segments; RemoveBefore runs and is held as it
// creates first-lsn.wal.tmp (before any removal); Close() returns nil; Open of the
// same directory succeeds; RemoveBefore resumes and returns. Expected: Close
// waits for RemoveBefore (or RemoveBefore stops at Close), so the second Log
// owns the directory alone. Happens: the second Log's oldest segment is
// deleted by the first Log after the second opened.
func TestCloseWaitsForRemoveBefore(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	held, release := make(chan struct{}), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		// Hold RemoveBefore as it removes its first segment.
		if op.Kind == faultfs.OpRemove && strings.HasSuffix(op.Path, ".wal") && armed.CompareAndSwap(true, false) {
			close(held)
			<-release
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	last := appendN(t, l, 0, 60, 300)[59]
	armed.Store(true)
	rbDone := make(chan error, 1)
	go func() {
		_, err := l.RemoveBefore(last)
		rbDone <- err
	}()
	<-held
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(2 * time.Second):
		close(release)
		<-rbDone
		return // Close waited for RemoveBefore: the expected behaviour
	}
	l2 := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	defer l2.Close()
	close(release)
	<-rbDone
	first := l2.Recovered().FirstLSN
	r, err := l2.NewReader(first)
	require.NoError(t, err, "Close returned and a second Log opened the directory while the first Log's RemoveBefore was still removing segments; the second Log's oldest segment (LSN %d) was deleted under it", first)
	r.Close()
}

// Sim seeds 242 and 489: TruncateFrom fails once the cut is recorded
// (here the directory sync after renaming truncate-lsn into place), the
// log is poisoned, yet RemoveBefore still runs: it removes the segment
// holding the recorded cut and records a start past it. After a process
// crash Open refuses the directory for good ("a truncation at LSN x was
// recorded, but the oldest segment starts at LSN y"); seed 489's variant
// (the removal of truncate-lsn failed) ends, after a power loss, in
// "first-lsn records the start of a log, but no segment of it is left".
// A poisoned log must refuse RemoveBefore, or Open must finish such a cut.
func TestRemoveBeforeAfterFailedCutLeavesUnopenableLog(t *testing.T) {
	mem := vfs.NewMem()
	var armed, renamed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		if op.Kind == faultfs.OpRename && strings.Contains(filepath.Base(op.Path), "truncate") {
			renamed.Store(true)
			return nil
		}
		if op.Kind == faultfs.OpSyncDir && renamed.Load() && armed.CompareAndSwap(true, false) {
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10, RecycleSegments: 0, Policy: policy.SyncEveryCommit()}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	lsns := appendN(t, l, 1, 40, 300)
	require.NoError(t, l.Sync())
	armed.Store(true)
	err = l.TruncateFrom(lsns[5])
	require.ErrorIs(t, err, wal.ErrPoisoned, "the cut failed once recorded")
	_, rerr := l.RemoveBefore(lsns[35])
	t.Logf("RemoveBefore on the poisoned log: %v", rerr)
	l.Close()

	for _, img := range []*vfs.MemFS{mem.ProcessCrash(), mem.PowerLoss(vfs.KeepAll()), mem.PowerLoss(vfs.DropAll())} {
		opts.FS = img
		l, err := wal.Open(logDir, opts)
		require.NoError(t, err, "a crash after a failed cut and a RemoveBefore leaves a log Open refuses")
		got, _ := readAll(t, l, l.FirstLSN())
		require.NotEmpty(t, got)
		require.NoError(t, l.Close())
	}
}

// Sim seed 4032: RemoveBefore overwrites first-lsn in place; a write of it
// that fails part-way (7 of its 16 bytes, then ENOSPC, as a copy-on-write
// filesystem may answer even an overwrite) leaves a record that no longer
// checks, and after a process crash Open refuses the log for good ("the
// LSN recorded in first-lsn is damaged"). The in-place write trusts the
// sector to be written whole, which holds for the device, not for the
// write(2) that put the bytes in the page cache.
func TestShortWriteOfFirstLSNLeavesUnopenableLog(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			return nil
		}
		// A full disk: no block for a new record file, so the record
		// is overwritten in place, and that write is cut short too.
		if op.Kind == faultfs.OpCreate && strings.HasPrefix(filepath.Base(op.Path), "first-lsn.") {
			return syscall.ENOSPC
		}
		if op.Kind == faultfs.OpWrite && filepath.Base(op.Path) == "first-lsn" && armed.CompareAndSwap(true, false) {
			return &faultfs.ShortOp{Keep: 7, Err: syscall.ENOSPC}
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	lsns := appendN(t, l, 1, 40, 300)
	armed.Store(true)
	_, err = l.RemoveBefore(lsns[30])
	require.Error(t, err, "the write of first-lsn failed")
	l.Close()

	opts.FS = mem.ProcessCrash()
	l, err = wal.Open(logDir, opts)
	require.NoError(t, err, "a failed RemoveBefore leaves a log Open refuses")
	_, got := readAll(t, l, l.FirstLSN())
	require.NotEmpty(t, got)
	require.NoError(t, l.Close())
}

// TestRemoveBeforeFailedFirstLSNPoisons (found by the simulator, seed
// 83022325): RemoveBefore renamed the new first-lsn into place and the
// directory sync after it failed. It returned the error and the log went
// on with its old start, so a TruncateFrom below the recorded start left a
// first-lsn past the log's end: Open and OpenReadOnly refused the log. A
// failure to record the new start now poisons the log (the start on the
// disk is unknown), a cut is refused, and the reopened log holds every
// record up to the end, from whichever start reached the disk.
func TestRemoveBeforeFailedFirstLSNPoisons(t *testing.T) {
	mem := vfs.NewMem()
	var armed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if armed.Load() && op.Kind == faultfs.OpSyncDir {
			armed.Store(false)
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 4 << 10, FS: faultfs.Inject(mem, inj)}
	l := openLog(t, opts.FS, opts)
	lsns := appendN(t, l, 0, 60, 300)
	require.NoError(t, l.Sync())
	armed.Store(true)
	_, err := l.RemoveBefore(lsns[50])
	require.ErrorIs(t, err, wal.ErrPoisoned)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, l.TruncateFrom(lsns[20]), wal.ErrPoisoned, "no cut below a start that may be recorded")
	l.Close()

	for _, img := range []*vfs.MemFS{mem.ProcessCrash(), mem.PowerLoss(vfs.DropAll()), mem.PowerLoss(vfs.KeepAll())} {
		opts.FS = img
		l, err := wal.Open(logDir, opts)
		require.NoError(t, err)
		got, _ := readAll(t, l, l.FirstLSN())
		require.NotEmpty(t, got)
		require.Equal(t, lsns[59], got[len(got)-1], "every record to the end is kept")
		require.LessOrEqual(t, l.FirstLSN(), lsns[50])
		require.NoError(t, l.Close())
	}
}
