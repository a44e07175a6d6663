package wal_test

// What the group-commit counters in Stats.Group count, against the log's own
// counters: SyncGroups includes the groups the policy chose to sync,
// Group.Commits counts every wait on the queue (Close's final flush
// included), and GroupSizeHistTotal can be called on Stats().Group.

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
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

func TestStatsGroupCounters(t *testing.T) {
	l, err := wal.Open(faultDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, Policy: policy.SyncEveryN(4)})
	require.NoError(t, err)
	const n = 400 // one at a time: each Append is its own group
	for i := range n {
		_, err := l.Append(payload(i, 64))
		require.NoError(t, err)
	}
	s := l.Stats()
	require.Equal(t, uint64(n), s.Commits)
	require.Equal(t, uint64(n), s.Group.Groups)
	require.Equal(t, uint64(n), s.Group.GroupSizeHistTotal(), "callable on the value Stats returns")
	require.Equal(t, uint64(n), l.Stats().Group.GroupSizeHistTotal())
	// Every 4th group synced by the policy's choice (sync_binlog=4), though
	// no committer asked for Synced.
	require.Equal(t, uint64(n/4), s.Group.SyncGroups, "groups the policy synced")
	require.GreaterOrEqual(t, s.Fsyncs, s.Group.SyncGroups)

	// Group.Commits counts every successful wait on the queue: commits that
	// wait, plus Sync, WaitDurable and Close's final flush.
	require.Equal(t, uint64(n), s.Group.Commits)
	require.NoError(t, l.Sync())
	require.NoError(t, l.WaitDurable(context.Background(), 0))
	s = l.Stats()
	require.Equal(t, uint64(n), s.Commits, "Sync and WaitDurable are not commits")
	require.Equal(t, uint64(n+1), s.Group.Commits, "Sync waited; WaitDurable found the record durable without waiting")
	require.NoError(t, l.Close())
	s = l.Stats()
	require.Equal(t, uint64(n), s.Commits)
	require.Equal(t, uint64(n+2), s.Group.Commits, "Close's final flush is a wait")
}

// TestSegmentWaitsCounted: an append that reaches the end of a segment while
// the next one is still being prepared (started at the eighth-full mark) waits
// for it, and that wait is counted and timed, although the append did not
// start the preparation. Preparations are counted with their bytes: under
// SyncNever the first segment is allocated, the next one zero-filled.
func TestSegmentWaitsCounted(t *testing.T) {
	const segSize = 8 << 10
	var armed atomic.Bool
	release := make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		// The next segment's temporary file (a handle keeps the path it was
		// opened with, so the first segment's writes still say prepare-1).
		if armed.Load() && (op.Kind == faultfs.OpWrite || op.Kind == faultfs.OpAllocate) && strings.Contains(op.Path, "prepare-2") {
			<-release // the next segment's allocation hangs until released
		}
		return nil
	})
	l, err := wal.Open(faultDir, wal.Options{FS: faultfs.Inject(vfs.NewMem(), inj), SegmentSize: segSize, Policy: policy.SyncNever()})
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Stats().Prepare.Prepared, "the first segment")
	armed.Store(true)
	const hold = 30 * time.Millisecond
	time.AfterFunc(hold, func() { close(release) })
	start := time.Now()
	for i := 0; l.Stats().Rolls == 0 && time.Since(start) < 10*time.Second; i++ {
		_, err := l.Append(payload(i, 500))
		require.NoError(t, err)
		if l.AppendedLSN() > segSize {
			break
		}
	}
	require.NoError(t, l.Close())
	s := l.Stats()
	require.Equal(t, uint64(1), s.Prepare.Waits, "the append at the segment's end waited for the running preparation")
	require.GreaterOrEqual(t, s.Prepare.WaitTime, hold/2, "the wait is timed")
	require.Equal(t, s.Prepare.WaitTime, s.Prepare.WaitMax, "one wait: the total is the longest")
	require.Equal(t, uint64(2), s.Prepare.Prepared)
	require.Equal(t, uint64(1), s.Prepare.Allocated, "the first segment is allocated, the next zero-filled where commits write")
	require.Equal(t, uint64(segSize), s.Prepare.PrepareBytes, "zeros only for the zero-filled one")
	require.Positive(t, s.Prepare.PrepareTime)
}

