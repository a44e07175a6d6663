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
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestPostponedWriteForcedWithoutNewCommits: under Redis everysec
// (SyncIntervalPostponed(1s, 2s)) with syncs taking 3.5 s, a commit made
// while the background sync runs is postponed, and no commit follows it.
// Redis writes it once it has been postponed 2 s whether or not commands
// arrive (serverCron); so must the background flusher, without waiting for
// the running sync. Fake clock (testing/synctest): the sync sleeps 3.5 s of
// fake time.
func TestPostponedWriteForcedWithoutNewCommits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := vfs.NewMem()
		fsys, slow, started := slowSyncs(mem)
		pol := policy.SyncIntervalPostponed(time.Second, 2*time.Second)
		opts := wal.Options{FS: fsys, SegmentSize: 1 << 20, Policy: pol}
		l, err := wal.Open(faultDir, opts)
		require.NoError(t, err)
		slow.Store(true)

		r0, r1 := payload(0, 100), payload(1, 100)
		_, err = l.Append(r0)
		require.NoError(t, err)
		<-started // the background sync of R0 runs (1 s after Open)
		t0 := time.Now()
		lsn1, err := l.Append(r1)
		require.NoError(t, err)
		require.Zero(t, time.Since(t0), "R1 is postponed: Append returns at once")
		require.Less(t, l.WrittenLSN(), lsn1+1, "R1 is not written yet")

		time.Sleep(2200 * time.Millisecond) // no more commits
		require.Greater(t, l.WrittenLSN(), lsn1, "R1 written once postponed 2 s")
		img := mem.ProcessCrash()
		require.Equal(t, uint64(1), l.Stats().DelayedWrites, "the forced write is a delayed write (aof_delayed_fsync)")

		slow.Store(false)
		time.Sleep(syncTime) // let the slow sync finish: Close would wait on its mutex
		require.NoError(t, l.Close())

		got, err := recoverImage(t, img, faultDir, wal.Options{SegmentSize: opts.SegmentSize})
		require.NoError(t, err)
		require.Equal(t, [][]byte{r0, r1}, got.recs, "a process crash 2.2 s after R1 keeps it")
	})
}

// syncTime is how long a sync of slowSyncs's filesystem takes, in fake time.
const syncTime = 3500 * time.Millisecond

// slowSyncs wraps mem so that, once slow is set, every sync takes syncTime
// (fake time, under testing/synctest); started is closed when the first
// slow sync begins.
func slowSyncs(mem *vfs.MemFS) (fsys vfs.FS, slow *atomic.Bool, started <-chan struct{}) {
	slow = new(atomic.Bool)
	ch := make(chan struct{})
	var once sync.Once
	fsys = faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpSync && slow.Load() {
			once.Do(func() { close(ch) })
			time.Sleep(syncTime)
		}
		return nil
	}))
	return fsys, slow, ch
}

// TestIncrementalSyncPostponedWriteForced: under Redis everysec
// (SyncIntervalPostponed) a sync started by IncrementalSync postpones the
// writes of the commits made while it runs, like an interval's sync; the
// flusher must still force such a write once it has been postponed
// maxPostpone, without waiting for the sync (aof_delayed_fsync), and so
// must not run that sync itself. Fake clock: the sync takes 3.5 s.
func TestIncrementalSyncPostponedWriteForced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fsys, slow, started := slowSyncs(vfs.NewMem())
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
