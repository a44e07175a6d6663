package wal_test

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// manySegments writes n records of 1..500 bytes with 4 KiB segments.
func manySegments(t *testing.T, n int) (*vfs.MemFS, *wal.Log, wal.Options, [][]byte, []wal.LSN) {
	t.Helper()
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()}
	l := openLog(t, mem, opts)
	var recs [][]byte
	var lsns []wal.LSN
	for i := range n {
		rec := record(2, i, 1+(i*131)%500)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
	}
	return mem, l, opts, recs, lsns
}

// appendN appends n records record(id, i, size) to l and returns their LSNs.
func appendN(t testing.TB, l *wal.Log, id, n, size int) []wal.LSN {
	t.Helper()
	lsns := make([]wal.LSN, n)
	for i := range n {
		lsn, err := l.Append(record(id, i, size))
		require.NoError(t, err)
		lsns[i] = lsn
	}
	return lsns
}

// appendUntilSegments appends 300-byte records record(id, i, 300) to l
// until the log in mem has n segments, and returns their LSNs.
func appendUntilSegments(t *testing.T, l *wal.Log, mem vfs.FS, n, id int) []wal.LSN {
	t.Helper()
	var lsns []wal.LSN
	for i := 0; len(segments(t, mem)) < n; i++ {
		lsn, err := l.Append(record(id, i, 300))
		require.NoError(t, err)
		lsns = append(lsns, lsn)
	}
	return lsns
}

func TestReaderAcrossSegments(t *testing.T) {
	mem, l, opts, recs, lsns := manySegments(t, 400)
	defer l.Close()
	require.Greater(t, len(segments(t, mem)), 20)
	got, gotRecs := readAll(t, l, 0)
	require.Equal(t, lsns, got)
	require.Equal(t, recs, gotRecs)
	require.NoError(t, l.Close())
	got, gotRecs, _ = replay(t, mem, opts)
	require.Equal(t, lsns, got)
	require.Equal(t, recs, gotRecs)
}

// TestReaderFromEveryLSN starts a Reader at every record's LSN and just after
// it (inside the frame): it returns exactly the records at or above.
func TestReaderFromEveryLSN(t *testing.T) {
	_, l, _, recs, lsns := manySegments(t, 120)
	defer l.Close()
	for i, lsn := range lsns {
		for _, from := range []wal.LSN{lsn, lsn + 1, lsn + 8} {
			want := i
			if from > lsn {
				want = i + 1
			}
			got, gotRecs := readAll(t, l, from)
			require.Len(t, got, len(lsns)-want, "from %d", from)
			if want < len(lsns) {
				require.Equal(t, lsns[want:], got, "from %d", from)
				require.Equal(t, recs[want:], gotRecs, "from %d", from)
			}
		}
	}
	r, err := l.NewReader(l.AppendedLSN())
	require.NoError(t, err)
	_, _, err = r.Next()
	require.Equal(t, io.EOF, err, "a Reader at the end sees nothing yet")
	require.NoError(t, r.Close())
	_, err = l.NewReader(l.AppendedLSN() + 1)
	require.ErrorIs(t, err, wal.ErrNotFound)
}

// TestReaderFollowsTail: a Reader at EOF returns records appended later.
func TestReaderFollowsTail(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncNever()})
	defer l.Close()
	r, err := l.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	for i := range 100 { // crosses several segments
		_, _, err := r.Next()
		require.Equal(t, io.EOF, err)
		rec := record(3, i, 200)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		got, gotRec, err := r.Next()
		require.NoError(t, err, "record %d", i)
		require.Equal(t, lsn, got)
		require.Equal(t, rec, gotRec)
	}
}

func TestRemoveBefore(t *testing.T) {
	mem, l, opts, recs, lsns := manySegments(t, 300)
	segs := segments(t, mem)
	end := l.AppendedLSN()

	kept, err := l.RemoveBefore(0)
	require.NoError(t, err)
	require.Zero(t, kept, "nothing below LSN 0")

	mid := lsns[150]
	kept, err = l.RemoveBefore(mid)
	require.NoError(t, err)
	require.LessOrEqual(t, kept, mid)
	require.Greater(t, kept, wal.LSN(0))
	left := segments(t, mem)
	require.Less(t, len(left), len(segs))
	assert.Equal(t, segFirst(t, left[0]), kept, "the first kept segment starts at kept")
	assert.Equal(t, segs[len(segs)-len(left):], left, "a contiguous suffix is kept")

	// The kept segment holds mid: its frames run from kept.
	k := 0
	for lsns[k] < kept {
		k++
	}
	require.Equal(t, kept, lsns[k], "kept is a record's LSN")

	_, err = l.NewReader(kept - 1)
	require.ErrorIs(t, err, wal.ErrNotFound)
	_, err = l.NewReader(0)
	require.ErrorIs(t, err, wal.ErrNotFound)
	got, gotRecs := readAll(t, l, kept)
	require.Equal(t, lsns[k:], got)
	require.Equal(t, recs[k:], gotRecs)

	// Removing again below kept changes nothing; the active segment stays.
	again, err := l.RemoveBefore(kept)
	require.NoError(t, err)
	require.Equal(t, kept, again)
	last, err := l.RemoveBefore(end + 1000)
	require.NoError(t, err)
	require.Len(t, segments(t, mem), 1, "only the active segment is left")
	require.NoError(t, l.Close())

	// Reopen after removal: recovery starts at the first kept segment and
	// continues at the right LSN. A power loss keeps the removals.
	for _, img := range []vfs.FS{mem, mem.PowerLoss(vfs.DropAll())} {
		l = openLog(t, img, opts)
		info := l.Recovered()
		require.Equal(t, last, info.FirstLSN)
		require.Equal(t, end, info.EndLSN)
		lsn, err := l.Append([]byte("after"))
		require.NoError(t, err)
		require.Equal(t, end, lsn)
		_, err = l.NewReader(last - 1)
		require.ErrorIs(t, err, wal.ErrNotFound)
		got, _ := readAll(t, l, last)
		require.Equal(t, end, got[len(got)-1])
		require.NoError(t, l.Close())
	}
}

// TestReaderOnRemovedSegment: a Reader inside a segment RemoveBefore drops
// reports fs.ErrNotExist when it moves on, not garbage.
func TestReaderOnRemovedSegment(t *testing.T) {
	_, l, _, _, lsns := manySegments(t, 200)
	defer l.Close()
	r, err := l.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	_, _, err = r.Next()
	require.NoError(t, err)
	_, err = l.RemoveBefore(lsns[150])
	require.NoError(t, err)
	for {
		_, _, err = r.Next()
		if err != nil {
			break
		}
	}
	require.ErrorIs(t, err, fs.ErrNotExist)
}

// TestFrameEndsAtSegmentEnd fills a segment exactly (up to the room kept for
// the link frame): the next frame goes to a new segment at the same LSN, the
// finished segment ends with a link frame, and both survive reopen and power
// loss.
func TestFrameEndsAtSegmentEnd(t *testing.T) {
	const segSize = 4 << 10
	capacity := segSize - segHeader - endFrame
	for _, split := range [][]int{
		{capacity - frameHeader},                            // one record fills it
		{1000 - frameHeader, capacity - 1000 - frameHeader}, // two records fill it
		{capacity - frameHeader - 8},                        // 8 bytes left: a 1-byte record does not fit
	} {
		mem := vfs.NewMem()
		opts := wal.Options{SegmentSize: segSize}
		l := openLog(t, mem, opts)
		var recs [][]byte
		for i, n := range split {
			rec := record(4, i, n)
			_, err := l.Append(rec)
			require.NoError(t, err)
			recs = append(recs, rec)
		}
		full := l.AppendedLSN()
		require.Len(t, segments(t, mem), 1)
		rec := []byte("x")
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		require.Equal(t, full, lsn)
		recs = append(recs, rec)
		segs := segments(t, mem)
		require.Len(t, segs, 2, "split %v", split)
		require.Equal(t, full, segFirst(t, segs[1]), "the new segment is named by the next frame's LSN")
		require.NoError(t, l.Close()) // waits for the roll's sealing, which writes the link
		if full == wal.LSN(capacity) {
			b := fileBytes(t, mem, segs[0])
			at := segSize - endFrame
			require.NotZero(t, b[at-1]|b[at-2]|b[at-3], "the record frame runs to the room kept for the link frame")
			require.EqualValues(t, 2, b[at+12]&3, "a link frame (flags 2) fills the last bytes")
		}
		for _, img := range []vfs.FS{mem, mem.PowerLoss(vfs.DropAll())} {
			_, got, info := replay(t, img, opts)
			require.Equal(t, recs, got)
			require.Zero(t, info.TornBytes)
		}
	}

	// A full last segment and nothing after it: reopen rolls on the next
	// append.
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: segSize}
	l := openLog(t, mem, opts)
	_, err := l.Append(record(5, 0, capacity-frameHeader))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l = openLog(t, mem, opts)
	require.Equal(t, wal.LSN(capacity), l.AppendedLSN())
	lsn, err := l.Append([]byte("y"))
	require.NoError(t, err)
	require.Equal(t, wal.LSN(capacity), lsn)
	require.NoError(t, l.Close())
	_, got, _ := replay(t, mem, opts)
	require.Len(t, got, 2)
	require.Len(t, segments(t, mem), 2)
}

