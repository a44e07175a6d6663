package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestTruncateFrom cuts a log spanning several segments in the last
// segment, in an earlier one, at a segment's first LSN, at the first LSN
// (empty log) and at the appended LSN (nothing dropped), under each sync
// method, and checks what is read, where appends continue, and that a
// reopen sees the same.
func TestTruncateFrom(t *testing.T) {
	for _, m := range vfs.SyncMethods() {
		for _, where := range []string{"last-segment", "earlier-segment", "segment-start", "first", "end"} {
			t.Run(fmt.Sprintf("method=%s/cut=%s", m, where), func(t *testing.T) {
				mem := vfs.NewMem()
				mem.SetDirectIOAlignment(512)
				opts := wal.Options{Policy: policy.SyncEveryN(3), SegmentSize: 8 << 10, SyncMethod: m}
				l := openLog(t, mem, opts)
				h := &history{}
				for i := range 120 {
					rec := record(1, i, 1+i*61%500)
					lsn, err := l.Append(rec)
					require.NoError(t, err)
					h.add(lsn, rec)
				}
				require.GreaterOrEqual(t, countSegments(t, mem), 4)
				var k int
				switch where {
				case "last-segment":
					k = len(h.lsns) - 3
				case "earlier-segment":
					k = 20
				case "segment-start":
					// the first record of the third segment
					names, err := mem.List(logDir)
					require.NoError(t, err)
					third := segFirst(t, names[2])
					k = slices.Index(h.lsns, third)
					require.Positive(t, k)
				case "first":
					k = 0
				case "end":
					k = len(h.lsns)
				}
				cut := l.AppendedLSN()
				if k < len(h.lsns) {
					cut = h.lsns[k]
				}
				r, err := l.NewReader(0) // before the cut
				require.NoError(t, err)
				defer r.Close()
				var past *wal.Reader
				if k+1 < len(h.lsns) {
					past, err = l.NewReader(h.lsns[k+1])
					require.NoError(t, err)
					defer past.Close()
				}

				require.NoError(t, l.TruncateFrom(cut))
				require.Equal(t, cut, l.AppendedLSN())
				require.Equal(t, cut, l.SyncedLSN())
				lsns, recs := readAll(t, l, 0)
				require.Equal(t, nilIfEmpty(h.lsns[:k]), lsns)
				require.Equal(t, nilIfEmpty(h.recs[:k]), recs)
				if k < len(h.lsns) {
					_, err = l.ReadRecord(cut, nil)
					require.ErrorIs(t, err, wal.ErrNotFound)
				}
				if past != nil {
					_, _, err = past.Next()
					require.ErrorIs(t, err, wal.ErrTruncated)
				}
				// Appends continue at the cut, and old records never come back.
				h.recs, h.lsns = h.recs[:k], h.lsns[:k]
				for i := range 40 {
					rec := record(2, i, 1+i*97%700)
					lsn, err := l.Append(rec)
					require.NoError(t, err)
					if i == 0 {
						require.Equal(t, cut, lsn)
					}
					h.add(lsn, rec)
				}
				for i, lsn := range h.lsns {
					got, err := l.ReadRecord(lsn, nil)
					require.NoError(t, err)
					require.Equal(t, h.recs[i], got)
				}
				var got [][]byte
				for {
					_, rec, err := r.Next()
					if err != nil {
						require.Equal(t, io.EOF, err)
						break
					}
					got = append(got, bytes.Clone(rec))
				}
				require.Equal(t, len(h.recs), len(got), "a reader before the cut reads the new records")
				for i := range got {
					require.True(t, bytes.Equal(h.recs[i], got[i]), "record %d read by the reader before the cut", i)
				}
				require.NoError(t, l.Close())
				l = openLog(t, mem, opts)
				defer l.Close()
				lsns, recs = readAll(t, l, 0)
				require.Equal(t, h.lsns, lsns)
				require.Equal(t, h.recs, recs)
				require.True(t, l.Recovered().Clean)
			})
		}
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// TestTruncateFromErrors: a cut below FirstLSN or beyond the end is
// ErrNotFound, one inside a record ErrInvalidArgument naming the record,
// and neither changes the log; after Close, ErrClosed. A cut at a record
// whose frame is damaged stays a *CorruptionError
// (TestTruncateFromDamagedFrame).
func TestTruncateFromErrors(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{SegmentSize: 8 << 10})
	h := &history{}
	for i := range 60 {
		rec := record(1, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		h.add(lsn, rec)
	}
	first, err := l.RemoveBefore(h.lsns[30])
	require.NoError(t, err)
	end := l.AppendedLSN()
	require.ErrorIs(t, l.TruncateFrom(first-8), wal.ErrNotFound)
	require.ErrorIs(t, l.TruncateFrom(end+8), wal.ErrNotFound)
	err = l.TruncateFrom(h.lsns[40] + 8)
	require.ErrorIs(t, err, wal.ErrInvalidArgument)
	require.NotErrorIs(t, err, wal.ErrCorrupt, "a caller's LSN inside a record is not damage")
	require.ErrorContains(t, err, fmt.Sprintf("inside the record at LSN %d", h.lsns[40]))
	require.Equal(t, end, l.AppendedLSN())
	_, err = l.Append(record(1, 60, 10))
	require.NoError(t, err, "the log is not poisoned")
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.TruncateFrom(first), wal.ErrClosed)
}

// TestTruncateFromDamagedFrame: a cut at a record whose frame is damaged,
// or inside a record past that damage, is a *CorruptionError, not
// ErrInvalidArgument: TruncateFrom tells a caller's mistake from damage only
// when the frames before the LSN verify. A cut inside a record before the
// damage is still the caller's mistake. The log is not changed.
func TestTruncateFromDamagedFrame(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 8 << 10}
	l := openLog(t, mem, opts)
	h := &history{}
	for i := 0; l.Stats().Rolls < 2; i++ {
		rec := record(1, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		h.add(lsn, rec)
	}
	require.NoError(t, l.Close())
	segs := segments(t, mem)
	const k = 5 // the damaged record, in the first segment (Open reads only the last)
	require.Less(t, h.lsns[k+2], segFirst(t, segs[1]))
	b := fileBytes(t, mem, segs[0])
	b[segHeader+int(h.lsns[k]-segFirst(t, segs[0]))+frameHeader] ^= 0xff
	setFile(t, mem, segs[0], b)

	l = openLog(t, mem, opts)
	defer l.Close()
	end := l.AppendedLSN()
	var ce *wal.CorruptionError
	err := l.TruncateFrom(h.lsns[k])
	require.ErrorAs(t, err, &ce)
	require.NotErrorIs(t, err, wal.ErrInvalidArgument)
	err = l.TruncateFrom(h.lsns[k+2] + 8)
	require.ErrorAs(t, err, &ce, "past the damage the frames cannot tell where records start")
	require.NotErrorIs(t, err, wal.ErrInvalidArgument)
	require.ErrorIs(t, l.TruncateFrom(h.lsns[k-2]+8), wal.ErrInvalidArgument)
	require.Equal(t, end, l.AppendedLSN())
}

// TestTruncateFromConcurrentAppends: appenders and readers run while the
// log is cut again and again; every cut leaves a log whose records are
// those appended before it up to the cut, and the queue never hangs.
func TestTruncateFromConcurrentAppends(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncEveryCommit(), SegmentSize: 8 << 10})
	defer l.Close()
	var wg sync.WaitGroup
	var stop atomic.Bool
	for w := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				if _, err := l.Append(record(w, i, 1+i%300)); !assertNoErr(t, err) {
					return
				}
			}
		})
	}
	// Readers by LSN and a tailing Reader run beside the cuts: a read gives
	// an intact record (one appended at some time at that LSN) or
	// ErrNotFound, never damage.
	var lastEnd atomic.Uint64
	for r := range 2 {
		wg.Go(func() {
			var buf []byte
			for i := 0; !stop.Load(); i++ {
				end := wal.LSN(lastEnd.Load())
				if end == 0 {
					time.Sleep(time.Millisecond)
					continue
				}
				lsn := wal.LSN((uint64(i*7919+r*104729) % uint64(end)) &^ 7)
				rec, err := l.ReadRecord(lsn, buf)
				if err != nil {
					if !errors.Is(err, wal.ErrNotFound) && !errors.Is(err, wal.ErrCorrupt) {
						t.Errorf("ReadRecord(%d): %v", lsn, err)
						return
					}
					if errors.Is(err, wal.ErrCorrupt) && wal.LSN(lastEnd.Load()) > lsn+8 {
						continue // lsn is not where a record starts: expected for a random LSN
					}
					continue
				}
				if len(rec) > 16 && !bytes.Equal(rec, record(int(binary.LittleEndian.Uint64(rec[0:8])&^(0x80)), int(binary.LittleEndian.Uint64(rec[8:16])), len(rec))) {
					t.Errorf("ReadRecord(%d): a damaged record of %d bytes", lsn, len(rec))
					return
				}
				buf = rec
			}
		})
	}
	tail, err := l.NewReader(0)
	require.NoError(t, err)
	wg.Go(func() {
		defer tail.Close()
		for !stop.Load() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			_, _, err := tail.Follow(ctx)
			cancel()
			if errors.Is(err, wal.ErrTruncated) {
				tail.Close()
				if tail, err = l.NewReader(l.FirstLSN()); !assertNoErr(t, err) {
					return
				}
				continue
			}
			if err != nil && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("tailing reader: %v", err)
				return
			}
		}
	})
	cuts := 0
	for i := 0; cuts < 30; i++ {
		lastEnd.Store(uint64(l.AppendedLSN()))
		lsns, recs := readAll(t, l, l.FirstLSN())
		if len(lsns) < 20 {
			time.Sleep(time.Millisecond)
			continue
		}
		k := len(lsns) * (i % 3) / 3
		require.NoError(t, l.TruncateFrom(lsns[k]))
		cuts++
		got, gotRecs := readAll(t, l, l.FirstLSN())
		require.GreaterOrEqual(t, len(got), k)
		require.Equal(t, nilIfEmpty(lsns[:k]), nilIfEmpty(got[:k]), "the records before the cut stay")
		require.Equal(t, nilIfEmpty(recs[:k]), nilIfEmpty(gotRecs[:k]))
	}
	stop.Store(true)
	wg.Wait()
	require.NoError(t, l.Sync())
}

