package wal_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// checkInside asserts that every LSN strictly inside each record at lsns
// (of the given sizes, at the given offsets) is ErrInvalidArgument naming that record.
func checkInside(t *testing.T, l *wal.Log, lsns []wal.LSN, sizes []int, offs []int) {
	t.Helper()
	end := l.AppendedLSN()
	for i, lsn := range lsns {
		fsz := frameSize(sizes[i])
		for _, o := range offs {
			if o >= fsz {
				continue
			}
			at := lsn + wal.LSN(o)
			err := l.TruncateFrom(at)
			require.ErrorIs(t, err, wal.ErrInvalidArgument, "record %d at %d, cut at +%d", i, lsn, o)
			require.NotErrorIs(t, err, wal.ErrCorrupt)
			require.ErrorContains(t, err, fmt.Sprintf("inside the record at LSN %d,", lsn), "cut at %d", at)
		}
	}
	require.Equal(t, end, l.AppendedLSN())
}

// TestTruncateFromInsideRecords: every LSN inside a record (at offsets
// across the frame header and payload) is ErrInvalidArgument naming that
// record, in the first, middle and last segments, in the log buffer, after
// RemoveBefore, after a cut and appends in the new epoch, and after
// TruncateFrom(FirstLSN); the log is never changed.
func TestTruncateFromInsideRecords(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 8 << 10})
	defer l.Close()
	var lsns []wal.LSN
	var sizes []int
	for i := 0; l.Stats().Rolls < 4; i++ {
		sz := 1 + (i*37)%700
		lsn, err := l.Append(record(1, i, sz))
		require.NoError(t, err)
		lsns, sizes = append(lsns, lsn), append(sizes, sz)
	}
	// an unflushed tail in the log buffer
	for i := range 5 {
		sz := 3 + i*11
		lsn, err := l.Append(record(2, i, sz))
		require.NoError(t, err)
		lsns, sizes = append(lsns, lsn), append(sizes, sz)
	}
	offs := []int{1, 2, 7, 8, 16, 23, 24, 25, 32, 100, 600, 719}
	checkInside(t, l, lsns, sizes, offs)

	// After RemoveBefore of the first segment(s).
	_, err := l.RemoveBefore(lsns[len(lsns)/2])
	require.NoError(t, err)
	first := l.FirstLSN()
	var keepL []wal.LSN
	var keepS []int
	for i, lsn := range lsns {
		if lsn >= first {
			keepL, keepS = append(keepL, lsn), append(keepS, sizes[i])
		}
	}
	checkInside(t, l, keepL, keepS, offs)
	require.ErrorIs(t, l.TruncateFrom(first-1), wal.ErrNotFound)

	// After a TruncateFrom in the middle and more appends (new epoch).
	mid := len(keepL) / 2
	require.NoError(t, l.TruncateFrom(keepL[mid]))
	keepL, keepS = keepL[:mid], keepS[:mid]
	for i := 0; l.Stats().Rolls < 7; i++ {
		sz := 1 + (i*53)%500
		lsn, err := l.Append(record(3, i, sz))
		require.NoError(t, err)
		keepL, keepS = append(keepL, lsn), append(keepS, sz)
	}
	checkInside(t, l, keepL, keepS, offs)
	// TruncateFrom(FirstLSN) then inside the first new record.
	require.NoError(t, l.TruncateFrom(l.FirstLSN()))
	lsn, err := l.Append(record(4, 0, 100))
	require.NoError(t, err)
	checkInside(t, l, []wal.LSN{lsn}, []int{100}, offs)
}

// TestTruncateFromInsideRecordsReopened: the same after Close and Open
// (the walk reads sealed segments from the disk).
func TestTruncateFromInsideRecordsReopened(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 8 << 10}
	l := openLog(t, mem, opts)
	var lsns []wal.LSN
	var sizes []int
	for i := 0; l.Stats().Rolls < 3; i++ {
		sz := 1 + (i*37)%700
		lsn, err := l.Append(record(1, i, sz))
		require.NoError(t, err)
		lsns, sizes = append(lsns, lsn), append(sizes, sz)
	}
	require.NoError(t, l.Close())
	l = openLog(t, mem, opts)
	defer l.Close()
	checkInside(t, l, lsns, sizes, []int{1, 8, 24, 31})
}

// TestTruncateFromReadOnly: a read-only Log refuses every cut with
// ErrReadOnly, inside a record or at its start.
func TestTruncateFromReadOnly(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 8 << 10}
	l := openLog(t, mem, opts)
	lsn, err := l.Append(record(1, 0, 100))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	opts.FS = mem
	r, err := wal.OpenReadOnly(logDir, opts)
	require.NoError(t, err)
	defer r.Close()
	require.ErrorIs(t, r.TruncateFrom(lsn+8), wal.ErrReadOnly)
	require.ErrorIs(t, r.TruncateFrom(lsn), wal.ErrReadOnly)
}

// TestTruncateFromInsideRecordsOfOlderFormats: in logs of the older
// fixtures, an LSN inside a record is ErrInvalidArgument too.
func TestTruncateFromInsideRecordsOfOlderFormats(t *testing.T) {
	for _, v := range []string{"format-v1", "format-v2", "format-v3", "format-v4", "format-v6"} {
		t.Run(v, func(t *testing.T) {
			mem := loadFixture(t, filepath.Join("testdata", v))
			l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
			defer l.Close()
			lsns, recs := readAll(t, l, l.FirstLSN())
			require.NotEmpty(t, lsns)
			sizes := make([]int, len(recs))
			for i := range recs {
				sizes[i] = len(recs[i])
			}
			checkInside(t, l, lsns, sizes, []int{1, 8, 24})
		})
	}
}
