package wal_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/require"
)

// wbCall is one Writeback request a file received.
type wbCall struct {
	file      int // which Create or OpenReadWrite returned the file
	off, n    int64
	wait      bool
	writeHigh int64 // the file's highest written offset when it came
}

// wbFS records the Writeback requests made on its files, which it wraps
// from fsys.
type wbFS struct {
	vfs.FS
	mu    sync.Mutex
	files int
	calls []wbCall
}

type wbFile struct {
	vfs.File
	fs   *wbFS
	id   int
	high int64
}

func (f *wbFS) wrap(file vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return file, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files++
	return &wbFile{File: file, fs: f, id: f.files}, nil
}

func (f *wbFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	return f.wrap(f.FS.Create(name, m))
}

func (f *wbFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	return f.wrap(f.FS.OpenReadWrite(name, m))
}

func (w *wbFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	w.fs.mu.Lock()
	w.high = max(w.high, off+int64(n))
	w.fs.mu.Unlock()
	return n, err
}

func (w *wbFile) Writeback(off, n int64, wait bool) error {
	w.fs.mu.Lock()
	defer w.fs.mu.Unlock()
	w.fs.calls = append(w.fs.calls, wbCall{file: w.id, off: off, n: n, wait: wait, writeHigh: w.high})
	return nil
}

// TestWritebackAfter: with WritebackAfter set, the log's frames, and where
// commits sync every segment's zero-fill, are handed to the device in
// contiguous ranges of at least that many bytes, each only once written, the
// zero-fill waiting for each step before the one it hands over; with it
// off, or under O_DSYNC (each write is durable) or O_DIRECT (no page
// cache), nothing is.
func TestWritebackAfter(t *testing.T) {
	const segSize, step = 1 << 20, 64 << 10
	run := func(t *testing.T, wb int64, m vfs.SyncMethod, pol policy.Policy) *wbFS {
		fsys := &wbFS{FS: vfs.NewMem()}
		l := openLog(t, fsys, wal.Options{SegmentSize: segSize, WritebackAfter: wb, SyncMethod: m, Policy: pol})
		appendUntilSegments(t, l, fsys, 4, 1)
		require.NoError(t, l.Close())
		return fsys
	}
	// Where commits do not sync, preparation runs unpaced: only the
	// frames are handed over, none waited for.
	for _, c := range run(t, step, vfs.Fdatasync, policy.SyncNever()).calls {
		require.False(t, c.wait, "a wait under SyncNever: %+v", c)
		require.NotZero(t, c.off, "zeros handed over under SyncNever: %+v", c)
	}
	fsys := run(t, step, vfs.Fdatasync, policy.SyncEveryCommit())
	type span struct {
		next  int64
		waits int
	}
	seen := map[int]*span{}
	prepared := 0
	for _, c := range fsys.calls {
		s := seen[c.file]
		if s == nil || (!c.wait && s.next == segSize) {
			// A prepared segment's zeros from 0; then, once it is in
			// use, its frames from the end of its header.
			s = &span{next: c.off}
			seen[c.file] = s
			if c.off != 0 {
				require.EqualValues(t, segHeader, c.off, "file %d: frames handed over from offset %d", c.file, c.off)
			}
		}
		require.LessOrEqual(t, c.off+c.n, c.writeHigh, "file %d: writeback of [%d, %d) before it was written", c.file, c.off, c.off+c.n)
		if c.wait {
			s.waits++
			require.Less(t, c.off, s.next, "file %d: waits for a range not yet handed over", c.file)
			continue
		}
		require.Equal(t, s.next, c.off, "file %d: ranges not contiguous", c.file)
		require.GreaterOrEqual(t, c.n, int64(step), "file %d: a range shorter than WritebackAfter", c.file)
		s.next = c.off + c.n
		if s.next == segSize && s.waits > 0 {
			prepared++
		}
	}
	require.GreaterOrEqual(t, prepared, 4, "every prepared segment's zeros handed over whole, paced by waits")
	frames := 0
	for _, c := range fsys.calls {
		if c.off == segHeader {
			frames++
		}
	}
	require.GreaterOrEqual(t, frames, 3, "the frames of each filled segment handed over")

	for _, c := range []struct {
		name string
		wb   int64
		m    vfs.SyncMethod
	}{{"off", -1, vfs.Fdatasync}, {"O_DSYNC", step, vfs.ODsync}, {"O_DIRECT", step, vfs.ODirect}} {
		t.Run(c.name, func(t *testing.T) {
			require.Empty(t, run(t, c.wb, c.m, policy.SyncEveryCommit()).calls)
		})
	}
}

