package wal

import (
	"context"
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

	if syncBeforeWrite && need == groupcommit.Synced { // the crashlab_late negative control only
		l.syncMu.Lock()
		err = l.syncTimed(l.write.seg)
		l.syncMu.Unlock()
	}
	if err == nil && len(b.buf) > 0 {
		err = l.writeBuffer(b)
		l.leader.groupsSinceSync.Add(1)
	}
	b.reset(0)
	l.leader.spareBuf = b
	if syncBeforeWrite && need == groupcommit.Synced {
		if err == nil {
			l.synced.Store(l.written.Load()) // the bug: claimed, not synced
		}
	} else if err == nil && (need == groupcommit.Synced || decide.SyncGroup(l.pol, decide.State{GroupsSinceSync: int(l.leader.groupsSinceSync.Load()) - 1})) {
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

// writeLink writes into the finished segment old, at next (its successor's
// first LSN, now durable), a link frame, and makes it durable: from then on
// Open knows the log continues past old, and a missing successor is damage,
// not the end of the log. Written through a buffered handle (under O_DIRECT
// the direct handle's partial block now belongs to the new segment), with
// O_DSYNC under a write-through method so no fsync is added there. A
// version-1 segment gets one only if it fits.
func (l *Log) writeLink(old *segment, next LSN) error {
	// A version-1 segment keeps no room for the link, but takes one if it
	// fits: its successor is a version-2 segment, which builds that read
	// only version 1 refuse anyway, so the link costs no compatibility and
	// a vanished first version-2 segment is reported.
	end := old.size
	if old.limit > 0 {
		end = old.limit
	}
	if old.version < 2 && old.offset(next)+endFrameSize > end {
		return nil
	}
	b := make([]byte, endFrameSize) // the FS may scramble what it is given
	encodeEndFrame(b, old.format(), l.app.epoch.N, next, flagLink)
	return l.writeFile(old.path, l.bufferedMethod(), false, func(f vfs.File) error {
		_, err := f.WriteAt(b, old.offset(next))
		return err
	})
}

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

// rollTo makes next the segment receiving writes. Under a buffered or
// direct sync method the commit path pays only next's header write and
// rename, no sync: the rest is sealing (sealInBackground), done by a
// goroutine while commits go on into next. Sealing syncs the finished
// segment (settling it: every LSN below next is then durable), makes
// next's name and header durable, then writes the finished segment's link
// frame naming next. Any sync of the log does whatever of that is not yet
// done first (syncWrittenSynced), so the synced LSN only advances in order
// and never past next's first LSN before the link is durable: next can be
// found, and its header lost after that is damage, not a roll to undo.
// Until then, frames written to next carry watermarks no higher than its
// first LSN, which lets recovery tell a roll cut short by a crash (the finished
// segment's tail torn or next's header lost, and the link missing) from
// damage (recoverRoll). The finished segment's final fdatasync must flush
// everything written since the last sync, and whichever sync comes first
// after the roll pays the device's cache flush for it (20-50 ms for 64 MiB
// on the development VM): that is what leaves the commit path.
//
// Under a write-through method every write was durable already: next is
// installed with its syncs and the link written at once.
//
// Only one roll's sealing runs at a time: a roll first waits for the one
// before it (counted in Stats.SealWaits), so recovery never finds more
// than one unsealed segment.
func (l *Log) rollTo(next *segment) error {
	// Until next becomes the write segment nothing else holds its file: a
	// failure closes it (the log is poisoned; the file stays for Open).
	failed := func(err error) error {
		next.closeUnused()
		return err
	}
	if err := l.awaitSeal(true); err != nil {
		return failed(err)
	}
	if err := l.poisoned(); err != nil {
		return failed(err)
	}
	old := l.write.seg
	name := segmentName(next.first)
	if old.first == next.first {
		return l.replaceEmpty(old, next)
	}
	var sl *seal // nil under a write-through method: nothing is left to seal
	if l.method.WriteThrough() {
		if err := l.installSegment(next); err != nil {
			return failed(fmt.Errorf("installing segment %s: %w", name, err))
		}
	} else {
		if err := l.writeHeader(next); err != nil {
			return failed(fmt.Errorf("writing the header of segment %s: %w", name, err))
		}
		if err := l.nameSegment(next); err != nil {
			return failed(fmt.Errorf("naming segment %s: %w", name, err))
		}
		sl = &seal{seg: old, succ: next, done: make(chan struct{})}
	}
	l.write.Lock()
	l.write.seg = next
	if sl != nil {
		l.write.seal = sl
	}
	l.write.Unlock()
	l.segs.Lock()
	l.segs.firsts = append(l.segs.firsts, next.first)
	l.segs.sizes = append(l.segs.sizes, next.size)
	l.publishSegmentsLocked()
	l.segs.Unlock()
	l.stats.rolls.Add(1)
	l.opts.Logger.Info("wal: rolled segment", "segment", name)
	if o := l.opts.Observer; o != nil {
		o.ObserveRoll(RollEvent{Segment: name, FirstLSN: next.first})
	}
	if sl != nil {
		go l.sealInBackground(sl)
		return nil
	}
	if err := l.writeLink(old, next.first); err != nil {
		old.closeUnused() // no longer the write segment: Close would not close it
		return fmt.Errorf("linking %s to %s: %w", old.path, name, err)
	}
	if err := old.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", old.path, err) // a close error may report a lost write
	}
	old.f = nil
	return nil
}

// replaceEmpty is a roll away from a segment that holds no frame of the
// log: old, whose first LSN is next's, the segment a writable Open left for
// appends (one of a format older than 6, which takes no new frame; or one
// too small for the frame that came), emptied or never filled. next takes
// its name: installed with its syncs (header, rename over old, directory)
// before any frame goes to it, so a crash leaves the old file or the new
// one under the name, each a valid empty segment at that LSN; nothing is
// linked or sealed, as nothing in old belongs to the log.
func (l *Log) replaceEmpty(old, next *segment) error {
	name := segmentName(next.first)
	if err := l.installSegment(next); err != nil {
		next.closeUnused()
		return fmt.Errorf("installing segment %s in place of an empty one: %w", name, err)
	}
	l.write.Lock()
	l.write.seg = next
	l.write.Unlock()
	l.segs.Lock()
	l.segs.sizes[len(l.segs.sizes)-1] = next.size
	l.publishSegmentsLocked()
	l.segs.Unlock()
	l.rfiles.Lock()
	if h := l.rfiles.m[next.first]; h != nil { // a handle of the replaced file
		h.f.Close()
		delete(l.rfiles.m, next.first)
	}
	l.rfiles.Unlock()
	l.stats.rolls.Add(1)
	l.opts.Logger.Info("wal: replaced an empty segment", "segment", name)
	if o := l.opts.Observer; o != nil {
		o.ObserveRoll(RollEvent{Segment: name, FirstLSN: next.first})
	}
	if err := old.f.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", old.path, err)
	}
	old.f = nil
	return nil
}

