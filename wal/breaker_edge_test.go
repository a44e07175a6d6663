package wal_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/wal"
	"github.com/stretchr/testify/require"
)

// FINDING: when the last segment file of a cleanly closed log has been
// replaced by a directory, Open fails (ErrCorrupt, "missing ... continues at
// LSN"), but OpenReadOnly succeeds and reports a log that ends at the link
// frame: every record of the last segment silently disappears, and the
// read-only verdict differs from Open's although OpenReadOnly promises the
// same verdict. (segmentExists opens the path, which succeeds on a
// directory, so the directory is taken for a live writer's new segment.)
func TestBreakerReadOnlyLastSegmentIsDirectory(t *testing.T) {
	dir := t.TempDir()
	opts := wal.Options{SegmentSize: 8 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	for i := range 500 {
		_, err := l.Append(record(0, i, 1+i%300))
		require.NoError(t, err)
	}
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

// FINDING: Open lists only regular files, so a log directory whose files
// are symbolic links (segments and first-lsn moved to another disk and
// linked back, as operators do) looks empty: Open silently creates a new
// log at LSN 0 over the links, and every acknowledged record vanishes with
// no error. A single linked segment is reported ("missing"); linking all
// of them is not. Open should follow the links or refuse the entries
// (ErrForeignFile), never start an empty log.
func TestBreakerOpenAllSegmentsSymlinkedStartsEmptyLog(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	opts := wal.Options{SegmentSize: 8 << 10}
	l, err := wal.Open(dir, opts)
	require.NoError(t, err)
	for i := range 500 {
		_, err := l.Append(record(0, i, 1+i%300))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range ents {
		if e.Name() == "LOCK" {
			continue
		}
		require.NoError(t, os.Rename(filepath.Join(dir, e.Name()), filepath.Join(other, e.Name())))
		require.NoError(t, os.Symlink(filepath.Join(other, e.Name()), filepath.Join(dir, e.Name())))
	}

	l, err = wal.Open(dir, opts)
	if err != nil {
		return // a clear error is acceptable
	}
	defer l.Close()
	_, recs := readAll(t, l, 0)
	require.Len(t, recs, 500, "Open succeeded (RecoveryInfo %+v) but the 500 acknowledged records are gone", l.Recovered())
}
