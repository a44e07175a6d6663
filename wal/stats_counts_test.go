package wal_test

// What the group-commit counters in Stats.Group count, against the log's own
// counters: SyncGroups includes the groups the policy chose to sync,
// Group.Commits counts every wait on the queue (Close's final flush
// included), and GroupSizeHistTotal can be called on Stats().Group.

import (
	"context"
	"strings"
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
	require.Equal(t, uint64(1), s.SegmentCreateStalls, "the append at the segment's end waited for the running preparation")
	require.Equal(t, s.SegmentCreateStalls, s.Prepare.Waits)
	require.GreaterOrEqual(t, s.Prepare.WaitTime, hold/2, "the wait is timed")
	require.Equal(t, s.Prepare.WaitTime, s.Prepare.WaitMax, "one wait: the total is the longest")
	require.Equal(t, uint64(2), s.Prepare.Prepared)
	require.Equal(t, uint64(1), s.Prepare.Allocated, "the first segment is allocated, the next zero-filled where commits write")
	require.Equal(t, uint64(segSize), s.Prepare.PrepareBytes, "zeros only for the zero-filled one")
	require.Positive(t, s.Prepare.PrepareTime)
}
