package wal_test

import (
	"context"
	"errors"
	"strings"
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

// TestFollowWokenByTruncateFrom: a tailing Reader waiting in
// Follow at the end of the log, past the LSN a TruncateFrom cuts at,
// must return ErrTruncated ("a Reader positioned past lsn returns
// ErrTruncated from then on"), not sleep until some later write.
func TestFollowWokenByTruncateFrom(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{Policy: policy.SyncEveryCommit()})
	defer l.Close()
	lsns := appendN(t, l, 1, 10, 100)
	r, err := l.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	for range lsns {
		_, _, err := r.Next()
		require.NoError(t, err)
	}
	got := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() {
		_, _, err := r.Follow(ctx)
		got <- err
	}()
	require.Eventually(t, func() bool { return wal.TailWaiting(l) }, 5*time.Second, time.Millisecond, "the reader waits at the tail")
	require.NoError(t, l.TruncateFrom(lsns[5]))
	select {
	case err := <-got:
		require.ErrorIs(t, err, wal.ErrTruncated)
	case <-time.After(2 * time.Second):
		t.Fatal("Follow still waits 2s after TruncateFrom cut below the reader: not woken by the cut")
	}
}

// openFS counts the files opened through it and not yet closed.
type openFS struct {
	vfs.FS
	mu         sync.Mutex
	open       map[*openFile]string
	afterClose []string
}

type openFile struct {
	vfs.File
	fs     *openFS
	name   string
	closed atomic.Bool
}

// used records an operation on f; one after f's Close is a use after close.
func (f *openFile) used(op string) {
	if f.closed.Load() {
		f.fs.mu.Lock()
		f.fs.afterClose = append(f.fs.afterClose, op+" "+f.name)
		f.fs.mu.Unlock()
	}
}

func (f *openFile) ReadAt(p []byte, off int64) (int, error) {
	f.used("read")
	return f.File.ReadAt(p, off)
}
func (f *openFile) WriteAt(p []byte, off int64) (int, error) {
	f.used("write")
	return f.File.WriteAt(p, off)
}
func (f *openFile) Sync() error { f.used("sync"); return f.File.Sync() }

func newOpenFS(fsys vfs.FS) *openFS { return &openFS{FS: fsys, open: map[*openFile]string{}} }

func (o *openFS) wrap(f vfs.File, name string, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	of := &openFile{File: f, fs: o, name: name}
	o.mu.Lock()
	o.open[of] = name
	o.mu.Unlock()
	return of, nil
}

func (o *openFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := o.FS.Create(name, m)
	return o.wrap(f, name, err)
}

func (o *openFS) Open(name string) (vfs.File, error) {
	f, err := o.FS.Open(name)
	return o.wrap(f, name, err)
}

func (o *openFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := o.FS.OpenReadWrite(name, m)
	return o.wrap(f, name, err)
}

func (f *openFile) Close() error {
	f.closed.Store(true)
	f.fs.mu.Lock()
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return f.File.Close()
}

// stillOpen lists the files opened and not closed.
func (o *openFS) stillOpen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var names []string
	for _, n := range o.open {
		names = append(names, n)
	}
	return names
}

// TestReadRecordRacingCloseLeaksNoHandle: ReadRecord racing Close
// must not open a segment read handle that nobody will ever close: Close
// "releases the files".
func TestReadRecordRacingCloseLeaksNoHandle(t *testing.T) {
	for iter := 0; iter < longtest.Pick(300, 100); iter++ {
		ofs := newOpenFS(vfs.NewMem())
		l := openLog(t, ofs, wal.Options{Policy: policy.SyncEveryCommit()})
		lsns := appendN(t, l, 1, 4, 100)
		// Each reader reads before Close (read) and goes on until it has
		// met ErrClosed (wg): Close lands among reads, and reads follow it.
		var wg, read sync.WaitGroup
		for g := 0; g < 2; g++ {
			wg.Add(1)
			read.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; ; n++ {
					_, err := l.ReadRecord(lsns[0], nil)
					if n == 0 {
						read.Done()
					}
					if errors.Is(err, wal.ErrClosed) {
						return
					}
					if err != nil {
						t.Errorf("ReadRecord: %v", err)
						return
					}
				}
			}()
		}
		read.Wait()
		require.NoError(t, l.Close())
		wg.Wait()
		if open := ofs.stillOpen(); len(open) > 0 {
			t.Fatalf("iteration %d: after Close returned and every ReadRecord ended, %d file(s) are still open and nothing will close them: %v", iter, len(open), open)
		}
	}
}