// TestRecoveryBytesReadCountsEveryRead: RecoveryInfo.BytesRead is "the
// number of bytes of segment files Open read", but Open read every
// segment's header once more before checking the segments (a stray short
// file is reported as itself), and those reads, like the second read of a
// last segment that a live writer changed under OpenReadOnly and the read
// of the segment an interrupted TruncateFrom left, were not counted: 32
// bytes per segment went missing from the figure.
//
// Sequence: a clean log of 7 segments of 64 KiB; Open and OpenReadOnly
// through an FS counting the bytes read from segment files, with and
// without VerifyOnOpen, and once more with a TruncateFrom's record left
// (its segment is read before the scan). Expected: BytesRead equals the
// count. Happened: it was 7×32 = 224 bytes short.
func TestRecoveryBytesReadCountsEveryRead(t *testing.T) {
	opts := wal.Options{SegmentSize: 64 << 10, Policy: policy.SyncNever()}
	sizes := make([]int, 600)
	for i := range sizes {
		sizes[i] = 500 + i%300
	}
	w := writeLog(t, opts, sizes)
	require.Greater(t, len(segments(t, w.mem)), 5)
	counted := func(fsys vfs.FS) (vfs.FS, *atomic.Int64) {
		var n atomic.Int64
		return faultfs.Inject(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Kind == faultfs.OpRead && strings.HasSuffix(op.Path, ".wal") {
				n.Add(int64(op.Len))
			}
			return nil
		})), &n
	}
	for _, verify := range []bool{false, true} {
		for _, readOnly := range []bool{true, false} {
			fsys, n := counted(w.mem.ProcessCrash())
			o := opts
			o.FS, o.VerifyOnOpen = fsys, verify
			open := wal.Open
			if readOnly {
				open = wal.OpenReadOnly
			}
			l, err := open(logDir, o)
			require.NoError(t, err)
			require.Equal(t, n.Load(), l.Recovered().BytesRead, "VerifyOnOpen %v, read-only %v", verify, readOnly)
			require.NoError(t, l.Close())
		}
	}

	// A cut a crash kept TruncateFrom from finishing: Open reads the
	// segment holding it before the scan, to zero the dropped frames.
	mem := w.mem.ProcessCrash()
	var armed, cutting atomic.Bool
	l := openLog(t, faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRename && strings.HasPrefix(filepath.Base(op.Path), "truncate-lsn") && armed.Load() {
			cutting.Store(true) // the cut is recorded: fail its first write
		} else if op.Kind == faultfs.OpWrite && cutting.Load() {
			return faultfs.ErrInjected
		}
		return nil
	})), opts)
	armed.Store(true)
	require.ErrorIs(t, l.TruncateFrom(w.lsns[len(w.lsns)-40]), wal.ErrPoisoned)
	img := mem.ProcessCrash()
	l.Close()
	fsys, n := counted(img)
	o := opts
	o.FS = fsys
	l, err := wal.Open(logDir, o)
	require.NoError(t, err)
	require.Equal(t, n.Load(), l.Recovered().BytesRead, "with a cut to finish")
	require.NoError(t, l.Close())
}

