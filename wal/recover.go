package wal

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// RecoveryInfo says what Open found and repaired. From OpenReadOnly it says
// what Open would find and repair, and nothing was repaired: TornBytes were
// not zeroed or quarantined, Unvouched bytes not rewritten, RemovedTemp
// files not removed, and Quarantined lists only the files already there.
type RecoveryInfo struct {
	// Segments is the number of segment files found.
	Segments int
	// FirstLSN is the LSN of the oldest record kept (the first segment's
	// first LSN); EndLSN is where the next frame goes.
	FirstLSN, EndLSN LSN
	// TornBytes is the number of bytes past EndLSN in the last segment that
	// held a torn tail (a partial frame, or frames after a hole that were
	// never synced) and were zeroed, synced, before any new append. 0 after a
	// clean close.
	TornBytes int64
	// RemovedTemp counts leftover temporary files of interrupted segment
	// preparations that Open removed.
	RemovedTemp int
	// Clean reports that the log ends with the end frame a clean Close
	// writes: every byte of the last segment was verified (of every
	// segment, with Options.VerifyOnOpen; a trusted sealed segment's frames
	// are checked when read), and the torn tail is empty.
	Clean bool
	// Unvouched is the number of bytes of recovered frames at the end of
	// the log that no later frame's watermark vouches for (0 after a clean
	// Close): frames written but perhaps never synced before a crash. Open
	// rewrites them from what it read and syncs them before any append, so
	// they are durable from then on; damage inside them could not have been
	// told from a torn tail (see "Recovery" in the package doc).
	Unvouched int64
	// TrustedSegments is the number of sealed (non-last) segments Open
	// trusted by their header and link frame without reading their frames;
	// VerifiedSegments the number it checked frame by frame (all of them
	// with Options.VerifyOnOpen). The last segment is always checked.
	TrustedSegments, VerifiedSegments int
	// BytesRead is the number of bytes of segment files Open read.
	BytesRead int64
	// Steps lists, in words and in order, what Open wrote to make the
	// directory hold the recovered log (from OpenReadOnly: what Open would
	// write): leftovers removed, an interrupted cut or removal finished, a
	// header, link or unvouched frames written again, a torn tail
	// quarantined and zeroed, the new epoch recorded. Recovery decides
	// all of it by reading alone, before the first write.
	Steps []string
	// Epoch is the log's epoch from this Open on: every writable Open and
	// every TruncateFrom begins a new one (recorded in the file "epoch"),
	// and a frame written in an earlier epoch never validates at an LSN a
	// later one has written since. From OpenReadOnly, the epoch recorded
	// (0 for a log written before epochs were recorded).
	Epoch uint64
	// Duration is how long Open took to recover the log: from taking the
	// directory lock to the log being ready for appends.
	Duration time.Duration
	// DroppedSegment names the last segment file if Open removed it: a
	// crash came inside the roll into it, before its sealing was done, and
	// either the segment the roll finished has a torn tail, or the dropped
	// segment's header never reached the disk (zeros, or a recycled file's
	// earlier header). Every frame
	// of the dropped segment was written after the hole and none was
	// acknowledged as durable (a commit's sync syncs the finished segment
	// first); its frames are copied to a quarantine file first. "" if
	// none. From OpenReadOnly: the segment Open would remove, left in place.
	DroppedSegment string
	// Quarantined lists the files in the log directory that hold the bytes
	// of torn tails Open removed, this time or at an earlier Open, oldest
	// first. Nothing in them is a record of the log: they are kept for
	// inspection and may be deleted by the operator.
	Quarantined []QuarantineFile
}

// QuarantineFile is a copy of a torn tail that Open cut from the log: the
// bytes that followed the last valid frame, which Open could not prove were
// ever synced (the recovery rule) and zeroed, copied first to a file named
// "<from>-<end>[.n].torn" in the log directory, as etcd keeps a ".broken"
// copy of a WAL file it repairs.
type QuarantineFile struct {
	// Name is the file's base name in the log directory.
	Name string
	// FromLSN is the LSN at which the removed bytes started (the recovered
	// end of the log then); EndLSN is FromLSN plus Bytes.
	FromLSN, EndLSN LSN
	// Bytes is the file's size in bytes.
	Bytes int64
}

