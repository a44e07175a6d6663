package wal_test

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// checkpointed appends records of 300 bytes to l and, after every roll,
// removes every segment but the last two, until the log has rolled n
// times. It returns the records kept and their LSNs.
func checkpointed(t *testing.T, l *wal.Log, n uint64) (lsns []wal.LSN, recs [][]byte) {
	t.Helper()
	rolls := l.Stats().Rolls
	for i := 0; l.Stats().Rolls < n; i++ {
		rec := record(3, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		lsns, recs = append(lsns, lsn), append(recs, rec)
		if r := l.Stats().Rolls; r != rolls && len(lsns) > 20 {
			rolls = r
			kept, err := l.RemoveBefore(lsns[len(lsns)-20])
			require.NoError(t, err)
			for len(lsns) > 0 && lsns[0] < kept {
				lsns, recs = lsns[1:], recs[1:]
			}
		}
	}
	return lsns, recs
}

// TestRecycledSegments: a log checkpointed by RemoveBefore keeps freed
// segment files (Options.RecycleSegments) and prepares its next segments
// from them, writing no zeros; a recycled segment (format version 3) is
// full of valid frames of earlier LSNs, which no reader, recovery or clean
// Close mistakes for frames of the log: a clean Close reopens clean with
// nothing quarantined, and every record reads back.
func TestRecycledSegments(t *testing.T) {
	const segSize = 8 << 10
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: segSize, Policy: policy.SyncEveryCommit()}
	l := openLog(t, mem, opts)
	lsns, recs := checkpointed(t, l, 12)
	st := l.Stats().Prepare
	require.GreaterOrEqual(t, st.Recycled, uint64(8), "%+v", st)
	require.GreaterOrEqual(t, st.Kept, st.Recycled)
	require.Equal(t, uint64(1), st.Allocated, "only the first segment is allocated where commits sync: %+v", st)
	require.Equal(t, (st.Prepared-st.Recycled-st.Allocated)*segSize, st.PrepareBytes, "no zeros written for a recycled segment")
	gotLSNs, got := readAll(t, l, lsns[0])
	require.Equal(t, lsns, gotLSNs)
	require.Equal(t, recs, got)

	// The last segment is a recycled file: version 3, and after its
	// frames, a frame of an earlier use that is valid at its own LSN.
	segs := segments(t, mem)
	last := fileBytes(t, mem, segs[len(segs)-1])
	require.EqualValues(t, wal.RecycledVersion, binary.LittleEndian.Uint32(last[8:12]), "the last segment reuses a file")
	require.NoError(t, l.Close())
	require.NotEmpty(t, kept(t, mem), "Close leaves the kept files for the next Open")
	last = fileBytes(t, mem, segs[len(segs)-1])
	end := staleFramesAfterEnd(t, last)
	require.Positive(t, end, "the recycled segment holds stale frames after its end frame")

	l = openLog(t, mem, opts)
	info := l.Recovered()
	require.True(t, info.Clean, "a clean Close of a recycled segment reopens clean: %+v", info)
	require.Zero(t, info.TornBytes)
	require.Empty(t, info.Quarantined)
	require.Zero(t, info.RemovedTemp, "the kept files are adopted, not removed")
	gotLSNs, got = readAll(t, l, info.FirstLSN)
	require.Equal(t, lsns, gotLSNs)
	require.Equal(t, recs, got)
	// The next segment reuses a file the last process kept.
	for l.Stats().Rolls == 0 {
		_, err := l.Append(record(3, 0, 300))
		require.NoError(t, err)
	}
	require.Positive(t, l.Stats().Prepare.Recycled, "a file kept before the restart is reused")
	require.NoError(t, l.Close())
	l = openLog(t, mem, opts)
	_, got = readAll(t, l, lsns[0])
	require.NoError(t, l.Close())
	require.Greater(t, len(got), len(recs))
	for i := range recs {
		require.True(t, bytes.Equal(recs[i], got[i]), "record %d after the restart", i)
	}

	// With VerifyOnOpen every sealed recycled segment is checked frame by
	// frame: the stale frames after each link do not matter either.
	vopts := opts
	vopts.VerifyOnOpen = true
	l = openLog(t, mem, vopts)
	require.Positive(t, l.Recovered().VerifiedSegments)
	_, got2 := readAll(t, l, lsns[0])
	require.NoError(t, l.Close())
	require.Equal(t, len(got), len(got2))
	for i := range got {
		require.True(t, bytes.Equal(got[i], got2[i]), "record %d with VerifyOnOpen", i)
	}
}

