package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/durawal/durawal/wal/vfs"
)

// ErrNotRepaired is returned (wrapped) by Repair when the log it repaired
// is still refused by Open, or when nothing before the damage could be kept:
// damage Repair does not handle (a damaged first-lsn, truncate-lsn or epoch
// record; a segment of another format version). The error says which.
var ErrNotRepaired = errors.New("wal: repair: not repaired")

// RepairReport says what Repair found and did (or, from PlanRepair, would
// do).
type RepairReport struct {
	// Needed reports that Open refused the log (with VerifyOnOpen: every
	// frame of every segment checked), so there was something to repair.
	// When false nothing else is set and nothing was changed.
	Needed bool
	// Damage is why Open refused the log: its error.
	Damage error
	// Kept is the longest verifiable prefix, which the repaired log holds:
	// Salvage's report of it.
	Kept SalvageReport
	// LostFrom is the first LSN the repair drops (Kept.Stop), and LostTo the
	// highest LSN of the dropped bytes as their positions say (the end of
	// the last dropped segment's valid frames, or of its non-zero bytes).
	LostFrom, LostTo LSN
	// LostBytes counts the bytes moved into evidence files: non-zero bytes
	// after the cut in the segment that keeps the prefix, and every byte of
	// the segments after it.
	LostBytes int64
	// LostRecords counts the valid record frames found in the dropped bytes
	// (in the chains of the dropped segments from their first LSN); records
	// in damaged frames are not countable and not counted.
	LostRecords int
	// Evidence lists the files of the log directory that hold the dropped
	// bytes, named like the quarantined torn tails Open keeps
	// ("<from>-<end>.torn"): the tail of the segment cut at the damage
	// (from the cut's LSN on), and each later segment file whole, renamed
	// (from its first LSN; its end there is its first LSN plus its size).
	Evidence []string
	// Steps lists, in order, what the repair does to the directory.
	Steps []string
}

// Repair turns the damaged log in dir into one Open accepts, keeping its
// longest verifiable prefix (what Salvage reads) and moving every byte it
// drops into evidence files in dir, named like the torn tails Open
// quarantines. Nothing is done, and Needed is false, when Open (with
// VerifyOnOpen) accepts the log as it is. The segment holding the first
// damage keeps its frames before it; its bytes from there on are copied
// into an evidence file (made durable) and then zeroed, and the file is
// set back to the size its header records; every later segment is renamed
// into an evidence file whole. Only opts.FS is used (vfs.OS() if nil).
//
// Crash safety: evidence is durable before any byte of the log is zeroed
// or renamed, and renames are atomic, so a crash at any point loses no
// byte; the directory is then the damaged log, a log Open still refuses
// that a second Repair finishes (it adds evidence files, never overwrites
// one), or the repaired log. Repair takes the directory's lock: it fails
// with an error matching vfs.ErrLocked while a Log (of any process) has the
// log open. Not safe for concurrent use with anything writing dir.
//
// Errors: vfs.ErrLocked; ErrForeignFile, ErrUnsupportedVersion and other
// errors of Open that are not damage (unchanged, nothing done); an error
// wrapping ErrNotRepaired when nothing before the damage can be kept or
// the repaired log is still refused (its reason included); or the
// filesystem's error, the directory then in one of the states above.
func Repair(dir string, opts Options) (RepairReport, error) {
	return repair(dir, opts, true)
}

// PlanRepair says what Repair would do to the log in dir, changing nothing
// and taking no lock: the report's Steps, Evidence (names as Repair would
// first try them) and losses. Errors as Repair's, but for vfs.ErrLocked.
// Safe for concurrent use.
func PlanRepair(dir string, opts Options) (RepairReport, error) {
	return repair(dir, opts, false)
}

