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
// sync: reopen the log first), or the filesystem's (the segments not yet removed are then
// removed by the next Open).
func (l *Log) RemoveBefore(lsn LSN) (LSN, error) {
	if l.readOnly {
		return 0, ErrReadOnly
	}
	l.app.Lock()
	closed := l.app.closed
	l.app.Unlock()
	if closed {
		return 0, ErrClosed
	}
	l.removal.Lock()
	defer l.removal.Unlock()
	l.app.Lock()
	closed = l.app.closed // again: a Close that ran meanwhile has released the directory lock
	poisoned := l.poisoned()
	l.app.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if poisoned != nil {
		// A failed write or sync may have left a recorded cut or a
		// segment half sealed that only the next Open settles: removing
		// segments now could remove the one that cut's record names
		// (found by the simulator, seeds 242 and 489).
		return 0, poisoned
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
		// A segment whose roll is still sealing it (syncing, then writing
		// its link by name) is removed only once that is done.
		l.write.Lock()
		sl := l.write.seal
		l.write.Unlock()
		if sl != nil && sl.seg.first < first {
			<-sl.done
			if sl.err != nil {
				// Its successor's header may never have reached the
				// disk: removing the segment would leave a log that
				// starts in that successor, which Open cannot read.
				return l.FirstLSN(), fmt.Errorf("%w: the roll into %s failed, and %s stays: %w",
					ErrPoisoned, segmentName(sl.succ.first), segmentName(sl.seg.first), sl.err)
			}
		}
	}
	if k > 0 {
		if err := l.writeFirstLSN(first); err != nil {
			return doomed[0], fmt.Errorf("wal: recording the new first LSN %d: %w", first, err)
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
	for len(l.removal.leftover) > 0 {
		name := segmentName(l.removal.leftover[0])
		path := filepath.Join(l.dir, name)
		if err := l.removeSegmentFile(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return first, fmt.Errorf("wal: removing %s: %w", name, err)
		}
		if err := l.syncDir(); err != nil {
			return first, fmt.Errorf("wal: removing %s: %w", name, err)
		}
		l.removal.leftover = l.removal.leftover[1:]
		// Yield between removals, as the segment preparer does between
		// chunks: a checkpoint freeing hundreds of segments is a run of
		// short syscalls that would otherwise keep this P from commits
		// woken onto it for a whole 10 ms time slice.
		runtime.Gosched()
	}
	return first, nil
}