// wbFailFS fails the Writeback requests fail chooses, on files it wraps
// from fsys.
type wbFailFS struct {
	vfs.FS
	fail func(wait bool) error
}

type wbFailFile struct {
	vfs.File
	fail func(wait bool) error
}

func (f *wbFailFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	file, err := f.FS.Create(name, m)
	if err != nil {
		return file, err
	}
	return &wbFailFile{File: file, fail: f.fail}, nil
}

func (f *wbFailFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, m)
	if err != nil {
		return file, err
	}
	return &wbFailFile{File: file, fail: f.fail}, nil
}

func (w *wbFailFile) Writeback(off, n int64, wait bool) error { return w.fail(wait) }

// TestWritebackErrorPoisons: a failed request to start writeback of
// written frames is one of the segment's write errors: the log is poisoned
// and the commit gets ErrDurabilityUnknown, never an acknowledgement or a
// synced LSN past what was synced before. A failed wait while a segment is
// prepared (paced only where commits sync: SyncEveryCommit here)
// fails that preparation only (its file is discarded): the append
// that needed it gets the error, the log is not poisoned, and no temporary
// file is left.
func TestWritebackErrorPoisons(t *testing.T) {
	var failWrite, failWait atomic.Bool
	fsys := &wbFailFS{FS: vfs.NewMem(), fail: func(wait bool) error {
		if (wait && failWait.Load()) || (!wait && failWrite.Load()) {
			return syscall.EIO
		}
		return nil
	}}
	const segSize = 1 << 20
	// Preparation paces (and waits) only where commits sync.
	l := openLog(t, fsys, wal.Options{SegmentSize: segSize, WritebackAfter: 64 << 10, Policy: policy.SyncEveryN(1000)})
	failWait.Store(true)
	var err error
	for i := 0; err == nil && l.AppendedLSN() < 2*segSize; i++ {
		_, err = l.Append(record(0, i, 1000))
	}
	require.ErrorContains(t, err, "preparing a segment")
	require.ErrorIs(t, err, syscall.EIO)
	require.NotErrorIs(t, err, wal.ErrPoisoned)
	names, lerr := fsys.List(logDir)
	require.NoError(t, lerr)
	for _, n := range names {
		require.False(t, strings.HasSuffix(n, ".tmp"), "the failed preparation's file %s is left", n)
	}
	require.NoError(t, l.Sync(), "the log itself is sound")
	require.NoError(t, l.Close())

	failWait.Store(false)
	// A segment recovered at Open: its frames are handed over from the
	// recovered end on.
	fsys.FS = vfs.NewMem()
	l = openLog(t, fsys, wal.Options{SegmentSize: segSize})
	_, err = l.Append(record(1, 0, 1000))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	l = openLog(t, fsys, wal.Options{SegmentSize: segSize, WritebackAfter: 4 << 10})
	failWrite.Store(true)
	synced := l.SyncedLSN()
	for i := 1; err == nil; i++ {
		_, err = l.Append(record(1, i, 1000))
		if err == nil {
			synced = l.SyncedLSN()
		}
		require.Less(t, i, 100, "no Writeback failed: %v", err)
	}
	require.ErrorIs(t, err, wal.ErrDurabilityUnknown)
	require.ErrorIs(t, err, wal.ErrPoisoned)
	require.ErrorIs(t, err, syscall.EIO)
	require.Equal(t, synced, l.SyncedLSN(), "the failed group was not acknowledged as synced")
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
}
