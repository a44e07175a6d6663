package wal

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// preparer is the state of the segment preparation that runs ahead of the
// roll: the spare (the next segment, installed and ready), whether a
// goroutine is making it, and the recycle pool it takes kept files from.
// The code that uses it is in this file.
type preparer struct {
	// Guarded by the append lock (Log.app).
	spare *segment      // prepared segment for the next roll, or nil
	busy  bool          // a goroutine is preparing the spare
	done  chan struct{} // closed when that goroutine finishes
	err   error         // why the last preparation failed

	poolMu sync.Mutex
	pool   []string // paths of segment files kept for reuse (RecycleSegments), oldest first
}

// awaitSpareLocked waits for the segment preparer, starting it if needed.
// It returns ErrNoSpace once the filesystem kept reporting ENOSPC until
// deadline. l.app is released while waiting.
func (l *Log) awaitSpareLocked(ctx context.Context, deadline time.Time) error {
	if !l.prep.busy {
		if err := l.prep.err; err != nil {
			if !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.EDQUOT) {
				l.prep.err = nil
				return fmt.Errorf("wal: preparing a segment: %w", err)
			}
			if !time.Now().Before(deadline) {
				l.prep.err = nil
				return fmt.Errorf("%w: %w", ErrNoSpace, err)
			}
			// Back-pressure: wait a little before trying again.
			l.app.Unlock()
			select {
			case <-time.After(min(50*time.Millisecond, time.Until(deadline))):
			case <-ctx.Done():
			}
			l.app.Lock()
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err := l.usableLocked(); err != nil {
				return err // closed or poisoned while we slept: start no preparer
			}
			l.prep.err = nil
		}
		l.startPrepareLocked()
	}
	done := l.prep.done
	l.app.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
	l.app.Lock()
	return ctx.Err()
}

// startPrepareLocked starts a goroutine that prepares the next segment.
func (l *Log) startPrepareLocked() {
	l.prep.busy = true
	done := make(chan struct{})
	l.prep.done = done
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		s, err := l.prepareSegment(l.allocatesSpares(), true)
		l.app.Lock()
		defer l.app.Unlock()
		l.prep.busy = false
		close(done)
		if err != nil {
			l.prep.err = err
			return
		}
		if l.app.closed {
			s.f.Close()
			l.fs.Remove(s.path)
			return
		}
		l.prep.spare = s
	}()
}

// prepareSegment returns a temporary segment file of SegmentSize bytes in
// dir that reads as zeros, or a recycled one: appends into it later need no
// block allocation and no size update. A new file is made in one of two
// ways:
//
//   - allocate (fallocate, vfs.Allocate): blocks reserved, no data written.
//     Fast and no write amplification, but its extents are marked
//     unwritten, and a sync after a write into them commits that marking
//     too (about twice the cost of an fdatasync into zeros: docs/design.md,
//     Measurements behind the defaults). Where commits sync, the frames
//     written into such a segment are preceded by zeros a MiB at a time
//     (zeroAhead), so that one sync per MiB converts its blocks.
//   - zero-fill (PostgreSQL XLogFileInit, InnoDB's redo files): zeros
//     written and synced, so that a later fdatasync flushes data only.
//
// allocate asks for the first; sync asks for the file to be synced before
// prepareSegment returns (a caller that syncs it next, installSegment, saves
// one sync by passing false). prepareSegment falls back to zero-fill where
// the file or its filesystem cannot allocate, and under a write-through
// method (O_DSYNC), whose writes are each durable but whose allocation
// would not be without an fsync. The file is opened with the log's sync
// method; under O_DIRECT the zeros are written from an aligned buffer in
// aligned chunks (SegmentSize is a multiple of the alignment), under O_DSYNC
// each write is durable and no sync follows. A failure removes the
// temporary file; ENOSPC is reported as an error matching syscall.ENOSPC.
func (l *Log) prepareSegment(allocate, sync bool) (*segment, error) {
	if s := l.reuseSegment(); s != nil {
		return s, nil
	}
	path := filepath.Join(l.dir, fmt.Sprintf("prepare-%d%s", l.tmpSeq.Add(1), tmpSuffix))
	f, err := l.openFile(path, l.fs.Create)
	if err != nil {
		if f != nil {
			f.Close()
			l.fs.Remove(path)
		}
		return nil, err
	}
	fail := func(err error) (*segment, error) {
		f.Close()
		l.fs.Remove(path)
		return nil, err
	}
	start := time.Now()
	done := func(zeroed bool) (*segment, error) {
		if sync {
			if err := l.syncSegment(f); err != nil {
				return fail(err)
			}
		}
		// Counted only for a segment prepared, not for one discarded.
		if zeroed {
			l.stats.seg.prepareBytes.Add(uint64(l.opts.SegmentSize))
		} else {
			l.stats.seg.allocated.Add(1)
		}
		l.stats.seg.prepared.Add(1)
		l.stats.seg.prepareTime.Add(int64(time.Since(start)))
		s := &segment{version: segmentVersion, use: newUseID(), size: l.opts.SegmentSize, limit: l.opts.SegmentSize, handed: segmentHeaderSize, path: path, f: f}
		if !zeroed {
			s.zeroTo = segmentHeaderSize
		}
		return s, nil
	}
	if allocate && !l.method.WriteThrough() {
		err := vfs.Allocate(f, l.opts.SegmentSize)
		if err == nil {
			return done(false)
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			return fail(err)
		}
	}
	if err := l.zeroFill(f); err != nil {
		return fail(err)
	}
	return done(true)
}