// kept returns the names of the segment files kept for reuse in the log
// directory.
func kept(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(logDir)
	require.NoError(t, err)
	var out []string
	for _, name := range names {
		if strings.HasPrefix(name, "recycle-") {
			out = append(out, name)
		}
	}
	return out
}

// TestKeptFilesAdoptedOnlyBelowTheStart: Open adopts a kept file only if
// every frame it held lies below the log's start. A log recreated in the
// directory (its segments and first-lsn deleted, the kept files left) starts
// again at LSN 0, where a kept file's stale frames could pass for current
// ones: Open removes them. So it does with RecycleSegments off, and beyond
// the pool's size.
func TestKeptFilesAdoptedOnlyBelowTheStart(t *testing.T) {
	const segSize = 8 << 10
	opts := wal.Options{SegmentSize: segSize, Policy: policy.SyncNever()}
	// setup leaves a closed log with n ≥ 2 kept files.
	setup := func() (*vfs.MemFS, int) {
		mem := vfs.NewMem()
		l := openLog(t, mem, opts)
		checkpointed(t, l, 8)
		appendUntilSegments(t, l, mem, 5, 4)
		_, err := l.RemoveBefore(l.AppendedLSN()) // all but the active segment
		require.NoError(t, err)
		require.NoError(t, l.Close())
		n := len(kept(t, mem))
		require.GreaterOrEqual(t, n, 2)
		return mem, n
	}
	t.Run("recreated log", func(t *testing.T) {
		mem, n := setup()
		names, err := mem.List(logDir)
		require.NoError(t, err)
		for _, name := range names {
			if !strings.HasPrefix(name, "recycle-") {
				require.NoError(t, mem.Remove(logDir+"/"+name))
			}
		}
		l := openLog(t, mem, opts)
		require.Equal(t, n, l.Recovered().RemovedTemp, "stale files of another log are removed")
		require.Empty(t, kept(t, mem))
		checkpointed(t, l, 3)
		require.NoError(t, l.Close())
	})
	t.Run("recycling off", func(t *testing.T) {
		mem, n := setup()
		o := opts
		o.RecycleSegments = -1
		l := openLog(t, mem, o)
		require.Equal(t, n, l.Recovered().RemovedTemp)
		require.Empty(t, kept(t, mem))
		require.NoError(t, l.Close())
	})
	t.Run("smaller pool", func(t *testing.T) {
		mem, n := setup()
		o := opts
		o.RecycleSegments = 1
		l := openLog(t, mem, o)
		require.Equal(t, n-1, l.Recovered().RemovedTemp)
		require.Len(t, kept(t, mem), 1)
		require.NoError(t, l.Close())
	})
	t.Run("another segment size", func(t *testing.T) {
		mem, n := setup()
		o := opts
		o.SegmentSize = 2 * segSize
		l := openLog(t, mem, o)
		require.Equal(t, n, l.Recovered().RemovedTemp)
		require.NoError(t, l.Close())
	})
}