// truncState is what the truncation workload has done, as the crash images
// must reflect it: base holds the records the log holds if every operation
// so far completed (the LSNs and bytes, a record added before its Append
// is called, since its bytes may reach the disk before Append returns);
// base[:acked] must survive any crash; while a TruncateFrom runs, pending
// is the index it cuts at, and an image may also hold exactly base[:pending].
type truncState struct {
	mu      sync.Mutex
	lsns    []wal.LSN
	recs    [][]byte
	acked   int
	pending int // -1: none
	cuts    int // completed TruncateFrom calls
}

func (s *truncState) snapshot() *truncState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &truncState{lsns: slices.Clone(s.lsns), recs: slices.Clone(s.recs),
		acked: s.acked, pending: s.pending, cuts: s.cuts}
}

// truncWorkload appends, syncs, cuts the log in an earlier segment, appends,
// cuts it in the last segment, appends and closes. It returns false at the
// first error (an injected fault).
func truncWorkload(t *testing.T, fsys vfs.FS, opts wal.Options, s *truncState) bool {
	opts.FS = fsys
	l, err := wal.Open(logDir, opts)
	if err != nil {
		return false
	}
	defer l.Close()
	appendN := func(stream, n int) bool {
		for i := range n {
			rec := record(stream, i, 40+i*89%400)
			s.mu.Lock()
			s.lsns, s.recs = append(s.lsns, l.AppendedLSN()), append(s.recs, rec)
			s.mu.Unlock()
			if _, err := l.Append(rec); err != nil {
				return false
			}
			if i%4 == 3 || i == n-1 {
				if l.Sync() != nil {
					return false
				}
				s.mu.Lock()
				s.acked = len(s.recs)
				s.mu.Unlock()
			}
		}
		return true
	}
	cut := func(k int) bool {
		s.mu.Lock()
		s.pending = k
		lsn := s.lsns[k]
		s.mu.Unlock()
		if l.TruncateFrom(lsn) != nil {
			return false
		}
		s.mu.Lock()
		s.lsns, s.recs = s.lsns[:k], s.recs[:k]
		s.acked, s.pending = min(s.acked, k), -1
		s.cuts++
		s.mu.Unlock()
		return true
	}
	return appendN(1, 30) && cut(8) && appendN(2, 20) && cut(22) && appendN(3, 6) && l.Close() == nil
}