// recover scans the log directory at Open and applies the watermark rule
// (docs/design.md, Recovery rule) in two phases. First it reads: the
// listing, the records, the segments' headers and frames, reading the log as
// the repairs will leave it (a pending cut's bytes as zeros, a segment a
// crash cut short left out), and builds the plan (l.plan): every write that
// makes the directory hold the log it found. Then Open applies the plan in
// order; a read-only Log (OpenReadOnly) stops before, with the same
// verdict. On return l.app.next, l.write.seg, l.app.seg and l.segs.firsts
// describe the log; after Open any torn tail is zeroed and synced and the
// new epoch recorded.
func (l *Log) recover() error {
	l.rec.plan, l.rec.cut = recoveryPlan{}, noCutLSN
	names, err := l.fs.List(l.dir)
	if err != nil {
		if l.readOnly && errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("wal: open read-only: no log directory %s: %w", l.dir, err)
		}
		return fmt.Errorf("wal: open: listing %s: %w", l.dir, foreignIfNotRegular(err))
	}
	d, err := classifyDir(l.fs, l.dir, names, true)
	if err != nil {
		return err
	}
	// The epoch rule every frame scanned must meet (epoch.go).
	if l.app.epoch, err = readEpoch(l.fs, l.dir); err != nil {
		return err
	}
	firsts, hasFirst := d.Segments, d.hasFirst
	l.info.Quarantined = d.Quarantined
	var pooled []string // kept segment files (RecycleSegments), decided on once the log's start is known
	for _, name := range d.Temp {
		if _, ok := parseRecycleName(name); ok && l.opts.RecycleSegments > 0 {
			pooled = append(pooled, name)
			continue
		}
		path := filepath.Join(l.dir, name)
		l.rec.plan.add(func() error { return l.fs.Remove(path) }, "remove the leftover %s", name)
		l.info.RemovedTemp++
	}
	if l.info.RemovedTemp > 0 {
		l.rec.plan.add(l.syncDir, "sync the directory")
	}
	recorded := false // the log has a first-lsn file
	cut := noCutLSN   // a recorded cut a read-only Log must hide instead of finishing
	if len(firsts) > 0 {
		if firsts, recorded, err = l.checkFirst(firsts); err != nil {
			return err
		}
		if firsts, cut, err = l.finishTruncate(firsts); err != nil {
			return err
		}
		l.rec.cut = cut
	}
	l.info.Segments = len(firsts)
	if len(firsts) == 0 && hasFirst {
		// first-lsn is written only after the log's first segment exists,
		// and RemoveBefore never removes the last one.
		return &CorruptionError{Segment: firstLSNName, Offset: 0,
			Reason: fmt.Sprintf("missing: %s records the start of a log, but no segment of it is left", firstLSNName)}
	}
	if len(firsts) == 0 && l.app.epoch.Known {
		// The epoch record too is written only once the first segment and
		// first-lsn are durable: a log was here, and its files are gone.
		return &CorruptionError{Segment: epochName, Offset: 0,
			Reason: fmt.Sprintf("missing: %s records epoch %d of a log (begun at LSN %d), but no segment of it and no %s is left",
				epochName, l.app.epoch.N, l.app.epoch.Start, firstLSNName)}
	}
	if len(firsts) == 0 && l.readOnly {
		return fmt.Errorf("wal: open read-only: no log in %s (no segment file): %w", l.dir, fs.ErrNotExist)
	}
	if len(firsts) == 0 {
		// A new log. Its directory's own entry must be durable before
		// anything in it is acknowledged: Open synced the parent if it
		// created the directory, but an earlier Open that created it may
		// have failed before that sync, or the caller made it.
		//
		// Every ancestor, not the parent alone: an earlier Open may have
		// created more than one level and failed before syncing them all
		// (found by the simulator, seed 1304). A log is created once;
		// the few syncs are paid once.
		if !l.madeDir {
			for d := filepath.Clean(l.dir); filepath.Dir(d) != d; d = filepath.Dir(d) {
				parent := filepath.Dir(d)
				if err := l.syncDirAt(parent); err != nil {
					return fmt.Errorf("wal: open: syncing %s, an ancestor of the new log's directory: %w", parent, err)
				}
			}
		}
		if err := l.adoptPooled(pooled, 0); err != nil { // a new log: none is of it
			return err
		}
		// The leftovers go before the log is created.
		if err := l.rec.plan.apply(); err != nil {
			return err
		}
		s, err := l.prepareSegment(true, false) // installSegment syncs it
		if err != nil {
			return fmt.Errorf("wal: open: creating the first segment: %w", noSpace(err))
		}
		if err := l.installSegment(s); err != nil {
			s.f.Close()
			if strings.HasSuffix(s.path, tmpSuffix) {
				// Not renamed yet: the first write and sync of an
				// allocated segment are installSegment's, so remove it as
				// a failed preparation does.
				l.fs.Remove(s.path)
			}
			return fmt.Errorf("wal: open: installing the first segment: %w", err)
		}
		if err := l.writeFirstLSN(0); err != nil {
			s.f.Close()
			return fmt.Errorf("wal: open: %w", err)
		}
		if err := l.beginEpoch(0); err != nil {
			s.f.Close()
			return fmt.Errorf("wal: open: %w", err)
		}
		l.info.Epoch = l.app.epoch.N
		l.write.seg, l.app.seg, l.segs.firsts, l.segs.sizes = s, s, []LSN{0}, []int64{s.size}
		return nil
	}
	if err := l.checkSegmentHeaders(firsts); err != nil {
		return err
	}
	var rollUnvouched int64
	if firsts, rollUnvouched, err = l.recoverRoll(firsts); err != nil {
		return err
	}
	var oldestVersion uint32
	sizes := make([]int64, 0, len(firsts))
	for i, first := range firsts {
		last := i == len(firsts)-1
		name := segmentName(first)
		path := filepath.Join(l.dir, name)
		if !last {
			size, version, err := l.checkSealedSegment(path, name, first, firsts[i+1])
			if err != nil {
				return err
			}
			sizes = append(sizes, size)
			if i == 0 {
				oldestVersion = version
			}
			continue
		}
		f, err := l.fs.Open(path)
		if err != nil {
			return fmt.Errorf("wal: open: %w", err)
		}
		defer f.Close()
		size, err := f.Size()
		if err != nil {
			return fmt.Errorf("wal: open: %s: %w", path, err)
		}
		// The last segment is read a window at a time too, never whole:
		// a segment may be as large as MaxSegmentSize.
		sc := l.scanFile(f, name, first, size)
		sizes = append(sizes, size)
		if err := checkSegment(sc); err != nil {
			l.info.BytesRead += sc.read
			return err
		}
		version, use := sc.s.version, sc.s.use
		newScanner := func() *frameScanner {
			sc := l.scanFile(f, name, first, size)
			sc.setFormat(version, use)
			return sc
		}
		if i == 0 {
			oldestVersion = version
		}
		end, proven, err := l.recoverTail(sc, version)
		l.info.BytesRead += sc.read
		for try := 1; err != nil && l.readOnly && try < readOnlyAttempts; try++ {
			// A live writer may have written the segment while it was
			// read (a frame of a later group seen, an earlier one not
			// yet), or cut the log and begun a new epoch: the verdict
			// stands only if a second read, under the epoch recorded
			// now, reaches it too.
			if e, eerr := readEpoch(l.fs, l.dir); eerr == nil {
				l.app.epoch = e
			}
			sc = newScanner()
			l.info.TornBytes = 0
			var again error
			end, proven, again = l.recoverTail(sc, version)
			l.info.BytesRead += sc.read
			if again != nil && sameVerdict(again, err) {
				break
			}
			err = again
		}
		if err != nil {
			return err
		}
		l.info.Unvouched = int64(end-proven) + rollUnvouched
		s := &segment{first: first, version: version, use: use, size: size, limit: size, path: path}
		l.write.seg, l.app.seg, l.app.next = s, s, end
		l.planRepairTail(s, sc, end, proven)
	}
	if !recorded && oldestVersion >= 2 && firsts[0] != 0 {
		// A log is created at LSN 0, and only RemoveBefore moves its start,
		// recording it first: both the record and the oldest segments are
		// gone.
		return &CorruptionError{Segment: segmentName(0), Offset: 0,
			Reason: fmt.Sprintf("missing: %s is gone and the oldest segment present starts at LSN %d, not 0: the log's first segments are missing", firstLSNName, firsts[0])}
	}
	if !recorded && oldestVersion >= 2 {
		// Only a crash between creating the log's first segment and
		// recording its start leaves a version-2 log without the record
		// (an older build cannot read such a log, so the file costs no
		// compatibility): write it, or a later loss of the oldest segment
		// would go unnoticed.
		start := firsts[0]
		l.rec.plan.add(func() error { return l.writeFirstLSN(start) }, "record the log's start, LSN %d, in %s", start, firstLSNName)
	}
	// Kept files are trusted only after a clean Close. A roll reuses a
	// kept file by renaming it, and a crash may undo the rename while
	// keeping the frames written into the file, or some of their blocks
	// and not its new header: the file is back under its kept name, its
	// header naming an LSN below the start, but it holds frames of LSNs
	// the log will write again after this recovery, with valid checksums.
	// Reused, those stale frames would follow the new ones as if written
	// by them.
	trustBelow := firsts[0]
	if !l.info.Clean {
		trustBelow = 0 // no LSN is below 0: every kept file is removed
	}
	if err := l.adoptPooled(pooled, trustBelow); err != nil {
		return err
	}
	// A new epoch from the recovered end, before any frame is appended:
	// whatever followed the end (a torn tail, the frames of a cut whose
	// zeros never reached the disk) can never come back after new frames,
	// even where the zeros written over it are lost. The recovered frames
	// were made durable first (repairTail), so nothing before the end can
	// change after it.
	end := l.app.next
	l.rec.plan.add(func() error { return l.beginEpoch(end) }, "begin epoch %d at LSN %d (file %s)", l.app.epoch.N+1, end, epochName)
	l.info.Epoch = l.app.epoch.N
	l.info.Steps = l.rec.plan.describe()
	l.segs.firsts, l.segs.sizes = firsts, sizes
	l.info.FirstLSN, l.info.EndLSN = firsts[0], l.app.next
	if !l.readOnly {
		if err := l.rec.plan.apply(); err != nil {
			return err
		}
		l.info.Epoch = l.app.epoch.N
	}
	slices.SortStableFunc(l.info.Quarantined, func(a, b QuarantineFile) int { return cmp.Compare(a.FromLSN, b.FromLSN) })
	return nil
}