// zeroFill writes SegmentSize bytes of zeros to f in 64 KiB writes (a
// multiple of every accepted alignment, and small enough that the page
// cache keeps small folios for the file, which later small writes into it
// need), yielding the P after each. Where commits sync (SyncEveryCommit,
// SyncEveryN) under a buffered method, every WritebackAfter bytes are handed
// to the device as they are written and the step before is waited for, so
// at most two steps of zeros are ever queued ahead of the log's own writes
// and syncs; elsewhere it runs at full speed, as a log writing hundreds of
// MiB/s needs its next segment soon. An error of a writeback wait consumes
// the file's writeback error, as a sync's would: the preparation fails and
// the file is discarded. A short write with no error is ENOSPC, as
// PostgreSQL reports it.
func (l *Log) zeroFill(f vfs.File) error {
	const chunk = 64 << 10
	zeros := alignedBuf(int(min(chunk, l.opts.SegmentSize)), l.write.dio.align)
	step := l.opts.WritebackAfter
	if k := l.pol.Kind(); step <= 0 || l.method.Direct() || l.method.WriteThrough() ||
		(k != policy.KindSyncEveryCommit && k != policy.KindSyncEveryN) {
		step = 0
	}
	var handed int64 // zeros before this offset were handed to the device
	for off := int64(0); off < l.opts.SegmentSize; off += int64(len(zeros)) {
		clear(zeros) // the FS may scramble written buffers
		n := min(int64(len(zeros)), l.opts.SegmentSize-off)
		w, err := f.WriteAt(zeros[:n], off)
		if err == nil && int64(w) < n {
			err = syscall.ENOSPC
		}
		if err == nil && step > 0 && off+n-handed >= step {
			if handed > 0 {
				err = vfs.Writeback(f, max(0, handed-step), min(step, handed), true)
			}
			if err == nil {
				err = vfs.Writeback(f, handed, off+n-handed, false)
			}
			handed = off + n
		}
		if err != nil {
			return err
		}
		// Each write is a short syscall that returns before the runtime can
		// hand the P to another thread: without a yield the preparer keeps
		// it for a whole time slice, and commits woken onto its run queue
		// wait behind it (docs/design.md, Measurements behind the defaults).
		runtime.Gosched()
	}
	return nil
}

// allocatesSpares reports whether the next segment is to be allocated
// rather than zero-filled (prepareSegment): only where commits return
// before their record is written (BufferedInterval, AsyncCommit). Where a
// commit waits for its write() or its sync, the unwritten extents cost it:
// the sync that converts them (on ext4, in the journal) holds up the
// commits' writes and syncs meanwhile (docs/design.md, Measurements behind
// the defaults). A new log's first segment is allocated under every policy
// (where prepareSegment can allocate at all), so that Open does not write a
// segment of zeros first; where commits sync, zeros written ahead of its
// frames (zeroAhead) spare its commits most of the conversions. Spares stay
// zero-filled there, as an allocated one still costs its commits syncs, and
// the zero-fill runs off the commit path, paced;
// unless the writes are large (largeWrites), whose syncs convert their own
// blocks, a conversion per 64 KiB or more, where zeros would halve the
// bandwidth a log of large records gets from the device.
func (l *Log) allocatesSpares() bool {
	k := l.pol.Kind()
	return k == policy.KindBufferedInterval || k == policy.KindAsyncCommit || l.largeWrites()
}