// checkTruncImage opens a crash image and checks it against s: Open
// succeeds; the records are a prefix of s.base holding every acknowledged
// one (or, while a cut was in progress, exactly the records before it);
// no dropped record is back; the log appends at its end and reopens.
func checkTruncImage(t *testing.T, img vfs.FS, opts wal.Options, s *truncState, what string) {
	t.Helper()
	opts.FS = img
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err, "%s: Open", what)
	lsns, recs := readAll(t, l, l.FirstLSN())
	acked := s.acked
	if s.pending >= 0 && len(recs) == s.pending {
		acked = s.pending // a cut in progress: exactly the records before it
	}
	requireRecoveredRun(t, what, lsns, recs, s.lsns, s.recs, 0, acked)
	end := l.AppendedLSN()
	lsn, err := l.Append(record(9, 0, 100))
	require.NoError(t, err, "%s: append after recovery", what)
	require.Equal(t, end, lsn, "%s", what)
	require.NoError(t, l.Close(), what)
	l, err = wal.Open(logDir, opts)
	require.NoError(t, err, "%s: second Open", what)
	_, recs2 := readAll(t, l, l.FirstLSN())
	require.Len(t, recs2, len(recs)+1, "%s: second Open", what)
	require.NoError(t, l.Close(), what)
}

