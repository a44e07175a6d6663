package wal_test

import (
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

// TestPreparerYieldsBetweenChunks: a goroutine made runnable while the
// segment preparer zero-fills a spare runs within a chunk, not after the
// whole segment. With one P (the case of two Ps whose other one is held in
// a leader's fdatasync), a preparer that never yields holds the P until it
// blocks or is preempted (10 ms): commits woken onto its run queue waited
// that long behind it in a runtime trace of 16 SyncEveryCommit committers.
func TestPreparerYieldsBetweenChunks(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const (
		segSize = 4 << 20
		chunk   = 64 << 10 // the zero-fill's write size
		readyAt = 4        // the chunk whose write readies the other goroutine
	)
	inj, writes, ran := readyAtOp(readyAt, func(op faultfs.Op) bool { // zero-fill writes, not a header
		return op.Kind == faultfs.OpWrite && op.Len == chunk && strings.Contains(op.Path, "/prepare-")
	})
	l, err := wal.Open(t.TempDir(), wal.Options{
		FS:          faultfs.Inject(vfs.NewMem(), inj),
		SegmentSize: segSize,
		// Its spares are zero-filled, not allocated, and it writes no zeros
		// ahead of the frames in the (allocated) first segment, whose
		// 64 KiB writes the injector would count too.
		Policy: policy.SyncInterval(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Past half the first segment the preparer starts zero-filling the
	// next one.
	rec := make([]byte, 4000)
	for n := 0; writes.Load() == 0; n++ {
		if n*len(rec) > segSize {
			t.Fatal("no spare was zero-filled while a whole segment was appended")
		}
		if _, err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	var got int64
	select {
	case got = <-ran:
	case <-time.After(time.Minute):
		t.Fatalf("the preparer wrote %d chunks and never reached write %d", writes.Load(), readyAt)
	}
	if total := int64(segSize / chunk); got > readyAt+2 {
		t.Fatalf("the goroutine readied by zero-fill write %d ran after write %d of %d: the preparer held its P through the chunks between",
			readyAt, got, total)
	}
}

// TestRemoveBeforeYieldsBetweenRemovals: the same for a checkpoint that
// removes many segments: a goroutine readied during the removals runs
// between two of them, not after the last.
func TestRemoveBeforeYieldsBetweenRemovals(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const readyAt = 4
	inj, removals, ran := readyAtOp(readyAt, func(op faultfs.Op) bool { // segment files removed or renamed for reuse
		return (op.Kind == faultfs.OpRemove || op.Kind == faultfs.OpRename) && strings.HasSuffix(op.Path, ".wal")
	})
	l, err := wal.Open(t.TempDir(), wal.Options{
		FS:          faultfs.Inject(vfs.NewMem(), inj),
		SegmentSize: wal.MinSegmentSize,
		Policy:      policy.BufferedInterval(time.Hour, time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := make([]byte, 1000)
	var last wal.LSN
	for l.Stats().Segments < 64 {
		if last, err = l.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.RemoveBefore(last); err != nil {
		t.Fatal(err)
	}
	total := removals.Load()
	if total < 32 {
		t.Fatalf("RemoveBefore removed %d segment files, want 63", total)
	}
	if got := <-ran; got > readyAt+1 {
		t.Fatalf("the goroutine readied by removal %d ran after removal %d of %d: RemoveBefore held its P through the removals between",
			readyAt, got, total)
	}
}

// readyAtOp returns an injector that counts the operations match accepts
// and, as the at-th begins, readies a goroutine that sends on ran how many
// had begun by the time it ran. With one P, a goroutine running the
// operations that yields between them lets it run within one operation.
func readyAtOp(at int64, match func(faultfs.Op) bool) (inj faultfs.Injector, count *atomic.Int64, ran <-chan int64) {
	count = new(atomic.Int64)
	ready := make(chan struct{})
	inj = faultfs.InjectorFunc(func(op faultfs.Op) error {
		if match(op) && count.Add(1) == at {
			close(ready)
		}
		return nil
	})
	out := make(chan int64, 1)
	go func() {
		<-ready
		out <- count.Load()
	}()
	return inj, count, out
}
