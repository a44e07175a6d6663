package wal_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
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
	h := &sessionHistory{}
	h.lsns, h.recs = keptFilesLog(t, opts)
	h.acked = len(h.recs)

	type snap struct {
		img   vfs.FS
		acked int
		what  string
	}
	var mu sync.Mutex
	var snaps []snap
	acked := len(h.recs)
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range crashModesAt(op.Index) {
			snaps = append(snaps, snap{mem.PowerLoss(m), acked, fmt.Sprintf("before op %d (%s %s), %s", op.Index, op.Kind, op.Path, m)})
		}
		return nil
	})
	opts2 := opts
	opts2.FS = faultfs.Inject(mem, inj)
	l, err := wal.Open(logDir, opts2)
	require.NoError(t, err)
	require.True(t, l.Recovered().Clean)
	base := len(h.recs)
	for i := range 60 {
		rec := record(2, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		mu.Lock()
		h.lsns, h.recs = append(h.lsns, lsn), append(h.recs, rec)
		if pol.Kind() == policy.KindSyncEveryCommit {
			acked = len(h.recs)
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
	t.Logf("%d images", len(snaps))
	for _, s := range snaps {
		nn := len(h.recs)
		hh := &sessionHistory{lsns: h.lsns[:nn:nn], recs: h.recs[:nn:nn], acked: max(s.acked, base)}
		// same sizes, new contents: rolls land where the lost ones did
		if !recoverAppendReopen(t, s.img, opts, hh, s.what, 3, 60) {
			return
		}
	}
}

// keptFilesLog opens a recycling log with opts, appends 300-byte records
// until it has six segments, removes all but the last with RemoveBefore
// (the freed files are kept for reuse) and closes it cleanly. It returns
// what was appended.
func keptFilesLog(t *testing.T, opts wal.Options) (lsns []wal.LSN, recs [][]byte) {
	t.Helper()
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	var last wal.LSN
	for i := 0; l.Stats().Segments < 6; i++ {
		rec := record(1, i, 300)
		last, err = l.Append(rec)
		require.NoError(t, err)
		lsns, recs = append(lsns, last), append(recs, rec)
	}
	_, err = l.RemoveBefore(last)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	return lsns, recs
}

// crashModesAt returns the power losses imaged before the filesystem
// operation of the given index: everything kept, a torn sector, and two
// random subsets of the unsynced 512-byte blocks.
func crashModesAt(index int64) []vfs.CrashMode {
	return []vfs.CrashMode{vfs.KeepAll(), vfs.TearAtSector(index),
		vfs.KeepRandomSubsetOfBlocks(512, index), vfs.KeepRandomSubsetOfBlocks(512, index+1000)}
}

// recoverAppendReopen recovers img and checks it against h (sessionCheck),
// appends n 300-byte records of stream, closes cleanly, and checks that a
// reopen finds no torn bytes and reads back exactly the recovered records
// and the new ones. It reports whether the test may go on.
func recoverAppendReopen(t *testing.T, img vfs.FS, opts wal.Options, h *sessionHistory, what string, stream, n int) bool {
	t.Helper()
	l := sessionCheck(t, img, opts, h, what)
	info := l.Recovered()
	for i := range n {
		rec := record(stream, i, 300)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		h.lsns, h.recs = append(h.lsns, lsn), append(h.recs, rec)
	}
	require.NoError(t, l.Close())
	opts.FS = img
	l2, err := wal.Open(logDir, opts)
	require.NoError(t, err, what)
	defer l2.Close()
	require.Zero(t, l2.Recovered().TornBytes, "%s: torn tail after clean Close: %+v (first open %+v)", what, l2.Recovered(), info)
	lsns, got := readAll(t, l2, l2.FirstLSN())
	st, _ := slices.BinarySearch(h.lsns, l2.FirstLSN())
	require.Equal(t, h.lsns[st:], lsns, what)
	require.Equal(t, h.recs[st:], got, what)
	return !t.Failed()
}