// planRepairTail adds to the plan the step that makes the recovered last
// segment s ready for appends (repairTail), described by what it will do.
func (l *Log) planRepairTail(s *segment, sc *frameScanner, end, proven LSN) {
	var parts []string
	if end > proven {
		parts = append(parts, fmt.Sprintf("write again the unvouched frames of LSNs %d to %d", proven, end))
	}
	if n := l.info.TornBytes; n > 0 {
		parts = append(parts, fmt.Sprintf("quarantine and zero the %d torn bytes from LSN %d", n, end))
	}
	parts = append(parts, "sync it")
	l.rec.plan.add(func() error { return l.repairTail(s, sc, end, proven) },
		"open %s for appends at LSN %d: %s", segmentName(s.first), end, strings.Join(parts, ", "))
}

// repairTail makes the recovered last segment s (its bytes buf, valid
// frames up to end, vouched for up to proven) ready for appends: it opens
// its write handle, makes the recovered frames and names durable, rewrites
// the unvouched frames, quarantines and zeroes the torn tail (and any stale
// one an earlier Open cut). A read-only Log never calls it.
func (l *Log) repairTail(s *segment, sc *frameScanner, end, proven LSN) error {
	name := segmentName(s.first)
	f, err := l.openFile(s.path, l.fs.OpenReadWrite)
	if err != nil {
		if f != nil {
			f.Close()
		}
		return fmt.Errorf("wal: open: %w", err)
	}
	s.f = f
	s.handed = s.offset(end)
	if l.method.Direct() {
		// The partial block at the end of the frames is rewritten by
		// the next write: keep its bytes. An unaligned end of a
		// segment written by another method is left unused.
		s.limit = alignDown(s.size, l.write.dio.align)
		if endOff := s.offset(end); endOff <= s.limit {
			blk := alignDown(endOff, l.write.dio.align)
			tail := make([]byte, endOff-blk)
			if err := sc.readAt(tail, blk); err != nil {
				return err
			}
			l.write.dio.setTail(blk, tail)
		}
	}
	// After a process crash what was recovered may be only in the page
	// cache (frames and segment names alike), yet every new frame will
	// carry end as its watermark: make it durable first, or a later
	// power loss would turn a lost unsynced frame into "damaged synced
	// data" and an acknowledged record could vanish with its name.
	if err := l.syncDir(); err != nil {
		return fmt.Errorf("wal: open: %w", err)
	}
	// Frames no watermark vouches for may never have reached the disk
	// even though the page cache holds them: after a failed fsync Linux
	// marks the pages clean, and a sync now would write nothing. Write
	// them again from what was read, so the sync below makes them
	// durable before any new frame's watermark vouches for them.
	if end > proven {
		if err := l.rewrite(s, sc, proven, end); err != nil {
			return fmt.Errorf("wal: open: rewriting the unvouched frames of %s: %w", name, err)
		}
	}
	// A torn tail an earlier Open cut (its quarantine file says where)
	// may still be on the disk although this Open reads zeros: if that
	// Open's sync after zeroing failed, Linux marked the zeroed pages
	// clean without writing them (fsyncgate), and a power loss would
	// bring the cut frames back after new ones. Zero it again.
	stale := int64(0)
	for _, q := range l.info.Quarantined {
		if q.FromLSN >= s.first && q.EndLSN > end {
			stale = max(stale, int64(q.EndLSN-end))
		}
	}
	stale = min(stale, s.size-s.offset(end))
	if l.info.TornBytes > 0 {
		if err := l.quarantine(end, sc, s.offset(end), l.info.TornBytes); err != nil {
			return fmt.Errorf("wal: open: quarantining the torn tail of %s: %w", name, err)
		}
	}
	if n := max(l.info.TornBytes, stale); n > 0 {
		if err := l.zeroTail(s, end, n); err != nil {
			return fmt.Errorf("wal: open: truncating the torn tail of %s: %w", name, err)
		}
	} else if err := l.syncFile(f); err != nil { // makes the recovered frames durable
		return fmt.Errorf("wal: open: syncing %s: %w", name, err)
	}
	return nil
}

