package wal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logDir is where the tests put a log on a MemFS.
const logDir = "/log"

// testSegmentSize is the segment size tests use when they set none: the
// 64 MiB default costs a zero fill of 64 MiB at every Open.
const testSegmentSize = 64 << 10

// openLog opens the log in logDir on fsys, which overrides opts.FS.
func openLog(t testing.TB, fsys vfs.FS, opts wal.Options) *wal.Log {
	t.Helper()
	opts.FS = fsys
	if opts.SegmentSize == 0 {
		opts.SegmentSize = testSegmentSize
	}
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	return l
}

// readAll replays every record from from to the end of what was written.
func readAll(t testing.TB, l *wal.Log, from wal.LSN) (lsns []wal.LSN, recs [][]byte) {
	t.Helper()
	r, err := l.NewReader(from)
	require.NoError(t, err)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			return lsns, recs
		}
		if err != nil {
			require.NoError(t, err, "after %d records", len(recs))
		}
		lsns = append(lsns, lsn)
		recs = append(recs, bytes.Clone(rec))
	}
}

// replay opens the log on fsys, reads every record, and closes it.
func replay(t testing.TB, fsys vfs.FS, opts wal.Options) ([]wal.LSN, [][]byte, wal.RecoveryInfo) {
	t.Helper()
	l := openLog(t, fsys, opts)
	lsns, recs := readAll(t, l, l.Recovered().FirstLSN)
	info := l.Recovered()
	require.NoError(t, l.Close())
	return lsns, recs, info
}

// segments returns the base names of the segment files in logDir.
func segments(t testing.TB, fsys vfs.FS) []string {
	t.Helper()
	names, err := fsys.List(logDir)
	require.NoError(t, err)
	var segs []string
	for _, n := range names {
		if strings.HasSuffix(n, ".wal") {
			segs = append(segs, n)
		}
	}
	return segs
}

// fileBytes returns the content of the file name in logDir.
func fileBytes(t testing.TB, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(filepath.Join(logDir, name))
	require.NoError(t, err)
	defer f.Close()
	size, err := f.Size()
	require.NoError(t, err)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	require.Equal(t, int(size), n, "read %s: %v", name, err)
	return b
}

// setFile replaces the content of the file name in logDir with b, synced.
func setFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.OpenReadWrite(filepath.Join(logDir, name), vfs.Fdatasync)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(b))))
	_, err = f.WriteAt(bytes.Clone(b), 0) // MemFS scrambles the buffer it wrote
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// record returns a deterministic record of size bytes for (stream, i): a
// 16-byte header naming it, then odd bytes derived from it. Its first and
// last bytes are never zero, so a frame cut anywhere inside its payload
// differs from the whole one.
func record(stream, i, size int) []byte {
	b := make([]byte, size)
	var h [16]byte
	binary.LittleEndian.PutUint64(h[0:8], uint64(stream))
	binary.LittleEndian.PutUint64(h[8:16], uint64(i))
	n := copy(b, h[:])
	for j := n; j < size; j++ {
		b[j] = byte(stream*31+i*7+j*13) | 1
	}
	b[0] |= 0x80
	if size <= 16 {
		b[size-1] |= 0x40 // a short record holds only part of the header
	}
	return b
}

func TestAppendCloseReopenRead(t *testing.T) {
	for _, name := range []string{"os", "mem"} {
		t.Run("fs="+name, func(t *testing.T) {
			var fsys vfs.FS = vfs.NewMem()
			dir := logDir
			if name == "os" {
				fsys, dir = vfs.OS(), t.TempDir()
			}
			opts := wal.Options{FS: fsys, SegmentSize: 8 << 10}
			l, err := wal.Open(dir, opts)
			require.NoError(t, err)
			var want [][]byte
			var wantLSN []wal.LSN
			for i := range 500 {
				rec := record(0, i, 1+i%300)
				lsn, err := l.Append(rec)
				require.NoError(t, err)
				if len(wantLSN) > 0 {
					require.Greater(t, lsn, wantLSN[len(wantLSN)-1])
				}
				want, wantLSN = append(want, rec), append(wantLSN, lsn)
			}
			end := l.AppendedLSN()
			require.NoError(t, l.Close())

			l, err = wal.Open(dir, opts)
			require.NoError(t, err)
			info := l.Recovered()
			assert.Equal(t, end, info.EndLSN)
			assert.Zero(t, info.TornBytes)
			assert.Greater(t, info.Segments, 5, "8 KiB segments must roll")
			lsns, got := readAll(t, l, 0)
			require.Equal(t, want, got)
			require.Equal(t, wantLSN, lsns)
			lsn, err := l.Append([]byte("next"))
			require.NoError(t, err)
			assert.Equal(t, end, lsn, "the next append lands at the recovered end")
			require.NoError(t, l.Close())
		})
	}
}

