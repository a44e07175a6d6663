package wal_test

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyLastSegmentIsDirectory: with the last segment file of a
// cleanly closed log replaced by a directory, Open fails (ErrCorrupt: the
// link frame names a segment that is not there) and OpenReadOnly must reach
// the same verdict. It used to take the directory, which opens, for a live
// writer's new segment and end the log at the link frame, every record of
// the last segment silently gone.
func TestReadOnlyLastSegmentIsDirectory(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 8 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	appendVaried(t, l, 500)
	end := l.AppendedLSN()
	require.NoError(t, l.Close())

	names, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	require.NoError(t, err)
	last := names[len(names)-1]
	require.NoError(t, os.Remove(last))
	require.NoError(t, os.Mkdir(last, 0o755))

	_, openErr := wal.Open(dir, opts)
	require.ErrorIs(t, openErr, wal.ErrCorrupt, "Open reports the missing last segment")

	ro, err := wal.OpenReadOnly(dir, opts)
	if err == nil {
		got := ro.Recovered().EndLSN
		ro.Close()
		t.Fatalf("OpenReadOnly succeeded with EndLSN %d (acknowledged end %d) while Open fails with %v: the records of the last segment vanish silently", got, end, openErr)
	}
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

// TestOpenRefusesLinkedSegments: a log directory whose files are symbolic
// links (segments and first-lsn moved to another disk and linked back) used
// to list as empty, the links skipped, and Open created a new log at LSN 0
// over them: every acknowledged record gone with no error. Open,
// OpenReadOnly and InspectDir now refuse the links (ErrForeignFile, and
// vfs.ErrNotRegular naming the entry).
func TestOpenRefusesLinkedSegments(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	opts := wal.Options{SegmentSize: 8 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	appendVaried(t, l, 500)
	require.NoError(t, l.Close())
	replaceWithLinks(t, dir, other, false)

	l, err = wal.Open(dir, opts)
	if err == nil {
		defer l.Close()
		_, recs := readAll(t, l, 0)
		require.Len(t, recs, 500, "Open succeeded (RecoveryInfo %+v) but the 500 acknowledged records are gone", l.Recovered())
	}
	require.ErrorIs(t, err, wal.ErrForeignFile)
	require.ErrorIs(t, err, vfs.ErrNotRegular)
	require.ErrorContains(t, err, "symbolic link")
	_, err = wal.OpenReadOnly(dir, opts)
	require.ErrorIs(t, err, wal.ErrForeignFile)
	_, err = wal.InspectDir(nil, dir)
	require.ErrorIs(t, err, wal.ErrForeignFile)
}

// TestOpenRefusesDanglingLinks: segments linked to a disk that is not
// mounted (every link dangles) must not read as an empty directory, where
// Open would start a new log over them.
func TestOpenRefusesDanglingLinks(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 8 << 10})
	require.NoError(t, err)
	for i := range 50 {
		_, err := l.Append(record(0, i, 500))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	replaceWithLinks(t, dir, filepath.Join(other, "unmounted"), true)
	_, err = wal.Open(dir, wal.Options{SegmentSize: 8 << 10})
	require.ErrorIs(t, err, wal.ErrForeignFile, "Open over dangling links must fail, not start a new log")
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range after {
		if e.Name() != "LOCK" {
			require.NotZero(t, e.Type()&os.ModeSymlink, "Open created %s among the links", e.Name())
		}
	}
}

// appendVaried appends n records of 1 to 300 bytes to l.
func appendVaried(t *testing.T, l *wal.Log, n int) {
	t.Helper()
	for i := range n {
		_, err := l.Append(record(0, i, 1+i%300))
		require.NoError(t, err)
	}
}

// replaceWithLinks replaces every file of the closed log in dir but LOCK
// with a symbolic link to the same name in other: moved there first, as
// an operator moving the log to another disk does, or, if dangling, not
// (the other disk is not mounted).
func replaceWithLinks(t *testing.T, dir, other string, dangling bool) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		from, to := filepath.Join(dir, e.Name()), filepath.Join(other, e.Name())
		if dangling {
			require.NoError(t, os.Remove(from))
		} else {
			require.NoError(t, os.Rename(from, to))
		}
		require.NoError(t, os.Symlink(to, from))
	}
}

// TestLogDirEntryDurableAfterFailedOpen: Open makes a directory it creates
// durable by syncing its parent, but only the Open that ran the mkdir does;
// makeDir skips every sync when the directory exists. If that Open fails at
// the parent's sync (EIO, or the process dies between mkdir and the sync),
// the next Open finds the directory, never syncs its parent, and every
// record it acknowledges lives in a directory whose own entry is not
// durable.
//
// Sequence: the parent sync of the first Open fails (Open returns an
// error); process crash; Open again (nil); five SyncEveryCommit appends
// return nil; Close returns nil; power loss (DropAll). Expected: the five
// records are there. Happens: the log directory is gone, and Open creates a
// fresh empty log without an error.
func TestLogDirEntryDurableAfterFailedOpen(t *testing.T) {
	mem := vfs.NewMem()
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSyncDir && filepath.Clean(op.Path) == "/" {
			return syscall.EIO
		}
		return nil
	})
	opts := wal.Options{SegmentSize: 64 << 10, FS: faultfs.Inject(mem, inj)}
	_, err := wal.Open(logDir, opts)
	require.Error(t, err, "the first Open fails at the parent directory's sync")

	img := mem.ProcessCrash()
	l := openLog(t, img, opts)
	appendN(t, l, 0, 5, 100)
	require.NoError(t, l.Close())

	lost := img.PowerLoss(vfs.DropAll())
	_, got, _ := replay(t, lost, opts)
	require.Len(t, got, 5, "five records acknowledged durable (SyncEveryCommit, then a clean Close) vanished with their directory")
}

// Sim seed 1304: Open of a new log in /data/wal creates /data and fails
// syncing / (ENOSPC). The retried Open finds /data (in the page cache),
// creates the log and acknowledges a SyncEveryCommit append, but never
// syncs / again: a power loss loses /data with the log and the record.
func TestRetriedOpenLeavesAncestorUnsynced(t *testing.T) {
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
