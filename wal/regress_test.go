package wal_test

// Regression tests for bugs an adversarial review found; each names what
// went wrong.

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// An older segment whose size is not a multiple of the direct-I/O alignment,
// reopened with O_DIRECT, leaves its unaligned end unused: a frame that fits
// the file but ends past the last whole block must roll, not panic in the
// flush leader.
func TestDirectIOUnalignedSegmentFrameRolls(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(4096)
	l := openLog(t, mem, wal.Options{SegmentSize: 8200}) // a multiple of 8, not of 4096
	for i := range 7 {                                   // frames of 1024 bytes end at offset 7200
		_, err := l.Append(record(3, i, 1000))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	l = openLog(t, mem, wal.Options{SyncMethod: vfs.ODirect, SegmentSize: 8192})
	_, err := l.Append(record(3, 7, 976)) // a 1000-byte frame ending at 8200: past the 8192 limit
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Stats().Rolls)
	require.NoError(t, l.Close())
	_, recs, _ := replay(t, mem, wal.Options{})
	require.Len(t, recs, 8)
	require.Equal(t, record(3, 7, 976), recs[7])
}

// A batch cancelled after some of its records were appended must not say
// "not appended": it returns a *BatchError with the count, and exactly those
// records are in the log.
func TestAppendBatchCancelledMidway(t *testing.T) {
	mem := vfs.NewMem()
	gate := newSyncGate()
	l := openLog(t, &hookFS{FS: mem, beforeSync: gate.hold}, wal.Options{BufferSize: 4096})
	gate.arm(true)
	done := make(chan error, 1)
	go func() { _, err := l.Append(record(1, 0, 100)); done <- err }()
	gate.waitEntered(t) // a flush is in flight, held in its sync
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	first, err := l.AppendBatchContext(ctx, [][]byte{record(2, 0, 3000), record(2, 1, 3000)})
	var be *wal.BatchError
	require.ErrorAs(t, err, &be)
	require.NotErrorIs(t, err, wal.ErrNotAppended)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, 1, be.Appended)
	require.Equal(t, first, be.First)
	gate.arm(false)
	close(gate.release)
	require.NoError(t, <-done)
	require.NoError(t, l.Close())
	lsns, recs, _ := replay(t, mem, wal.Options{})
	var found []wal.LSN
	for i, r := range recs {
		if bytes.Equal(r, record(2, 0, 3000)) || bytes.Equal(r, record(2, 1, 3000)) {
			found = append(found, lsns[i])
		}
	}
	require.Equal(t, []wal.LSN{first}, found, "exactly the first batch record is in the log")
}

// The context ending before the first record got an LSN (here: waiting for
// log-buffer space) is ErrNotAppended, and that record is not in the log.
func TestAppendNotAppended(t *testing.T) {
	mem := vfs.NewMem()
	gate := newSyncGate()
	l := openLog(t, &hookFS{FS: mem, beforeSync: gate.hold}, wal.Options{BufferSize: 4096})
	gate.arm(true)
	done := make(chan error, 2)
	go func() { _, err := l.Append(record(1, 0, 3000)); done <- err }()
	gate.waitEntered(t) // the first flush holds its sync
	go func() { _, err := l.Append(record(1, 1, 3000)); done <- err }()
	waitFor(t, "the second record in the log buffer", func() bool { return l.Stats().AppendRequests == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := l.AppendContext(ctx, record(9, 0, 3000)) // the buffer is full: it waits, then gives up
	require.ErrorIs(t, err, wal.ErrNotAppended)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	gate.arm(false)
	close(gate.release)
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	require.NoError(t, l.Close())
	_, recs, _ := replay(t, mem, wal.Options{})
	require.Len(t, recs, 2)
	for _, r := range recs {
		require.False(t, bytes.Equal(r, record(9, 0, 3000)), "ErrNotAppended, yet the record is in the log")
	}
}

// Segments written before the header recorded the file size (field 0) still
// open: 0 means "not recorded", not "created empty".
func TestSegmentWithoutRecordedSize(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	_, err := l.Append(record(1, 0, 100))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	seg := segments(t, mem)[0]
	b := fileBytes(t, mem, seg)
	binary.LittleEndian.PutUint32(b[12:16], 0)
	binary.LittleEndian.PutUint64(b[56:64], xxhash.Sum64(b[:56]))
	setFile(t, mem, seg, b)
	_, recs, _ := replay(t, mem, wal.Options{SegmentSize: testSegmentSize})
	require.Equal(t, [][]byte{record(1, 0, 100)}, recs)
}