// firstLSNName is the file recording where the log starts: written when a
// log is created and by RemoveBefore before it removes anything, so a
// missing oldest segment is damage, not a checkpoint.
const firstLSNName = format.FirstLSNName

// writeFirstLSN makes first the recorded start of the log: written under
// a temporary name, synced, renamed into place and the directory synced, so
// that a write cut short (a full disk, a crash) leaves the old record whole.
// Where that needs a block the disk no longer has (ENOSPC), the record is
// overwritten in place and synced, as PostgreSQL updates pg_control: its 16
// bytes lie in the file's first sector, and an in-place write needs no free
// block, so RemoveBefore can free space on a full disk. An in-place write
// that fails puts the old record back (the simulator, seed 4032, found a
// short write leaving a record that no longer checked).
func (l *Log) writeFirstLSN(first LSN) error {
	err := l.writeLSNFile(firstLSNName, first)
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return l.writeFile(filepath.Join(l.dir, firstLSNName), l.bufferedMethod(), false, func(f vfs.File) error {
		old := make([]byte, 16)
		n, _ := f.ReadAt(old, 0)
		_, werr := f.WriteAt(encodeLSNRecord(first), 0)
		if werr != nil && n == len(old) {
			f.WriteAt(old, 0) // best effort: the record as it was
		}
		return werr
	})
}

// checkFirst compares the segments found with the recorded start of the
// log. Segments below it are what an interrupted RemoveBefore left: Open
// finishes removing them (a read-only Log leaves them out of the log and
// on the disk). A first segment above it is missing: damage. A
// log without the record (written by an older build) is not checked.
func (l *Log) checkFirst(firsts []LSN) (kept []LSN, recorded bool, err error) {
	first, ok, err := l.readLSNFile(firstLSNName)
	if err != nil {
		return nil, true, err
	}
	if !ok {
		return firsts, false, nil
	}
	if first > firsts[0] && !slices.Contains(firsts, first) {
		// RemoveBefore records the first LSN of the oldest segment it
		// keeps, and only then removes the older ones: a record naming
		// no segment (a restored or copied file) contradicts the
		// segments, and none is removed on its word.
		return nil, true, &CorruptionError{Segment: firstLSNName, Offset: 0,
			Reason: fmt.Sprintf("%s records the log's start at LSN %d, which is not the first LSN of any segment present (%s to %s)",
				firstLSNName, first, segmentName(firsts[0]), segmentName(firsts[len(firsts)-1]))}
	}
	if len(firsts) > 1 && firsts[0] < first && firsts[1] <= first {
		// The record is updated in place: after a process crash what was
		// read may be only in the page cache, and after a failed sync
		// there as clean, so a sync would write nothing (fsyncgate).
		// Write it again and sync it before removing what it says is gone.
		l.rec.plan.add(func() error { return l.writeFirstLSN(first) }, "write %s (LSN %d) again and sync it", firstLSNName, first)
	}
	removed := false
	for len(firsts) > 1 && firsts[0] < first && firsts[1] <= first {
		path := filepath.Join(l.dir, segmentName(firsts[0]))
		l.rec.plan.add(func() error { return l.fs.Remove(path) }, "remove %s, below the recorded start (an interrupted RemoveBefore)", segmentName(firsts[0]))
		firsts, removed = firsts[1:], true
	}
	if removed {
		l.rec.plan.add(l.syncDir, "sync the directory")
	}
	if firsts[0] > first {
		return nil, true, &CorruptionError{Segment: segmentName(first), Offset: 0,
			Reason: fmt.Sprintf("missing: the log starts at LSN %d (recorded in %s), but the oldest segment present starts at LSN %d", first, firstLSNName, firsts[0])}
	}
	return firsts, true, nil
}

// adoptPooled takes into the pool of files to reuse (Options.RecycleSegments)
// the segment files an earlier process kept, named in names, and removes the
// rest. A file is kept only if it is a segment of the size new segments get,
// with a valid header naming an LSN below start (the log's first LSN, or 0
// after a crash, when none is kept): its stale frames then carry LSNs the
// log never uses again. Anything
// else (a log recreated in the directory, another SegmentSize, more files
// than the pool takes) is removed, counted in RecoveryInfo.RemovedTemp. A
// read-only Log only counts.
func (l *Log) adoptPooled(names []string, start LSN) error {
	kept := 0
	for _, name := range names {
		path := filepath.Join(l.dir, name)
		if kept < l.opts.RecycleSegments && l.reusable(path, start) {
			kept++
			l.rec.plan.add(func() error {
				l.prep.pool = append(l.prep.pool, path)
				n, _ := parseRecycleName(name)
				for cur := l.tmpSeq.Load(); cur < n && !l.tmpSeq.CompareAndSwap(cur, n); cur = l.tmpSeq.Load() {
				}
				return nil
			}, "keep %s for reuse", name)
			continue
		}
		l.rec.plan.add(func() error {
			if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}, "remove the leftover %s", name)
		l.info.RemovedTemp++
	}
	return nil
}

// reusable reports whether the kept file at path can become a segment of
// this log (see adoptPooled).
func (l *Log) reusable(path string, start LSN) bool {
	f, err := l.fs.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil || size != l.opts.SegmentSize {
		return false
	}
	// Its last use began below the start; its frames ended where its
	// successor began, at or below the start, and any earlier use's are
	// older still. A new log starts at LSN 0, where no file qualifies.
	first, ok := headerFirst(f)
	return ok && first < start
}

