package wal_test

import (
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

// TestCloseWaitsForTheHandedOffWrite: the write of a full log-buffer half
// runs in the goroutine the append handed it to, after the append
// returned. If the log is poisoned meanwhile (here: the seal of the
// segment that write rolled away from fails its sync), Close must still
// wait for that write before it closes the segment files: else the write
// lands in a closed file (or, on the OS, a reused descriptor), or the next
// writeAt finds the write segment's file nil and panics.
func TestCloseWaitsForTheHandedOffWrite(t *testing.T) {
	const bufSize = 4 << 10
	mem := vfs.NewMem()
	var first atomic.Value // the path the first segment's file was opened with
	first.Store("")
	var armed, failSync atomic.Bool
	var held atomic.Int64
	release := make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			if op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") {
				first.Store(op.Path) // the path the first segment was opened with
			}
			return nil
		}
		if op.Kind == faultfs.OpSync && strings.Contains(op.Path, ".wal") && failSync.Load() {
			return faultfs.ErrInjected
		}
		if op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") && op.Path != first.Load().(string) && op.Offset < 32 {
			failSync.Store(true) // the roll's header write: from here on, the seal's sync fails
		}
		if op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") && op.Path != first.Load().(string) && op.Offset >= 32 && held.Load() == 0 {
			// The frames after the roll, in the new segment: the write
			// is held while the roll's seal fails and poisons the log.
			held.Add(1)
			<-release
		}
		return nil
	})
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: 64 << 10, BufferSize: bufSize,
		Policy: policy.BufferedInterval(time.Hour, time.Hour)})
	require.Len(t, segments(t, mem), 1)

	// Append until a roll is in the active half, then until that half is
	// full and handed off: its write crosses into the second segment.
	var rolled wal.LSN
	for i := 0; ; i++ {
		_, err := l.Append(payload(i, 200))
		if err != nil && held.Load() > 0 {
			require.ErrorIs(t, err, wal.ErrPoisoned)
			break
		}
		require.NoError(t, err)
		if rolled == 0 && l.AppendedLSN() > 64<<10 {
			rolled = l.AppendedLSN()
			armed.Store(true)
		}
		if held.Load() > 0 || (rolled != 0 && l.AppendedLSN() > rolled+2*bufSize) {
			break
		}
	}
	closeWhileWriteHeld(t, l, &held, release, "the handed-off write")
}

// closeWhileWriteHeld waits until a write is held (held == 1) and the log
// poisoned, then calls Close and checks that it does not return while the
// write is held; it then lets the write go (closes release), and checks
// that Close returns ErrPoisoned, as does every channel in others (the
// results of the calls that were writing).
func closeWhileWriteHeld(t *testing.T, l *wal.Log, held *atomic.Int64, release chan struct{}, what string, others ...chan error) {
	t.Helper()
	require.Eventually(t, func() bool { return held.Load() == 1 }, 5*time.Second, time.Millisecond,
		"%s reached the new segment", what)
	require.Eventually(t, func() bool { return l.Stats().Poisoned }, 5*time.Second, time.Millisecond,
		"the seal's failed sync poisoned the log")
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		close(release)
		t.Fatalf("Close returned (%v) while %s was still in flight", err, what)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	for _, ch := range append(others, closed) {
		select {
		case err := <-ch:
			require.ErrorIs(t, err, wal.ErrPoisoned)
		case <-time.After(5 * time.Second):
			t.Fatalf("Close, or a call writing when it began, hangs after %s was let go", what)
		}
	}
}

// TestCloseWaitsForAUserLedFlush is TestCloseWaitsForTheHandedOffWrite for
// a flush led by the application's own goroutine: under a write-at-commit
// policy the append that rolls writes its frame into the new segment
// itself, and here that write is held while the roll's seal fails and
// poisons the log. Close on the poisoned log must still wait for that
// write before it closes the segment files: the new segment's file must
// not be closed under it.
func TestCloseWaitsForAUserLedFlush(t *testing.T) {
	var closedUnderWrite atomic.Bool
	r := startRollingAppend(t, func(op faultfs.Op, second bool, held int64) {
		if second && held == 1 {
			closedUnderWrite.Store(true)
		}
	})
	closeWhileWriteHeld(t, r.l, &r.held, r.release, "the rolling append's write", r.appended)
	require.False(t, closedUnderWrite.Load(), "Close closed the new segment's file while a write to it was in flight")
}

