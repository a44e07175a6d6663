package wal_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/internal/longtest"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// readCounter counts the reads made through an injected FS, and their bytes.
type readCounter struct{ reads, bytes, opens atomic.Int64 }

func (c *readCounter) inject(fsys vfs.FS) vfs.FS {
	return faultfs.Inject(fsys, faultfs.InjectorFunc(func(op faultfs.Op) error {
		switch op.Kind {
		case faultfs.OpRead:
			c.reads.Add(1)
			c.bytes.Add(int64(op.Len))
		case faultfs.OpOpen:
			c.opens.Add(1)
		}
		return nil
	}))
}

// TestReadRecord: every record of a log spanning segments reads back by its
// LSN, byte for byte, from the files, from the log buffer (a buffered
// policy, nothing written yet), and after a reopen.
func TestReadRecord(t *testing.T) {
	mem := vfs.NewMem()
	opts := wal.Options{Policy: policy.BufferedInterval(time.Hour, time.Hour), SegmentSize: 16 << 10, BufferSize: 1 << 20}
	l := openLog(t, mem, opts)
	h := &history{}
	for i := range 300 {
		rec := record(1, i, 1+i*37%900)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		h.add(lsn, rec)
	}
	check := func(l *wal.Log, what string) {
		var buf []byte
		for i, lsn := range h.lsns {
			got, err := l.ReadRecord(lsn, buf)
			require.NoError(t, err, "%s: record %d at LSN %d", what, i, lsn)
			require.Equal(t, h.recs[i], got, "%s: record %d", what, i)
			buf = got
		}
	}
	require.Greater(t, l.AppendedLSN(), l.WrittenLSN(), "some records are still in the log buffer")
	check(l, "buffered")
	require.NoError(t, l.Sync())
	check(l, "written")
	require.NoError(t, l.Close())
	l = openLog(t, mem, opts)
	defer l.Close()
	check(l, "reopened")

	end := l.AppendedLSN()
	for _, tc := range []struct {
		lsn  wal.LSN
		want error
	}{
		{end, wal.ErrNotFound},
		{end + 8, wal.ErrNotFound},
		{h.lsns[1] + 3, wal.ErrNotFound},
		{h.lsns[1] + 8, wal.ErrCorrupt}, // inside a record's payload
	} {
		_, err := l.ReadRecord(tc.lsn, nil)
		require.ErrorIs(t, err, tc.want, "LSN %d", tc.lsn)
	}
	first, err := l.RemoveBefore(h.lsns[len(h.lsns)/2])
	require.NoError(t, err)
	require.Equal(t, first, l.FirstLSN())
	require.Greater(t, first, wal.LSN(0))
	_, err = l.ReadRecord(h.lsns[0], nil)
	require.ErrorIs(t, err, wal.ErrNotFound, "below FirstLSN")
	_, err = l.ReadRecord(h.lsns[len(h.lsns)-1], nil)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	_, err = l.ReadRecord(h.lsns[len(h.lsns)-1], nil)
	require.ErrorIs(t, err, wal.ErrClosed)
}

// TestReadRecordIO: reading the last record of a full 64 MiB segment costs
// two reads (header, payload) and at most twice the frame's size in bytes,
// and the segment's read-only handle is opened once and reused. Before
// ReadRecord, a Reader positioned there read the whole segment (issue 14).
func TestReadRecordIO(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a 64 MiB segment")
	}
	for _, fsName := range []string{"mem", "os"} {
		t.Run("fs="+fsName, func(t *testing.T) { testReadRecordIO(t, fsName) })
	}
}

