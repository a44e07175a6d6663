package wal_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestIncrementalSyncPostponedWriteForced: under Redis everysec
// (SyncIntervalPostponed) a sync started by IncrementalSync postpones the
// writes of the commits made while it runs, like an interval's sync; the
// flusher must still force such a write once it has been postponed
// maxPostpone, without waiting for the sync (aof_delayed_fsync), and so
// must not run that sync itself. Fake clock: the sync takes 3.5 s.
func TestIncrementalSyncPostponedWriteForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const syncTime = 3500 * time.Millisecond
		mem := vfs.NewMem()
		var slow atomic.Bool
		started := make(chan struct{})
		var once sync.Once
		fsys := vfs.Inject(mem, vfs.InjectorFunc(func(op vfs.Op) error {
			if op.Kind == vfs.OpSync && slow.Load() {
				once.Do(func() { close(started) })
				time.Sleep(syncTime)
			}
			return nil
		}))
		pol := policy.SyncIntervalPostponed(time.Hour, 2*time.Second) // no interval sync
		opts := wal.Options{FS: fsys, SegmentSize: 1 << 20, Policy: pol, IncrementalSync: 4 << 10}
		l, err := wal.Open(faultDir, opts)
		require.NoError(t, err)
		slow.Store(true)

		r0, r1 := payload(0, 5000), payload(1, 100)
		_, err = l.Append(r0) // written at once: 5000 bytes unsynced start an incremental sync
		require.NoError(t, err)
		<-started
		lsn1, err := l.Append(r1)
		require.NoError(t, err)
		require.LessOrEqual(t, l.WrittenLSN(), lsn1, "R1 is postponed while the sync runs")

		time.Sleep(2200 * time.Millisecond) // no more commits
		require.Greater(t, l.WrittenLSN(), lsn1, "R1 written once postponed 2 s, before the 3.5 s sync ends")
		require.Equal(t, uint64(1), l.Stats().DelayedWrites)

		slow.Store(false)
		time.Sleep(syncTime)
		require.NoError(t, l.Close())
	})
}