func TestEmptyLog(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	assert.Equal(t, wal.LSN(0), l.AppendedLSN())
	_, recs := readAll(t, l, 0)
	assert.Empty(t, recs)
	require.NoError(t, l.Close())
	_, recs, info := replay(t, mem, wal.Options{})
	assert.Empty(t, recs)
	assert.Equal(t, 1, info.Segments)
	assert.Equal(t, []string{"00000000000000000000.wal"}, segments(t, mem))
}

func TestEmptyRecord(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	defer l.Close()
	for _, rec := range [][]byte{nil, {}} {
		_, err := l.Append(rec)
		require.ErrorIs(t, err, wal.ErrEmptyRecord)
		_, err = l.AppendContext(t.Context(), rec, wal.ForceSync)
		require.ErrorIs(t, err, wal.ErrEmptyRecord)
	}
	_, err := l.AppendBatchContext(t.Context(), nil)
	require.ErrorIs(t, err, wal.ErrEmptyRecord)
	_, err = l.AppendBatchContext(t.Context(), [][]byte{[]byte("a"), nil, []byte("b")})
	require.ErrorIs(t, err, wal.ErrEmptyRecord)
	assert.Equal(t, wal.LSN(0), l.AppendedLSN(), "nothing appended")
	assert.Zero(t, l.Stats().AppendRequests)
}