// A seal is what a roll leaves to do: sync the segment it finished
// (settled: every LSN below the successor's first LSN is durable), make
// the successor's name and header durable and then the finished segment's
// link frame naming it (linked), and close the finished segment. Until
// linked, nothing at or after the successor's first LSN counts as synced: a power loss may yet take the successor's
// header, and recovery then drops the successor (recoverRoll), which is
// safe only because none of its frames was acknowledged as durable.
type seal struct {
	seg     *segment      // the finished segment
	succ    *segment      // its successor, which receives the writes now
	settled bool          // seg's frames are durable; guarded by syncMu
	named   bool          // succ's name and header are durable; guarded by syncMu
	linked  bool          // and then seg's link; guarded by syncMu
	done    chan struct{} // closed once linked and seg closed, or the seal failed
	err     error         // why it failed; set before done is closed
}

// sealInBackground does sl's work that no sync of the log has done yet,
// then writes the finished segment's link and closes it. A failure poisons
// the log and fails the commits waiting, as a failed background sync does.
func (l *Log) sealInBackground(sl *seal) {
	// A sync of the log settles the finished segment and, if the
	// successor holds unsynced frames, names it and syncs them too,
	// advancing the synced LSN as any sync does; if it held none, its
	// name and header still need making durable.
	_, err := l.syncWrittenSynced(false)
	l.syncMu.Lock()
	if err == nil {
		err = l.settleLocked(sl) // a no-op unless nothing was written since the roll's sync
	}
	if err == nil {
		err = l.linkLocked(sl)
	}
	synced := l.synced.Load() + l.qbase // qbase changes under syncMu
	l.syncMu.Unlock()
	if err == nil {
		// What this sync made durable, and no further: frames written
		// past it belong to a flush in flight, whose leader wakes their
		// commits when it returns, after the sync its group may owe
		// (SyncEveryN). Waking them here, on the written LSN, let a
		// SyncEveryN(1) commit return before its sync.
		l.q.Advance(synced, synced)
	}
	// Settled, nothing syncs sl.seg.f again (settleLocked reads it only
	// while unsettled, under syncMu).
	if cerr := sl.seg.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing %s: %w", sl.seg.path, cerr) // a close error may report a lost write
	}
	if err != nil {
		l.poison(err)
		l.q.Fail(fmt.Errorf("%w: %w: %w", ErrDurabilityUnknown, ErrPoisoned, err))
	}
	sl.err = err
	close(sl.done)
}

