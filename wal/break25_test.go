package wal_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"encoding/binary"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// epochRecord builds a well-formed epoch file: [0:8) n, [8:16) start,
// [16:24) xxhash64 of [0:16).
func epochRecord(n, start uint64) []byte {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint64(b[0:8], n)
	binary.LittleEndian.PutUint64(b[8:16], start)
	binary.LittleEndian.PutUint64(b[16:24], xxhash.Sum64(b[0:16]))
	return b
}

// appendSynced appends records (stream, from..to) of size bytes and syncs.
func appendSynced(t *testing.T, l *wal.Log, from, to, size int) []wal.LSN {
	t.Helper()
	var lsns []wal.LSN
	for i := from; i < to; i++ {
		lsn, err := l.Append(record(1, i, size))
		require.NoError(t, err)
		lsns = append(lsns, lsn)
	}
	require.NoError(t, l.Sync())
	return lsns
}

// TestBreak25OlderEpochCopyRestored: the epoch file replaced by an older
// copy (a restore from backup of the directory's small files).
//
// Sequence: Open, append+sync 5 records, Close (epoch file E1 saved);
// Open, append+sync 5 more, Close; write E1 back; Open.
// Expected: all 10 acknowledged records, or an error from Open.
// Happened (main at 50f6162): Open succeeds with EndLSN after record 5;
// records 5..9 (synced, acknowledged) are silently gone: they carry epoch
// 2 at LSNs after the restored record's start (0), so the epoch rule
// refuses them as stale. Open's plan calls the 658 bytes of synced frames
// (and the clean-close end frame) "torn bytes", quarantines them into
// 00000000000000000640-00000000000000001298.torn, zeroes them, records epoch
// 2 again from LSN 640 and returns nil: the records are out of the log (the
// bytes survive only in the quarantine file, which nothing replays).
func TestBreak25OlderEpochCopyRestored(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, wal.Options{})
	appendSynced(t, l, 0, 5, 100)
	require.NoError(t, l.Close())
	old := fileBytes(t, fsys, "epoch")

	l = openLog(t, fsys, wal.Options{})
	appendSynced(t, l, 5, 10, 100)
	require.NoError(t, l.Close())

	setFile(t, fsys, "epoch", old)
	l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: testSegmentSize})
	if err != nil {
		t.Logf("Open refused: %v", err)
		return
	}
	_, recs := readAll(t, l, l.Recovered().FirstLSN)
	require.NoError(t, l.Close())
	require.Equal(t, 10, len(recs), "acknowledged records silently lost after restoring an older epoch file (steps %q, quarantined %v)", l.Recovered().Steps, l.Recovered().Quarantined)
}

