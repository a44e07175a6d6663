package wal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// inspectAll walks every segment of dir on fsys and returns their infos and
// frames.
func inspectAll(t *testing.T, fsys vfs.FS, dir string) (wal.DirInfo, []wal.SegmentInfo, [][]wal.FrameInfo) {
	t.Helper()
	d, err := wal.InspectDir(fsys, dir)
	require.NoError(t, err)
	var segs []wal.SegmentInfo
	var frames [][]wal.FrameInfo
	for _, first := range d.Segments {
		var fs []wal.FrameInfo
		si, err := wal.InspectSegment(fsys, filepath.Join(dir, segName(first)), func(fi wal.FrameInfo) error {
			fi.Payload = append([]byte(nil), fi.Payload...)
			fs = append(fs, fi)
			return nil
		})
		require.NoError(t, err)
		segs, frames = append(segs, si), append(frames, fs)
	}
	return d, segs, frames
}

func segName(first wal.LSN) string { return fmt.Sprintf("%020d.wal", uint64(first)) }

// TestInspectFixtures walks the format fixtures: every record frame the
// walker reports is a record OpenReadOnly reads, in order, and the sealed
// segments of format 2 end with a link to their successor.
func TestInspectFixtures(t *testing.T) {
	for _, dir := range []string{"testdata/format-v1", "testdata/format-v2"} {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			d, segs, frames := inspectAll(t, vfs.OS(), dir)
			require.NotEmpty(t, d.Segments)
			require.Empty(t, d.Foreign)
			l, err := wal.OpenReadOnly(dir, wal.Options{})
			require.NoError(t, err)
			lsns, recs := readAll(t, l, 0)
			info := l.Recovered()
			require.NoError(t, l.Close())
			var gotLSNs []wal.LSN
			var gotRecs [][]byte
			for i, si := range segs {
				require.NoError(t, si.HeaderErr, si.Name)
				require.Zero(t, si.TrailingBytes, si.Name)
				if si.Closing == wal.FrameLink { // the fixtures predate link frames; a log of today has them
					require.Equal(t, d.Segments[i+1], si.ChainEnd-24, "%s: the link names the next segment", si.Name)
				}
				for _, fi := range frames[i] {
					require.Empty(t, fi.Problem)
					require.False(t, fi.Stray)
					if fi.Kind == wal.FrameRecord {
						require.Equal(t, int(fi.Length), len(fi.Payload))
						gotLSNs, gotRecs = append(gotLSNs, fi.LSN), append(gotRecs, fi.Payload)
					}
				}
			}
			require.Equal(t, lsns, gotLSNs)
			require.Equal(t, recs, gotRecs)
			require.Equal(t, info.Clean, segs[len(segs)-1].Closing == wal.FrameEnd)
		})
	}
}

// TestInspectLinks: the sealed segments of a log of today end with a link
// frame naming their successor; the last, after Close, with an end frame.
func TestInspectLinks(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	lsns := appendUntilSegments(t, l, mem, 3, 1)
	require.NoError(t, l.Close())
	d, segs, frames := inspectAll(t, mem, logDir)
	require.Len(t, segs, 3)
	records := 0
	for i, si := range segs {
		require.NoError(t, si.HeaderErr)
		require.EqualValues(t, wal.SegmentVersion, si.Version)
		require.Equal(t, si.Size, si.CreatedSize)
		records += si.Records
		last := frames[i][len(frames[i])-1]
		if i+1 < len(segs) {
			require.Equal(t, wal.FrameLink, si.Closing, si.Name)
			require.Equal(t, wal.FrameLink, last.Kind)
			require.Equal(t, d.Segments[i+1], last.LSN, "the link names the next segment")
		} else {
			require.Equal(t, wal.FrameEnd, si.Closing)
			require.Equal(t, last.LSN, last.Watermark, "an end frame vouches for all before it")
		}
	}
	require.Equal(t, len(lsns), records)
	require.True(t, d.First.Present)
	require.Zero(t, d.First.LSN)
	require.True(t, d.Lock)
}

