package wal

import (
	"fmt"
	"time"

	"github.com/durawal/durawal/groupcommit"
	"github.com/durawal/durawal/internal/decide"
	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// flush is the groupcommit.FlushFunc: the leader of a group takes every frame
// appended so far (swapping the log buffer halves, so appends continue),
// writes them with one write per segment touched, and syncs if a member of
// the group needs it or the policy says this group syncs (sync_binlog=N).
// A write or sync failure poisons the log; the group gets an error matching
// both ErrDurabilityUnknown and ErrPoisoned.
func (l *Log) flush(need groupcommit.Level) (written, synced uint64, err error) {
	l.flushing.Lock() // TruncateFrom waits for it: the queue positions returned stay consistent
	defer l.flushing.Unlock()
	if l.flushing.shut {
		return l.written.Load() + l.qbase, l.synced.Load() + l.qbase, ErrClosed
	}
	if err := l.poisoned(); err != nil {
		return l.written.Load() + l.qbase, l.synced.Load() + l.qbase, err
	}
	l.app.Lock()
	b := l.app.active
	l.app.active = l.leader.spareBuf
	l.app.active.reset(l.app.next)
	l.app.active.seg = l.app.seg
	b.released() // appends waiting for room copy into the new active half
	l.app.postponeStart, l.app.delayedSeen = time.Time{}, false
	l.writing.Store(true)
	l.app.Unlock()
	defer l.writing.Store(false)

	if len(b.buf) > 0 {
		err = l.writeBuffer(b)
		l.leader.groupsSinceSync.Add(1)
	}
	b.reset(0)
	l.leader.spareBuf = b
	if err == nil {
		// The log may have been poisoned while the frames were written (a
		// roll's seal failing in the background): nothing will sync them
		// now, so no commit of this group is acknowledged, whatever its
		// policy, and the outcome does not hang on whether the queue
		// heard of the failure before this flush returned.
		if perr := l.poisoned(); perr != nil {
			return l.written.Load() + l.qbase, l.synced.Load() + l.qbase, fmt.Errorf("%w: %w", ErrDurabilityUnknown, perr)
		}
	}
	if err == nil && (need == groupcommit.Synced || decide.SyncGroup(l.pol, decide.State{GroupsSinceSync: int(l.leader.groupsSinceSync.Load()) - 1})) {
		err = l.syncWritten()
	}
	if err != nil {
		l.poison(err)
		return l.written.Load() + l.qbase, l.synced.Load() + l.qbase, fmt.Errorf("%w: %w: %w", ErrDurabilityUnknown, ErrPoisoned, err)
	}
	return l.written.Load() + l.qbase, l.synced.Load() + l.qbase, nil
}

// writeBuffer writes b's frames to their segments, rolling segments at the
// LSNs b records, and advances the written LSN.
func (l *Log) writeBuffer(b *logBuffer) error {
	data, lsn := b.buf, b.start
	for i, r := range b.rolls {
		n := int(r.lsn - lsn)
		if err := l.writeAt(data[:n], lsn); err != nil {
			discardRolls(b.rolls[i:])
			return err
		}
		data, lsn = data[n:], r.lsn
		if err := l.rollTo(r.seg); err != nil {
			discardRolls(b.rolls[i+1:]) // rollTo closed r.seg unless it became the write segment
			return err
		}
	}
	return l.writeAt(data, lsn)
}

// discardRolls closes the files of prepared segments that a failed flush
// will never roll to: the failure poisoned the log, nothing else holds
// them, and Close closes only the write segment's. The files stay: the
// next Open removes a leftover temporary file, or adopts a kept one.
func discardRolls(rolls []roll) {
	for _, r := range rolls {
		r.seg.closeUnused()
	}
}

// closeUnused closes s's write handle, if open, on a path where nothing
// will write to s again: a failed roll, or a poisoned log's unwritten
// rolls. The file itself stays.
func (s *segment) closeUnused() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
}

