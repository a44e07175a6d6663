package wal_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestTruncateReuseCrashEveryOp: a recycling log, clean Close, reopen; appends roll into reused files, then
// TruncateFrom back across rolls, appends of the same sizes again; crash
// images before every op. Each must recover a prefix; then same-size
// appends, clean Close, reopen: exact, no torn bytes.
func TestTruncateReuseCrashEveryOp(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncNever(), policy.SyncEveryCommit()} {
		for _, back := range []int{3, 14, 25} {
			t.Run(fmt.Sprintf("%s/back=%d", pol, back), func(t *testing.T) { truncateReuseSweep(t, pol, back) })
		}
	}
}

func truncateReuseSweep(t *testing.T, pol policy.Policy, back int) {
	mem := vfs.NewMem()
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10, RecycleSegments: 3, Policy: pol}
	lsns, recs := keptFilesLog(t, opts)

	type snap struct {
		img  vfs.FS
		h    sessionHistory
		what string
	}
	var mu sync.Mutex
	var snaps []snap
	acked := len(recs)
	var pending []byte
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		n := len(recs)
		hl, hr := lsns[:n:n], recs[:n:n]
		if pending != nil {
			var next wal.LSN
			if n > 0 {
				next = lsns[n-1] + wal.LSN(frameSize(len(recs[n-1])))
			}
			hl, hr = append(hl, next), append(hr, pending)
		}
		for _, m := range crashModesAt(op.Index) {
			snaps = append(snaps, snap{mem.PowerLoss(m), sessionHistory{hl, hr, acked}, fmt.Sprintf("before op %d (%s %s), %s", op.Index, op.Kind, op.Path, m)})
		}
		return nil
	})
	opts2 := opts
	opts2.FS = faultfs.Inject(mem, inj)
	l, err := wal.Open(logDir, opts2)
	require.NoError(t, err)
	app := func(stream, i int) {
		rec := record(stream, i, 300)
		mu.Lock()
		pending = rec
		mu.Unlock()
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		mu.Lock()
		pending = nil
		lsns, recs = append(lsns, lsn), append(recs, rec)
		if pol.Kind() == policy.KindSyncEveryCommit {
			acked = len(recs)
		}
		mu.Unlock()
	}
	for i := range 30 {
		app(2, i)
	}
	k := len(lsns) - back
	mu.Lock()
	acked = min(acked, k) // the cut is asked: records from k on may go
	mu.Unlock()
	require.NoError(t, l.TruncateFrom(lsns[k]))
	mu.Lock()
	lsns, recs = lsns[:k:k], recs[:k:k]
	acked = k
	mu.Unlock()
	for i := range 30 {
		app(3, i)
		if i%7 == 6 {
			require.NoError(t, l.Sync())
			mu.Lock()
			acked = len(recs)
			mu.Unlock()
		}
	}
	require.Positive(t, l.Stats().Prepare.Recycled)
	require.NoError(t, l.Close())
	t.Logf("%d images", len(snaps))
	for _, s := range snaps {
		if !recoverAppendReopen(t, s.img, opts, &s.h, s.what, 4, 40) {
			return
		}
	}
}