// TestWriteEndingAfterPoisonIsNotAcknowledged: a commit whose write ends
// after the log was poisoned (here: a roll's seal failing its sync in the
// background while the rolling append's write is held) gets ErrPoisoned
// and ErrDurabilityUnknown, whatever its policy: nothing will sync its
// record now. The seal is held after it poisoned the log and before it
// fails the group-commit queue (at its close of the finished segment), so
// the outcome cannot come from the queue having heard of the failure
// first (the order CI once met, which let TestCloseWaitsForAUserLedFlush's
// append return nil).
func TestWriteEndingAfterPoisonIsNotAcknowledged(t *testing.T) {
	releaseSeal := make(chan struct{})
	r := startRollingAppend(t, func(op faultfs.Op, second bool, held int64) {
		if !second {
			<-releaseSeal // the seal closes the finished segment after it poisoned the log
		}
	})
	require.Eventually(t, func() bool { return r.held.Load() == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { return r.l.Stats().Poisoned }, 5*time.Second, time.Millisecond)
	close(r.release)
	select {
	case err := <-r.appended:
		require.ErrorIs(t, err, wal.ErrPoisoned)
		require.ErrorIs(t, err, wal.ErrDurabilityUnknown)
	case <-time.After(5 * time.Second):
		t.Fatal("the append hangs once its write was let go")
	}
	close(releaseSeal)
	require.ErrorIs(t, r.l.Close(), wal.ErrPoisoned)
}

// rollingAppend is a log under SyncInterval whose appends run until the
// one that rolls writes its frame into the new segment: that write is
// held until release is closed, and from the roll's header write on,
// every sync of the new segment fails, so the roll's seal (which syncs it
// in the background) poisons the log.
type rollingAppend struct {
	l        *wal.Log
	held     atomic.Int64 // 1 while the write is held, 2 once released
	release  chan struct{}
	appended chan error // the appending goroutine's last result
}

// startRollingAppend opens the log of a rollingAppend and starts its
// appends. onClose sees every segment file's close after the faults are
// armed: second says whether it is the new segment's (else the finished
// one's), held is the held write's state at the close.
func startRollingAppend(t *testing.T, onClose func(op faultfs.Op, second bool, held int64)) *rollingAppend {
	r := &rollingAppend{release: make(chan struct{}), appended: make(chan error, 1)}
	var first atomic.Value // the path the first segment's file was opened with
	first.Store("")
	var armed, failSync atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !strings.Contains(op.Path, ".wal") {
			return nil
		}
		if !armed.Load() {
			if op.Kind == faultfs.OpWrite {
				first.CompareAndSwap("", op.Path) // not the spare's zero-fill, later
			}
			return nil
		}
		second := op.Path != first.Load().(string)
		switch {
		case op.Kind == faultfs.OpSync && second && failSync.Load():
			return faultfs.ErrInjected
		case op.Kind == faultfs.OpWrite && second && op.Offset < 32:
			failSync.Store(true) // the roll's header write: from here on, the seal's syncs fail
		case op.Kind == faultfs.OpWrite && second && r.held.CompareAndSwap(0, 1):
			<-r.release // the rolling append's frame, in the new segment
			r.held.Store(2)
		case op.Kind == faultfs.OpClose:
			onClose(op, second, r.held.Load())
		}
		return nil
	})
	r.l = openLog(t, faultfs.Inject(vfs.NewMem(), inj), wal.Options{SegmentSize: 16 << 10, Policy: policy.SyncInterval(time.Hour)})
	// The spare is ready (prepared before the injector arms): the roll
	// needs no preparation, whose writes and sync would meet the faults.
	fillToSpare(t, r.l)
	armed.Store(true)
	go func() {
		for i := 0; ; i++ {
			if _, err := r.l.Append(payload(i, 200)); err != nil || r.held.Load() > 0 {
				r.appended <- err
				return
			}
		}
	}()
	return r
}