// TestTruncateCrashImagesAtEveryOp crashes the truncation workload, under
// buffered, O_DSYNC and O_DIRECT writes, before
// each of its filesystem operations (without failing any) in every
// PowerLoss mode and as a process crash: a crash inside every step of both
// cuts (recording the cut, zeroing, removing segments, removing the
// record) and of the appends after them. Each image must hold a prefix of
// the log as it stood, with every acknowledged record, or exactly the log
// cut by a TruncateFrom in progress, and never a dropped record.
func TestTruncateCrashImagesAtEveryOp(t *testing.T) {
	for _, tc := range []struct {
		pol policy.Policy
		m   vfs.SyncMethod
	}{
		{policy.SyncEveryCommit(), vfs.Fdatasync},
		{policy.SyncNever(), vfs.Fdatasync},
		{policy.SyncEveryCommit(), vfs.ODsync},
		{policy.SyncEveryCommit(), vfs.ODirect},
		{policy.SyncNever(), vfs.ODirectODsync},
	} {
		pol := tc.pol
		t.Run(fmt.Sprintf("policy=%s/method=%s", pol, tc.m), func(t *testing.T) {
			opts := wal.Options{SegmentSize: 4 << 10, Policy: pol, SyncMethod: tc.m}
			type snap struct {
				img  vfs.FS
				s    *truncState
				what string
			}
			mem := vfs.NewMem()
			mem.SetDirectIOAlignment(512)
			s := &truncState{pending: -1}
			var mu sync.Mutex
			var snaps []snap
			var removes atomic.Int64
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				st := s.snapshot()
				n := op.Index
				if st.cuts == 0 && st.pending < 0 && op.Kind != faultfs.OpRemove {
					return nil // before the first cut: TestCrashImagesAtEveryOp covers it
				}
				if op.Kind == faultfs.OpRemove {
					removes.Add(1)
				}
				modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(n),
					vfs.KeepRandomSubsetOfBlocks(512, n)}
				var add []snap
				for _, m := range modes {
					add = append(add, snap{mem.PowerLoss(m), st, fmt.Sprintf("before op %d (%s %s), %s", n, op.Kind, op.Path, m)})
				}
				add = append(add, snap{mem.ProcessCrash(), st, fmt.Sprintf("before op %d (%s %s), process crash", n, op.Kind, op.Path)})
				// The segment preparer runs beside the workload: the images
				// may hold records appended since st was taken. Their bytes
				// are in the base taken now; a cut since makes the images
				// ambiguous, and they are dropped.
				st2 := s.snapshot()
				if st2.cuts != st.cuts || st2.pending != st.pending {
					return nil
				}
				st.lsns, st.recs = st2.lsns, st2.recs
				mu.Lock()
				snaps = append(snaps, add...)
				mu.Unlock()
				return nil
			})
			require.True(t, truncWorkload(t, faultfs.Inject(mem, inj), opts, s))
			require.Equal(t, 2, s.cuts)
			require.Positive(t, removes.Load(), "the cuts remove segments")
			for _, sn := range snaps {
				// A record enters the base before its Append is called, so
				// the base of each snapshot holds every frame its image may.
				checkTruncImage(t, sn.img, opts, sn.s, sn.what)
			}
			t.Logf("%d crash images", len(snaps))
		})
	}
}

// TestTruncateFromEveryOp fails the n-th filesystem operation of the
// truncation workload for every n, then checks the power-loss image that
// keeps only synced state: a failed cut leaves the old log or the cut one,
// a completed one stays completed.
func TestTruncateFromEveryOp(t *testing.T) {
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncEveryCommit()}
	var n int64
	for n = 1; ; n++ {
		mem := vfs.NewMem()
		inj, fired := failNth(n)
		s := &truncState{pending: -1}
		done := truncWorkload(t, faultfs.Inject(mem, inj), opts, s)
		what := fmt.Sprintf("op %d failed", n)
		for _, img := range []vfs.FS{mem.PowerLoss(vfs.DropAll()), mem.ProcessCrash()} {
			checkTruncImage(t, img, opts, s, what)
		}
		if done && !fired.Load() {
			break
		}
		require.Less(t, n, int64(5000), "the workload never finishes")
		if !done && errors.Is(nil, faultfs.ErrInjected) {
			t.Fatal("unreachable")
		}
	}
	t.Logf("failed each of %d operations", n-1)
}
