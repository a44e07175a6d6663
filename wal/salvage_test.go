package wal_test

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
)

// salvageLog writes n 300-byte records to a log of 64 KiB segments in a
// temporary directory and returns the directory, the records, their LSNs
// and the segment paths.
func salvageLog(t *testing.T, n int) (string, [][]byte, []wal.LSN, []string) {
	t.Helper()
	dir := t.TempDir()
	l, err := wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.NoError(t, err)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range n {
		rec := record(7, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
	}
	require.NoError(t, l.Close())
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	require.NoError(t, err)
	slices.Sort(segs)
	require.Greater(t, len(segs), 3)
	return dir, recs, lsns, segs
}

// salvageAll runs Salvage over dir and returns its report and records.
func salvageAll(t *testing.T, dir string) (wal.SalvageReport, [][]byte, []wal.LSN) {
	t.Helper()
	var got [][]byte
	var at []wal.LSN
	rep, err := wal.Salvage(dir, wal.Options{}, func(lsn wal.LSN, rec []byte) error {
		got, at = append(got, slices.Clone(rec)), append(at, lsn)
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, len(got), rep.Records)
	return rep, got, at
}

// frameOffset returns the file offset of the frame at lsn in the segment
// file path.
func frameOffset(t *testing.T, path string, lsn wal.LSN) int64 {
	t.Helper()
	off := int64(-1)
	_, err := wal.InspectSegment(nil, path, func(fi wal.FrameInfo) error {
		if fi.LSN == lsn && !fi.Stray {
			off = fi.Offset
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, off, int64(0), "no frame at LSN %d in %s", lsn, path)
	return off
}

func TestSalvageCleanLog(t *testing.T) {
	dir, recs, lsns, _ := salvageLog(t, 800)
	rep, got, at := salvageAll(t, dir)
	require.True(t, rep.Clean, "%+v", rep)
	require.NoError(t, rep.Damage)
	require.Equal(t, recs, got)
	require.Equal(t, lsns, at)
	require.Equal(t, lsns[0], rep.Start)
	require.Equal(t, lsns[len(lsns)-1]+(lsns[1]-lsns[0]), rep.Stop)
}

// A byte flipped in a sealed segment: Open with VerifyOnOpen and
// OpenReadOnly with it fail; Salvage reads every record before the damaged
// one and stops at its LSN.
func TestSalvageDamagedSealedSegment(t *testing.T) {
	dir, recs, lsns, segs := salvageLog(t, 800)
	first := salvSegFirst(t, segs[1])
	k := slices.IndexFunc(lsns, func(l wal.LSN) bool { return l > first }) + 5
	flipByte(t, segs[1], frameOffset(t, segs[1], lsns[k])+30)

	_, err := wal.OpenReadOnly(dir, wal.Options{VerifyOnOpen: true})
	require.ErrorIs(t, err, wal.ErrCorrupt)

	rep, got, _ := salvageAll(t, dir)
	require.False(t, rep.Clean)
	require.ErrorIs(t, rep.Damage, wal.ErrCorrupt)
	require.Equal(t, recs[:k], got)
	require.Equal(t, lsns[k], rep.Stop)
	require.Equal(t, filepath.Base(segs[1]), rep.Segment)
	require.Equal(t, frameOffset(t, segs[1], lsns[k]), rep.Offset)
}

// A missing middle segment: Open fails; Salvage reads the segments before
// the gap and names the missing one.
func TestSalvageMissingSegment(t *testing.T) {
	dir, recs, lsns, segs := salvageLog(t, 800)
	miss := salvSegFirst(t, segs[2])
	require.NoError(t, os.Remove(segs[2]))
	_, err := wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.ErrorIs(t, err, wal.ErrCorrupt)

	rep, got, _ := salvageAll(t, dir)
	require.ErrorIs(t, rep.Damage, wal.ErrCorrupt)
	require.Contains(t, rep.Damage.Error(), "missing")
	require.Equal(t, miss, rep.Stop)
	k := slices.Index(lsns, miss)
	require.Positive(t, k)
	require.Equal(t, recs[:k], got)
	require.Equal(t, filepath.Base(segs[2]), rep.Segment)
}

// The last segment shortened by 100 bytes of its zero padding: Open
// refuses it; Salvage reads every record, cleanly, and notes the size.
func TestSalvageShortenedLastSegment(t *testing.T) {
	dir, recs, _, segs := salvageLog(t, 800)
	last := segs[len(segs)-1]
	st, err := os.Stat(last)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(last, st.Size()-100))
	_, err = wal.Open(dir, wal.Options{SegmentSize: 64 << 10})
	require.ErrorIs(t, err, wal.ErrCorrupt)

	rep, got, _ := salvageAll(t, dir)
	require.True(t, rep.Clean, "%+v", rep)
	require.Equal(t, recs, got)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "created with")
}

// salvSegFirst returns the first LSN of the segment file path, from its name.
func salvSegFirst(t *testing.T, path string) wal.LSN {
	t.Helper()
	info, err := wal.InspectSegment(nil, path, func(wal.FrameInfo) error { return nil })
	require.NoError(t, err)
	return info.FirstLSN
}

// flipByte inverts the byte at off in the file path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	b[off] ^= 0xff
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// A segment extended sparsely to 1 GiB is refused from its header and size
// by InspectSegment, without reading (or allocating) the file whole.
func TestInspectSegmentExtendedNotReadWhole(t *testing.T) {
	_, _, _, segs := salvageLog(t, 800)
	require.NoError(t, os.Truncate(segs[0], 1<<30))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	info, err := wal.InspectSegment(nil, segs[0], func(wal.FrameInfo) error { return nil })
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, int64(1<<30), info.Size)
	require.ErrorIs(t, info.HeaderErr, wal.ErrCorrupt)
	require.Contains(t, info.HeaderErr.Error(), "created with 65536")
	require.Positive(t, info.Records)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "InspectSegment allocated the file whole")
	require.False(t, info.Recycled, "a fresh format-%d segment", info.Version)
}
