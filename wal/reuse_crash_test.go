package wal_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// TestReuseAfterCleanCloseCrashEveryOp: clean Close, reopen (kept files adopted), appends roll into reused files;
// crash images before every filesystem op. Each image must recover a prefix,
// then the same-size appends (so rolls land on the same LSNs as the lost
// ones), clean Close, reopen: exact records, no torn bytes.
func TestReuseAfterCleanCloseCrashEveryOp(t *testing.T) {
	for _, pol := range []policy.Policy{policy.SyncNever(), policy.SyncEveryCommit()} {
		for _, method := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect} {
			t.Run(fmt.Sprintf("%s/%v", pol, method), func(t *testing.T) {
				reuseCrashSweep(t, pol, method)
			})
		}
	}
}

func reuseCrashSweep(t *testing.T, pol policy.Policy, method vfs.SyncMethod) {
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(512)
	opts := wal.Options{FS: mem, SegmentSize: 4 << 10, RecycleSegments: 3, Policy: pol, SyncMethod: method}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	h := &sessionHistory{}
	var last wal.LSN
	for i := 0; l.Stats().Segments < 6; i++ {
		rec := record(1, i, 300)
		last, err = l.Append(rec)
		require.NoError(t, err)
		h.lsns, h.recs = append(h.lsns, last), append(h.recs, rec)
	}
	_, err = l.RemoveBefore(last)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	h.acked = len(h.recs)

	type snap struct {
		img   vfs.FS
		n     int // records appended so far
		acked int
		what  string
	}
	var mu sync.Mutex
	var snaps []snap
	n, acked := len(h.recs), len(h.recs)
	inj := vfs.InjectorFunc(func(op vfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range []vfs.CrashMode{vfs.KeepAll(), vfs.TearAtSector(op.Index), vfs.KeepRandomSubsetOfBlocks(512, op.Index), vfs.KeepRandomSubsetOfBlocks(512, op.Index+1000)} {
			snaps = append(snaps, snap{mem.PowerLoss(m), n, acked, fmt.Sprintf("before op %d (%s %s), %s", op.Index, op.Kind, op.Path, m)})
		}
		return nil
	})
	opts2 := opts
	opts2.FS = vfs.Inject(mem, inj)
	l, err = wal.Open(logDir, opts2)
	require.NoError(t, err)
	require.True(t, l.Recovered().Clean)
	base := len(h.recs)
	for i := range 60 {
		rec := record(2, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		mu.Lock()
		h.lsns, h.recs = append(h.lsns, lsn), append(h.recs, rec)
		n = len(h.recs)
		if pol.Kind() == policy.KindSyncEveryCommit {
			acked = n
		}
		mu.Unlock()
		if i%7 == 6 {
			require.NoError(t, l.Sync())
			mu.Lock()
			acked = len(h.recs)
			mu.Unlock()
		}
	}
	require.Positive(t, l.Stats().Prepare.Recycled, "phase 2 reused kept files")
	require.NoError(t, l.Close())
	_ = base
	t.Logf("%d images", len(snaps))
	for _, s := range snaps {
		nn := len(h.recs)
		hh := &sessionHistory{lsns: h.lsns[:nn:nn], recs: h.recs[:nn:nn], acked: max(s.acked, base)}
		o := opts
		l := sessionCheck(t, s.img, o, hh, s.what)
		info := l.Recovered()
		// same sizes, new contents: rolls land where the lost ones did
		for i := range 60 {
			rec := record(3, i, 300)
			lsn, err := l.Append(rec)
			require.NoError(t, err)
			hh.lsns, hh.recs = append(hh.lsns, lsn), append(hh.recs, rec)
		}
		require.NoError(t, l.Close())
		o.FS = s.img
		l2, err := wal.Open(logDir, o)
		require.NoError(t, err, s.what)
		require.Zero(t, l2.Recovered().TornBytes, "%s: torn tail after clean Close: %+v (first open %+v)", s.what, l2.Recovered(), info)
		lsns, got := readAll(t, l2, l2.FirstLSN())
		st := 0
		for st < len(hh.lsns) && hh.lsns[st] < l2.FirstLSN() {
			st++
		}
		require.Equal(t, hh.lsns[st:], lsns, s.what)
		require.Equal(t, hh.recs[st:], got, s.what)
		l2.Close()
		if t.Failed() {
			return
		}
	}
}
