package wal_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestIncrementalSync: with IncrementalSync set, the background flusher of
// an interval policy syncs whenever that many bytes were written since the
// last sync, long before its interval; without it, it waits for the
// interval. Fake time: the interval (an hour) never passes.
func TestIncrementalSync(t *testing.T) {
	const step = 64 << 10
	for _, c := range []struct {
		name string
		inc  int64
		pol  policy.Policy
	}{
		{"SyncInterval", step, policy.SyncInterval(time.Hour)},
		{"BufferedInterval", step, policy.BufferedInterval(time.Hour, time.Millisecond)},
		{"off", 0, policy.SyncInterval(time.Hour)},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := vfs.NewMem()
				l, err := wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: 4 << 20, Policy: c.pol, IncrementalSync: c.inc})
				require.NoError(t, err)
				rec := payload(0, 1000)
				for range 1000 { // 1 MiB of frames
					_, err := l.Append(rec)
					require.NoError(t, err)
					time.Sleep(10 * time.Microsecond) // let BufferedInterval's write tick run
				}
				time.Sleep(10 * time.Millisecond)
				synctest.Wait()
				st := l.Stats()
				if c.inc == 0 {
					require.Zero(t, st.BackgroundSyncs, "nothing syncs before the interval")
					require.Less(t, l.SyncedLSN(), l.WrittenLSN())
				} else {
					written := int64(l.WrittenLSN())
					require.Positive(t, written)
					require.GreaterOrEqual(t, st.BackgroundSyncs, uint64(written/step/2), "about one sync per %d bytes written", step)
					require.LessOrEqual(t, st.BackgroundSyncs, uint64(written/step)+1, "no more than one sync per %d bytes written", step)
					require.Less(t, written-int64(l.SyncedLSN()), int64(step), "never %d bytes written and unsynced once the flusher ran", step)
				}
				require.NoError(t, l.Close())
				require.Equal(t, mem.SyncCount(), int64(l.Stats().Fsyncs))
			})
		})
	}
	l, err := wal.Open(t.TempDir(), wal.Options{IncrementalSync: -1})
	require.NoError(t, err, "negative turns it off, as for every other option")
	require.NoError(t, l.Close())
}
