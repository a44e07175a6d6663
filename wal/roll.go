package wal

import (
	"fmt"

	"github.com/durawal/durawal/wal/vfs"
)

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