// reuseSegment returns a segment prepared from a file RemoveBefore kept
// for reuse (Options.RecycleSegments), or nil if none can be reused. A
// recycled file is neither zero-filled nor synced again: its blocks are
// allocated and written, so a later fdatasync needs no metadata, and what
// it holds are frames of LSNs below the log's start, which no frame
// checksum seeded with a current LSN accepts. It gets the header of
// version recycledVersion at install, so recovery takes those bytes for
// stale rather than torn. A file that cannot be opened is removed and the
// next one tried.
func (l *Log) reuseSegment() *segment {
	for {
		l.prep.poolMu.Lock()
		if len(l.prep.pool) == 0 {
			l.prep.poolMu.Unlock()
			return nil
		}
		path := l.prep.pool[0]
		l.prep.pool = l.prep.pool[1:]
		l.prep.poolMu.Unlock()
		start := time.Now()
		f, err := l.openFile(path, l.fs.OpenReadWrite)
		if err == nil {
			var size int64
			if size, err = f.Size(); err == nil && size != l.opts.SegmentSize {
				err = fmt.Errorf("recycled file %s is %d bytes, not %d", path, size, l.opts.SegmentSize)
			}
		}
		if err != nil {
			if f != nil {
				f.Close()
			}
			l.opts.Logger.Warn("wal: cannot reuse a recycled segment file; removing it", "file", path, "err", err)
			l.fs.Remove(path)
			continue
		}
		l.stats.seg.prepared.Add(1)
		l.stats.seg.recycled.Add(1)
		l.stats.seg.prepareTime.Add(int64(time.Since(start)))
		return &segment{version: recycledVersion, use: newUseID(), size: l.opts.SegmentSize, limit: l.opts.SegmentSize,
			handed: segmentHeaderSize, path: path, f: f}
	}
}

// recycleName returns the name under which RemoveBefore keeps a segment
// file for reuse: "recycle-<n>.wal.tmp", a temporary file's, so that builds
// that do not reuse it remove it at Open; this one adopts it (adoptPooled).
func (l *Log) recycleName() string {
	return filepath.Join(l.dir, fmt.Sprintf("%s%d%s", recyclePrefix, l.tmpSeq.Add(1), tmpSuffix))
}

// parseRecycleName returns the n of a name recycleName made.
func parseRecycleName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, recyclePrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, tmpSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

// removeSegmentFile removes the file of a segment below the log's start,
// or, while fewer than Options.RecycleSegments are kept, renames it for
// reuse by the next preparation. Only segments below the start are ever
// kept: their LSNs are never used again (TruncateFrom cannot cut below
// FirstLSN, and removes the segments after a cut), so none of their frames
// can pass for a current one.
func (l *Log) removeSegmentFile(path string) error {
	l.prep.poolMu.Lock()
	keep := len(l.prep.pool) < l.opts.RecycleSegments
	l.prep.poolMu.Unlock()
	if !keep {
		return l.fs.Remove(path)
	}
	to := l.recycleName()
	if err := l.fs.Rename(path, to); err != nil {
		return err
	}
	l.prep.poolMu.Lock()
	l.prep.pool = append(l.prep.pool, to)
	l.prep.poolMu.Unlock()
	l.stats.seg.recycledKept.Add(1)
	return nil
}

// dropSpare closes the prepared spare, if any, and removes its file unless
// it is a reused one (a kept file keeps its name and content: it stays
// kept). Files kept for reuse stay for the next Open to adopt
// (Options.RecycleSegments), as PostgreSQL keeps recycled WAL files. Close
// calls it once no preparer runs.
func (l *Log) dropSpare() {
	l.app.Lock()
	spare := l.prep.spare
	l.prep.spare = nil
	l.app.Unlock()
	if spare != nil {
		spare.f.Close()
		if spare.version != recycledVersion {
			l.fs.Remove(spare.path)
		}
	}
	l.prep.poolMu.Lock()
	l.prep.pool = nil
	l.prep.poolMu.Unlock()
}