// writeAt writes frames p, which start at lsn, into the segment receiving
// writes, and advances the written LSN; under a write-through method
// (O_DSYNC) the write made them durable, so it advances the synced LSN too.
// Under O_DIRECT the write is padded to whole blocks (writeDirect).
func (l *Log) writeAt(p []byte, lsn LSN) error {
	if len(p) == 0 {
		return nil
	}
	seg := l.write.seg
	off := seg.offset(lsn)
	// Monotonic readings only (time.Since on l.opened): time.Now reads
	// the wall clock too, two clock reads where one does.
	start := time.Since(l.opened)
	var n int
	var padding int64
	var err error
	if l.method.Direct() {
		n, padding, err = l.writeDirect(seg, p, off)
	} else {
		n, err = seg.f.WriteAt(p, off)
	}
	l.stats.writeCalls.Add(1)
	l.stats.bytesWritten.Add(uint64(n))
	done := time.Since(l.opened)
	l.stats.writeTime.Add(int64(done - start))
	l.stats.writeHist.record(done - start)
	if err == nil && n < len(p) {
		err = fmt.Errorf("short write of %d of %d bytes", n, len(p))
	}
	if err != nil {
		l.stats.writeErrors.Add(1)
		return fmt.Errorf("writing %s at offset %d with %v: %w", seg.path, off, l.method, err)
	}
	if step := l.opts.WritebackAfter; step > 0 && !l.method.Direct() && !l.method.WriteThrough() {
		// Hand what accumulated to the device now, so the next sync finds
		// little to write. SYNC_FILE_RANGE_WRITE alone consumes no
		// writeback error, but an error here is still one of this file's
		// writes: treat it as the write's.
		if end := off + int64(n); end-seg.handed >= step {
			if err := vfs.Writeback(seg.f, seg.handed, end-seg.handed, false); err != nil {
				l.stats.writeErrors.Add(1)
				return fmt.Errorf("starting writeback of %s at offset %d: %w", seg.path, seg.handed, err)
			}
			seg.handed = end
		}
	}
	// The size of the writes, for the next preparation (largeWrites).
	if ws := l.leader.writeSize.Load(); ws == 0 {
		l.leader.writeSize.Store(int64(n))
	} else {
		l.leader.writeSize.Store(ws + (int64(n)-ws)/8)
	}
	if seg.zeroTo > 0 && n < zeroAheadBelow && off+int64(n)+zeroAheadStep/2 > seg.zeroTo && l.zeroesAhead() {
		if err := l.zeroAhead(seg, off+int64(n)); err != nil {
			l.stats.writeErrors.Add(1)
			return fmt.Errorf("writing zeros ahead of the frames in %s at offset %d: %w", seg.path, max(seg.zeroTo, off+int64(n)), err)
		}
	}
	l.stats.paddingBytes.Add(uint64(padding))
	bs := int64(max(l.write.dio.align, blockCountSize))
	if (off+int64(len(p)))/bs > off/bs {
		l.stats.fullBlockWrites.Add(1)
	} else {
		l.stats.partialBlockWrites.Add(1)
	}
	end := uint64(lsn) + uint64(len(p))
	l.written.Store(end)
	if l.method.WriteThrough() {
		l.synced.Store(end)
	} else if l.stats.unsyncedSince.Load() == 0 {
		l.stats.unsyncedSince.CompareAndSwap(0, max(int64(done), 1)) // the oldest unsynced write (noteSynced)
	}
	l.notifyTail()
	l.lastWrite.Store(int64(done))
	if l.syncKick != nil && end-l.synced.Load() >= uint64(l.opts.IncrementalSync) {
		select {
		case l.syncKick <- struct{}{}:
		default:
		}
	}
	return nil
}

// zeroAheadStep is how many bytes of zeros zeroAhead writes at a time, in
// zeroAheadChunk writes. A write of zeroAheadBelow bytes or more writes no
// zeros ahead: its sync converts its own blocks, one conversion for that
// much data, and zeros would only double what the device writes.
const (
	zeroAheadStep  = 1 << 20
	zeroAheadChunk = 64 << 10
	zeroAheadBelow = 64 << 10
	zeroAheadPage  = 4 << 10
)

