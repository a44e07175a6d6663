package wal

import (
	"context"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// TestCommitOvertakenByCloseIsNilWhenDurable: a commit that got its LSN
// before Close and waits only after Close ran (the queue has failed with
// ErrClosed) returns nil, because Close's final sync made its record durable.
func TestCommitOvertakenByCloseIsNilWhenDurable(t *testing.T) {
	for _, p := range []policy.Policy{policy.SyncEveryCommit(), policy.SyncEveryN(4)} {
		t.Run(p.String(), func(t *testing.T) {
			l, err := Open("/log", Options{FS: vfs.NewMem(), SegmentSize: 64 << 10, Policy: p})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			l.app.Lock()
			if _, err := l.reserveLocked(ctx, []byte("x"), new(time.Duration)); err != nil {
				l.app.Unlock()
				t.Fatal(err)
			}
			end := l.app.next
			w := l.commitWaitLocked(nil)
			l.app.Unlock()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if LSN(l.synced.Load()) < end {
				t.Fatalf("Close left the record unsynced: synced %d < %d", l.synced.Load(), end)
			}
			if err := l.commit(ctx, end, uint64(end), w, time.Since(l.opened), 1); err != nil {
				t.Fatalf("commit after Close made it durable: %v, want nil", err)
			}
		})
	}
}

// TestLogBufferPreallocated: both log-buffer halves are allocated at their
// full size by Open, so appends up to BufferSize never reallocate (copy) a
// half under the append lock; only a frame larger than BufferSize grows one.
func TestLogBufferPreallocated(t *testing.T) {
	const bufSize = 1 << 20
	l, err := Open("/log", Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, BufferSize: bufSize,
		Policy: policy.SyncNever()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.app.Lock()
	halves := map[*byte]bool{}
	for _, b := range []*logBuffer{l.app.active, l.leader.spareBuf} {
		if cap(b.buf) != bufSize {
			t.Errorf("a half has capacity %d bytes after Open, want BufferSize %d", cap(b.buf), bufSize)
		}
		halves[&b.buf[:1][0]] = true
	}
	l.app.Unlock()
	rec := make([]byte, 1000)
	for range 3 * bufSize / len(rec) { // three buffers' worth: the halves swap
		if _, err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
		l.app.Lock()
		p := &l.app.active.buf[:1][0]
		l.app.Unlock()
		if !halves[p] {
			t.Fatal("a log-buffer half was reallocated by an append below BufferSize")
		}
	}

	// Small segments bound what Open allocates (two segments per half).
	small, err := Open("/small", Options{FS: vfs.NewMem(), SegmentSize: 4 << 10, BufferSize: bufSize})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	if got := cap(small.app.active.buf); got != 8<<10 {
		t.Errorf("half capacity %d bytes with 4 KiB segments, want 8 KiB", got)
	}
}
