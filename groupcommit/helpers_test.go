package groupcommit_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/durawal/durawal/groupcommit"
)

// fakeLog is an in-memory log for tests: append reserves an LSN; its flush
// "writes" and "syncs" everything appended when the flush starts. It checks
// that the queue never runs two flushes at once.
type fakeLog struct {
	appended atomic.Uint64
	// written and synced are published before flush returns, so that a
	// committer acknowledged by the queue can check its coverage against them.
	written, synced atomic.Uint64

	inFlush    atomic.Int32
	concurrent atomic.Bool
	flushes    atomic.Int64
	syncs      atomic.Int64

	// hold, if set, is called in each flush after the target is taken and
	// before the result is published (block, sleep, or fail there).
	hold func(n int64) error
}

// append reserves size bytes and returns the record's end LSN.
func (f *fakeLog) append(size uint64) uint64 { return f.appended.Add(size) }

func (f *fakeLog) flush(need groupcommit.Level) (uint64, uint64, error) {
	if f.inFlush.Add(1) != 1 {
		f.concurrent.Store(true)
	}
	defer f.inFlush.Add(-1)
	n := f.flushes.Add(1)
	end := f.appended.Load()
	if f.hold != nil {
		if err := f.hold(n); err != nil {
			return f.written.Load(), f.synced.Load(), err
		}
	}
	f.written.Store(end)
	if need == groupcommit.Synced {
		f.syncs.Add(1)
		f.synced.Store(end)
	}
	return end, f.synced.Load(), nil
}

// covered reports whether lsn is covered at need by a finished flush.
func (f *fakeLog) covered(lsn uint64, need groupcommit.Level) bool {
	if need == groupcommit.Synced {
		return f.synced.Load() >= lsn
	}
	return f.written.Load() >= lsn
}

func newQueue(t testing.TB, f *fakeLog, opts groupcommit.Options) *groupcommit.Queue {
	t.Helper()
	q, err := groupcommit.New(f.flush, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return q
}

// gate is a FlushFunc hold that blocks flush number n until released.
type gate struct {
	n       int64
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate(n int64) *gate {
	return &gate{n: n, entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) hold(n int64) error {
	if n == g.n {
		close(g.entered)
		<-g.release
	}
	return nil
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }
