package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
)

// RemoveBefore removes, oldest first, every segment whose frames all lie
// below lsn (a checkpoint: the caller no longer needs those records), or
// keeps up to Options.RecycleSegments of their files, renamed, for the next
// segments to reuse (PostgreSQL wal_recycle). The active segment is never
// removed. The new start of the log is recorded
// (the first-lsn file, synced) before any file is removed, so a missing
// oldest segment is damage and a crash between the removals is finished by
// the next Open; each removal is then made durable (directory synced)
// before the next. Appends, rolls and readers do not wait for the removals:
// the segment list is updated at once, under a lock held only for that. It
// returns the first LSN still kept. Readers positioned in a removed segment
// fail with fs.ErrNotExist. Concurrent calls are serialized. Errors:
// ErrClosed, ErrReadOnly (OpenReadOnly), ErrPoisoned (a failed write or
// sync, this call's recording of the new start included: reopen the log,
// whose Open finds either start), or the filesystem's (the segments not yet
// removed are then removed by the next Open).
func (l *Log) RemoveBefore(lsn LSN) (LSN, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	if err := l.removable(); err != nil {
		return 0, err
	}
	l.removal.Lock()
	defer l.removal.Unlock()
	if err := l.removable(); err != nil { // again: a Close that ran meanwhile has released the directory lock
		return 0, err
	}
	// Only RemoveBefore shortens the list at its front, and rolls only
	// append to it: the first k entries stay what they are read as here.
	l.segs.Lock()
	k := 0
	for k+1 < len(l.segs.firsts) && l.segs.firsts[k+1] <= lsn {
		k++
	}
	doomed := slices.Clone(l.segs.firsts[:k])
	first := l.segs.firsts[k]
	l.segs.Unlock()
	if k > 0 {
		if err := l.awaitSealBelow(first); err != nil {
			return l.FirstLSN(), err
		}
		if err := l.writeFirstLSN(first); err != nil {
			// The new start may have reached the disk or not: the log can
			// no longer say where it starts, and a TruncateFrom below first
			// would leave a first-lsn past the log's end. Reopen decides.
			err = fmt.Errorf("wal: recording the new first LSN %d: %w", first, err)
			l.poison(err)
			return doomed[0], fmt.Errorf("%w: %w", ErrPoisoned, err)
		}
		l.reads.Lock() // no ReadRecord is reading through a handle closed here
		l.segs.Lock()
		l.segs.firsts, l.segs.sizes = l.segs.firsts[k:], l.segs.sizes[k:]
		l.publishSegmentsLocked()
		l.segs.Unlock()
		l.closeReadHandles(first, ^LSN(0))
		l.reads.Unlock()
	}
	// Out of the list now; a removal that fails is retried by the next
	// call (or finished by the next Open).
	l.removal.leftover = append(l.removal.leftover, doomed...)
	if err := l.removeLeftovers(); err != nil {
		return first, err
	}
	return first, nil
}

// removable returns ErrClosed on a closed log and the poisoning error on a
// poisoned one: a failed write or sync may have left a recorded cut or a
// segment half sealed that only the next Open settles, and removing
// segments then could remove the one that cut's record names (found by the
// simulator, seeds 242 and 489).
func (l *Log) removable() error {
	l.app.Lock()
	defer l.app.Unlock()
	if l.app.closed {
		return ErrClosed
	}
	return l.poisoned()
}

// awaitSealBelow waits for the last roll's sealing if the segment it seals
// starts below first: a segment is removed only once its roll has synced
// it and written its link. If that sealing failed, its successor's header
// may never have reached the disk, and removing the segment would leave a
// log that starts in that successor, which Open cannot read: it returns an
// error matching ErrPoisoned.
func (l *Log) awaitSealBelow(first LSN) error {
	l.write.Lock()
	sl := l.write.seal
	l.write.Unlock()
	if sl == nil || sl.seg.first >= first {
		return nil
	}
	<-sl.done
	if sl.err != nil {
		return fmt.Errorf("%w: the roll into %s failed, and %s stays: %w",
			ErrPoisoned, segmentName(sl.succ.first), segmentName(sl.seg.first), sl.err)
	}
	return nil
}

// removeLeftovers removes (or keeps for reuse) the files of the segments in
// l.removal.leftover, oldest first, syncing the directory after each, and
// drops each from the list once done. l.removal is held.
func (l *Log) removeLeftovers() error {
	for len(l.removal.leftover) > 0 {
		name := segmentName(l.removal.leftover[0])
		path := filepath.Join(l.dir, name)
		if err := l.removeSegmentFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wal: removing %s: %w", name, err)
		}
		if err := l.syncDir(); err != nil {
			return fmt.Errorf("wal: removing %s: %w", name, err)
		}
		l.removal.leftover = l.removal.leftover[1:]
		// Yield between removals, as the segment preparer does between
		// chunks: a checkpoint freeing hundreds of segments is a run of
		// short syscalls that would otherwise keep this P from commits
		// woken onto it for a whole time slice.
		runtime.Gosched()
	}
	return nil
}