// settleLocked makes the frames of sl's finished segment durable, if no
// sync did yet, and advances the synced LSN to the successor's first LSN:
// every segment before it was settled before this roll began. l.syncMu is
// held.
func (l *Log) settleLocked(sl *seal) error {
	if sl.settled {
		return nil
	}
	if err := l.poisoned(); err != nil {
		return err // never sync again after a failed sync or write (fsyncgate)
	}
	if err := l.syncTimed(sl.seg); err != nil {
		return err
	}
	sl.settled = true
	if l.synced.Load() < uint64(sl.succ.first) {
		l.synced.Store(uint64(sl.succ.first))
		l.notifyTail()
	}
	return nil
}

// linkLocked makes the successor's name durable (a directory sync) and its
// header (a sync of the successor, which covers the frames written to it so
// far too), unless a sync did already (named), then writes the finished
// segment's link frame naming it and syncs that. l.syncMu is held. Any
// failure poisons the log.
func (l *Log) linkLocked(sl *seal) error {
	if sl.linked {
		return nil
	}
	if err := l.poisoned(); err != nil {
		return err
	}
	if !sl.named {
		if err := l.syncName(sl); err != nil {
			return err
		}
		if err := l.syncTimed(sl.succ); err != nil {
			return err
		}
		sl.named = true
	}
	if err := l.writeLink(sl.seg, sl.succ.first); err != nil {
		err = fmt.Errorf("linking %s to %s: %w", sl.seg.path, segmentName(sl.succ.first), err)
		l.poison(err)
		return err
	}
	sl.linked = true
	return nil
}

// syncName makes the successor's name durable: a directory sync. A
// failure poisons the log.
func (l *Log) syncName(sl *seal) error {
	if err := l.syncDir(); err != nil {
		err = fmt.Errorf("making the name of %s durable: %w", sl.succ.path, err)
		l.poison(err)
		return err
	}
	return nil
}

// awaitSeal waits until the last roll's sealing is done and returns its
// error (nil if there is none). counted says the wait is a roll's, counted
// in Stats.SealWaits if it had to wait.
func (l *Log) awaitSeal(counted bool) error {
	l.write.Lock()
	sl := l.write.seal
	l.write.Unlock()
	if sl == nil {
		return nil
	}
	select {
	case <-sl.done:
	default:
		if counted {
			l.stats.sealWaits.Add(1)
		}
		<-sl.done
	}
	return sl.err
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
	l.notifyTail()
	if groups {
		l.leader.groupsSinceSync.Store(0)
	}
	return true, nil
}

var syncHook = func(l *Log, s *segment) error { return l.syncFile(s.f) } // crashlab_broken.go replaces it

// syncTimed syncs s, records the sync's timing, and applies the failure rule:
// a failed sync is final (a test may set Options.unsafeRetrySync).
func (l *Log) syncTimed(s *segment) error {
	l.lastSyncStart.Store(int64(time.Since(l.opened)))
	err := syncHook(l, s)
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

// stateLocked returns the numbers the policy decides from. l.app is held.
func (l *Log) stateLocked(now time.Time) decide.State {
	since := int64(now.Sub(l.opened))
	st := decide.State{
		AppendedLSN:     uint64(l.app.next),
		WrittenLSN:      l.written.Load(),
		SyncedLSN:       l.synced.Load(),
		GroupsSinceSync: int(l.leader.groupsSinceSync.Load()),
		SyncInProgress:  l.syncInProgress.Load(),
		SinceSyncStart:  time.Duration(since - l.lastSyncStart.Load()),
		SinceWrite:      time.Duration(since - l.lastWrite.Load()),
	}
	if !l.app.postponeStart.IsZero() {
		st.PostponedFor = now.Sub(l.app.postponeStart)
	}
	return st
}

// runFlusher is the background flusher of interval and async policies: it
// wakes every policy tick, or when the next sync is due (timed from the
// start of the previous sync on the monotonic clock) or a postponed write
// reaches the policy's maximum postponement, and does what the
// policy's OnTick says. It stops when Close closes l.stop, or when the log
// is poisoned.
func (l *Log) runFlusher() {
	defer l.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-l.stop; cancel() }()
	tick := decide.Tick(l.pol)
	timer := time.NewTimer(tick)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-l.syncKick: // nil (never ready) unless IncrementalSync is set
			if l.poisonErr.Load() != nil {
				return
			}
			if l.written.Load()-l.synced.Load() >= uint64(l.opts.IncrementalSync) && l.syncInProgress.CompareAndSwap(false, true) {
				if !l.startBackgroundSync(ctx) {
					return
				}
			}
			continue
		case <-timer.C:
		}
		if !l.flusherRound(ctx) {
			return
		}
		timer.Reset(l.nextWake(tick))
	}
}