func TestRecordTooLarge(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	_, err := l.Append([]byte("first"))
	require.NoError(t, err)
	end := l.AppendedLSN()
	max := 4<<10 - 112 // the default is capped to what fits a segment (header, frame header, end/link frame room)

	for _, size := range []int{max + 1, 4 << 10, 10 << 10, 5 << 20} {
		_, err = l.Append(make([]byte, size))
		require.ErrorIs(t, err, wal.ErrRecordTooLarge, "size %d", size)
		_, err = l.AppendBatchContext(t.Context(), [][]byte{[]byte("ok"), make([]byte, size)})
		require.ErrorIs(t, err, wal.ErrRecordTooLarge, "batch with size %d", size)
	}
	assert.Equal(t, end, l.AppendedLSN(), "no side effects")
	assert.Equal(t, uint64(1), l.Stats().AppendRequests)
	assert.Len(t, segments(t, mem), 1, "no new segment for a rejected record")

	// The largest record fits an empty segment exactly, so each one rolls
	// once, and never loops creating segments.
	big := bytes.Repeat([]byte{0xab}, max)
	for range 3 {
		_, err = l.Append(big)
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	assert.Len(t, segments(t, mem), 4)
	_, recs, _ := replay(t, mem, opts)
	require.Len(t, recs, 4)
	for _, r := range recs[1:] {
		require.Equal(t, big, r)
	}
}

func TestMaxRecordSizeOption(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{MaxRecordSize: 100}
	l := openLog(t, mem, opts)
	_, err := l.Append(make([]byte, 100))
	require.NoError(t, err)
	_, err = l.Append(make([]byte, 101))
	require.ErrorIs(t, err, wal.ErrRecordTooLarge)
	require.NoError(t, l.Close())
	_, recs, _ := replay(t, mem, opts)
	require.Len(t, recs, 1)
}

func TestAppendBatch(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	var want [][]byte
	for b := range 20 {
		var recs [][]byte
		for i := range b%7 + 1 {
			recs = append(recs, record(b, i, 50+i*40))
		}
		first, err := l.AppendBatchContext(t.Context(), recs)
		require.NoError(t, err)
		lsns, _ := readAll(t, l, first)
		require.NotEmpty(t, lsns)
		require.Equal(t, first, lsns[0])
		want = append(want, recs...)
	}
	require.NoError(t, l.Close())
	_, got, _ := replay(t, mem, wal.Options{SegmentSize: 4 << 10})
	require.Equal(t, want, got)
}

func TestUseAfterClose(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	_, err := l.Append([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, l.Close())

	_, err = l.Append([]byte("x"))
	assert.ErrorIs(t, err, wal.ErrClosed, "Append")
	_, err = l.AppendContext(t.Context(), []byte("x"), wal.ForceSync)
	assert.ErrorIs(t, err, wal.ErrClosed, "AppendContext")
	_, err = l.AppendBatchContext(t.Context(), [][]byte{[]byte("x")})
	assert.ErrorIs(t, err, wal.ErrClosed, "AppendBatch")
	assert.ErrorIs(t, l.Sync(), wal.ErrClosed, "Sync")
	_, err = l.NewReader(0)
	assert.ErrorIs(t, err, wal.ErrClosed, "NewReader")
	_, err = l.RemoveBefore(100)
	assert.ErrorIs(t, err, wal.ErrClosed, "RemoveBefore")
	assert.ErrorIs(t, l.Close(), wal.ErrClosed, "second Close")
	assert.NotPanics(t, func() { _ = l.Stats() })

	// The lock was released: the log opens again.
	_, recs, _ := replay(t, mem, wal.Options{})
	assert.Len(t, recs, 1)
}

func TestReaderAfterLogClose(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	_, err := l.Append([]byte("x"))
	require.NoError(t, err)
	r, err := l.NewReader(0)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	_, _, err = r.Next()
	assert.ErrorIs(t, err, wal.ErrClosed, "Next after Reader.Close")
	assert.NoError(t, r.Close(), "second Reader.Close")
	require.NoError(t, l.Close())
}

func TestInvalidOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts wal.Options
	}{
		{"segment too small", wal.Options{SegmentSize: 4<<10 - 8}},
		{"segment negative", wal.Options{SegmentSize: -1}},
		{"segment too large", wal.Options{SegmentSize: 4<<30 + 8}},
		{"segment not a multiple of 8", wal.Options{SegmentSize: 4<<10 + 4}},
		{"max record above segment", wal.Options{SegmentSize: 4 << 10, MaxRecordSize: 4 << 10}},
		{"max record just above what fits", wal.Options{SegmentSize: 4 << 10, MaxRecordSize: 4<<10 - 79}},
		{"max record negative", wal.Options{MaxRecordSize: -1}},
		{"buffer negative", wal.Options{BufferSize: -1}},
		{"sync every 0", wal.Options{Policy: policy.SyncEveryN(0)}},
		{"sync interval 0", wal.Options{Policy: policy.SyncInterval(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := vfs.NewMem()
			tc.opts.FS = mem
			before := tc.opts
			l, err := wal.Open(logDir, tc.opts)
			require.ErrorIs(t, err, wal.ErrInvalidOptions)
			require.Nil(t, l)
			assert.Equal(t, before, tc.opts, "Open does not modify Options")
			names, _ := mem.List(logDir)
			assert.Empty(t, names, "nothing created")
		})
	}
	t.Run("empty dir", func(t *testing.T) {
		_, err := wal.Open("", wal.Options{FS: vfs.NewMem()})
		require.ErrorIs(t, err, wal.ErrInvalidOptions)
	})
	t.Run("largest max record", func(t *testing.T) {
		mem := vfs.NewMem()
		l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10, MaxRecordSize: 4<<10 - 112})
		require.NoError(t, l.Close())
	})
}

func TestOpenLocked(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{})
	_, err := wal.Open(logDir, wal.Options{FS: mem, SegmentSize: testSegmentSize})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.NoError(t, l.Close())
	l = openLog(t, mem, wal.Options{})
	require.NoError(t, l.Close())

	dir := t.TempDir()
	l, err = wal.Open(dir, wal.Options{SegmentSize: testSegmentSize})
	require.NoError(t, err)
	_, err = wal.Open(dir, wal.Options{SegmentSize: testSegmentSize})
	require.ErrorIs(t, err, vfs.ErrLocked)
	require.NoError(t, l.Close())
}

func TestSyncMakesDurable(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{Policy: policy.SyncNever(), SegmentSize: 4 << 10}
	l := openLog(t, mem, opts)
	var want [][]byte
	for i := range 100 {
		rec := record(1, i, 100)
		_, err := l.Append(rec)
		require.NoError(t, err)
		want = append(want, rec)
	}
	require.NoError(t, l.Sync())
	assert.Equal(t, l.AppendedLSN(), l.SyncedLSN())
	_, err := l.Append([]byte("unsynced"))
	require.NoError(t, err)
	_, got, _ := replay(t, mem.PowerLoss(vfs.DropAll()), opts)
	require.Equal(t, want, got)
	require.NoError(t, l.Close())
}