func testReadRecordIO(t *testing.T, fsName string) {
	var c readCounter
	var mem vfs.FS = vfs.NewMem()
	dir := logDir
	if fsName == "os" {
		mem, dir = vfs.OS(), t.TempDir()
	}
	segSize := int64(64 << 20) // the case: the last record of a full default segment
	if raceEnabled || !longtest.Long() {
		segSize = 4 << 20 // the same reads, a sixteenth of the filling (-race is ~10× slower; 64 MiB with DURAWAL_LONG=1)
	}
	l, err := wal.Open(dir, wal.Options{Policy: policy.SyncNever(), SegmentSize: segSize, FS: c.inject(mem)})
	require.NoError(t, err)
	defer l.Close()
	const size = 100
	batch := make([][]byte, 4096)
	lsns := make([]wal.LSN, len(batch))
	last := wal.LSN(0)
	for segs := 1; segs < 2; segs = countSegmentsIn(t, mem, dir) {
		for i := range batch {
			batch[i] = record(2, i, size)
		}
		_, err := l.AppendBatchLSNs(context.Background(), batch, lsns)
		require.NoError(t, err)
		require.NoError(t, l.Sync())
		for _, lsn := range lsns {
			if lsn+wal.LSN(wal.FrameSize(size)) <= 64<<20-segHeader-24 {
				last = max(last, lsn)
			}
		}
	}
	// last is the last record of the first segment.
	reads, bytes, opens := c.reads.Load(), c.bytes.Load(), c.opens.Load()
	start := time.Now()
	rec, err := l.ReadRecord(last, nil)
	took := time.Since(start)
	require.NoError(t, err)
	require.Len(t, rec, size)
	gotReads, gotBytes := c.reads.Load()-reads, c.bytes.Load()-bytes
	t.Logf("%s: ReadRecord of the last record of a full 64 MiB segment (LSN %d), first read (opens the handle): %d reads, %d bytes (frame %d bytes), %v",
		fsName, last, gotReads, gotBytes, wal.FrameSize(size), took)
	require.LessOrEqual(t, gotBytes, 2*wal.FrameSize(size))
	require.Equal(t, int64(3), gotReads, "the segment's header (its format), the frame header, the payload")
	start = time.Now()
	for range 10 {
		_, err := l.ReadRecord(last, rec)
		require.NoError(t, err)
	}
	t.Logf("%s: the same read again: %v each", fsName, time.Since(start)/10)
	require.Equal(t, int64(1), c.opens.Load()-opens, "one read-only handle, reused")

	// NewReader seeks directly to a record's LSN.
	reads, bytes = c.reads.Load(), c.bytes.Load()
	r, err := l.NewReader(last)
	require.NoError(t, err)
	lsn, got, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, last, lsn)
	require.Equal(t, rec, got)
	require.NoError(t, r.Close())
	t.Logf("NewReader(last)+Next: %d reads, %d bytes", c.reads.Load()-reads, c.bytes.Load()-bytes)
	require.LessOrEqual(t, c.bytes.Load()-bytes, int64(256<<10), "at most one read window")
}

// TestReadRecordConcurrent: readers and appenders and a RemoveBefore run
// together; every read returns the record appended at its LSN or
// ErrNotFound once removed.
func TestReadRecordConcurrent(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncEveryN(8), SegmentSize: 16 << 10})
	defer l.Close()
	var mu sync.Mutex
	recs := map[wal.LSN][]byte{}
	var lsns []wal.LSN
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 2 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rec := record(w, i, 1+i%700)
				lsn, err := l.Append(rec)
				if !assertNoErr(t, err) {
					return
				}
				mu.Lock()
				recs[lsn] = rec
				lsns = append(lsns, lsn)
				mu.Unlock()
			}
		})
	}
	for r := range 3 {
		wg.Go(func() {
			var buf []byte
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				if len(lsns) == 0 {
					mu.Unlock()
					continue
				}
				lsn := lsns[(i*7919+r)%len(lsns)]
				want := recs[lsn]
				mu.Unlock()
				got, err := l.ReadRecord(lsn, buf)
				if errors.Is(err, wal.ErrNotFound) && lsn < l.FirstLSN() {
					continue
				}
				if !assertNoErr(t, err) || !assertEqual(t, want, got, lsn) {
					return
				}
				buf = got
			}
		})
	}
	for range 20 {
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		n := len(lsns)
		var at wal.LSN
		if n > 0 {
			at = lsns[n/3]
		}
		mu.Unlock()
		_, err := l.RemoveBefore(at)
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
}