// TestBreak25EpochBadInputs: well-checksummed epoch records with absurd
// contents, and records of the wrong size. Expected: a clear error or a safe
// open that keeps every acknowledged record; never a panic or hang.
// OpenReadOnly and Open must agree.
// Happened (main at 50f6162): "short", "long", "empty", "startMidFrame"
// hold. "startPastEnd" (start far past the end), "startMaxUint" (start
// 2^64-1) and "startZeroEpochBig" (epoch 2^64-1, start 0; its successor
// wraps to 0) are all accepted by Open without error and every one of the 5
// synced records is silently dropped (EndLSN becomes the first LSN): a
// checksummed but nonsensical epoch record is trusted over valid frames.
// Open's plan: "quarantine and zero the 658 torn bytes from LSN 0", then
// "begin epoch 2 at LSN 0" (for startZeroEpochBig "begin epoch 0": N+1
// wraps). No error, no CorruptionError: the start LSN is never checked
// against the end the segments show, nor the epoch against the frames'.
func TestBreak25EpochBadInputs(t *testing.T) {
	cases := map[string]func(n, end uint64) []byte{
		"startPastEnd":         func(n, end uint64) []byte { return epochRecord(n, end+1<<40) },
		"startMaxUint":         func(n, end uint64) []byte { return epochRecord(n, ^uint64(0)) },
		"startMidFrame":        func(n, end uint64) []byte { return epochRecord(n, 8) },
		"startInsideLastFrame": func(n, end uint64) []byte { return epochRecord(n, end-8) },
		"startEarlierEpochNow": func(n, end uint64) []byte { return epochRecord(n+1, end-112) },
		"startZeroEpochBig":    func(n, end uint64) []byte { return epochRecord(^uint64(0), 0) },
		"short":                func(n, end uint64) []byte { return epochRecord(n, 0)[:20] },
		"long":                 func(n, end uint64) []byte { return append(epochRecord(n, 0), 1, 2, 3) },
		"empty":                func(n, end uint64) []byte { return nil },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, wal.Options{})
			appendSynced(t, l, 0, 5, 100)
			end := uint64(l.AppendedLSN())
			require.NoError(t, l.Close())
			n := binary.LittleEndian.Uint64(fileBytes(t, fsys, "epoch"))
			setFile(t, fsys, "epoch", mk(n, end))
			opts := wal.Options{FS: fsys, SegmentSize: testSegmentSize}
			ro, rerr := wal.OpenReadOnly(logDir, opts)
			var roInfo wal.RecoveryInfo
			if rerr == nil {
				roInfo = ro.Recovered()
				require.NoError(t, ro.Close())
			}
			l, err := wal.Open(logDir, opts)
			require.Equal(t, rerr == nil, err == nil, "OpenReadOnly err %v, Open err %v", rerr, err)
			if err != nil {
				t.Logf("refused: %v", err)
				return
			}
			info := l.Recovered()
			require.Equal(t, roInfo.EndLSN, info.EndLSN, "OpenReadOnly and Open disagree on the end")
			_, recs := readAll(t, l, info.FirstLSN)
			// Append after the odd epoch, reopen: everything must still be there.
			appendSynced(t, l, 5, 8, 100)
			require.NoError(t, l.Close())
			require.Equal(t, 5, len(recs), "acknowledged records silently dropped by Open over a %s epoch record (EndLSN %d, Open took it; steps %q, quarantined %v)", name, info.EndLSN, info.Steps, info.Quarantined)
			_, recs, _ = replay(t, fsys, wal.Options{})
			require.Equal(t, 8, len(recs), "acknowledged records lost after opening over a %s epoch record", name)
		})
	}
}

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
	pending := map[wal.LSN][]byte{}
	var lsns []wal.LSN
	for i := 0; i < 12; i++ {
		rec := record(1, i, 200)
		lsn, err := l.Append(rec)
		if err != nil {
			return
		}
		lsns = append(lsns, lsn)
		pending[lsn] = rec
	}
	if l.Sync() != nil {
		return
	}
	for k, v := range pending {
		acked[k] = v
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
	pending = map[wal.LSN][]byte{}
	for i := 0; i < 7; i++ {
		rec := record(2, i, 200)
		lsn, err := l.Append(rec)
		if err != nil {
			return
		}
		pending[lsn] = rec
	}
	if l.Sync() != nil {
		return
	}
	for k, v := range pending {
		acked[k] = v
	}
	return
}

// checkRecovered opens the log on fsys and checks it holds every acked
// record and none of the cut ones (when the cut returned nil).
func checkRecovered25(t *testing.T, fsys vfs.FS, acked map[wal.LSN][]byte, cut map[string]bool, what string) {
	t.Helper()
	ro, rerr := wal.OpenReadOnly(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	var roEnd wal.LSN
	var roSteps []string
	if rerr == nil {
		roEnd = ro.Recovered().EndLSN
		roSteps = ro.Recovered().Steps
		ro.Close()
	}
	l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: 4 << 10})
	if err != nil {
		t.Fatalf("%s: Open: %v (OpenReadOnly: %v)", what, err, rerr)
	}
	defer l.Close()
	if rerr == nil && roEnd != l.Recovered().EndLSN {
		t.Errorf("%s: OpenReadOnly EndLSN %d, Open EndLSN %d", what, roEnd, l.Recovered().EndLSN)
	}
	if rerr == nil && fmt.Sprint(roSteps) != fmt.Sprint(l.Recovered().Steps) {
		t.Errorf("%s: OpenReadOnly planned %q, Open did %q", what, roSteps, l.Recovered().Steps)
	}
	got := map[wal.LSN][]byte{}
	r, err := l.NewReader(l.Recovered().FirstLSN)
	require.NoError(t, err)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err != nil {
			break
		}
		got[lsn] = append([]byte(nil), rec...)
		if cut[string(rec)] {
			t.Errorf("%s: cut record came back at LSN %d", what, lsn)
		}
	}
	for lsn, rec := range acked {
		if string(got[lsn]) != string(rec) {
			t.Errorf("%s: acknowledged record at LSN %d lost (got %d bytes)", what, lsn, len(got[lsn]))
		}
	}
	if t.Failed() {
		t.Logf("%s: recovered %+v", what, l.Recovered())
	}
}

