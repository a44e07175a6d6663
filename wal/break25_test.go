package wal_test

import (
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"encoding/binary"

	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
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
// refuses them as stale, and Open then records epoch 2 again from there.
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
	require.Equal(t, 10, len(recs), "acknowledged records silently lost after restoring an older epoch file")
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
func TestBreak25EpochBadInputs(t *testing.T) {
	cases := map[string]func(end uint64) []byte{
		"startPastEnd":      func(end uint64) []byte { return epochRecord(1, end+1<<40) },
		"startMaxUint":      func(end uint64) []byte { return epochRecord(1, ^uint64(0)) },
		"startMidFrame":     func(end uint64) []byte { return epochRecord(1, 8) },
		"startZeroEpochBig": func(end uint64) []byte { return epochRecord(^uint64(0), 0) },
		"short":             func(end uint64) []byte { return epochRecord(1, 0)[:20] },
		"long":              func(end uint64) []byte { return append(epochRecord(1, 0), 1, 2, 3) },
		"empty":             func(end uint64) []byte { return nil },
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewMem()
			l := openLog(t, fsys, wal.Options{})
			appendSynced(t, l, 0, 5, 100)
			end := uint64(l.AppendedLSN())
			require.NoError(t, l.Close())
			setFile(t, fsys, "epoch", mk(end))
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
			require.Equal(t, 5, len(recs), "acknowledged records silently dropped by Open over a %s epoch record (EndLSN %d, Open took it)", name, info.EndLSN)
			_, recs, _ = replay(t, fsys, wal.Options{})
			require.Equal(t, 8, len(recs), "acknowledged records lost after opening over a %s epoch record", name)
		})
	}
}