// zeroesAhead reports whether frames written into an allocated segment are
// preceded by zeros (zeroAhead): where commits sync (SyncEveryCommit,
// SyncEveryN) through the page cache. Elsewhere a sync converts a second's
// worth of blocks at once, or O_DIRECT writes whole blocks itself.
func (l *Log) zeroesAhead() bool {
	k := l.pol.Kind()
	return (k == policy.KindSyncEveryCommit || k == policy.KindSyncEveryN) &&
		!l.method.Direct() && !l.method.WriteThrough()
}

// largeWrites reports whether the log's recent writes (a moving average
// of the last eight or so) are of zeroAheadBelow bytes or more, where
// commits sync: a segment that such writes fill is allocated rather than
// zero-filled (allocatesSpares), since each sync converts the blocks of
// that many bytes at once, and zeros would double what the device writes.
func (l *Log) largeWrites() bool {
	return l.zeroesAhead() && l.leader.writeSize.Load() >= zeroAheadBelow
}

// zeroAhead writes zeroAheadStep bytes of zeros into s, an allocated
// segment, from the end of the frames just written (end, a file offset)
// or from where its last zeros end, if further, and starts their
// writeback. An allocated segment's blocks are unwritten extents: the
// first sync after a write into them must also commit their conversion to
// written (on ext4 and XFS a journal commit), which made each commit's
// fdatasync cost 1.5-2× one into written blocks, and a new log's
// throughput at 32 committers less than half of one whose first segment
// was zero-filled. Zeros written a MiB ahead leave one conversion per MiB,
// paid by the first sync after it, and no zero-fill of the whole segment
// before its first use. The bytes zeroed were zeros already (unwritten
// extents read as zeros), so a crash keeps, of them, zeros whatever it
// keeps; the frames later written over them are ordered after them by the
// one goroutine that writes s.
func (l *Log) zeroAhead(s *segment, end int64) error {
	// From the page after the frames: the page they end in is written
	// with them, and stays out of the writeback the zeros start.
	from := max(s.zeroTo, (end+zeroAheadPage-1)&^(zeroAheadPage-1))
	to := min(from+zeroAheadStep, s.size)
	if from >= to {
		s.zeroTo = 0 // the whole file is written: nothing more to do
		return nil
	}
	if l.leader.zeros == nil {
		l.leader.zeros = make([]byte, zeroAheadChunk)
	}
	for off := from; off < to; {
		clear(l.leader.zeros) // the FS may scramble written buffers
		n := min(int64(len(l.leader.zeros)), to-off)
		w, err := s.f.WriteAt(l.leader.zeros[:n], off)
		if err == nil && int64(w) < n {
			err = fmt.Errorf("short write of %d of %d bytes", w, n)
		}
		if err != nil {
			return err
		}
		off += n
	}
	if l.opts.WritebackAfter > 0 {
		if err := vfs.Writeback(s.f, from, to-from, false); err != nil {
			return err
		}
	}
	s.zeroTo = to
	l.stats.seg.zeroedAhead.Add(uint64(to - from))
	return nil
}

// blockCountSize is the block size, in bytes, by which writes are counted as
// full-block or partial-block writes without O_DIRECT (InnoDB's 512-byte
// log block); under O_DIRECT it is the direct-I/O alignment.
const blockCountSize = 512

// bufferedMethod is the sync method for the small side files and in-place
// writes made outside the direct-I/O path (link frames, first-lsn): the
// log's durability without O_DIRECT, so syncSegment's rule (no fsync under a
// write-through method) holds for them too.
func (l *Log) bufferedMethod() vfs.SyncMethod {
	if l.method.WriteThrough() {
		return vfs.ODsync
	}
	return vfs.Fdatasync
}

// syncWritten syncs everything written so far and advances the synced LSN.
// It returns nil at once if nothing written is unsynced, or if the sync
// method writes through (O_DSYNC: each write advanced the synced LSN).
func (l *Log) syncWritten() error {
	_, err := l.syncWrittenSynced(true)
	return err
}