// TestInspectDamage: a flipped byte in a synced record of the last segment
// is reported where it is, with the stray frames after it and their
// watermarks; OpenReadOnly calls it damage.
func TestInspectDamage(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 16 << 10, Policy: policy.SyncEveryCommit()}
	l := openLog(t, mem, opts)
	lsns := appendN(t, l, 1, 6, 100)
	require.NoError(t, l.Close())
	name := segments(t, mem)[0]
	b := fileBytes(t, mem, name)
	off := segHeader + int(lsns[2]) + frameHeader + 5
	b[off] ^= 1
	setFile(t, mem, name, b)

	_, segs, frames := inspectAll(t, mem, logDir)
	si := segs[0]
	require.Equal(t, lsns[2], si.ChainEnd)
	require.Equal(t, 2, si.Records)
	require.Positive(t, si.TrailingBytes)
	require.Equal(t, wal.FrameInvalid, si.Closing)
	fs := frames[0]
	require.Len(t, fs, 2+1+3+1, "two records, the damaged one, three stray records and the stray end frame")
	bad := fs[2]
	require.Equal(t, lsns[2], bad.LSN)
	require.Equal(t, wal.FrameInvalid, bad.Kind)
	require.Equal(t, "checksum mismatch", bad.Problem)
	require.Equal(t, uint32(100), bad.Length)
	for i, fi := range fs[3:6] {
		require.True(t, fi.Stray)
		require.Equal(t, lsns[3+i], fi.LSN)
		require.Greater(t, fi.Watermark, lsns[2], "a later watermark vouches for the damaged frame")
	}
	require.Equal(t, wal.FrameEnd, fs[6].Kind)

	_, err := wal.OpenReadOnly(logDir, wal.Options{FS: mem})
	require.ErrorIs(t, err, wal.ErrCorrupt)
}

func TestInspectBadInput(t *testing.T) {
	mem := vfs.NewMem()
	require.NoError(t, mem.MkdirAll(logDir, 0o755))
	put := func(name string, b []byte) {
		f, err := mem.Create(filepath.Join(logDir, name), vfs.Fdatasync)
		require.NoError(t, err)
		_, err = f.WriteAt(b, 0)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	put("notes.txt", []byte("hello"))
	put("00000000000000000000.wal", []byte("short"))
	put("00000000000000004096.wal", make([]byte, 8192)) // no magic
	put("first-lsn", []byte("garbage"))

	d, err := wal.InspectDir(mem, logDir)
	require.NoError(t, err)
	require.Equal(t, []string{"notes.txt"}, d.Foreign)
	require.Equal(t, []wal.LSN{0, 4096}, d.Segments)
	require.True(t, d.First.Present)
	require.ErrorIs(t, d.First.Err, wal.ErrCorrupt)
	require.False(t, d.Truncate.Present)

	calls := 0
	count := func(wal.FrameInfo) error { calls++; return nil }
	si, err := wal.InspectSegment(mem, filepath.Join(logDir, "00000000000000000000.wal"), count)
	require.NoError(t, err)
	require.ErrorIs(t, si.HeaderErr, wal.ErrCorrupt)
	require.Contains(t, si.HeaderErr.Error(), "too short")
	si, err = wal.InspectSegment(mem, filepath.Join(logDir, "00000000000000004096.wal"), count)
	require.NoError(t, err)
	require.Contains(t, si.HeaderErr.Error(), "magic")
	require.Zero(t, calls, "no frames read from a file without a segment header")

	_, err = wal.InspectSegment(mem, filepath.Join(logDir, "notes.txt"), count)
	require.ErrorContains(t, err, "not a segment file name")
	_, err = wal.InspectSegment(mem, filepath.Join(logDir, "00000000000000000008.wal"), count)
	require.Error(t, err, "no such file")
	_, err = wal.InspectDir(mem, "/nowhere")
	require.Error(t, err)

	// fn's error stops the walk and is returned.
	mem2 := vfs.NewMem()
	l := openLog(t, mem2, wal.Options{})
	appendN(t, l, 1, 3, 10)
	require.NoError(t, l.Close())
	stop := errors.New("stop")
	calls = 0
	_, err = wal.InspectSegment(mem2, filepath.Join(logDir, segments(t, mem2)[0]), func(wal.FrameInfo) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls)
}