// recoverRoll applies the recovery rule to a crash inside a roll that
// seals in the background (rollTo). Its state: S, the last segment, is of
// a format version that may take frames before its predecessor P is synced
// (earlyUse), or has a header that was never made durable (all zeros, as
// prepared, or the header of a recycled file's earlier use: the roll
// writes S's header without a sync), and P has no link frame, which its
// sealing writes only once P is synced and S's name and header are
// durable. P's frames are scanned as a last segment's would be
// (recoverTail), up to x:
//
//   - A frame of P after x or of S with a watermark above x means x was
//     synced: damage, ErrCorrupt. (Until P is synced no frame carries a
//     watermark above P's end; until S's header is durable, none above
//     S's first LSN.)
//   - If x is S's first LSN and S's header is good, P is whole; Open
//     writes S's header again and makes it and S's name durable, then
//     rewrites the frames of P no
//     watermark vouches for (they may be only in the page cache after a
//     failed sync), counted in unvouched, before checkSealedSegment
//     writes P's link.
//   - Otherwise the roll never finished and none of S's frames was
//     acknowledged as durable: the log ends at x. Open quarantines S's
//     frames, removes S and syncs the directory, and P's tail is then cut
//     as the last segment's; RecoveryInfo.DroppedSegment names S. A
//     read-only Log leaves S on the disk and out of the log.
//
// Any other state is left to the checks that follow (a missing link with
// damage in P, or a bad header, is ErrCorrupt).
func (l *Log) recoverRoll(firsts []LSN) (kept []LSN, unvouched int64, err error) {
	n := len(firsts)
	if n < 2 {
		return firsts, 0, nil
	}
	pFirst, sFirst := firsts[n-2], firsts[n-1]
	pName, sName := segmentName(pFirst), segmentName(sFirst)
	pPath, sPath := filepath.Join(l.dir, pName), filepath.Join(l.dir, sName)
	open := func(path, name string, first LSN) (vfs.File, *frameScanner, error) {
		f, err := l.fs.Open(path)
		if err != nil {
			return nil, nil, fmt.Errorf("wal: open: %w", err)
		}
		size, err := f.Size()
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("wal: open: %s: %w", path, err)
		}
		return f, l.scanFile(f, name, first, size), nil
	}
	sf, ssc, err := open(sPath, sName, sFirst)
	if err != nil {
		return firsts, 0, err
	}
	defer func() {
		if sf != nil {
			l.info.BytesRead += ssc.read
			sf.Close()
		}
	}()
	headerGood := checkSegment(ssc) == nil
	if headerGood && !earlyUse(ssc.s.version) {
		return firsts, 0, nil
	}
	if !headerGood {
		if ssc.s.size < segmentHeaderSize || ssc.load(0, segmentHeaderSize, false) != nil ||
			!headerUnwritten(ssc.bytesAt(0)[:segmentHeaderSize], sFirst) {
			return firsts, 0, nil // damage: the checks that follow report it
		}
		// Its frames, if any, were written by this build (a roll of an
		// older one leaves no epoch record behind) under a use ID whose
		// header is lost: none validates, and the scans below find none.
		ssc.s.version, ssc.s.use = segmentVersion, 0
	}
	pf, psc, err := open(pPath, pName, pFirst)
	if err != nil {
		return firsts, 0, err
	}
	defer func() {
		l.info.BytesRead += psc.read
		pf.Close()
	}()
	if checkSegment(psc) != nil {
		return firsts, 0, nil
	}
	pVersion := psc.s.version
	// A version-1 segment gets a link too when it fits (writeLink).
	if linked, err := psc.linkAt(sFirst); err != nil || linked {
		return firsts, 0, err
	}
	clean, torn := l.info.Clean, l.info.TornBytes
	x, proven, err := l.recoverTail(psc, pVersion)
	l.info.Clean, l.info.TornBytes = clean, torn
	if err != nil || x > sFirst {
		return firsts, 0, err // x > sFirst: a frame across S's first LSN, reported by checkSealed
	}
	sEnd, sMark, err := leadingFrames(ssc)
	if err != nil {
		return firsts, 0, err
	}
	if x == sFirst && headerGood {
		// P is whole: S's header and name become durable before the
		// link that vouches for them, and P's unvouched frames are
		// written again before the link's sync makes P durable.
		from := max(proven, min(sMark, sFirst))
		// Written again, not only synced: after a failed sync the page
		// cache may hold it as clean while the disk does not
		// (fsyncgate), and a sync would then write nothing.
		hdr := make([]byte, ssc.s.hdr())
		if err := ssc.readAt(hdr, 0); err != nil {
			return firsts, 0, err
		}
		l.rec.plan.add(func() error { return l.rewriteHeader(sPath, hdr) }, "write the header of %s again and sync it", sName)
		l.rec.plan.add(l.syncDir, "sync the directory")
		if from < sFirst {
			p := &segment{first: pFirst, version: pVersion, use: psc.s.use, size: psc.s.size, path: pPath}
			l.rec.plan.add(func() error {
				return l.withScanner(p, func(sc *frameScanner) error { return l.rewrite(p, sc, from, sFirst) })
			}, "write again the unvouched frames of %s, LSNs %d to %d, and sync them", pName, from, sFirst)
		}
		return firsts, int64(sFirst - min(from, sFirst)), nil
	}
	at, wm, _, _, err := scanTail(ssc, ssc.s.hdr(), x, x+1)
	if err != nil {
		return firsts, 0, err
	}
	if wm > x && !headerGood {
		return firsts, 0, &CorruptionError{Segment: sName, Offset: 0,
			Reason: fmt.Sprintf("the header was never made durable (a roll cut short), but the frame at LSN %d records the log as synced up to LSN %d", at, wm)}
	}
	if wm > x {
		return firsts, 0, &CorruptionError{Segment: pName, Offset: psc.s.offset(x),
			Reason: fmt.Sprintf("frames end at LSN %d, before the next segment's first LSN %d, but the frame at LSN %d of %s records the log as synced up to LSN %d", x, sFirst, at, sName, wm)}
	}
	// The roll into S never finished: S goes, and P is the last segment.
	l.info.DroppedSegment = sName
	tornBytes := int64(sEnd - sFirst)
	if !headerGood {
		// Its frames cannot be told from other bytes without the use ID
		// the lost header held: keep everything written after it.
		last, err := ssc.lastNonZero(ssc.s.hdr())
		if err != nil {
			return firsts, 0, err
		}
		tornBytes = last + 1 - ssc.s.hdr()
	}
	sSeg := &segment{first: sFirst, version: ssc.s.version, use: ssc.s.use, size: ssc.s.size, path: sPath}
	if tornBytes > 0 {
		l.rec.plan.add(func() error {
			l.opts.Logger.Warn("wal: the last roll did not finish before the crash: removing its new segment",
				"segment", sName, "end_lsn", x, "frames_bytes", tornBytes)
			return l.withScanner(sSeg, func(sc *frameScanner) error { return l.quarantine(sFirst, sc, sc.s.hdr(), tornBytes) })
		}, "quarantine the %d bytes written into %s, a segment whose roll a crash cut short", tornBytes, sName)
	}
	l.rec.plan.add(func() error { return l.fs.Remove(sPath) }, "remove %s", sName)
	l.rec.plan.add(l.syncDir, "sync the directory")
	return firsts[:n-1], 0, nil
}