// syncWrittenSynced is syncWritten; synced reports whether it issued a sync.
// What the last roll's sealing has not yet done comes first: the finished
// segment's sync (settleLocked), then, before the successor's frames can
// count as synced, its name (nameLocked; the successor's own sync makes its
// header durable). So the synced LSN only advances in order. groups says
// the sync counts as a group's for policy.SyncEveryN (it restarts the count
// of groups since the last sync); a roll's sealing does not.
func (l *Log) syncWrittenSynced(groups bool) (synced bool, err error) {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if err := l.poisoned(); err != nil {
		return false, err // never sync again after a failed sync or write (fsyncgate)
	}
	if l.method.WriteThrough() {
		return false, nil
	}
	l.write.Lock() // the segment written and what it holds, as one
	seg, sl := l.write.seg, l.write.seal
	target := l.written.Load()
	l.write.Unlock()
	snap := time.Since(l.opened)
	if target <= l.synced.Load() {
		if groups { // another sync (a roll's sealing) covered this group's
			l.leader.groupsSinceSync.Store(0)
		}
		return false, nil
	}
	if sl != nil && !sl.settled {
		if err := l.settleLocked(sl); err != nil {
			return false, err
		}
		synced = true
		if target <= l.synced.Load() {
			if groups {
				l.leader.groupsSinceSync.Store(0)
			}
			return true, nil
		}
	}
	linking := sl != nil && !sl.linked && seg == sl.succ
	if linking && !sl.named {
		if err := l.syncName(sl); err != nil {
			return synced, err
		}
	}
	if err := l.syncTimed(seg); err != nil {
		return synced, err
	}
	if linking {
		// The successor's header is durable with this sync: link it
		// before anything in it counts as synced.
		sl.named = true
		if err := l.linkLocked(sl); err != nil {
			return true, err
		}
	}
	l.synced.Store(target)
	l.noteSynced(target, snap)
	l.notifyTail()
	if groups {
		l.leader.groupsSinceSync.Store(0)
	}
	return true, nil
}

// noteSynced records, once a sync that began at snap (since Open) made
// everything written up to target durable, how long the oldest write it
// covered waited unsynced (Stats.UnsyncedWait), and warns if that exceeds
// the policy's bound. Writes after target are then dated from snap: they
// came after it. l.syncMu is held.
func (l *Log) noteSynced(target uint64, snap time.Duration) {
	c := &l.stats
	since := c.unsyncedSince.Load()
	if since == 0 {
		return
	}
	now := time.Since(l.opened)
	age := now - time.Duration(since)
	c.unsyncedHist.record(age)
	raiseMax(&c.unsyncedMax, int64(age))
	if d := decide.UnsyncedBound(l.pol); d > 0 && age > d+2*(now-snap) {
		c.unsyncedOver.Add(1)
		l.opts.Logger.Warn("wal: a write waited longer than the policy's bound to become durable (the flusher ran late)",
			"dir", l.dir, "waited", age, "bound", d+2*(now-snap), "policy", l.opts.Policy.String())
	}
	// Writers only set the mark from 0: clear it, then date the writes
	// after target (if any) from the sync's start.
	if c.unsyncedSince.CompareAndSwap(since, 0) && l.written.Load() > target {
		c.unsyncedSince.CompareAndSwap(0, max(int64(snap), 1))
	}
}

// syncTimed syncs s, records the sync's timing, and applies the failure rule:
// a failed sync is final (a test may set Options.unsafeRetrySync).
func (l *Log) syncTimed(s *segment) error {
	l.lastSyncStart.Store(int64(time.Since(l.opened)))
	err := l.syncFile(s.f)
	if err != nil {
		l.stats.fsyncErrors.Add(1)
		if l.opts.unsafeRetrySync {
			// The fsyncgate mistake, on purpose: the retry may "succeed"
			// although the kernel dropped the data the failed sync covered.
			l.opts.Logger.Warn("wal: UNSAFE: retrying a failed sync", "segment", s.path, "err", err)
			err = l.syncFile(s.f)
		}
	}
	if err != nil {
		err = fmt.Errorf("syncing %s: %w", s.path, err)
		l.poison(err) // under syncMu: no sync can start between the failure and the poison
		return err
	}
	return nil
}