// TestBreak25RaftCrashEveryOp: the Raft-like workload (append, cut,
// re-append the same sizes) crashed at every filesystem operation, under
// every crash mode, then recovered; and again with the recovering Open
// itself crashed at every operation before a final Open.
// Expected: every synced record back, no record a returned cut dropped.
func TestBreak25RaftCrashEveryOp(t *testing.T) {
	modes := []vfs.CrashMode{vfs.DropAll(), vfs.KeepAll(), vfs.TearAtSector(1), vfs.TearAtSector(2),
		vfs.KeepRandomSubsetOfBlocks(512, 1), vfs.KeepRandomSubsetOfBlocks(512, 2), vfs.KeepRandomSubsetOfBlocks(4096, 3)}
	for k := int64(1); ; k++ {
		mem := vfs.NewMem()
		var reached atomic.Bool
		inj := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
			if op.Index >= k {
				reached.Store(true)
				return errCrash25
			}
			return nil
		}))
		acked, cut, _ := raftWorkload(inj)
		if !reached.Load() {
			require.Greater(t, k, int64(60), "the workload runs fewer operations than expected")
			t.Logf("%d crash points", k-1)
			break
		}
		for _, m := range modes {
			after := mem.PowerLoss(m)
			checkRecovered25(t, after, acked, cut, fmt.Sprintf("crash at op %d, %v", k, m))
			if t.Failed() {
				return
			}
		}
		// The recovering Open crashed at each of its operations (every
		// 3rd crash point of the workload, to bound the run).
		if k%3 != 0 {
			continue
		}
		base := mem.PowerLoss(vfs.KeepAll())
		for j := int64(1); j < 400; j++ {
			img := base.ProcessCrash()
			hit := false
			inj2 := faultfs.Inject(img, faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Index >= j {
					hit = true
					return errCrash25
				}
				return nil
			}))
			if l, err := wal.Open(logDir, wal.Options{FS: inj2, SegmentSize: 4 << 10}); err == nil {
				l.Close()
			}
			if !hit {
				break
			}
			for _, m := range modes[:3] {
				checkRecovered25(t, img.PowerLoss(m), acked, cut, fmt.Sprintf("crash at op %d, recovery crashed at op %d, %v", k, j, m))
				if t.Failed() {
					return
				}
			}
		}
	}
}

var errCrash25 = errors.New("injected crash")

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
	pending := map[wal.LSN][]byte{}
	for i := 0; i < 5; i++ {
		rec := record(3, i, 150)
		lsn, err := l.Append(rec)
		if err != nil {
			return
		}
		pending[lsn] = rec
	}
	if l.Sync() != nil {
		return
	}
	for k, v := range pending {
		acked[k] = v
	}
	return
}

// TestBreak25LegacyCutCrashEveryOp: TruncateFrom into a segment of each
// older format (fixtures v1..v4), at a record in the last segment and at one
// in an earlier segment, then appends; crashed at every filesystem
// operation under several crash modes, then recovered.
// Expected: the records before the cut and every synced new record back;
// no record a returned cut dropped; OpenReadOnly's EndLSN equal to Open's.
func TestBreak25LegacyCutCrashEveryOp(t *testing.T) {
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
				for k := int64(1); ; k++ {
					mem := base.ProcessCrash()
					var reached atomic.Bool
					inj := faultfs.Inject(mem, faultfs.InjectorFunc(func(op faultfs.Op) error {
						if op.Index >= k {
							reached.Store(true)
							return errCrash25
						}
						return nil
					}))
					acked, cut := legacyCutWorkload(inj, orig, origRecs, cutIdx)
					if !reached.Load() {
						require.Greater(t, k, int64(20))
						break
					}
					for _, m := range modes {
						checkRecovered25(t, mem.PowerLoss(m), acked, cut, fmt.Sprintf("%s cut at record %d, crash at op %d, %v", v, cutIdx, k, m))
						if t.Failed() {
							return
						}
					}
				}
			}
		})
	}
}

// TestBreak25EpochFileDeleted: the epoch file removed (an operator's
// clean-up, a backup that copied only segments).
//
// Sequence: Open (epoch 1), append+sync 5, Close; Open (epoch 2), append+sync
// 5, Close; remove "epoch"; Open (no rule: every frame admitted; it records
// epoch 1 from the end), Close; Open again.
// Expected: all 10 records at every Open, or an error.
func TestBreak25EpochFileDeleted(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, wal.Options{})
	appendSynced(t, l, 0, 5, 100)
	require.NoError(t, l.Close())
	l = openLog(t, fsys, wal.Options{})
	appendSynced(t, l, 5, 10, 100)
	require.NoError(t, l.Close())
	require.NoError(t, fsys.Remove(filepath.Join(logDir, "epoch")))
	require.NoError(t, fsys.SyncDir(logDir))
	for i := 0; i < 3; i++ {
		l, err := wal.Open(logDir, wal.Options{FS: fsys, SegmentSize: testSegmentSize})
		if err != nil {
			t.Logf("Open %d refused: %v", i, err)
			return
		}
		_, recs := readAll(t, l, l.Recovered().FirstLSN)
		info := l.Recovered()
		require.NoError(t, l.Close())
		require.Equal(t, 10, len(recs), "Open %d after removing the epoch file: acknowledged records silently lost (epoch %d, steps %q)", i, info.Epoch, info.Steps)
	}
}