// withScanner runs fn with a scanner of the segment s's file, opened for
// the call, whose format is s's.
func (l *Log) withScanner(s *segment, fn func(sc *frameScanner) error) error {
	f, err := l.fs.Open(s.path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := l.scanFile(f, segmentName(s.first), s.first, s.size)
	sc.setFormat(s.version, s.use)
	err = fn(sc)
	l.info.BytesRead += sc.read
	return err
}

// headerUnwritten reports whether b, the first bytes of the segment file
// named for first, is a header a roll wrote without a sync and a crash
// lost: all zeros (a prepared file), or a valid header naming an LSN below
// first (what a recycled file's earlier use left). A header is 32 bytes in
// one sector, written whole or not at all.
func headerUnwritten(b []byte, first LSN) bool {
	if bytes.Equal(b, make([]byte, len(b))) {
		return true
	}
	h, why, _ := decodeSegmentHeader(b)
	return why == "" && LSN(h.First) < first
}

// rewriteHeader writes hdr, the header read from the segment file at path,
// to it again and syncs it, through a buffered handle of its own.
func (l *Log) rewriteHeader(path string, hdr []byte) error {
	return l.writeFile(path, vfs.Fdatasync, false, func(f vfs.File) error {
		_, err := f.WriteAt(hdr, 0)
		return err
	})
}

// leadingFrames follows the valid frames of sc from its first LSN and
// returns the LSN where they stop and the highest watermark among them.
func leadingFrames(sc *frameScanner) (end, mark LSN, err error) {
	lsn := sc.s.first
	for {
		_, wm, size, flags, st, err := sc.frame(lsn, true)
		if err != nil {
			return 0, 0, err
		}
		if st != frameValid || flags != 0 { // an end or link frame ends them too
			return lsn, mark, nil
		}
		mark = max(mark, wm)
		lsn += LSN(size)
	}
}

// checkSealedSegment checks the non-last segment at path, whose successor
// starts at LSN next, and returns its size in bytes and its format version.
// A version-2 segment of the size it was created with, whose link frame
// names next, is trusted without reading its frames (unless
// Options.VerifyOnOpen): a roll writes the link only once every frame
// before it and the successor are durable, and readers check every frame's
// checksum when they read it. Any other sealed segment is checked frame by
// frame (checkSealed) through a bounded window, and the link a crash kept
// its roll from writing is written.
func (l *Log) checkSealedSegment(path, name string, first, next LSN) (size int64, version uint32, err error) {
	f, err := l.fs.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("wal: open: %w", err)
	}
	defer f.Close()
	if size, err = f.Size(); err != nil {
		return 0, 0, fmt.Errorf("wal: open: %s: %w", path, err)
	}
	sc := l.scanFile(f, name, first, size)
	defer func() { l.info.BytesRead += sc.read }()
	if err := checkSegment(sc); err != nil {
		return 0, 0, err
	}
	version = sc.s.version
	linked := false
	if version >= 2 {
		if linked, err = sc.linkAt(next); err != nil {
			return 0, 0, err
		}
	}
	if linked && !l.opts.VerifyOnOpen {
		l.info.TrustedSegments++
		return size, version, nil
	}
	if err := checkSealed(sc, next); err != nil {
		return 0, 0, err
	}
	l.info.VerifiedSegments++
	// A version-2 segment without its link: a crash came between the
	// roll's sync of the successor and the link. Without it, a later loss
	// of the successor, if it is the last segment, would pass for the end
	// of the log. (A segment too full to hold one needs none: nothing
	// could follow its frames.)
	if version < 2 || linked || sc.s.offset(next)+endFrameSize > size {
		return size, version, nil
	}
	seg := &segment{first: first, version: version, use: sc.s.use, size: size, path: path}
	l.rec.plan.add(func() error { return l.writeLink(seg, next) }, "write the missing link frame of %s, at LSN %d", name, next)
	return size, version, nil
}

// checkSealed validates a non-last segment: its frames must run without a
// gap from its first LSN to next, the first LSN of the following segment.
// Every byte there was synced before the next segment was used, so any bad
// frame is damage, and a segment too short to reach next means a missing
// segment.
func checkSealed(sc *frameScanner, next LSN) error {
	s, name := &sc.s, sc.name
	if next < s.first || int64(next-s.first) > s.capacity() {
		at, linked, err := sc.linkIn()
		if err != nil {
			return err
		}
		if linked { // the roll's link names the successor
			return &CorruptionError{Segment: segmentName(at), Offset: 0,
				Reason: fmt.Sprintf("missing: %s continues at LSN %d, but the next segment present starts at LSN %d", name, at, next)}
		}
		return &CorruptionError{Segment: name, Offset: s.size,
			Reason: fmt.Sprintf("the next segment starts at LSN %d, beyond this segment's end (LSN %d): a segment is missing", next, s.first+LSN(s.capacity()))}
	}
	for lsn := s.first; lsn < next; {
		off := s.offset(lsn)
		_, _, size, flags, st, err := sc.frame(lsn, true)
		if err != nil {
			return err
		}
		if st != frameValid {
			return &CorruptionError{Segment: name, Offset: off,
				Reason: fmt.Sprintf("%s at LSN %d in a completed segment (the log continues at LSN %d)", st, lsn, next)}
		}
		if size == endFrameSize && flags != 0 { // an end or link frame before next
			return &CorruptionError{Segment: segmentName(lsn), Offset: 0,
				Reason: fmt.Sprintf("missing: %s continues at LSN %d, but the next segment present starts at LSN %d", name, lsn, next)}
		}
		if lsn+LSN(size) > next {
			return &CorruptionError{Segment: name, Offset: off,
				Reason: fmt.Sprintf("frame at LSN %d ends past the next segment's first LSN %d", lsn, next)}
		}
		lsn += LSN(size)
	}
	return nil
}