// flusherRound does one tick's work; it returns false if the flusher must
// stop.
func (l *Log) flusherRound(ctx context.Context) bool {
	if l.poisonErr.Load() != nil {
		return false
	}
	l.app.Lock()
	now := time.Now()
	st := l.stateLocked(now)
	a := decide.OnTick(l.pol, st)
	target := uint64(l.app.next) + l.qbase
	if a.Write && st.SyncInProgress && st.PostponedFor > 0 && !l.app.delayedSeen {
		// Redis everysec: the postponement reached its limit and no commit
		// came to force the write; the flusher writes it without waiting for
		// the running sync (aof_delayed_fsync).
		l.app.delayedSeen = true
		l.stats.delayedWrites.Add(1)
	}
	l.app.Unlock()
	if a.Write {
		if err := l.q.Wait(ctx, target, groupcommit.Written); err != nil {
			return false
		}
	}
	if !a.Sync || !l.syncInProgress.CompareAndSwap(false, true) {
		return true
	}
	return l.startBackgroundSync(ctx)
}

// startBackgroundSync runs a background sync, for a tick or for
// IncrementalSync; the caller has set syncInProgress. It returns false if
// the flusher must stop.
func (l *Log) startBackgroundSync(ctx context.Context) bool {
	postponing := l.pol.Kind() == policy.KindSyncIntervalPostponed
	if l.pol.WriteDelay() == 0 && !postponing {
		return l.runBackgroundSync() == nil
	}
	// Buffered and async policies: the sync runs beside the writes
	// (InnoDB's log_writer and log_flusher are separate threads), so the
	// next write tick never waits a sync. Redis everysec: the sync runs in
	// the background (the bio thread) so that the flusher can force a write
	// postponed to its limit while the sync still runs; when the sync ends,
	// what it postponed is written at once.
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		if l.runBackgroundSync() == nil && postponing {
			l.writePostponed(ctx)
		}
	}()
	return true
}

// writePostponed writes what a finished background sync postponed, as the
// policy says (Redis everysec).
func (l *Log) writePostponed(ctx context.Context) {
	l.app.Lock()
	a := decide.OnTick(l.pol, l.stateLocked(time.Now()))
	target := uint64(l.app.next) + l.qbase
	l.app.Unlock()
	if a.Write {
		l.q.Wait(ctx, target, groupcommit.Written) // a failure poisons the log; the flusher stops on it
	}
}

// nextWake returns how long the flusher sleeps: one tick, or less when a
// sync falls due sooner (so 1 s means 1 s, not 1 s rounded to ticks).
func (l *Log) nextWake(tick time.Duration) time.Duration {
	d := tick
	if mp := l.pol.MaxPostpone(); mp > 0 {
		l.app.Lock()
		if !l.app.postponeStart.IsZero() {
			d = min(d, mp-time.Since(l.app.postponeStart)) // a postponed write falls due
		}
		l.app.Unlock()
	}
	if iv := l.pol.Interval(); iv > 0 && l.appended.Load() > l.synced.Load() {
		since := time.Duration(int64(time.Since(l.opened)) - l.lastSyncStart.Load())
		if until := iv - since; until < d {
			d = until
		}
	}
	return max(d, time.Millisecond)
}

// runBackgroundSync syncs what is written, outside the group-commit queue (like
// InnoDB's log_flusher or Redis's bio thread), and wakes commits waiting for
// it. A failure poisons the log and never marks it clean.
// The caller has set syncInProgress; runBackgroundSync clears it.
func (l *Log) runBackgroundSync() error {
	didSync, err := l.syncWrittenSynced(true)
	l.syncInProgress.Store(false)
	if err != nil {
		l.poison(err)
		l.q.Fail(fmt.Errorf("%w: %w: %w", ErrDurabilityUnknown, ErrPoisoned, err))
		return err
	}
	if didSync { // not when another sync had covered everything, or under O_DSYNC
		l.stats.backgroundSyncs.Add(1)
	}
	l.syncMu.Lock() // TruncateFrom changes qbase under syncMu
	synced := l.synced.Load() + l.qbase
	l.syncMu.Unlock()
	l.q.Advance(synced, synced) // what it made durable, no further: see sealInBackground
	return nil
}
