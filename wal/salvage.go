package wal

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/durawal/durawal/wal/vfs"
)

// SalvageReport says how far Salvage read a log and why it stopped there.
type SalvageReport struct {
	// Start is the LSN of the first record read: the recorded start of
	// the log (its first-lsn record), or the first LSN of its lowest
	// segment when that record is missing or damaged.
	Start LSN
	// Stop is the LSN just past the last record read: every record in
	// [Start, Stop) was passed to fn, none at or after Stop.
	Stop LSN
	// Records is the number of records passed to fn, and Bytes the sum
	// of their lengths.
	Records int
	Bytes   int64
	// Segment and Offset locate where the reading stopped: the segment
	// file's base name and the byte offset in it (Offset 0 with a
	// missing or damaged file).
	Segment string
	Offset  int64
	// Clean reports that the reading stopped where an undamaged log ends:
	// an end frame, or only zeros after the last valid frame of the last
	// segment. When false, Damage says what stopped it.
	Clean bool
	// Damage is why the reading stopped short of a clean end: a
	// *CorruptionError (errors.Is(err, ErrCorrupt)) naming the file and
	// offset, or an error matching ErrUnsupportedVersion. Nil when Clean.
	Damage error
	// Notes lists what Salvage noticed and read past: a damaged first-lsn
	// or epoch record, a segment file shorter or longer than its header
	// records, a pending cut.
	Notes []string

	maxEpoch uint32 // the highest epoch (modulo 2^30) carried by a frame read, of format 6 or later
}

// Salvage reads the longest verifiable prefix of the log in dir, damaged or
// not, and calls fn with every record of it in LSN order, up to the first
// damage; it returns where and why it stopped. It is the way to read what a
// damaged log still holds when Open and OpenReadOnly fail with ErrCorrupt
// (docs/damaged-log.md): a record is passed to fn only if its frame's
// checksum verifies, its epoch is admitted by the log's epoch record and
// the frames before it chain to it from the start of the log without a
// gap. A segment whose file size differs from the size its header records
// is read as far as its frames verify (a note says so), where Open refuses
// it. Records at or after a pending cut (a TruncateFrom a crash
// interrupted) are not read.
//
// Only opts.FS is used (vfs.OS() if nil). Salvage changes nothing and takes
// no lock; run beside a writer it may see a moment of a changing directory.
// rec is valid only during the call to fn. Safe for concurrent use.
//
// Errors: the filesystem's error (one matching fs.ErrNotExist if dir does
// not exist or holds no segment), ErrForeignFile if a file the log did not
// create is in dir, or the first non-nil error fn returns, which stops the
// reading. Damage is not an error: it is in SalvageReport.Damage.
func Salvage(dir string, opts Options, fn func(lsn LSN, rec []byte) error) (SalvageReport, error) {
	fsys := opts.FS
	if fsys == nil {
		fsys = vfs.OS()
	}
	var rep SalvageReport
	names, err := fsys.List(dir)
	if err != nil {
		return rep, fmt.Errorf("wal: salvage: listing %s: %w", dir, foreignIfNotRegular(err))
	}
	d, err := classifyDir(fsys, dir, names, true)
	if err != nil {
		return rep, fmt.Errorf("wal: salvage: %w", err)
	}
	segs := slices.Clone(d.Segments)
	slices.Sort(segs)
	if len(segs) == 0 {
		return rep, fmt.Errorf("wal: salvage: %s holds no segment: %w", dir, fs.ErrNotExist)
	}
	start := segs[0]
	if lsn, ok, err := readLSNRecord(fsys, dir, firstLSNName); err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("first-lsn record unreadable (%v): reading from the lowest segment, LSN %d", err, start))
	} else if ok {
		start = lsn
	}
	rule, err := readEpoch(fsys, dir)
	if err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("epoch record unreadable (%v): frames are judged by their checksums and by their epochs never going back", err))
		rule = epochRule{}
	}
	cut := noCutLSN
	if lsn, ok, err := readLSNRecord(fsys, dir, truncateName); err != nil {
		rep.Notes = append(rep.Notes, fmt.Sprintf("truncate-lsn record unreadable (%v): no pending cut applied", err))
	} else if ok {
		cut = lsn
		rep.Notes = append(rep.Notes, fmt.Sprintf("a cut at LSN %d is pending: nothing from it on is read", lsn))
	}
	rep.Start, rep.Stop = start, start

	// The segment holding start: the last one whose first LSN is <= start.
	i := 0
	for i+1 < len(segs) && segs[i+1] <= start {
		i++
	}
	if segs[i] > start {
		rep.Segment, rep.Damage = segmentName(start), &CorruptionError{Segment: segmentName(start), Offset: 0,
			Reason: fmt.Sprintf("missing: the log starts at LSN %d but the lowest segment present starts at LSN %d", start, segs[i])}
		return rep, nil
	}
	stop := func(name string, off int64, clean bool, damage error) (SalvageReport, error) {
		rep.Segment, rep.Offset, rep.Clean, rep.Damage = name, off, clean, damage
		return rep, nil
	}
	for ; i < len(segs); i++ {
		first := segs[i]
		name := segmentName(first)
		last := i == len(segs)-1
		if first != rep.Stop && first > start {
			return stop(segmentName(rep.Stop), 0, false, &CorruptionError{Segment: segmentName(rep.Stop), Offset: 0,
				Reason: fmt.Sprintf("missing: the log continues at LSN %d, but the next segment present starts at LSN %d", rep.Stop, first)})
		}
		f, err := fsys.Open(filepath.Join(dir, name))
		if err != nil {
			return rep, fmt.Errorf("wal: salvage: %w", err)
		}
		next, end, err := salvageSegment(f, name, first, start, rule, cut, last, &rep, fn)
		f.Close()
		if err != nil || end != nil {
			if err != nil {
				return rep, err
			}
			return stop(name, end.off, end.clean, end.damage)
		}
		rep.Stop = next // a link frame: the log continues in the next segment
	}
	// The last segment ended with a link frame naming a segment not there.
	return stop(segmentName(rep.Stop), 0, false, &CorruptionError{Segment: segmentName(rep.Stop), Offset: 0,
		Reason: fmt.Sprintf("missing: the last segment present links to a segment starting at LSN %d", rep.Stop)})
}

