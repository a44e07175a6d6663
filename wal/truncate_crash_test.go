package wal_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// raftWorkload runs, on fsys: Open, append 12 same-size records (stream 1),
// sync, TruncateFrom(the 6th: it and those after are dropped), append 7 records of stream 2 (same size, so
// they land exactly where the cut ones were), sync, Close. It stops at the
// first error (the injected crash). It returns the records acknowledged
// (synced) by LSN, the cut ones' content, and whether TruncateFrom returned
// nil.
func raftWorkload(fsys vfs.FS) (acked map[wal.LSN][]byte, cut map[string]bool, cutDone bool) {
	acked = map[wal.LSN][]byte{}
	cut = map[string]bool{}
	l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	if err != nil {
		return
	}
	defer l.Close()
	lsns, ok := appendSyncAck(l, acked, 1, 12, 200)
	if !ok {
		return
	}
	// TruncateFrom(lsn) drops lsn and after. Once it is called, records
	// 5..11 may go (a failed cut is either undone or finished by Open).
	for i := 5; i < 12; i++ {
		delete(acked, lsns[i])
	}
	if l.TruncateFrom(lsns[5]) != nil {
		return
	}
	cutDone = true
	for i := 5; i < 12; i++ {
		cut[string(record(1, i, 200))] = true
	}
	appendSyncAck(l, acked, 2, 7, 200)
	return
}

// appendSyncAck appends n records record(stream, i, size) to l and syncs;
// once the sync returns nil it adds them to acked. It returns their LSNs,
// and false at the first error (the injected crash).
func appendSyncAck(l *wal.Log, acked map[wal.LSN][]byte, stream, n, size int) ([]wal.LSN, bool) {
	lsns := make([]wal.LSN, n)
	for i := range n {
		lsn, err := l.Append(record(stream, i, size))
		if err != nil {
			return nil, false
		}
		lsns[i] = lsn
	}
	if l.Sync() != nil {
		return nil, false
	}
	for i, lsn := range lsns {
		acked[lsn] = record(stream, i, size)
	}
	return lsns, true
}

// TestTruncateRaftCrashEveryOp: the Raft-like workload (append, cut,
// re-append the same sizes) crashed at every filesystem operation, under
// every crash mode, then recovered; and again with the recovering Open
// itself crashed at every operation before a final Open.
// Expected: every synced record back, no record a returned cut dropped.
func TestTruncateRaftCrashEveryOp(t *testing.T) {
	modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(1), vfs.TearAtSector(2),
		vfs.KeepRandomSubsetOfBlocks(512, 1), vfs.KeepRandomSubsetOfBlocks(512, 2), vfs.KeepRandomSubsetOfBlocks(4096, 3)}
	var acked map[wal.LSN][]byte
	var cut map[string]bool
	n := crashAtEveryOp(t, 60, vfs.NewMem, func(fsys vfs.FS) { acked, cut, _ = raftWorkload(fsys) }, func(k int64, mem *vfs.MemFS) bool {
		for _, m := range modes {
			after := mem.PowerLoss(m)
			requireCutRecovered(t, after, acked, cut, fmt.Sprintf("crash at op %d, %v", k, m))
			if t.Failed() {
				return false
			}
		}
		// The recovering Open crashed at each of its operations (every
		// 3rd crash point of the workload, to bound the run).
		if k%3 != 0 {
			return true
		}
		base := mem.PowerLoss(vfs.KeepAll())
		crashAtEveryOp(t, 0, base.ProcessCrash, func(fsys vfs.FS) {
			if l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10}); err == nil {
				l.Close()
			}
		}, func(j int64, img *vfs.MemFS) bool {
			for _, m := range modes[:3] {
				requireCutRecovered(t, img.PowerLoss(m), acked, cut, fmt.Sprintf("crash at op %d, recovery crashed at op %d, %v", k, j, m))
				if t.Failed() {
					return false
				}
			}
			return true
		})
		return !t.Failed()
	})
	t.Logf("%d crash points", n)
}

// legacyCutWorkload: Open a copy of an older-format fixture, read it, cut at
// cutIdx (a record of an old-format segment: the log then ends inside a
// segment it never appends to), append 5 records, sync, Close. It stops at
// the first error. It returns the original records, the records expected
// after (LSN → content) and the cut ones.
func legacyCutWorkload(fsys vfs.FS, orig []wal.LSN, origRecs [][]byte, cutIdx int) (acked map[wal.LSN][]byte, cut map[string]bool) {
	acked = map[wal.LSN][]byte{}
	cut = map[string]bool{}
	for i := 0; i < cutIdx; i++ {
		acked[orig[i]] = origRecs[i]
	}
	l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	if err != nil {
		for i := cutIdx; i < len(orig); i++ {
			acked[orig[i]] = origRecs[i]
		}
		return
	}
	defer l.Close()
	if l.TruncateFrom(orig[cutIdx]) != nil {
		return
	}
	for i := cutIdx; i < len(orig); i++ {
		cut[string(origRecs[i])] = true
	}
	appendSyncAck(l, acked, 3, 5, 150)
	return
}

// TestTruncateLegacyCutCrashEveryOp: TruncateFrom into a segment of each
// older format (fixtures v1..v4), at a record in the last segment and at one
// in an earlier segment, then appends; crashed at every filesystem
// operation under several crash modes, then recovered.
// Expected: the records before the cut and every synced new record back;
// no record a returned cut dropped; OpenReadOnly's EndLSN equal to Open's.
func TestTruncateLegacyCutCrashEveryOp(t *testing.T) {
	modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(1),
		vfs.KeepRandomSubsetOfBlocks(512, 1), vfs.KeepRandomSubsetOfBlocks(4096, 2)}
	for _, v := range []string{"format-v1", "format-v2", "format-v3", "format-v4"} {
		t.Run(v, func(t *testing.T) {
			src := filepath.Join("testdata", v)
			base := loadFixture(t, src)
			l, err := wal.OpenReadOnly(logDir, wal.Options{FS: base})
			require.NoError(t, err)
			orig, origRecs := readAll(t, l, l.Recovered().FirstLSN)
			require.NoError(t, l.Close())
			require.Greater(t, len(orig), 10)
			for _, cutIdx := range []int{len(orig) - 2, len(orig) / 2} {
				var acked map[wal.LSN][]byte
				var cut map[string]bool
				crashAtEveryOp(t, 20, base.ProcessCrash, func(fsys vfs.FS) {
					acked, cut = legacyCutWorkload(fsys, orig, origRecs, cutIdx)
				}, func(k int64, mem *vfs.MemFS) bool {
					for _, m := range modes {
						requireCutRecovered(t, mem.PowerLoss(m), acked, cut, fmt.Sprintf("%s cut at record %d, crash at op %d, %v", v, cutIdx, k, m))
						if t.Failed() {
							return false
						}
					}
					return true
				})
				if t.Failed() {
					return
				}
			}
		})
	}
}
