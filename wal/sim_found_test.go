// Regressions found by the simulator (package wal/internal/sim) on main as
// of issue 25, each focused on one violation. Each fails on that main and
// passes since its fix.

package wal_test

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// simFoundAppend appends n records of size bytes and returns their LSNs.
func simFoundAppend(t *testing.T, l *wal.Log, stream, n, size int) []wal.LSN {
	t.Helper()
	var lsns []wal.LSN
	for i := range n {
		lsn, err := l.Append(record(stream, i, size))
		require.NoError(t, err)
		lsns = append(lsns, lsn)
	}
	return lsns
}

// failReadsOf fails every read of the file named base with EIO.
func failReadsOf(base string) faultfs.Injector {
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRead && filepath.Base(op.Path) == base {
			return syscall.EIO
		}
		return nil
	})
}

// Sim seeds 65, 328, 550, 673 (and others): an EIO reading first-lsn at
// Open is reported as corruption, not as the filesystem's error.
func TestSimFoundEIOReadingFirstLSNIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	simFoundAppend(t, l, 1, 3, 100)
	require.NoError(t, l.Close())

	opts.FS = faultfs.Inject(mem, failReadsOf("first-lsn"))
	l, err = wal.Open(logDir, opts)
	if err == nil {
		l.Close()
		t.Skip("Open did not read first-lsn")
	}
	require.ErrorIs(t, err, syscall.EIO, "the filesystem's error")
	require.NotErrorIs(t, err, wal.ErrCorrupt, "an I/O error is not damage")
}

// Sim seed 550: the same for truncate-lsn, left by a cut whose zeroing
// failed to sync.
func TestSimFoundEIOReadingTruncateLSNIsNotCorruption(t *testing.T) {
	mem := vfs.NewMem()
	var failSync atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && strings.HasSuffix(op.Path, ".wal") && failSync.Load() {
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	lsns := simFoundAppend(t, l, 1, 6, 100)
	failSync.Store(true)
	require.ErrorIs(t, l.TruncateFrom(lsns[3]), wal.ErrPoisoned)
	l.Close()
	img := mem.ProcessCrash()
	names, err := img.List(logDir)
	require.NoError(t, err)
	require.Contains(t, names, "truncate-lsn", "the cut is recorded")

	opts.FS = faultfs.Inject(img, failReadsOf("truncate-lsn"))
	l, err = wal.Open(logDir, opts)
	if err == nil {
		l.Close()
		t.Fatal("Open succeeded without reading truncate-lsn")
	}
	require.ErrorIs(t, err, syscall.EIO, "the filesystem's error")
	require.NotErrorIs(t, err, wal.ErrCorrupt, "an I/O error is not damage")
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
func TestSimFoundRemoveBeforeAfterFailedCutLeavesUnopenableLog(t *testing.T) {
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
	lsns := simFoundAppend(t, l, 1, 40, 300)
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

// Sim seed 1304: Open of a new log in /data/wal creates /data and fails
// syncing / (ENOSPC). The retried Open finds /data (in the page cache),
// creates the log and acknowledges a SyncEveryCommit append, but never
// syncs / again: a power loss loses /data with the log and the record.
func TestSimFoundRetriedOpenLeavesAncestorUnsynced(t *testing.T) {
	mem := vfs.NewMem()
	var failed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSyncDir && filepath.Clean(op.Path) == "/" && failed.CompareAndSwap(false, true) {
			return syscall.ENOSPC
		}
		return nil
	})
	dir := "/data/wal"
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	_, err := wal.Open(dir, opts)
	require.Error(t, err, "the first Open fails syncing /")
	require.True(t, failed.Load())

	img := mem.ProcessCrash()
	opts.FS = img
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	rec := record(1, 0, 227)
	_, err = l.Append(rec)
	require.NoError(t, err, "acknowledged durable")

	pl := img.PowerLoss(vfs.DropAll())
	l.Close()
	opts.FS = pl
	l2, err := wal.Open(dir, opts)
	require.NoError(t, err)
	defer l2.Close()
	_, got := readAll(t, l2, l2.FirstLSN())
	require.Equal(t, [][]byte{rec}, got, "the acknowledged record survives the power loss")
}

// Sim seed 4032: RemoveBefore overwrites first-lsn in place; a write of it
// that fails part-way (7 of its 16 bytes, then ENOSPC, as a copy-on-write
// filesystem may answer even an overwrite) leaves a record that no longer
// checks, and after a process crash Open refuses the log for good ("the
// LSN recorded in first-lsn is damaged"). The in-place write trusts the
// sector to be written whole, which holds for the device, not for the
// write(2) that put the bytes in the page cache.
func TestSimFoundShortWriteOfFirstLSNLeavesUnopenableLog(t *testing.T) {
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
	lsns := simFoundAppend(t, l, 1, 40, 300)
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