// TestConcurrentAppend runs 32 appending goroutines: LSNs are unique, every
// record reads back intact (frames never interleave), and each goroutine's
// records come back in the order it appended them.
func TestConcurrentAppend(t *testing.T) {
	for _, pc := range []struct {
		name string
		p    policy.Policy
	}{
		{"sync-never", policy.SyncNever()},
		{"sync-every-commit", policy.SyncEveryCommit()},
	} {
		t.Run("policy="+pc.name, func(t *testing.T) {
			const writers, each = 32, 150
			mem := vfs.NewMem()
			opts := wal.Options{Policy: pc.p, SegmentSize: 16 << 10, BufferSize: 8 << 10}
			l := openLog(t, mem, opts)
			lsns := make([][]wal.LSN, writers)
			var wg sync.WaitGroup
			for g := range writers {
				wg.Go(func() {
					for i := range each {
						lsn, err := l.Append(record(g, i, 17+(g*each+i)%700))
						if !assert.NoError(t, err) {
							return
						}
						lsns[g] = append(lsns[g], lsn)
					}
				})
			}
			wg.Wait()
			require.NoError(t, l.Close())

			all := slices.Concat(lsns...)
			slices.Sort(all)
			require.Len(t, slices.Compact(all), writers*each, "LSNs are unique")

			gotLSN, recs, _ := replay(t, mem, opts)
			require.Len(t, recs, writers*each)
			next := make([]int, writers)
			for k, rec := range recs {
				require.Greater(t, len(rec), 16)
				g := int(binary.LittleEndian.Uint64(rec[0:8]) &^ 0x80)
				i := int(binary.LittleEndian.Uint64(rec[8:16]))
				require.Less(t, g, writers)
				require.Equal(t, next[g], i, "writer %d's records in order", g)
				require.Equal(t, record(g, i, len(rec)), rec, "record intact")
				require.Equal(t, lsns[g][i], gotLSN[k], "Append returned the LSN it was read at")
				next[g]++
			}
		})
	}
}

func TestConcurrentAppendSyncRead(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{Policy: policy.SyncNever(), SegmentSize: 8 << 10}
	l := openLog(t, mem, opts)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 300 {
				if _, err := l.Append(record(g, i, 1+i%200)); !assert.NoError(t, err) {
					return
				}
				if i%50 == 0 {
					assert.NoError(t, l.Sync())
				}
			}
		})
	}
	var readers sync.WaitGroup
	readers.Go(func() {
		for ctx.Err() == nil {
			r, err := l.NewReader(0)
			if !assert.NoError(t, err) {
				return
			}
			prev := wal.LSN(0)
			for n := 0; ; n++ {
				lsn, rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if !assert.NoError(t, err) {
					r.Close()
					return
				}
				if n > 0 && !assert.Greater(t, lsn, prev) {
					break
				}
				prev = lsn
				assert.NotEmpty(t, rec)
			}
			r.Close()
		}
	})
	wg.Wait()
	cancel()
	readers.Wait()
	require.NoError(t, l.Close())
	_, recs, _ := replay(t, mem, opts)
	require.Len(t, recs, 1200)
}

func TestStatsCount(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	for i := range 100 {
		_, err := l.Append(record(0, i, 100))
		require.NoError(t, err)
	}
	s := l.Stats()
	assert.Equal(t, uint64(100), s.Commits)
	assert.Equal(t, uint64(100), s.AppendRequests)
	assert.Equal(t, uint64(100*100), s.BytesAppended)
	assert.Equal(t, l.AppendedLSN(), s.AppendedLSN)
	assert.Equal(t, s.AppendedLSN, s.SyncedLSN, "sync every commit")
	assert.Positive(t, s.Rolls)
	assert.False(t, s.Poisoned)
	require.NoError(t, l.Close())
	assert.Equal(t, fmt.Sprint(l.AppendedLSN()), l.AppendedLSN().String())
}

// A batch cancelled after some of its records were appended must not say
// "not appended": it returns a *BatchError with the count, and exactly those
// records are in the log.
func TestAppendBatchCancelledMidway(t *testing.T) {
	mem := vfs.NewMem()
	gate := newSyncGate()
	l := openLog(t, faultfs.Inject(mem, gate), wal.Options{BufferSize: 4096})
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
	l := openLog(t, faultfs.Inject(mem, gate), wal.Options{BufferSize: 4096})
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

// failReadsOf fails every read of the file named base with EIO.
func failReadsOf(base string) faultfs.Injector {
	return faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpRead && filepath.Base(op.Path) == base {
			return syscall.EIO
		}
		return nil
	})
}