// Issue 26: Stats and Options say the policy, sync method and options in
// use; a log reopened with another policy and sync method says the new
// ones (neither is recorded in the log).
func TestStatsPolicyAndOptions(t *testing.T) {
	mem := vfs.NewMem()
	l, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: policy.SyncInterval(50 * time.Millisecond)})
	require.NoError(t, err)
	s := l.Stats()
	require.Equal(t, "sync-interval(50ms)", s.Policy)
	require.Equal(t, vfs.Fdatasync, s.SyncMethod)
	o := l.Options()
	require.Equal(t, int64(64<<10), o.SegmentSize)
	require.Equal(t, wal.DefaultBufferSize, o.BufferSize, "defaults filled in")
	require.Equal(t, "sync-interval(50ms)", o.Policy.String())
	_, err = l.Append([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	l, err = wal.Open(logDir, wal.Options{FS: mem, SegmentSize: 64 << 10, Policy: policy.SyncNever(), SyncMethod: vfs.Fsync})
	require.NoError(t, err)
	defer l.Close()
	s = l.Stats()
	require.Equal(t, "sync-never", s.Policy)
	require.Equal(t, vfs.Fsync, s.SyncMethod)
	_, recs := readAll(t, l, l.Recovered().FirstLSN)
	require.Len(t, recs, 1, "the record written under the other policy is read")
}

// Issue 26: the log measures how long written records wait to become
// durable, and counts and logs a wait over an interval policy's bound (a
// flusher that ran late).
func TestUnsyncedWait(t *testing.T) {
	var logged strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	l, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 64 << 10,
		Policy: policy.SyncInterval(20 * time.Millisecond), Logger: logger})
	require.NoError(t, err)
	defer l.Close()
	for range 5 {
		_, err := l.Append([]byte("x"))
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, l.Sync())
	s := l.Stats()
	require.Positive(t, s.UnsyncedWait.Count)
	require.Positive(t, s.UnsyncedWaitMax)
	require.Zero(t, s.UnsyncedAge, "all synced")

	// A flusher a second late: the wait is over the bound.
	over := s.UnsyncedOverBound
	aged := false
	for i := 0; i < 100 && !aged; i++ {
		_, err := l.Append([]byte("y"))
		require.NoError(t, err)
		aged = wal.AgeUnsynced(l, time.Second)
	}
	require.True(t, aged, "no append stayed unsynced long enough to age it")
	require.GreaterOrEqual(t, l.Stats().UnsyncedAge, time.Second)
	require.NoError(t, l.Sync())
	s = l.Stats()
	require.Equal(t, over+1, s.UnsyncedOverBound)
	require.GreaterOrEqual(t, s.UnsyncedWaitMax, time.Second)
	mu.Lock()
	require.Contains(t, logged.String(), "waited longer than the policy's bound")
	mu.Unlock()
}

// SyncEveryCommit has no interval bound: waits are measured, none is over.
func TestUnsyncedWaitSyncEveryCommit(t *testing.T) {
	l, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer l.Close()
	for range 5 {
		_, err := l.Append([]byte("x"))
		require.NoError(t, err)
	}
	s := l.Stats()
	require.Equal(t, uint64(5), s.UnsyncedWait.Count, "one sample per commit's sync")
	require.Zero(t, s.UnsyncedOverBound)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}

// BenchmarkStats: Stats (a Stats returned by value) against StatsInto (one
// Stats refilled).
func BenchmarkStats(b *testing.B) {
	l, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 64 << 10})
	require.NoError(b, err)
	defer l.Close()
	b.Run("Stats", func(b *testing.B) {
		for b.Loop() {
			s := l.Stats()
			if s.Commits != 0 {
				b.Fatal(s.Commits)
			}
		}
	})
	b.Run("StatsInto", func(b *testing.B) {
		var s wal.Stats
		for b.Loop() {
			l.StatsInto(&s)
			if s.Commits != 0 {
				b.Fatal(s.Commits)
			}
		}
	})
}

// StatsInto fills every field: a Stats refilled equals a fresh one.
func TestStatsInto(t *testing.T) {
	l, err := wal.Open(logDir, wal.Options{FS: vfs.NewMem(), SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer l.Close()
	_, err = l.Append([]byte("x"))
	require.NoError(t, err)
	var s wal.Stats
	s.Commits, s.FsyncDuration.Count, s.CommitWaitSynced.Buckets[3] = 99, 99, 99 // stale
	l.StatsInto(&s)
	want := l.Stats()
	want.UnsyncedAge, s.UnsyncedAge = 0, 0
	require.Equal(t, want, s)
	require.Equal(t, uint64(1), s.Commits)
}