func assertNoErr(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Error(err)
		return false
	}
	return true
}

func assertEqual(t *testing.T, want, got []byte, lsn wal.LSN) bool {
	t.Helper()
	if string(want) != string(got) {
		t.Errorf("LSN %d: got %d bytes, want %d", lsn, len(got), len(want))
		return false
	}
	return true
}

// TestAppendBatchLSNs: every record's LSN is reported, in order, each
// readable at it; the call allocates nothing in steady state.
func TestAppendBatchLSNs(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncNever(), SegmentSize: 16 << 20})
	defer l.Close()
	batch := [][]byte{record(3, 0, 10), record(3, 1, 200), record(3, 2, 33)}
	lsns := make([]wal.LSN, 3)
	first, err := l.AppendBatchLSNs(context.Background(), batch, lsns)
	require.NoError(t, err)
	require.Equal(t, first, lsns[0])
	for i, lsn := range lsns {
		if i > 0 {
			require.Equal(t, lsns[i-1]+wal.LSN(wal.FrameSize(len(batch[i-1]))), lsn)
		}
		got, err := l.ReadRecord(lsn, nil)
		require.NoError(t, err)
		require.Equal(t, batch[i], got)
	}
	before := l.AppendedLSN()
	_, err = l.AppendBatchLSNs(context.Background(), batch, lsns[:2])
	require.ErrorIs(t, err, wal.ErrInvalidArgument, "too few LSN slots")
	require.Equal(t, before, l.AppendedLSN(), "nothing appended")
	err = nil
	if raceEnabled {
		return
	}
	for range 100 {
		_, err := l.AppendBatchLSNs(context.Background(), batch, lsns)
		require.NoError(t, err)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if _, e := l.AppendBatchLSNs(context.Background(), batch, lsns); e != nil {
			err = e
		}
	})
	require.NoError(t, err)
	require.Zero(t, allocs, "allocations per AppendBatchLSNs")
}

// TestReaderSeeksDirectly: NewReader at a record's LSN, at an LSN inside a
// record, and at the appended LSN.
func TestReaderSeeksDirectly(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{SegmentSize: 16 << 10})
	defer l.Close()
	h := &history{}
	for i := range 100 {
		rec := record(4, i, 1+i*53%600)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		h.add(lsn, rec)
	}
	for _, i := range []int{0, 1, 37, 99} {
		for _, delta := range []wal.LSN{0, 8} {
			lsns, recs := readAll(t, l, h.lsns[i]+delta)
			j := i
			if delta > 0 {
				j++
			}
			require.Equal(t, len(h.lsns[j:]), len(lsns), fmt.Sprintf("from record %d + %d", i, delta))
			if j < len(h.lsns) {
				require.Equal(t, h.lsns[j:], lsns)
				require.Equal(t, h.recs[j:], recs)
			}
		}
	}
	r, err := l.NewReader(l.AppendedLSN())
	require.NoError(t, err)
	defer r.Close()
	_, _, err = r.Next()
	require.Equal(t, io.EOF, err)
	rec := record(4, 100, 10)
	lsn, err := l.Append(rec)
	require.NoError(t, err)
	got, gotRec, err := r.Next()
	require.NoError(t, err)
	require.Equal(t, lsn, got)
	require.Equal(t, rec, gotRec)
}

// countSegments returns how many segment files logDir holds on fsys.
func countSegments(t testing.TB, fsys vfs.FS) int { return countSegmentsIn(t, fsys, logDir) }

// countSegmentsIn returns how many segment files dir holds on fsys.
func countSegmentsIn(t testing.TB, fsys vfs.FS, dir string) int {
	t.Helper()
	names, err := fsys.List(dir)
	require.NoError(t, err)
	n := 0
	for _, name := range names {
		if len(name) == 24 && name[20:] == ".wal" {
			n++
		}
	}
	return n
}