func repair(dir string, opts Options, apply bool) (RepairReport, error) {
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.OS()
	}
	var rep RepairReport
	if apply {
		lock, err := fsys.Lock(filepath.Join(dir, lockName))
		if err != nil {
			return rep, fmt.Errorf("wal: repair: %w", lockError(dir, err))
		}
		noteHeld(dir, true)
		defer func() { lock.Close(); noteHeld(dir, false) }()
	}
	ropts := Options{FS: fsys, SegmentSize: opts.SegmentSize, VerifyOnOpen: true}
	if l, err := OpenReadOnly(dir, ropts); err == nil {
		l.Close()
		return rep, nil
	} else if !errors.Is(err, ErrCorrupt) {
		return rep, fmt.Errorf("wal: repair: not damage, not repaired: %w", err)
	} else {
		rep.Needed, rep.Damage = true, err
		var ce *CorruptionError
		if errors.As(err, &ce) {
			switch ce.Segment {
			case firstLSNName, truncateName, epochName:
				return rep, fmt.Errorf("%w: the %s record is damaged, and Repair rewrites no record (docs/damaged-log.md): %w", ErrNotRepaired, ce.Segment, err)
			}
		}
	}
	kept, err := Salvage(dir, Options{FS: fsys}, func(LSN, []byte) error { return nil })
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	rep.Kept = kept
	cut := kept.Stop
	rep.LostFrom, rep.LostTo = cut, cut
	names, err := fsys.List(dir)
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	d, err := classifyDir(fsys, dir, names, true)
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	segs := d.Segments
	pi := -1 // the segment that keeps the prefix's end: the last starting before the cut
	for i, first := range segs {
		if first < cut {
			pi = i
		}
	}
	if pi < 0 {
		return rep, fmt.Errorf("%w: nothing before the damage at LSN %d can be kept (%v); export what Salvage reads and start a new log", ErrNotRepaired, cut, rep.Damage)
	}
	taken := map[string]bool{}
	for _, n := range names {
		taken[n] = true
	}
	evidenceName := func(from LSN, size int64) string {
		for n := 0; ; n++ {
			if name := quarantineName(from, size, n); !taken[name] {
				taken[name] = true
				return name
			}
		}
	}

	// The segment cut at the damage: its non-zero bytes from the cut on.
	pname := segmentName(segs[pi])
	var pf vfs.File
	if apply {
		pf, err = fsys.OpenReadWrite(filepath.Join(dir, pname), vfs.Fdatasync)
	} else {
		pf, err = fsys.Open(filepath.Join(dir, pname))
	}
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	defer pf.Close()
	size, err := pf.Size()
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %s: %w", pname, err)
	}
	sc := scanFile(pf, pname, segs[pi], size)
	sc.detectFormat()
	created := size
	if err := sc.load(0, segmentHeaderSize, false); err == nil {
		if h, why, _ := decodeSegmentHeader(sc.bytesAt(0)); why == "" && h.Created > 0 {
			created = h.Created
		}
	}
	off := min(sc.s.offset(cut), size)
	if kept.Clean && off < size {
		// A clean stop at an end frame keeps it: nothing after it is lost.
		if rec, _, fsize, flags, st, err := sc.frame(cut, false); err == nil && st == frameValid && rec == nil && flags == flagEnd {
			off = min(off+fsize, size)
		}
	}
	nz, err := sc.lastNonZero(off)
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	var tailName string
	if nz >= 0 {
		n := nz + 1 - off
		tailName = evidenceName(cut, n)
		rep.Evidence = append(rep.Evidence, tailName)
		rep.LostBytes += n
		rep.LostTo = max(rep.LostTo, cut+LSN(n))
		rep.Steps = append(rep.Steps, fmt.Sprintf("copy the %d bytes of %s from offset %d (LSN %d) into %s, and sync it", n, pname, off, cut, tailName))
	}
	// Kept segments longer or shorter than their headers record (Salvage
	// read past it): their bytes beyond the created size are evidence, and
	// the file is set back to it.
	type resize struct {
		name          string
		created, size int64
		from          LSN   // the evidence's name position
		off, n        int64 // the evidence bytes
		ev            string
	}
	var resizes []resize
	for _, first := range segs[:pi] {
		name := segmentName(first)
		f, err := fsys.Open(filepath.Join(dir, name))
		if err != nil {
			return rep, fmt.Errorf("wal: repair: %w", err)
		}
		size, err := f.Size()
		var h segHeader
		if err == nil {
			hb := make([]byte, segmentHeaderSize)
			if n, _ := f.ReadAt(hb, 0); n == len(hb) {
				h, _, _ = decodeSegmentHeader(hb)
			}
		}
		if err != nil || h.Created == 0 || h.Created == size {
			f.Close()
			if err != nil {
				return rep, fmt.Errorf("wal: repair: %s: %w", name, err)
			}
			continue
		}
		r := resize{name: name, created: h.Created, size: size}
		if size > h.Created {
			xs := scanFile(f, name, first, size)
			nz, err := xs.lastNonZero(h.Created)
			if err != nil {
				f.Close()
				return rep, fmt.Errorf("wal: repair: %w", err)
			}
			if nz >= 0 {
				r.off, r.n = h.Created, nz+1-h.Created
				r.from = first + LSN(h.Created-headerSize(h.Version))
				r.ev = evidenceName(r.from, r.n)
				rep.Evidence = append(rep.Evidence, r.ev)
				rep.LostBytes += r.n
				rep.Steps = append(rep.Steps, fmt.Sprintf("copy the %d bytes of %s past its created size %d into %s, and sync it", r.n, name, h.Created, r.ev))
			}
		}
		f.Close()
		rep.Steps = append(rep.Steps, fmt.Sprintf("set %s back to the %d bytes its header records (it is %d), and sync it", name, h.Created, size))
		resizes = append(resizes, r)
	}
	// The later segments, whole.
	type move struct{ from, to string }
	var moves []move
	for _, first := range segs[pi+1:] {
		name := segmentName(first)
		info, err := InspectSegment(fsys, filepath.Join(dir, name), func(FrameInfo) error { return nil })
		if info.Size == 0 && err != nil {
			return rep, fmt.Errorf("wal: repair: %w", err)
		}
		to := evidenceName(first, info.Size)
		moves = append(moves, move{name, to})
		rep.Evidence = append(rep.Evidence, to)
		rep.LostBytes += info.Size
		rep.LostRecords += info.Records
		rep.LostTo = max(rep.LostTo, info.ChainEnd, first+LSN(max(info.Size-headerSize(info.Version), 0)))
		rep.Steps = append(rep.Steps, fmt.Sprintf("rename %s (%d bytes, %d valid records) to %s", name, info.Size, info.Records, to))
	}
	if nz >= 0 {
		rep.Steps = append(rep.Steps, fmt.Sprintf("zero %s from offset %d (LSN %d) to %d", pname, off, cut, min(nz+1, created)))
	}
	if size != created {
		rep.Steps = append(rep.Steps, fmt.Sprintf("set %s back to the %d bytes its header records (it is %d)", pname, created, size))
	}
	if nz >= 0 || size != created {
		rep.Steps = append(rep.Steps, "sync "+pname)
	}
	rep.Steps = append(rep.Steps, "sync the directory")
	if !apply {
		return rep, nil
	}

	// 1. Evidence first, durable before anything it holds is zeroed.
	if nz >= 0 {
		if err := writeEvidence(fsys, dir, tailName, sc, off, nz+1-off); err != nil {
			return rep, err
		}
	}
	for _, r := range resizes {
		if err := fixSize(fsys, dir, r.name, r.created, r.off, r.n, r.ev); err != nil {
			return rep, err
		}
	}
	// 2. Later segments renamed, the highest first: a crash between two
	// renames leaves the segments kept a prefix of the log's.
	for i := len(moves) - 1; i >= 0; i-- {
		if err := fsys.Rename(filepath.Join(dir, moves[i].from), filepath.Join(dir, moves[i].to)); err != nil {
			return rep, fmt.Errorf("wal: repair: %w", err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	// 3. The cut segment: zeros from the cut on, its created size.
	if nz >= 0 {
		if err := writeZeros(pf, off, min(nz+1, created)); err != nil {
			return rep, fmt.Errorf("wal: repair: zeroing %s: %w", pname, err)
		}
	}
	if size != created {
		if err := pf.Truncate(created); err != nil {
			return rep, fmt.Errorf("wal: repair: resizing %s: %w", pname, err)
		}
	}
	if nz >= 0 || size != created {
		if err := pf.Sync(); err != nil {
			return rep, fmt.Errorf("wal: repair: syncing %s: %w", pname, err)
		}
	}
	if err := fsys.SyncDir(dir); err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	if l, err := OpenReadOnly(dir, ropts); err != nil {
		return rep, fmt.Errorf("%w: Open still refuses the log: %w", ErrNotRepaired, err)
	} else {
		l.Close()
	}
	return rep, nil
}

// writeEvidence copies n bytes of the segment sc scans, from offset off,
// into the new file name of dir, and makes it durable (file and directory).
func writeEvidence(fsys vfs.FS, dir, name string, sc *frameScanner, off, n int64) error {
	path := filepath.Join(dir, name)
	f, err := fsys.Create(path, vfs.Fdatasync)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("wal: repair: evidence file %s appeared meanwhile: %w", name, err)
		}
		return fmt.Errorf("wal: repair: %w", err)
	}
	if err := sc.copyRange(off, n, func(p []byte, at int64) error {
		_, err := f.WriteAt(p, at-off)
		return err
	}); err != nil {
		f.Close()
		return fmt.Errorf("wal: repair: writing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("wal: repair: syncing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	return nil
}

// fixSize sets the kept segment name back to its created size, after
// copying its n bytes from off (past that size) into the evidence file ev
// when n > 0.
func fixSize(fsys vfs.FS, dir, name string, created, off, n int64, ev string) error {
	f, err := fsys.OpenReadWrite(filepath.Join(dir, name), vfs.Fdatasync)
	if err != nil {
		return fmt.Errorf("wal: repair: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return fmt.Errorf("wal: repair: %s: %w", name, err)
	}
	if n > 0 {
		if err := writeEvidence(fsys, dir, ev, scanFile(f, name, 0, size), off, n); err != nil {
			return err
		}
	}
	if err := f.Truncate(created); err != nil {
		return fmt.Errorf("wal: repair: resizing %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("wal: repair: syncing %s: %w", name, err)
	}
	return nil
}