// TestFailedRollLeaksNoHandle: a roll whose header write into the
// spare fails poisons the log; Close must still release every file,
// the spare's handle included (rollTo returns before it is write.seg, and
// nothing else holds it).
func TestFailedRollLeaksNoHandle(t *testing.T) {
	for _, method := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODsync} {
		t.Run(method.String(), func(t *testing.T) {
			rollFailureLeaksNoHandle(t, method, func(op faultfs.Op) bool {
				return op.Kind == faultfs.OpWrite && strings.Contains(op.Path, "prepare-") && op.Offset == 0 // the header write into the spare
			})
		})
	}
}

// TestFailedLinkLeaksNoHandle (O_DSYNC): the roll writes the link
// into the finished segment itself; if that fails, the finished
// segment's write handle must still be closed by Close.
func TestFailedLinkLeaksNoHandle(t *testing.T) {
	rollFailureLeaksNoHandle(t, vfs.ODsync, func(op faultfs.Op) bool {
		return op.Kind == faultfs.OpOpenReadWrite && strings.HasSuffix(op.Path, ".wal") // the link's handle on the finished segment
	})
}

// rollFailureLeaksNoHandle opens a log of 16 KiB segments, fills half a
// segment, waits for the spare, then fails every op that fails matches and
// appends until an append fails (the roll); Close of the poisoned log must
// leave no file open.
func rollFailureLeaksNoHandle(t *testing.T, method vfs.SyncMethod, fails func(faultfs.Op) bool) {
	t.Helper()
	var armed atomic.Bool
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if armed.Load() && fails(op) {
			return faultfs.ErrInjected
		}
		return nil
	})
	ofs := newOpenFS(faultfs.Inject(vfs.NewMem(), inj))
	l := openLog(t, ofs, wal.Options{SegmentSize: 16 << 10, SyncMethod: method, Policy: policy.SyncEveryCommit()})
	fillToSpare(t, l)
	armed.Store(true)
	appendUntilPoisoned(t, l)
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
	if open := ofs.stillOpen(); len(open) > 0 {
		t.Fatalf("after Close of the poisoned log %d file(s) are still open: %v", len(open), open)
	}
}

// TestDurableOnlyReaderStopsAtSyncedLSN: a DurableOnly Reader
// "returns only records that are durable (up to Log.SyncedLSN)". After a
// roll the finished segment is synced by the roll's background seal; while
// that sync has not completed (here: held), its records are not durable,
// and a DurableOnly reader must not return them.
func TestDurableOnlyReaderStopsAtSyncedLSN(t *testing.T) {
	var armed atomic.Bool
	release := make(chan struct{})
	var held atomic.Int64
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if armed.Load() && op.Kind == faultfs.OpSync {
			held.Add(1)
			<-release // every sync, the seal's included, waits
		}
		return nil
	})
	mem := vfs.NewMem()
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: 16 << 10, Policy: policy.SyncInterval(time.Hour)})
	defer func() {
		close(release)
		l.Close()
	}()
	fillToSpare(t, l)
	armed.Store(true)
	for i := 0; l.WrittenLSN() < 20<<10; i++ { // past the roll at ~16 KiB
		_, err := l.Append(payload(i, 200))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return held.Load() > 0 }, 5*time.Second, time.Millisecond, "the seal's sync is held")
	synced := l.SyncedLSN()
	r, err := l.NewReader(0, wal.DurableOnly)
	require.NoError(t, err)
	defer r.Close()
	for {
		lsn, rec, err := r.Next()
		if err != nil {
			break
		}
		end := lsn + wal.LSN(wal.FrameSize(len(rec)))
		if end > l.SyncedLSN() {
			t.Fatalf("DurableOnly reader returned the record at LSN %d (ends at %d) while SyncedLSN is %d (was %d at the start; WrittenLSN %d): not durable",
				lsn, end, l.SyncedLSN(), synced, l.WrittenLSN())
		}
	}
}

