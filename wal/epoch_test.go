package wal_test

import (
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
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

// TestEpochOlderCopyRestored: the epoch file replaced by an older
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
func TestEpochOlderCopyRestored(t *testing.T) {
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

// TestEpochBadInputs: well-checksummed epoch records with absurd
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
func TestEpochBadInputs(t *testing.T) {
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

// TestEpochFileDeleted: the epoch file removed (an operator's
// clean-up, a backup that copied only segments).
//
// Sequence: Open (epoch 1), append+sync 5, Close; Open (epoch 2), append+sync
// 5, Close; remove "epoch"; Open (no rule: every frame admitted; it records
// epoch 1 from the end), Close; Open again.
// Expected: all 10 records at every Open, or an error.
func TestEpochFileDeleted(t *testing.T) {
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