// recoverTail scans the last segment sc, of format version version, a window
// at a time, and returns where its valid frames end.
// At the first frame that does not validate, at LSN x, it looks at every
// later position for a valid frame whose watermark is above x: such a frame
// was appended after x had been synced, so x is damaged synced data and Open
// must fail. Without one, x was never synced: the bytes from x on are a torn
// tail, counted in l.info.TornBytes for zeroing.
//
// proven is the highest LSN up to which the valid frames are vouched for:
// the largest watermark among them (at least first, since a segment is used
// only after its predecessor was synced), at most x.
func (l *Log) recoverTail(sc *frameScanner, version uint32) (x, proven LSN, err error) {
	s, name, first := &sc.s, sc.name, sc.s.first
	lsn := first
	proven = first
	l.info.Clean = false
	link := false
	lowest, seen := LSN(0), false // the first valid frame's watermark: no later frame's is lower
	var st frameStatus
	for {
		var rec []byte
		var wm LSN
		var size int64
		var flags uint32
		rec, wm, size, flags, st, err = sc.frame(lsn, true)
		if err != nil {
			return 0, 0, err
		}
		if st != frameValid {
			break
		}
		proven = max(proven, min(wm, lsn))
		if !seen {
			lowest, seen = wm, true
		}
		lsn += LSN(size)
		l.info.Clean = rec == nil // the end frame of a clean Close, if nothing follows
		link = rec == nil && flags == flagLink
	}
	if link {
		// A roll wrote this link after its successor was durable: the
		// log continues in a segment that is not there. Nothing is ever
		// written after a link, so bytes after it are damage too, not a
		// torn tail to cut.
		at := lsn - endFrameSize
		if l.readOnly && l.segmentExists(at) {
			// A live writer rolled after the directory was listed: the
			// log goes on in a segment this scan did not list. A
			// read-only Log ends at the link.
			return at, at, nil
		}
		return 0, 0, &CorruptionError{Segment: segmentName(at), Offset: 0,
			Reason: fmt.Sprintf("missing: %s, the last segment present, continues at LSN %d in it", name, at)}
	}
	// In a recycled segment (version 3) the bytes after the frames are
	// what an earlier use of the file left, not zeros: only frames valid
	// at their own position's LSN belong to this use of it. A frame's
	// watermark is the synced LSN when it was appended, so the frames of
	// this use carry watermarks of at least the first one's, while every
	// stale one is below it (the file was kept only once its segment's
	// successor was synced). Not of at least first: the frames appended
	// before the roll's sync of the predecessor carry lower ones. Without
	// a valid first frame there is no such bound, and only the checksums
	// at each position tell this use's frames from stale ones.
	recycled := staleTail(version)
	if l.info.Clean {
		// The log ends with a clean Close's end frame and nothing after
		// it: every byte before it is verified. The end is the end
		// frame's LSN; the next append overwrites it.
		at := lsn - endFrameSize
		lo := at + 1 // looking for what follows, not for a verdict
		if recycled {
			lo = lowest
		}
		_, wm, end, last, err := scanTail(sc, s.offset(lsn), at, lo)
		if err != nil {
			return 0, 0, err
		}
		follows := last >= 0 // not zeros
		if recycled {
			follows = end > 0 // not stale
		}
		follows = follows || wm > at // a later frame: the crash path finds it again
		if !follows {
			return at, at, nil
		}
		// Bytes follow it: recover as after a crash, the end frame being
		// part of the tail that is cut.
		l.info.Clean, lsn = false, at
	}
	x, xoff := lsn, s.offset(lsn)
	lo := x + 1 // the lowest watermark of a frame scanTail must look at
	if recycled {
		lo = lowest
	}
	at, wm, end, last, err := scanTail(sc, xoff, x, lo)
	if err != nil {
		return 0, 0, err
	}
	if wm > x {
		return 0, 0, &CorruptionError{Segment: name, Offset: xoff,
			Reason: fmt.Sprintf("%s at LSN %d, but the frame at LSN %d records the log as synced up to LSN %d", st, x, at, wm)}
	}
	if recycled && end > xoff {
		// The frames of this use after x (never synced, or a
		// later frame would vouch for x) must go, or new frames ending
		// where one starts would bring it back; the stale bytes after
		// them are left to be overwritten.
		l.info.TornBytes = end - xoff
	}
	if !recycled && last >= 0 {
		l.info.TornBytes = last + 1 - xoff
	}
	if l.info.TornBytes > 0 {
		l.info.Clean = false
	}
	return x, proven, nil
}

// scanTail looks at every frame position of the last segment sc from
// offset xoff on, where the valid frames stop at LSN x, for frames valid at
// their own position's LSN with a watermark of at least lo. It returns the
// first of them whose watermark is above x (at, wm: x was synced, and is
// damaged), or else wm 0 and the offset where the last of them ends (0 if
// none), and the offset of the last non-zero byte from xoff on (-1 if
// none). It reads the positions a window at a time, and each candidate
// frame through sc: every byte once, but for the candidates.
//
// Only a frame whose watermark lies in [lo, at] is checksummed (every
// frame's watermark is at most its own LSN): the rest are skipped on one
// load, or a torn record of small integers, read as a header at each of
// its offsets, would be checksummed over its claimed length at every one.
func scanTail(sc *frameScanner, xoff int64, x, lo LSN) (at, wm LSN, end, last int64, err error) {
	size := sc.s.size
	last = -1
	var chunk []byte
	cbase := int64(-1) // file offset of chunk[0]
	covered := xoff    // every byte before it was looked at for the last non-zero one
	for off := xoff; off+frameHeaderSize <= size; off += frameAlign {
		if cbase < 0 || off+frameHeaderSize > cbase+int64(len(chunk)) {
			if chunk == nil {
				chunk = make([]byte, min(sc.window, size-xoff))
			}
			chunk, cbase = chunk[:min(int64(cap(chunk)), size-off)], off
			if err := sc.readAt(chunk, off); err != nil {
				return 0, 0, 0, -1, err
			}
			if k := lastNonZeroFrom(chunk, 0); k >= 0 {
				last = max(last, cbase+k)
			}
			covered = max(covered, cbase+int64(len(chunk)))
		}
		pos := sc.s.first + LSN(off-sc.s.hdr())
		h := chunk[off-cbase:]
		if w := LSN(binary.LittleEndian.Uint64(h[16:24])); w < lo || w > pos {
			continue
		}
		_, w, fsize, _, st, err := sc.frame(pos, false)
		if err != nil {
			return 0, 0, 0, -1, err
		}
		if st != frameValid {
			continue
		}
		if w > x {
			return pos, w, 0, -1, nil
		}
		if k := lastNonZeroFrom(sc.bytesAt(off)[:fsize], 0); k >= 0 { // the frame may run past the chunk
			last = max(last, off+k)
		}
		covered = max(covered, off+fsize)
		end = off + fsize
		off += fsize - frameAlign
	}
	if covered < size {
		// Bytes after the last position a frame header fits, or after a
		// frame that ran past the last chunk: no frame, but written.
		k, err := sc.lastNonZero(covered)
		if err != nil {
			return 0, 0, 0, -1, err
		}
		last = max(last, k)
	}
	return 0, 0, end, last, nil
}