// salvageEnd is where and why salvageSegment stopped short of a link frame.
type salvageEnd struct {
	off    int64
	clean  bool
	damage error
}

// salvageSegment passes the verified records of one segment file to fn,
// from start (or the segment's first LSN, if later), updating rep. It
// returns the LSN of the link frame that ends the segment, or where the
// reading stopped.
func salvageSegment(f vfs.File, name string, first, start LSN, rule epochRule, cut LSN, last bool,
	rep *SalvageReport, fn func(LSN, []byte) error) (LSN, *salvageEnd, error) {
	size, err := f.Size()
	if err != nil {
		return 0, nil, fmt.Errorf("wal: salvage: %s: %w", name, err)
	}
	sc := scanFile(f, name, first, size)
	sc.rule, sc.cut = rule, cut
	if size < segmentHeaderSize {
		return 0, &salvageEnd{damage: &CorruptionError{Segment: name, Offset: 0,
			Reason: fmt.Sprintf("segment file is %d bytes, too short for a header", size)}}, nil
	}
	if err := sc.load(0, segmentHeaderSize, false); err != nil {
		return 0, nil, err
	}
	hdr := slices.Clone(sc.bytesAt(0)[:segmentHeaderSize])
	if err := checkHeader(hdr, name, first); err != nil {
		return 0, &salvageEnd{damage: err}, nil
	}
	h, _, _ := decodeSegmentHeader(hdr)
	if h.Created != 0 && h.Created != size {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s is %d bytes but was created with %d: read as far as its frames verify", name, size, h.Created))
		if h.Created < size {
			sc.s.size, sc.zeroFrom = h.Created, h.Created // the extension is not the log's
		}
	}
	sc.setFormat(h.Version, h.Use)
	lsn := first
	for {
		off := sc.s.offset(lsn)
		rec, _, fsize, flags, st, err := sc.frame(lsn, true)
		if err != nil {
			return 0, nil, err
		}
		if st != frameValid {
			if !last {
				return 0, &salvageEnd{off: off, damage: &CorruptionError{Segment: name, Offset: off,
					Reason: fmt.Sprintf("%s at LSN %d in a completed segment (no link frame reached)", st, lsn)}}, nil
			}
			nz, err := sc.lastNonZero(off)
			if err != nil {
				return 0, nil, err
			}
			if nz < 0 {
				return 0, &salvageEnd{off: off, clean: true}, nil
			}
			return 0, &salvageEnd{off: off, damage: &CorruptionError{Segment: name, Offset: off,
				Reason: fmt.Sprintf("%s at LSN %d, %d non-zero bytes after it (a torn tail Open may cut, or damage)", st, lsn, nz+1-off)}}, nil
		}
		if ep := sc.word >> 2; h.Version >= 6 {
			if !rule.Known && ep < rep.maxEpoch {
				// Epochs only grow along the log: a frame of an older one
				// after a later one is a frame a cut or a recovery dropped
				// and whose zeros never reached the disk (the epoch rule,
				// which would say so, is unreadable or missing).
				return 0, &salvageEnd{off: off, damage: &CorruptionError{Segment: name, Offset: off,
					Reason: fmt.Sprintf("the frame at LSN %d was written in epoch %d (modulo 2^30), before epoch %d of a frame ahead of it: a frame the log dropped", lsn, ep, rep.maxEpoch)}}, nil
			}
			rep.maxEpoch = max(rep.maxEpoch, ep)
		}
		if rec == nil {
			if flags == flagLink {
				return lsn, nil, nil
			}
			return 0, &salvageEnd{off: off, clean: true}, nil
		}
		if lsn >= start {
			if err := fn(lsn, rec); err != nil {
				return 0, nil, err
			}
			rep.Records++
			rep.Bytes += int64(len(rec))
		}
		lsn += LSN(fsize)
		rep.Stop = max(rep.Stop, lsn)
	}
}
