package wal_test

import (
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestAppendAllocs: an Append in steady state (within a segment, log buffer
// warmed up) allocates nothing, under a write-only and a sync policy, with
// the latency histograms recording, and with every Observer func set.
func TestAppendAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var c eventCounts
	for _, pc := range []struct {
		name string
		p    policy.Policy
		obs  wal.Observer
	}{
		{"sync-never", policy.SyncNever(), nil},
		{"sync-every-commit", policy.SyncEveryCommit(), nil},
		{"sync-every-n", policy.SyncEveryN(4), nil},
		{"sync-every-commit/observer=all", policy.SyncEveryCommit(), c.observer()}, // events are values: none escapes
	} {
		t.Run("policy="+pc.name, func(t *testing.T) {
			l := openLog(t, vfs.NewMem(), wal.Options{Policy: pc.p, SegmentSize: 16 << 20, Observer: pc.obs})
			defer l.Close()
			rec := record(0, 0, 100)
			for range 100 { // warm up: buffers, waiter pool
				_, err := l.Append(rec)
				require.NoError(t, err)
			}
			var err error
			allocs := testing.AllocsPerRun(1000, func() {
				if _, e := l.Append(rec); e != nil {
					err = e
				}
			})
			require.NoError(t, err)
			require.Zero(t, allocs, "allocations per Append")
		})
	}
}
