package wal

import (
	"errors"
	"io/fs"
	"slices"
	"time"
)

// readOnlyAttempts bounds how often OpenReadOnly scans a directory that a
// live writer changed under the scan.
const readOnlyAttempts = 5

// OpenReadOnly opens the log in dir to read it, without repairing it and
// without taking the directory lock: a damaged log can be inspected, and a
// live log read by another process (or another Log of this one) while its
// writer runs. It changes no byte and no directory entry of dir.
//
// It runs Open's recovery scan and applies the same recovery rule, so it
// fails where Open would fail, with the same error (a *CorruptionError for
// damaged synced data or a missing segment, ErrUnsupportedVersion,
// ErrForeignFile), but it carries out none of Open's repairs: leftover
// temporary files stay, segments an interrupted RemoveBefore left below the
// recorded start stay on the disk and out of the log, the segments after an
// unfinished TruncateFrom's cut stay on the disk and the log is read as if
// the cut were finished, a missing link frame is not written, unvouched
// frames are not rewritten, a torn tail is neither quarantined nor zeroed,
// the first-lsn record is not written, and nothing is synced. Recovered
// reports what Open would find and do (EndLSN, TornBytes, Unvouched, Clean,
// RemovedTemp); its Quarantined lists only the quarantine files present, not
// the one Open would add for TornBytes. Nothing OpenReadOnly reads is
// guaranteed durable: after a crash, the frames it recovers may be only in
// the page cache until an Open syncs them.
//
// The Log reads up to the recovered end: AppendedLSN, WrittenLSN and
// SyncedLSN are all EndLSN, and stay there (SyncedLSN is then no claim of
// durability; NewReader refuses DurableOnly with ErrReadOnly). NewReader, Reader.Next,
// ReadRecord, FirstLSN, Stats and Recovered work as on any Log; records a
// live writer appends after OpenReadOnly are not visible to it (open it
// again to see them), and Reader.Follow at the end waits until its
// context ends or the Log is closed. A live writer's RemoveBefore can
// remove a segment a reader of this Log has yet to open: the read then
// fails with an error matching fs.ErrNotExist. A live writer's
// TruncateFrom below the recovered end is not seen either: a reader of
// this Log then reads zeros (ErrCorrupt), or the records appended after
// the cut at the cut records' LSNs, which pass their checksums; open the
// log again after a cut. A live writer may change
// the log while OpenReadOnly scans it: a segment whose link frame names a
// successor created after the directory was listed ends the read-only log
// at the link; a last segment that fails the recovery rule is read again,
// and the verdict stands only if its bytes did not change; and a scan that
// fails while the directory changed (a roll, a removal) is run again. Each
// is retried a few times before the failure is returned. Every
// method that would change the log (Append, AppendContext, AppendBatch,
// AppendBatchLSNs, Sync, SyncContext, WaitDurable, RemoveBefore,
// TruncateFrom) returns ErrReadOnly. No background goroutine runs. Close
// releases the files and writes nothing. The Log is safe for concurrent use.
//
// Of opts, FS, Logger, Observer and VerifyOnOpen are used (the Observer
// hears of nothing, as nothing is written or synced); the others are
// checked as Open checks them and otherwise ignored.
//
// Errors: ErrInvalidOptions for bad options; an error matching
// fs.ErrNotExist if dir does not exist or holds no segment (OpenReadOnly
// never creates a log); Open's recovery errors; or the filesystem's error
// with the path.
func OpenReadOnly(dir string, opts Options) (*Log, error) {
	l, err := newLog(dir, opts)
	if err != nil {
		return nil, err
	}
	l.readOnly = true
	start := time.Now()
	for attempt := 1; ; attempt++ {
		before, _ := l.fs.List(dir)
		err = l.recover()
		if err == nil || attempt == readOnlyAttempts || !(errors.Is(err, ErrCorrupt) || errors.Is(err, fs.ErrNotExist)) {
			break
		}
		// A writer may have rolled or removed segments under the scan
		// (a link frame naming a segment listed after it, a segment
		// removed before it was read): scan again if the directory
		// changed, and let the verdict stand if it did not.
		after, lerr := l.fs.List(dir)
		slices.Sort(before)
		slices.Sort(after)
		if lerr != nil || slices.Equal(before, after) {
			break
		}
		l.info = RecoveryInfo{BytesRead: l.info.BytesRead} // every scan's reads count
		l.write.seg, l.app.seg, l.segs.firsts, l.segs.sizes, l.app.next = nil, nil, nil, nil, 0
	}
	l.info.Duration = time.Since(start)
	if err != nil {
		return nil, err
	}
	l.segs.Lock()
	l.publishSegmentsLocked()
	l.segs.Unlock()
	l.app.active = &logBuffer{start: l.app.next}
	l.leader.spareBuf = &logBuffer{}
	l.appended.Store(uint64(l.app.next))
	l.written.Store(uint64(l.app.next))
	l.synced.Store(uint64(l.app.next))
	l.q.Advance(uint64(l.app.next), uint64(l.app.next))
	l.opts.Logger.Info("wal: opened read-only", "dir", dir, "lsn", l.app.next, "segments", l.info.Segments,
		"torn_bytes", l.info.TornBytes, "unvouched", l.info.Unvouched)
	return l, nil
}

// closeReadOnly is Close for a Log opened with OpenReadOnly, once it is
// marked closed: it fails waiters and closes the read handles.
func (l *Log) closeReadOnly() error {
	l.q.Fail(ErrClosed)
	l.reads.Lock()
	l.reads.closed = true
	l.closeReadHandles(1, 0) // every one
	l.reads.Unlock()
	l.opts.Logger.Info("wal: closed read-only", "dir", l.dir)
	return nil
}
