package wal

import (
	"context"
	"testing"

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
			l.mu.Lock()
			if _, err := l.reserveLocked(ctx, []byte("x")); err != nil {
				l.mu.Unlock()
				t.Fatal(err)
			}
			end := l.next
			w := l.commitWaitLocked(nil)
			l.mu.Unlock()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if LSN(l.synced.Load()) < end {
				t.Fatalf("Close left the record unsynced: synced %d < %d", l.synced.Load(), end)
			}
			if err := l.commit(ctx, end, w); err != nil {
				t.Fatalf("commit after Close made it durable: %v, want nil", err)
			}
		})
	}
}

// TestLogBufferPreallocated: both log buffer halves are allocated at full
// capacity at Open, and appends (filling them past BufferSize and swapping
// them many times) never grow or replace them.
func TestLogBufferPreallocated(t *testing.T) {
	const bufSize = 4 << 10
	l, err := Open("/log", Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, BufferSize: bufSize,
		MaxRecordSize: 2 << 10, Policy: policy.SyncNever()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	want := bufferCap(l.opts)
	if want < bufSize {
		t.Fatalf("bufferCap = %d < BufferSize %d", want, bufSize)
	}
	l.mu.Lock()
	halves := []*logBuffer{l.active, l.spareBuf}
	l.mu.Unlock()
	base := func(b *logBuffer) *byte { return &b.buf[:1][0] }
	var bases [2]*byte
	for i, b := range halves {
		if got := cap(b.buf); got != want {
			t.Fatalf("half %d: cap at Open = %d, want %d", i, got, want)
		}
		bases[i] = base(b)
	}
	rec := make([]byte, 100)
	big := make([]byte, 2<<10)
	for i := range 2000 {
		r := rec
		if i%50 == 0 {
			r = big
		}
		if _, err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range []*logBuffer{l.active, l.spareBuf} {
		if b != halves[0] && b != halves[1] {
			t.Fatal("a log buffer half was replaced")
		}
	}
	for i, b := range halves {
		if cap(b.buf) != want || base(b) != bases[i] {
			t.Errorf("half %d grew: cap %d (want %d), reallocated %v", i, cap(b.buf), want, base(b) != bases[i])
		}
	}
}
