package wal_test

import (
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
	"github.com/stretchr/testify/require"
)

// heldSyncs is an injector that, while held, stops every sync of the file
// first created under a name with prefix until release is closed: the
// first segment of a new log is prepared as "prepare-1.wal.tmp", and its
// handle keeps that name after the rename.
type heldSyncs struct {
	prefix  string
	name    atomic.Pointer[string]
	hold    atomic.Bool
	blocked chan struct{} // one value each time a sync is stopped
	release chan struct{}
}

func newHeldSyncs(prefix string) *heldSyncs {
	return &heldSyncs{prefix: prefix, blocked: make(chan struct{}, 64), release: make(chan struct{})}
}

func (h *heldSyncs) Before(op faultfs.Op) error {
	if op.Kind == faultfs.OpCreate && h.name.Load() == nil && strings.HasPrefix(filepath.Base(op.Path), h.prefix) {
		p := op.Path
		h.name.Store(&p)
	}
	if op.Kind == faultfs.OpSync && h.hold.Load() {
		if p := h.name.Load(); p != nil && *p == op.Path {
			h.blocked <- struct{}{}
			<-h.release
		}
	}
	return nil
}

// within runs f in a goroutine and fails the test if it has not returned
// after d: for calls that must not wait for a sync the test holds.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s waited for the finished segment's sync", what)
	}
}