// staleFramesAfterEnd walks the frames of segment b (each frame's length
// from its header, no checksum) to its end frame and returns the offset of
// the first non-zero byte after it, or 0 if only zeros follow.
func staleFramesAfterEnd(t *testing.T, b []byte) int {
	t.Helper()
	off := segHeader
	for {
		n := int(binary.LittleEndian.Uint32(b[off+8:]))
		flags := binary.LittleEndian.Uint32(b[off+12:]) & 3 // bits 2-31: the epoch
		if n == 0 {
			require.EqualValues(t, 1, flags, "an end frame at offset %d", off)
			off += frameHeader
			break
		}
		off += frameSize(n)
	}
	for i := off; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return 0
}

// TestRecycledSegmentCrash: a crash while a recycled segment takes frames
// (process crash, and power loss keeping any subset of blocks) recovers
// exactly the log's records: the stale frames of the file's earlier use are
// neither read nor quarantined, and frames of this use written after a
// hole are cut.
func TestRecycledSegmentCrash(t *testing.T) {
	const segSize = 8 << 10
	for _, pol := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncNever()} {
		t.Run(pol.String(), func(t *testing.T) {
			mem := vfs.NewMem()
			opts := wal.Options{SegmentSize: segSize, Policy: pol}
			l := openLog(t, mem, opts)
			lsns, recs := checkpointed(t, l, 10)
			require.Positive(t, l.Stats().Prepare.Recycled)
			require.NoError(t, l.Sync())
			synced := len(lsns)
			for i := range 8 { // unsynced under SyncNever
				rec := record(4, i, 200)
				lsn, err := l.Append(rec)
				require.NoError(t, err)
				lsns, recs = append(lsns, lsn), append(recs, rec)
			}
			acked := synced
			if pol.Kind() == policy.KindSyncEveryCommit {
				acked = len(lsns)
			}
			images := map[string]*vfs.MemFS{"process crash": mem.ProcessCrash()}
			for seed := range int64(20) {
				m := vfs.KeepRandomSubsetOfBlocks(512, seed)
				images[m.String()] = mem.PowerLoss(m)
			}
			require.NoError(t, l.Close())
			for what, img := range images {
				l := openLog(t, img, opts)
				info := l.Recovered()
				gotLSNs, got := readAll(t, l, lsns[0])
				require.GreaterOrEqual(t, len(got), acked, "%s: lost an acknowledged record", what)
				require.Equal(t, lsns[:len(got)], gotLSNs, what)
				require.Equal(t, recs[:len(got)], got, what)
				for _, q := range info.Quarantined { // only bytes of this use after the end
					require.LessOrEqual(t, q.Bytes, int64(8*frameSize(200)), "%s: quarantined %s", what, q.Name)
				}
				// One record of the size of those lost: if a frame of
				// this use that followed a hole had been left in place,
				// the next one would now start where the new record ends,
				// and a crash would bring it back.
				rec := record(5, 0, 200)
				lsn, err := l.Append(rec)
				require.NoError(t, err, what)
				require.Equal(t, info.EndLSN, lsn, what)
				require.NoError(t, l.Sync(), what)
				_, got2, _ := replay(t, img.ProcessCrash(), opts)
				require.Equal(t, append(got, rec), got2, "%s, then a crash after one more record", what)
				require.NoError(t, l.Close(), what)
				_, got2, info2 := replay(t, img, opts)
				require.True(t, info2.Clean, what)
				require.Equal(t, append(got, rec), got2, what)
			}
		})
	}
}

// TestRecycleSegmentsOff: with RecycleSegments negative, RemoveBefore
// removes every file and every segment is zero-filled.
func TestRecycleSegmentsOff(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 8 << 10, RecycleSegments: -1})
	checkpointed(t, l, 6)
	st := l.Stats().Prepare
	require.Zero(t, st.Recycled)
	require.Zero(t, st.Kept)
	names, err := mem.List(logDir)
	require.NoError(t, err)
	for _, name := range names {
		require.False(t, strings.HasPrefix(name, "recycle-"), name)
	}
	require.NoError(t, l.Close())
}
