package wal_test

// What the group-commit counters in Stats.Group count, against the log's own
// counters: SyncGroups includes the groups the policy chose to sync,
// Group.Commits counts every wait on the queue (Close's final flush
// included), and GroupSizeHistTotal can be called on Stats().Group.

import (
	"context"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
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