// segmentExists reports whether the segment starting at first is in the
// log directory now, as a file the listing recovery read would include: a
// directory of that name opens, but is not a segment.
func (l *Log) segmentExists(first LSN) bool {
	names, err := l.fs.List(l.dir)
	if err != nil {
		return false
	}
	_, found := slices.BinarySearch(names, segmentName(first))
	return found
}

// rewrite writes buf's bytes of the frames in [from, end) of s again, through
// a buffered handle (O_DIRECT would need whole aligned blocks), and syncs
// them. Under Linux a failed fsync leaves the pages it lost marked clean: a
// rewrite is the only way to make a later sync write them.
func (l *Log) rewrite(s *segment, sc *frameScanner, from, end LSN) error {
	off, stop := s.offset(from), s.offset(end)
	return l.writeFile(s.path, vfs.Fdatasync, false, func(f vfs.File) error {
		return sc.copyRange(off, stop-off, func(p []byte, at int64) error {
			_, err := f.WriteAt(p, at)
			return err
		})
	})
}

// quarantineName returns the name of the n-th quarantine file (n = 0: the
// first) for a torn tail of the given size at LSN from.
func quarantineName(from LSN, size int64, n int) string {
	return format.QuarantineName(uint64(from), size, n)
}

// parseQuarantineName recognises a name quarantineName made.
func parseQuarantineName(name string) (QuarantineFile, bool) {
	from, ok := format.ParseQuarantineName(name)
	return QuarantineFile{Name: name, FromLSN: LSN(from)}, ok
}

// quarantine copies the torn tail p, which starts at LSN from, into a new
// file of the log directory and makes it durable (file and directory) before
// Open zeroes the tail: recovery never destroys bytes it has not proven
// torn.
func (l *Log) quarantine(from LSN, sc *frameScanner, off, size int64) error {
	copyTail := func(f vfs.File) error {
		return sc.copyRange(off, size, func(p []byte, at int64) error {
			_, err := f.WriteAt(p, at-off)
			return err
		})
	}
	var name string
	for n := 0; ; n++ {
		name = quarantineName(from, size, n)
		err := l.writeFile(filepath.Join(l.dir, name), vfs.Fdatasync, true, copyTail)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			l.fs.Remove(filepath.Join(l.dir, name)) // what a failed write left, if anything
			return err
		}
		if n > 1000 {
			return err
		}
	}
	if err := l.syncDir(); err != nil {
		return err
	}
	l.info.Quarantined = append(l.info.Quarantined, QuarantineFile{Name: name, FromLSN: from,
		EndLSN: from + LSN(size), Bytes: size})
	l.opts.Logger.Warn("wal: quarantined a torn tail", "file", name, "lsn", from, "bytes", size)
	return nil
}

// zeroTail overwrites the torn tail that starts at end with zeros and syncs,
// so no stale frame can ever be read as live and new frames follow the last
// valid one. The sync is a real one under every method: the recovered
// frames may have been written by an earlier process through the page cache.
func (l *Log) zeroTail(s *segment, end LSN, n int64) error {
	off := s.offset(end)
	stop := off + n
	f := s.f
	if l.method.Direct() {
		if stop <= s.limit {
			// Aligned: rewrite the partial block's kept bytes, then zeros
			// to the next block boundary.
			if err := l.zeroDirect(s, alignUp(stop, l.write.dio.align)); err != nil {
				return err
			}
			l.opts.Logger.Warn("wal: zeroed the tail", "segment", s.path, "lsn", end, "bytes", n, "torn_bytes", l.info.TornBytes)
			return l.syncFile(s.f)
		}
		// The torn bytes reach an unaligned end that O_DIRECT cannot
		// write (a segment made with another SegmentSize): zero them
		// through a buffered handle.
		bf, err := l.fs.OpenReadWrite(s.path, vfs.Fdatasync)
		if err != nil {
			return err
		}
		defer bf.Close()
		f = bf
	}
	if err := writeZeros(f, off, stop); err != nil {
		return err
	}
	l.opts.Logger.Warn("wal: zeroed the tail", "segment", s.path, "lsn", end, "bytes", n, "torn_bytes", l.info.TornBytes)
	return l.syncFile(f)
}

// zeroDirect writes, through O_DIRECT, the partial block at dio.tailOff (its
// kept bytes, then zeros) and zeros after it up to stop, an aligned offset.
func (l *Log) zeroDirect(s *segment, stop int64) error {
	const chunk = 1 << 20
	d := &l.write.dio
	buf := alignedBuf(int(min(chunk, stop-d.tailOff)), d.align)
	for off := d.tailOff; off < stop; {
		clear(buf)
		n := min(int64(len(buf)), stop-off)
		if off == d.tailOff {
			copy(buf, d.tail)
		}
		if _, err := s.f.WriteAt(buf[:n], off); err != nil {
			return err
		}
		off += n
	}
	return nil
}

// lastNonZeroFrom returns the offset of the last non-zero byte of buf at or
// after from, or -1.
func lastNonZeroFrom(buf []byte, from int64) int64 {
	// Whole chunks are compared with zeros at memory speed: the tail of a
	// segment is mostly its unused zero-filled end.
	var zeros [4096]byte
	i := int64(len(buf))
	for i > from {
		j := max(from, i-int64(len(zeros)))
		if bytes.Equal(buf[j:i], zeros[:i-j]) {
			i = j
			continue
		}
		for k := i - 1; k >= j; k-- {
			if buf[k] != 0 {
				return k
			}
		}
	}
	return -1
}