// BenchmarkReadRecord reads random records of 16 MiB of 100-byte records by
// LSN, on the OS filesystem (page cache warm) and on a MemFS, and reports
// the bytes read per record.
func BenchmarkReadRecord(b *testing.B) {
	for _, fsName := range []string{"os", "mem"} {
		b.Run("fs="+fsName+"/record=100", func(b *testing.B) {
			var c readCounter
			opts := wal.Options{Policy: policy.SyncNever(), SegmentSize: 4 << 20}
			dir := logDir
			var base vfs.FS = vfs.NewMem()
			if fsName == "os" {
				base, dir = vfs.OS(), b.TempDir()
			}
			opts.FS = c.inject(base)
			l, err := wal.Open(dir, opts)
			require.NoError(b, err)
			defer l.Close()
			batch := make([][]byte, 1024)
			lsns := make([]wal.LSN, len(batch))
			var all []wal.LSN
			for len(all) < (16<<20)/128 {
				for i := range batch {
					batch[i] = record(5, len(all)+i, 100)
				}
				_, err := l.AppendBatchLSNs(context.Background(), batch, lsns)
				require.NoError(b, err)
				all = append(all, lsns...)
			}
			require.NoError(b, l.Sync())
			bytes := c.bytes.Load()
			var buf []byte
			b.ReportAllocs()
			b.SetBytes(100)
			b.ResetTimer()
			i := 0
			for b.Loop() {
				buf, err = l.ReadRecord(all[(i*7919)%len(all)], buf)
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(c.bytes.Load()-bytes)/float64(i), "bytes-read/op")
		})
	}
}

// TestReaderFollow: a tailing Reader waits for records without
// polling, sees only durable ones with DurableOnly, ends with its context,
// and returns ErrClosed when the log closes under it.
func TestReaderFollow(t *testing.T) {
	l := openLog(t, vfs.NewMem(), wal.Options{Policy: policy.SyncNever()})
	tail, err := l.NewReader(0)
	require.NoError(t, err)
	defer tail.Close()
	durable, err := l.NewReader(0, wal.DurableOnly)
	require.NoError(t, err)
	defer durable.Close()

	got := make(chan wal.LSN, 100)
	go func() {
		for {
			lsn, _, err := tail.Follow(context.Background())
			if err != nil {
				close(got)
				return
			}
			got <- lsn
		}
	}()
	var lsns []wal.LSN
	for i := range 5 {
		lsn, err := l.Append(record(8, i, 50)) // written at commit, never synced
		require.NoError(t, err)
		lsns = append(lsns, lsn)
		select {
		case g := <-got:
			require.Equal(t, lsn, g)
		case <-time.After(5 * time.Second):
			t.Fatal("the tailing reader did not wake")
		}
	}
	// Not durable yet: the durable reader waits until its context ends.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, _, err = durable.Follow(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	done := make(chan []wal.LSN)
	go func() {
		var seen []wal.LSN
		for len(seen) < len(lsns) {
			lsn, _, err := durable.Follow(context.Background())
			if err != nil {
				break
			}
			seen = append(seen, lsn)
		}
		done <- seen
	}()
	require.Eventually(t, func() bool { return wal.TailWaiting(l) }, 5*time.Second, time.Millisecond, "the durable reader waits for the sync")
	require.NoError(t, l.Sync())
	select {
	case seen := <-done:
		require.Equal(t, lsns, seen, "the durable reader sees the records once synced")
	case <-time.After(5 * time.Second):
		t.Fatal("the durable reader did not wake at the sync")
	}
	require.NoError(t, l.Close())
	select {
	case _, ok := <-got:
		require.False(t, ok, "the tailing reader ends at Close")
	case <-time.After(5 * time.Second):
		t.Fatal("the tailing reader did not wake at Close")
	}
}