// TestRemoveBeforeDoesNotStallCommitsOrReaders: while RemoveBefore is inside
// a slow removal (its file removals and directory syncs can take
// milliseconds each on a real disk), appends that roll to a new segment and
// readers of the kept segments go on; they used to wait for the whole
// removal on the segment-list lock.
func TestRemoveBeforeDoesNotStallCommitsOrReaders(t *testing.T) {
	var armed atomic.Bool
	inRemove, release := make(chan struct{}), make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRemove && armed.CompareAndSwap(true, false) {
			close(inRemove)
			<-release
		}
		return nil
	})
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: 8 << 10})
	appendUntilSegments(t, l, mem, 5, 7)
	keep := segFirst(t, segments(t, mem)[3])
	armed.Store(true)
	removed := make(chan error, 1)
	go func() {
		_, err := l.RemoveBefore(keep)
		removed <- err
	}()
	<-inRemove

	done := make(chan error, 1)
	go func() {
		rolls := l.Stats().Rolls
		for i := 0; l.Stats().Rolls == rolls; i++ {
			if _, err := l.Append(record(8, i, 300)); err != nil {
				done <- err
				return
			}
		}
		r, err := l.NewReader(keep)
		if err != nil {
			done <- err
			return
		}
		defer r.Close()
		lsn, _, err := r.Next()
		if err == nil && lsn != keep {
			err = fmt.Errorf("reader started at %d, want %d", lsn, keep)
		}
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("a roll or a reader waited for RemoveBefore's removals")
	}
	close(release)
	require.NoError(t, <-removed)
	require.Equal(t, keep, segFirst(t, segments(t, mem)[0]))
	require.NoError(t, l.Close())
}

// TestRemoveBeforeRetriesAFailedRemoval: a segment whose removal failed is
// out of the log (the recorded start moved past it) and is removed by the
// next RemoveBefore.
func TestRemoveBeforeRetriesAFailedRemoval(t *testing.T) {
	for _, c := range []struct {
		name    string
		op      faultfs.OpKind
		recycle int
	}{{"remove", faultfs.OpRemove, -1}, {"rename for reuse", faultfs.OpRename, 2}} {
		t.Run(c.name, func(t *testing.T) {
			removeBeforeRetries(t, c.op, c.recycle)
		})
	}
}

func removeBeforeRetries(t *testing.T, kind faultfs.OpKind, recycle int) {
	var fail atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == kind && strings.HasSuffix(op.Path, ".wal") && fail.CompareAndSwap(true, false) {
			return faultfs.ErrInjected
		}
		return nil
	})
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: 8 << 10, RecycleSegments: recycle})
	appendUntilSegments(t, l, mem, 4, 9)
	segs := segments(t, mem)
	keep := segFirst(t, segs[2])
	fail.Store(true)
	first, err := l.RemoveBefore(keep)
	require.ErrorIs(t, err, faultfs.ErrInjected)
	require.Equal(t, keep, first, "the start moved although a file stayed")
	require.Contains(t, segments(t, mem), segs[0])
	first, err = l.RemoveBefore(keep)
	require.NoError(t, err)
	require.Equal(t, keep, first)
	require.Equal(t, segs[2:], segments(t, mem), "the leftover was removed")
	require.NoError(t, l.Close())
	_, got, info := replay(t, mem, wal.Options{SegmentSize: 8 << 10})
	require.Equal(t, keep, info.FirstLSN)
	require.NotEmpty(t, got)
}