// TestFailedOpenLeaksNoHandle: an Open that fails (any operation
// failing, one at a time) must release every file it opened.
func TestFailedOpenLeaksNoHandle(t *testing.T) {
	for _, method := range []vfs.SyncMethod{vfs.Fdatasync, vfs.ODirect} {
		mem := vfs.NewMem()
		l := openLog(t, mem, wal.Options{SegmentSize: 16 << 10, SyncMethod: method, Policy: policy.SyncEveryCommit(), RecycleSegments: 2})
		for i := 0; l.AppendedLSN() < 60<<10; i++ {
			_, err := l.Append(payload(i, 200))
			require.NoError(t, err)
		}
		_, err := l.RemoveBefore(30 << 10)
		require.NoError(t, err)
		for i := 0; i < 5; i++ {
			_, err := l.Append(payload(i, 200))
			require.NoError(t, err)
		}
		// A crash: no Close, so Open has a tail to check and repair.
		img := mem.ProcessCrash()
		for n := int64(1); ; n++ {
			var fired atomic.Bool
			inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
				if op.Index == n && op.Kind != faultfs.OpClose {
					fired.Store(true)
					return faultfs.ErrInjected
				}
				return nil
			})
			ofs := newOpenFS(faultfs.Inject(img.ProcessCrash(), inj))
			opts := wal.Options{SegmentSize: 16 << 10, SyncMethod: method, Policy: policy.SyncEveryCommit(), RecycleSegments: 2, FS: ofs}
			l2, err := wal.Open(logDir, opts)
			if err == nil {
				l2.Close()
				if !fired.Load() {
					break // past the last operation of Open
				}
				continue
			}
			if open := ofs.stillOpen(); len(open) > 0 {
				t.Errorf("%v: Open failing at operation %d (%v) left %d file(s) open: %v", method, n, err, len(open), open)
			}
		}
		l.Close()
	}
}

// TestCloseWhileSealBlockedOnPoisonedLog: the roll's seal is held
// in its sync of the finished segment; meanwhile the first write into the
// new segment fails and poisons the log; Close must wait for the seal
// (which then still writes the link by name and closes the old handle)
// and no file may be used after its Close.
func TestCloseWhileSealBlockedOnPoisonedLog(t *testing.T) {
	var first atomic.Value
	first.Store("")
	var armed atomic.Bool
	var heldSync atomic.Int64
	release := make(chan struct{})
	sealInSync := make(chan struct{})
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if !armed.Load() {
			if op.Kind == faultfs.OpWrite && strings.Contains(op.Path, ".wal") {
				first.CompareAndSwap("", op.Path)
			}
			return nil
		}
		old := op.Path == first.Load().(string)
		switch {
		case op.Kind == faultfs.OpSync && old && heldSync.CompareAndSwap(0, 1):
			close(sealInSync)
			<-release // the seal settling the finished segment
		case op.Kind == faultfs.OpWrite && !old && strings.Contains(op.Path, ".wal") && op.Offset >= 32:
			select { // until the seal is in its sync
			case <-sealInSync:
			case <-time.After(5 * time.Second):
			}
			return faultfs.ErrInjected // frames into the new segment
		}
		return nil
	})
	ofs := newOpenFS(faultfs.Inject(vfs.NewMem(), inj))
	l := openLog(t, ofs, wal.Options{SegmentSize: 16 << 10, Policy: policy.SyncInterval(time.Hour)})
	fillToSpare(t, l)
	armed.Store(true)
	appendUntilPoisoned(t, l)
	select {
	case <-sealInSync:
	case <-time.After(5 * time.Second):
		t.Fatal("the roll's seal never reached its sync of the finished segment")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case err := <-closed:
		close(release)
		t.Fatalf("Close returned (%v) while the seal's sync was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-closed:
		require.ErrorIs(t, err, wal.ErrPoisoned)
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
	ofs.mu.Lock()
	defer ofs.mu.Unlock()
	require.Empty(t, ofs.afterClose, "operations on closed files")
}

// fillToSpare appends 200-byte records to l (16 KiB segments) until half
// its first segment is used, then waits until the next segment is prepared
// (Prepared counts the first segment and the spare): a fault armed after it
// meets the roll, not the preparation.
func fillToSpare(t *testing.T, l *wal.Log) {
	t.Helper()
	for i := 0; l.AppendedLSN() < 8<<10; i++ {
		_, err := l.Append(payload(i, 200))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return l.Stats().Prepare.Prepared == 2 }, 5*time.Second, time.Millisecond)
}

// appendUntilPoisoned appends 200-byte records until one fails (at most
// 1000), and requires that failure to be ErrPoisoned.
func appendUntilPoisoned(t *testing.T, l *wal.Log) {
	t.Helper()
	var err error
	for i := 0; err == nil && i < 1000; i++ {
		_, err = l.Append(payload(i, 200))
	}
	require.ErrorIs(t, err, wal.ErrPoisoned)
}
