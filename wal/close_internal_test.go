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
			if err := l.commit(ctx, end, uint64(end), w); err != nil {
				t.Fatalf("commit after Close made it durable: %v, want nil", err)
			}
		})
	}
}
