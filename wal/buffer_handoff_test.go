package wal_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// TestBufferFullHandsOffTheWrite: an append that fills a half of the log
// buffer hands it to a writer and goes on copying into the other half while
// that write runs (appends return although the write is held); only an
// append that finds the other half full too, its write still running,
// waits for it, and only that one counts as a buffer-full wait
// (Innodb_log_waits). A context that ends during that wait returns
// ErrNotAppended and appends nothing. Every record appended reads back
// after a reopen.
func TestBufferFullHandsOffTheWrite(t *testing.T) {
	const bufSize = 4 << 10
	mem := vfs.NewMem()
	var hold atomic.Bool
	release := make(chan struct{})
	var held atomic.Int64
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if hold.Load() && op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") && op.Len > 1024 {
			held.Add(1)
			<-release
		}
		return nil
	})
	opts := wal.Options{FS: faultfs.Inject(mem, inj), SegmentSize: 64 << 10, BufferSize: bufSize,
		Policy: policy.BufferedInterval(time.Hour, time.Hour)} // no background write: only full halves are written
	l, err := wal.Open(faultDir, opts)
	require.NoError(t, err)
	hold.Store(true)

	// Fill the first half and start the second: the write of the first is
	// held, yet the appends return.
	var lsns []wal.LSN
	appendOne := func(i int) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		lsn, err := l.AppendContext(ctx, payload(i, 200))
		require.NoError(t, err, "append %d waited for the held write", i)
		lsns = append(lsns, lsn)
	}
	i := 0
	for ; l.AppendedLSN() < bufSize+bufSize/2; i++ {
		appendOne(i)
	}
	require.Eventually(t, func() bool { return held.Load() == 1 }, 5*time.Second, time.Millisecond, "the first half's write started")
	require.Zero(t, l.WrittenLSN(), "and is still held")
	require.Zero(t, l.Stats().BufferFullWaits, "the first full half was handed off without a wait")

	// Fill the second half: the append that finds it full waits for the
	// held write; with a context that ends, it gives up and appends nothing.
	for l.AppendedLSN()+232 <= 2*bufSize {
		appendOne(i)
		i++
	}
	before := l.AppendedLSN()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = l.AppendContext(ctx, payload(-1, 200))
	cancel()
	require.ErrorIs(t, err, wal.ErrNotAppended)
	require.True(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	require.Equal(t, before, l.AppendedLSN(), "nothing appended")
	require.Equal(t, uint64(1), l.Stats().BufferFullWaits, "found the other half still being written")

	// Without a deadline it waits until the write returns.
	done := make(chan error, 1)
	go func() { _, err := l.Append(payload(i, 200)); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("the append returned (%v) while the other half's write was held", err)
	case <-time.After(20 * time.Millisecond):
	}
	hold.Store(false)
	close(release)
	require.NoError(t, <-done)
	waited := l.Stats().CommitWaitNone
	require.GreaterOrEqual(t, waited.Sum, 20*time.Millisecond, "the wait for the held write is in the commit latency")
	require.Equal(t, uint64(len(lsns)+1), waited.Count, "every commit counted, the one that gave up excepted")
	lsns = append(lsns, 0) // its LSN is not known here; check by count below
	require.NoError(t, l.Close())

	l, err = wal.Open(faultDir, wal.Options{FS: mem, SegmentSize: 64 << 10})
	require.NoError(t, err)
	defer l.Close()
	got, recs := readAll(t, l, 0)
	require.Len(t, got, len(lsns))
	require.Equal(t, lsns[:len(lsns)-1], got[:len(got)-1])
	require.Equal(t, payload(i, 200), recs[len(recs)-1])
}

// TestCommitLatencyFromFirstWait: a WaitNone commit that waits for nothing
// reads no clock and counts as 0 in Stats.CommitWaitNone and for the
// Observer; a commit that waits (here for its sync) is timed.
func TestCommitLatencyFromFirstWait(t *testing.T) {
	var durations []time.Duration
	obs := &wal.ObserverFuncs{Commit: func(e wal.CommitEvent) { durations = append(durations, e.Duration) }}
	// 1 MiB segments: 100 small records stay below the eighth-full mark,
	// so no segment preparation runs and takes the log's lock meanwhile
	// (an append that found it taken would wait, and be timed).
	l := openLog(t, vfs.NewMem(), wal.Options{SegmentSize: 1 << 20, Policy: policy.BufferedInterval(time.Hour, time.Hour), Observer: obs})
	for i := range 100 {
		_, err := l.Append(payload(i, 100))
		require.NoError(t, err)
	}
	st := l.Stats().CommitWaitNone
	require.Equal(t, uint64(100), st.Count)
	require.Zero(t, st.Sum, "no wait, no clock")
	require.Equal(t, make([]time.Duration, 100), durations)
	_, err := l.AppendContext(context.Background(), payload(100, 100), wal.ForceSync)
	require.NoError(t, err)
	synced := l.Stats().CommitWaitSynced
	require.Equal(t, uint64(1), synced.Count)
	require.Positive(t, synced.Sum, "a commit that waits for its sync is timed")
	require.Positive(t, durations[100])
	require.NoError(t, l.Close())
}
