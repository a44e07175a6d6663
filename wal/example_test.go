package wal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
)

// Open a log, append, close, reopen and replay what it holds.
func Example() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	for _, rec := range []string{"create table t", "insert 1", "insert 2"} {
		if _, err := l.Append([]byte(rec)); err != nil { // durable on return
			log.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		log.Fatal(err)
	}

	l, err = wal.Open(dir, wal.Options{SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	r, err := l.NewReader(0)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %s\n", lsn, rec)
	}
	fmt.Println("next LSN", l.AppendedLSN())
	// Output:
	// 0 create table t
	// 40 insert 1
	// 72 insert 2
	// next LSN 104
}

// Append returns the record's LSN once the policy is satisfied: here after
// the write (policy.SyncNever); Sync then makes everything appended durable.
func ExampleLog_Append() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()

	lsn, err := l.Append([]byte("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("appended at", lsn, "written to", l.WrittenLSN(), "synced to", l.SyncedLSN())
	if err := l.Sync(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("synced to", l.SyncedLSN())
	_, err = l.Append(nil)
	fmt.Println(err)
	// Output:
	// appended at 0 written to 32 synced to 0
	// synced to 32
	// wal: empty record
}

// A Reader replays records from any LSN, across segments; here from the
// second record on.
func ExampleReader() {
	dir, err := os.MkdirTemp("", "durawal-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := wal.Open(dir, wal.Options{SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var second wal.LSN
	for i := range 4 {
		lsn, err := l.Append(fmt.Appendf(nil, "record %d", i))
		if err != nil {
			log.Fatal(err)
		}
		if i == 1 {
			second = lsn
		}
	}

	r, err := l.NewReader(second)
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d: %s\n", lsn, rec)
	}
	// Output:
	// 32: record 1
	// 64: record 2
	// 96: record 3
}

// AppendBatch appends several records as one commit: one wait (here one
// sync, under the default SyncEveryCommit) for the whole batch. It returns
// the first record's LSN.
func ExampleLog_AppendBatch() {
	l, err := wal.Open("/log", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	batch := [][]byte{[]byte("debit a 10"), []byte("credit b 10"), []byte("commit")}
	first, err := l.AppendBatchContext(context.Background(), batch)
	if err != nil {
		log.Fatal(err)
	}
	s := l.Stats()
	fmt.Println("first LSN", first, "next LSN", l.AppendedLSN(), "synced to", l.SyncedLSN())
	fmt.Println("records", s.AppendRequests, "commits", s.Commits, "groups", s.Group.Groups)
	// Output:
	// first LSN 0 next LSN 112 synced to 112
	// records 3 commits 1 groups 1
}

// WaitDurable forces a sync for one record under a policy that does not
// sync commits (the analogue of Redis WAITAOF).
func ExampleLog_WaitDurable() {
	l, err := wal.Open("/log", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	lsn, err := l.Append([]byte("transfer 42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after Append: durable?", l.SyncedLSN() > lsn)
	if err := l.WaitDurable(context.Background(), lsn); err != nil {
		log.Fatal(err)
	}
	fmt.Println("after WaitDurable: durable?", l.SyncedLSN() > lsn)
	err = l.WaitDurable(context.Background(), l.AppendedLSN())
	fmt.Println(errors.Is(err, wal.ErrNotFound))
	// Output:
	// after Append: durable? false
	// after WaitDurable: durable? true
	// true
}

// RemoveBefore drops the segments whose records all lie below a checkpoint;
// the segment holding the checkpoint stays, and so does the active one.
func ExampleLog_RemoveBefore() {
	mem := vfs.NewMem()
	l, err := wal.Open("/log", wal.Options{FS: mem, SegmentSize: wal.MinSegmentSize, Policy: policy.SyncNever()})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	var lsns []wal.LSN
	for range 12 { // three 1000-byte records fit in a 4 KiB segment
		lsn, err := l.Append(make([]byte, 1000))
		if err != nil {
			log.Fatal(err)
		}
		lsns = append(lsns, lsn)
	}
	segments := func() []string {
		names, err := mem.List("/log")
		if err != nil {
			log.Fatal(err)
		}
		var segs []string // not LOCK, nor a segment being prepared (.wal.tmp)
		for _, n := range names {
			if strings.HasSuffix(n, ".wal") {
				segs = append(segs, n)
			}
		}
		return segs
	}
	fmt.Println("segments before:", segments())
	checkpoint := lsns[10] // records before it are applied elsewhere
	kept, err := l.RemoveBefore(checkpoint)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("checkpoint", checkpoint, "first kept LSN", kept)
	fmt.Println("segments after:", segments())
	_, err = l.NewReader(0)
	fmt.Println(errors.Is(err, wal.ErrNotFound), err)
	// Output:
	// segments before: [00000000000000000000.wal 00000000000000003072.wal 00000000000000006144.wal 00000000000000009216.wal]
	// checkpoint 10240 first kept LSN 9216
	// segments after: [00000000000000009216.wal]
	// true wal: LSN not in the log: LSN 0 is below the oldest kept segment (LSN 9216)
}

// Read latency quantiles from the histograms in Stats, and the latency of
// an interval by subtracting an earlier snapshot.
func ExampleHistogram() {
	l, err := wal.Open("/log", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for range 100 {
		if _, err := l.Append([]byte("record")); err != nil {
			log.Fatal(err)
		}
	}
	s := l.Stats()
	fsync := s.FsyncDuration
	fmt.Println("one histogram count per fsync:", fsync.Count == s.Fsyncs)
	fmt.Println("p50 ≤ p99 ≤ p999:", fsync.P50() <= fsync.P99() && fsync.P99() <= fsync.P999())
	commits := s.CommitWaitSynced // SyncEveryCommit: every commit waited for its sync
	fmt.Println("commits:", commits.Count)

	for range 10 {
		if _, err := l.Append([]byte("record")); err != nil {
			log.Fatal(err)
		}
	}
	last10 := l.Stats().CommitWaitSynced.Sub(commits)
	fmt.Println("commits since the first snapshot:", last10.Count)
	lo, hi := wal.BucketBounds(wal.HistogramBuckets - 2)
	fmt.Println("last bounded bucket:", lo.Round(time.Second), "to", hi.Round(time.Second))
	// Output:
	// one histogram count per fsync: true
	// p50 ≤ p99 ≤ p999: true
	// commits: 100
	// commits since the first snapshot: 10
	// last bounded bucket: 1m7s to 1m9s
}

// An Observer sees each event as it happens: here, a count of syncs and
// the commits' wait levels, through ObserverFuncs.
func ExampleObserverFuncs() {
	var syncs, synced atomic.Int64
	l, err := wal.Open("/log", wal.Options{FS: vfs.NewMem(), SegmentSize: 1 << 20, Observer: &wal.ObserverFuncs{
		Sync: func(e wal.SyncEvent) { syncs.Add(1) },
		Commit: func(e wal.CommitEvent) {
			if e.Err == nil && e.Wait == policy.WaitSync {
				synced.Add(1)
			}
		},
	}})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for range 5 {
		if _, err := l.Append([]byte("record")); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("sync events match Stats.Fsyncs:", uint64(syncs.Load()) == l.Stats().Fsyncs)
	fmt.Println("commits that waited for a sync:", synced.Load())
	// Output:
	// sync events match Stats.Fsyncs: true
	// commits that waited for a sync: 5
}