// TestRollSealsInBackground: a roll does not wait for the segment it
// finished to be synced (innodb_flush_log_at_trx_commit=2, one committer:
// before, every roll's fdatasync of the finished segment ran on the commit
// path). While that sync is held: appends into the new segment return, the
// synced LSN stays below the new segment, a Sync does not return, and
// RemoveBefore of the finished segment waits. Crash images taken then
// recover as the recovery rule says: the finished segment's frames lost
// with the new segment's (DropAll), the finished segment torn while the
// new one's frames survived (the roll is undone: the new segment is
// quarantined and removed), or both whole (the missing link is written).
// Once the seal is done and the log synced past it, the same torn image is
// damage: ErrCorrupt.
func TestRollSealsInBackground(t *testing.T) {
	mem := vfs.NewMem()
	h := newHeldSyncs("prepare-")
	opts := wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncInterval(time.Hour)}
	l := openLog(t, faultfs.Inject(mem, faultfs.InjectorFunc(h.Before)), opts)
	h.hold.Store(true)
	var recs [][]byte
	var lsns []wal.LSN
	add := func(size int) {
		rec := record(0, len(recs), size)
		lsn, err := l.Append(rec)
		require.NoError(t, err)
		recs, lsns = append(recs, rec), append(lsns, lsn)
	}
	within(t, time.Minute, "an append into the new segment", func() {
		for l.Stats().Rolls == 0 {
			add(300)
		}
		for range 4 {
			add(200)
		}
	})
	<-h.blocked // the roll's sealing is inside the finished segment's sync
	segs := segments(t, mem)
	require.Len(t, segs, 2)
	sFirst := segFirst(t, segs[1])
	inP := 0
	for inP < len(lsns) && lsns[inP] < sFirst {
		inP++
	}
	require.Equal(t, len(recs)-5, inP, "the roll came with the record that did not fit")
	require.Less(t, l.SyncedLSN(), sFirst, "nothing claims the finished segment durable")

	synced := make(chan error, 1)
	go func() { synced <- l.Sync() }()
	removed := make(chan error, 1)
	go func() { _, err := l.RemoveBefore(sFirst); removed <- err }()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-synced:
		t.Fatalf("Sync returned %v while the finished segment's sync was held", err)
	case err := <-removed:
		t.Fatalf("RemoveBefore returned %v while the roll was still sealing the segment it removes", err)
	default:
	}

	// Crash images while the finished segment is not synced.
	opts.FS = nil
	t.Run("DropAll", func(t *testing.T) {
		img := mem.PowerLoss(vfs.DropAll())
		_, got, info := replay(t, img, opts)
		require.Empty(t, got, "no record was ever synced")
		require.Empty(t, info.DroppedSegment, "the new segment's name was never made durable")
		require.Equal(t, segs[:1], segments(t, img))
	})
	t.Run("FinishedSegmentTorn", func(t *testing.T) {
		img := mem.PowerLoss(vfs.KeepAll())
		b := fileBytes(t, img, segs[0])
		cut := segHeader + int(lsns[2]) // the third record's frame and all after it never reached the disk
		clear(b[cut:])
		setFile(t, img, segs[0], b)
		ro := opts
		ro.FS = img
		rl, err := wal.OpenReadOnly(logDir, ro)
		require.NoError(t, err)
		require.Equal(t, segs[1], rl.Recovered().DroppedSegment, "read-only: what Open would remove")
		require.Equal(t, lsns[2], rl.Recovered().EndLSN)
		require.NoError(t, rl.Close())
		require.Equal(t, segs, segments(t, img), "read-only: nothing removed")
		gotLSNs, got, info := replay(t, img, opts)
		require.Equal(t, recs[:2], got)
		require.Equal(t, lsns[:2], gotLSNs)
		require.Equal(t, segs[1], info.DroppedSegment)
		require.Equal(t, segs[:1], segments(t, img), "the new segment is removed")
		require.Len(t, info.Quarantined, 1)
		q := info.Quarantined[0]
		require.Equal(t, sFirst, q.FromLSN, "the new segment's frames are kept for inspection")
		require.EqualValues(t, l.AppendedLSN()-sFirst, q.Bytes)
		// The recovered log takes appends, and rolls again.
		o := opts
		o.FS = img
		l2, err := wal.Open(logDir, o)
		require.NoError(t, err)
		for range 20 {
			_, err := l2.Append(record(1, 0, 300))
			require.NoError(t, err)
		}
		require.NoError(t, l2.Close())
		_, got2, _ := replay(t, img, opts)
		require.Len(t, got2, 22)
	})
	t.Run("BothWhole", func(t *testing.T) {
		img := mem.PowerLoss(vfs.KeepAll())
		gotLSNs, got, info := replay(t, img, opts)
		require.Equal(t, recs, got)
		require.Equal(t, lsns, gotLSNs)
		require.Empty(t, info.DroppedSegment)
		require.Equal(t, 1, info.VerifiedSegments, "no link yet: checked frame by frame")
		require.Positive(t, info.Unvouched, "no watermark vouches for the finished segment's frames: rewritten")
		_, _, info = replay(t, img, opts)
		require.Equal(t, 1, info.TrustedSegments, "Open wrote the link")
	})

	// The roll writes the new segment's header without a sync: a crash
	// may leave it zeros (a prepared file) or the header of a recycled
	// file's earlier use. Then nothing written to it was acknowledged as
	// durable, and the roll is undone even though the finished segment is
	// whole.
	for _, c := range []struct {
		name   string
		header func(b []byte)
	}{
		{"NewHeaderLost", func(b []byte) { clear(b[:64]) }},
		{"StaleHeader", func(b []byte) {
			binary.LittleEndian.PutUint64(b[16:24], uint64(sFirst)/2) // an earlier use: a lower LSN
			binary.LittleEndian.PutUint64(b[56:64], xxhash.Sum64(b[:56]))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			img := mem.PowerLoss(vfs.KeepAll())
			b := fileBytes(t, img, segs[1])
			c.header(b)
			setFile(t, img, segs[1], b)
			gotLSNs, got, info := replay(t, img, opts)
			require.Equal(t, recs[:inP], got)
			require.Equal(t, lsns[:inP], gotLSNs)
			require.Equal(t, segs[1], info.DroppedSegment)
			require.Equal(t, sFirst, info.EndLSN)
			require.Equal(t, segs[:1], segments(t, img))
			require.Len(t, info.Quarantined, 1)
			require.Equal(t, sFirst, info.Quarantined[0].FromLSN)
		})
	}

	close(h.release)
	require.NoError(t, <-synced)
	require.NoError(t, <-removed)
	require.Equal(t, l.AppendedLSN(), l.SyncedLSN())
	require.Equal(t, segs[1:], segments(t, mem), "RemoveBefore removed the finished segment once sealed")

	// Once the finished segment was synced, frames of the new one vouch
	// for it: losing its tail is damage, not a roll to undo.
	t.Run("DamageAfterSeal", func(t *testing.T) {
		mem2 := vfs.NewMem()
		o := opts
		o.FS = mem2
		l2, err := wal.Open(logDir, o)
		require.NoError(t, err)
		var lsns2 []wal.LSN
		for l2.Stats().Rolls == 0 {
			lsn, err := l2.Append(record(2, len(lsns2), 300))
			require.NoError(t, err)
			lsns2 = append(lsns2, lsn)
		}
		require.NoError(t, l2.Sync()) // settles the finished segment, then syncs the new one
		_, err = l2.Append(record(2, len(lsns2), 300))
		require.NoError(t, err)
		require.NoError(t, l2.Sync())
		mem2 = mem2.ProcessCrash() // before Close: the seal may still be writing the link
		require.NoError(t, l2.Close())
		segs2 := segments(t, mem2)
		require.Len(t, segs2, 2)
		sFirst2 := segFirst(t, segs2[1])
		for i, damage := range []func(){
			func() { // the finished segment's tail
				b := fileBytes(t, o.FS, segs2[0])
				clear(b[segHeader+int(lsns2[2]):])
				setFile(t, o.FS, segs2[0], b)
				b = fileBytes(t, o.FS, segs2[0])
				clear(b[segHeader+int(sFirst2):][:24]) // and its link
				setFile(t, o.FS, segs2[0], b)
			},
			func() { // the new segment's header
				b := fileBytes(t, o.FS, segs2[1])
				clear(b[:32]) // its first half: what is left is no header
				setFile(t, o.FS, segs2[1], b)
				b = fileBytes(t, o.FS, segs2[0])
				clear(b[segHeader+int(sFirst2):][:24]) // and the link: as if the sealing had not written it
				setFile(t, o.FS, segs2[0], b)
			},
		} {
			o.FS = mem2.ProcessCrash()
			damage()
			_, err = wal.Open(logDir, o)
			var ce *wal.CorruptionError
			require.ErrorAs(t, err, &ce, "damage %d", i)
			require.Equal(t, segs2[i], ce.Segment)
			if i == 0 {
				require.Contains(t, ce.Reason, "records the log as synced")
			}
		}
	})
	require.NoError(t, l.Close())
}

// TestRollSealFailurePoisons: when the background sync of a finished
// segment fails, the log is poisoned and no commit that needs the synced
// LSN past it succeeds (fsyncgate: the failure is final).
func TestRollSealFailurePoisons(t *testing.T) {
	mem := vfs.NewMem()
	var failing atomic.Bool
	var first atomic.Pointer[string]
	inj := faultfs.InjectorFunc(func(op faultfs.Op) error {
		if op.Kind == faultfs.OpCreate && first.Load() == nil {
			p := op.Path
			first.Store(&p)
		}
		if op.Kind == faultfs.OpSync && failing.Load() {
			if p := first.Load(); p != nil && *p == op.Path {
				return errors.New("injected: EIO syncing the finished segment")
			}
		}
		return nil
	})
	l := openLog(t, faultfs.Inject(mem, inj), wal.Options{SegmentSize: 4 << 10, Policy: policy.SyncInterval(time.Hour)})
	failing.Store(true)
	for l.Stats().Rolls == 0 {
		if _, err := l.Append(record(0, 0, 300)); err != nil {
			require.ErrorIs(t, err, wal.ErrPoisoned) // the sealing failed already
			break
		}
	}
	err := l.Sync()
	require.ErrorIs(t, err, wal.ErrPoisoned)
	require.Less(t, l.SyncedLSN(), segFirst(t, segments(t, mem)[1]))
	var wg sync.WaitGroup
	wg.Go(func() {
		_, err := l.AppendContext(t.Context(), record(0, 1, 10), wal.ForceSync)
		require.ErrorIs(t, err, wal.ErrPoisoned)
	})
	wg.Wait()
	require.ErrorIs(t, l.Close(), wal.ErrPoisoned)
}

// TestEmptySmallSegmentTakesLargeRecordAfterResize (low): Options says
// "A log reopened with another SegmentSize keeps its existing segments as
// they are", and MaxRecordSize is checked against the new SegmentSize. When
// the last segment is empty (a log created and closed before its first
// record, or a crash right after a roll installed the next segment) and was
// made with a smaller SegmentSize, a record that fits the new size but not
// the old one never gets in: reserveLocked refuses to roll away from an
// empty segment ("rolling would never end") and returns ErrRecordTooLarge,
// on every try, although the next segment would be made at the new size.
//
// Sequence: Open with SegmentSize 4 KiB, Close (no record); reopen with
// 64 KiB; Append a 10 KiB record (MaxRecordSize allows 64 KiB-112).
// Expected: nil (a roll to a 64 KiB segment). Happens: ErrRecordTooLarge.
func TestEmptySmallSegmentTakesLargeRecordAfterResize(t *testing.T) {
	mem := vfs.NewMem()
	l := openLog(t, mem, wal.Options{SegmentSize: 4 << 10})
	require.NoError(t, l.Close())
	l = openLog(t, mem, wal.Options{SegmentSize: 64 << 10})
	defer l.Close()
	_, err := l.Append(record(0, 0, 10<<10))
	require.NoError(t, err, "a 10 KiB record under SegmentSize 64 KiB")
}

// An older segment whose size is not a multiple of the direct-I/O alignment,
// reopened with O_DIRECT, leaves its unaligned end unused: a frame that fits
// the file but ends past the last whole block must roll, not panic in the
// flush leader.
func TestDirectIOUnalignedSegmentFrameRolls(t *testing.T) {
	mem := vfs.NewMem()
	mem.SetDirectIOAlignment(4096)
	l := openLog(t, mem, wal.Options{SegmentSize: 8200}) // a multiple of 8, not of 4096
	for i := range 7 {                                   // frames of 1024 bytes end at offset 7200
		_, err := l.Append(record(3, i, 1000))
		require.NoError(t, err)
	}
	require.NoError(t, l.Close())
	l = openLog(t, mem, wal.Options{SyncMethod: vfs.ODirect, SegmentSize: 8192})
	_, err := l.Append(record(3, 7, 976)) // a 1000-byte frame ending at 8200: past the 8192 limit
	require.NoError(t, err)
	require.Equal(t, uint64(1), l.Stats().Rolls)
	require.NoError(t, l.Close())
	_, recs, _ := replay(t, mem, wal.Options{})
	require.Len(t, recs, 8)
	require.Equal(t, record(3, 7, 976), recs[7])
}
