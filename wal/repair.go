package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/durawal/durawal/wal/internal/format"
	"github.com/durawal/durawal/wal/vfs"
)

// ErrNotRepaired is returned (wrapped) by Repair when the log it repaired
// is still refused by Open, or when nothing before the damage could be
// kept. The error says which.
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
	// Records lists the damaged record files (first-lsn, truncate-lsn,
	// epoch) the repair replaces, each with the name of the copy of its
	// damaged bytes it keeps in the log directory and what it writes in
	// its place.
	Records []RecordRepair
	// ReportFile is the name, in the log directory, of the report Repair
	// writes ("repair-<stamp>.txt", <stamp> its start in UTC): the damage,
	// the prefix kept, the LSN range, records and bytes dropped, the
	// evidence files and the steps, in words. It is written before the
	// repair changes anything and rewritten when it is done. PlanRepair
	// sets the name it would use and writes nothing. Open ignores the file.
	ReportFile string
	// Steps lists, in order, what the repair does to the directory.
	Steps []string
}

// RecordRepair is what Repair does with one damaged record file.
type RecordRepair struct {
	// Name is the record file's name: "first-lsn", "truncate-lsn" or
	// "epoch".
	Name string
	// Damage is why it cannot be read (a *CorruptionError).
	Damage error
	// Copy is the file of the log directory that keeps its damaged bytes
	// ("repair-<stamp>.<Name>").
	Copy string
	// Replacement says what the repair writes in its place, in words:
	// first-lsn records the first LSN of the lowest segment (Salvage's
	// start: records an interrupted RemoveBefore was dropping come back
	// rather than be lost), truncate-lsn is removed (the interrupted cut
	// had not returned; its new epoch, if recorded, still drops the
	// records past it), epoch records an epoch after every one the kept
	// frames carry, starting at the end of the kept prefix.
	Replacement string

	data []byte // the damaged bytes
	rec  []byte // the new record (nil: remove the file)
}

// Repair turns the damaged log in dir into one Open accepts, keeping its
// longest verifiable prefix (what Salvage reads) and moving every byte it
// drops into evidence files in dir, named like the torn tails Open
// quarantines. Nothing is done, and Needed is false, when Open (with
// VerifyOnOpen) accepts the log as it is. The segment holding the first
// damage keeps its frames before it; its bytes from there on are copied
// into an evidence file (made durable) and then zeroed, and the file is
// set back to the size its header records; every later segment is renamed
// into an evidence file whole. A damaged first-lsn, truncate-lsn or epoch
// record is copied into a file of dir and replaced (see RecordRepair).
// Before changing anything Repair writes a report of what it does into dir
// (RepairReport.ReportFile), and rewrites it once done. Only opts.FS is
// used (vfs.OS() if nil).
//
// Crash safety: evidence is durable before any byte of the log is zeroed
// or renamed, and renames are atomic, so a crash at any point loses no
// byte; the directory is then the damaged log, a log Open still refuses
// that a second Repair finishes (it adds evidence files, never overwrites
// one), or the repaired log. The report is durable before the first
// change; it is replaced whole (temporary file, sync, rename), never torn. Repair takes the directory's lock: it fails
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
	}
	kept, err := Salvage(dir, Options{FS: fsys}, func(LSN, []byte) error { return nil })
	if errors.Is(err, fs.ErrNotExist) {
		// Open found a log's records (first-lsn, epoch) but no segment.
		return rep, fmt.Errorf("%w: no segment of the log is left, so nothing can be kept (%v); start a new log in another directory: %w", ErrNotRepaired, rep.Damage, err)
	}
	if err != nil {
		return rep, fmt.Errorf("wal: repair: %w", err)
	}
	rep.Kept = kept
	recs, err := damagedRecords(fsys, dir, kept)
	if err != nil {
		return rep, err
	}
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
	if pi < 0 && kept.Clean && len(segs) > 0 && segs[0] == cut {
		pi = 0 // an empty log: nothing to cut, only records to mend
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
	started := time.Now().UTC()
	stamp := started.Format(format.RepairStampLayout)
	repairName := func(what string) string {
		for n := 0; ; n++ {
			if name := format.RepairName(stamp, n, what); !taken[name] && !taken[name+tmpSuffix] {
				taken[name] = true
				return name
			}
		}
	}
	rep.ReportFile = repairName("txt")
	rep.Steps = append(rep.Steps, "write the report "+rep.ReportFile+", and sync it")
	for i := range recs {
		recs[i].Copy = repairName(recs[i].Name)
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
	for _, r := range recs {
		rep.Steps = append(rep.Steps, fmt.Sprintf("copy the damaged %s (%d bytes) into %s, and sync it", r.Name, len(r.data), r.Copy))
		if r.rec == nil {
			rep.Steps = append(rep.Steps, fmt.Sprintf("remove %s, and sync the directory", r.Name))
		} else {
			rep.Steps = append(rep.Steps, fmt.Sprintf("write %s anew (%s), and sync it and the directory", r.Name, r.Replacement))
		}
	}
	rep.Records = recs
	rep.Steps = append(rep.Steps, "rewrite the report "+rep.ReportFile+" with the result")
	if !apply {
		return rep, nil
	}

	// 0. The report, before anything changes.
	if err := replaceFile(fsys, dir, rep.ReportFile, rep.text(dir, started, time.Time{}, nil)); err != nil {
		return rep, fmt.Errorf("wal: repair: writing the report: %w", err)
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
	// 4. The damaged records, once the frames are what the new ones say:
	// each copied, then replaced or removed (epoch last: its start is the
	// end of the kept prefix, and nothing past it is left in the log).
	for _, r := range recs {
		if err := createFile(fsys, dir, r.Copy, r.data); err != nil {
			return rep, fmt.Errorf("wal: repair: %w", err)
		}
		if r.rec != nil {
			err = replaceFile(fsys, dir, r.Name, r.rec)
		} else if err = fsys.Remove(filepath.Join(dir, r.Name)); err == nil {
			err = fsys.SyncDir(dir)
		}
		if err != nil {
			return rep, fmt.Errorf("wal: repair: replacing %s: %w", r.Name, err)
		}
	}
	l, verr := OpenReadOnly(dir, ropts)
	if verr == nil {
		l.Close()
	}
	if err := replaceFile(fsys, dir, rep.ReportFile, rep.text(dir, started, time.Now().UTC(), verr)); err != nil {
		return rep, fmt.Errorf("wal: repair: rewriting the report: %w", err)
	}
	if verr != nil {
		return rep, fmt.Errorf("%w: Open still refuses the log: %w", ErrNotRepaired, verr)
	}
	return rep, nil
}

// isRepairName reports whether name is a file Repair leaves in a log
// directory (format.RepairName).
func isRepairName(name string) bool {
	_, ok := format.ParseRepairName(name)
	return ok
}

// maxRecordCopy bounds the bytes of a damaged record file Repair copies
// (a record is 16 or 24 bytes; a file grown past this is not one).
const maxRecordCopy = 64 << 10

// damagedRecords returns the record files of dir that cannot be read, in
// the order Repair replaces them (first-lsn, truncate-lsn, epoch), with
// what replaces each, given what Salvage kept.
func damagedRecords(fsys vfs.FS, dir string, kept SalvageReport) ([]RecordRepair, error) {
	var recs []RecordRepair
	add := func(name string, size int, damage error, rec []byte, repl string) error {
		b, _, _, err := readRecordFile(fsys, dir, name, max(size, maxRecordCopy))
		if err != nil {
			return fmt.Errorf("wal: repair: %w", err)
		}
		recs = append(recs, RecordRepair{Name: name, Damage: damage, Replacement: repl, data: b, rec: rec})
		return nil
	}
	if _, _, err := readLSNRecord(fsys, dir, firstLSNName); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("wal: repair: %w", err)
		}
		if err := add(firstLSNName, format.LSNRecordSize, err, encodeLSNRecord(kept.Start),
			fmt.Sprintf("LSN %d, the first LSN of the lowest segment", kept.Start)); err != nil {
			return nil, err
		}
	}
	if _, _, err := readLSNRecord(fsys, dir, truncateName); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("wal: repair: %w", err)
		}
		if err := add(truncateName, format.LSNRecordSize, err, nil, "no cut is pending"); err != nil {
			return nil, err
		}
	}
	if _, err := readEpoch(fsys, dir); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("wal: repair: %w", err)
		}
		e := epochRule{N: uint64(kept.maxEpoch) + 1, Start: uint64(kept.Stop), Known: true}
		if err := add(epochName, format.EpochRecordSize, err, format.EncodeEpoch(e),
			fmt.Sprintf("epoch %d from LSN %d: after every epoch the kept frames carry, from the end of the kept prefix", e.N, e.Start)); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// text returns the report of rep in words: what the repair of dir that
// began at started found and did; done is when it finished (zero: not
// yet), and verr Open's verdict then (nil: accepted).
func (rep *RepairReport) text(dir string, started, done time.Time, verr error) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "durawal repair of %s\n", dir)
	fmt.Fprintf(&b, "started: %s\n", started.Format(time.RFC3339))
	switch {
	case done.IsZero():
		b.WriteString("status: started, not finished (a crash interrupted it if this line still says so: if Open accepts the log, every change was made; otherwise run the repair again)\n")
	case verr == nil:
		fmt.Fprintf(&b, "status: finished %s: Open accepts the log\n", done.Format(time.RFC3339))
	default:
		fmt.Fprintf(&b, "status: finished %s, but Open still refuses the log: %v\n", done.Format(time.RFC3339), verr)
	}
	fmt.Fprintf(&b, "damage: %v\n", rep.Damage)
	k := rep.Kept
	fmt.Fprintf(&b, "kept: LSN %d to %d: %d records, %d bytes of records\n", k.Start, k.Stop, k.Records, k.Bytes)
	fmt.Fprintf(&b, "lost: LSN %d to %d: %d bytes; %d valid records counted among them (records in damaged frames cannot be counted)\n",
		rep.LostFrom, rep.LostTo, rep.LostBytes, rep.LostRecords)
	for _, e := range rep.Evidence {
		fmt.Fprintf(&b, "evidence: %s\n", e)
	}
	for _, r := range rep.Records {
		fmt.Fprintf(&b, "record: %s was damaged (%v); its bytes are in %s; replaced by: %s\n", r.Name, r.Damage, r.Copy, r.Replacement)
	}
	for _, n := range k.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for i, st := range rep.Steps {
		fmt.Fprintf(&b, "step %d: %s\n", i+1, st)
	}
	return []byte(b.String())
}

// createFile makes the new file name of dir hold b, durably (file and
// directory); it fails if the file exists.
func createFile(fsys vfs.FS, dir, name string, b []byte) error {
	if err := writeFileSynced(fsys, filepath.Join(dir, name), vfs.Fdatasync, true, vfs.File.Sync, func(f vfs.File) error {
		_, err := f.WriteAt(b, 0)
		return err
	}); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// replaceFile makes the file name of dir hold b, whole or not at all after
// a crash: written under a temporary name (which Open removes), synced,
// renamed over name and the directory synced.
func replaceFile(fsys vfs.FS, dir, name string, b []byte) error {
	tmp := name + tmpSuffix
	if err := fsys.Remove(filepath.Join(dir, tmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := createFile(fsys, dir, tmp, b); err != nil {
		return err
	}
	if err := fsys.Rename(filepath.Join(dir, tmp), filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// writeEvidence copies n bytes of the segment sc scans, from offset off,
// into the new file name of dir, and makes it durable (file and directory).
func writeEvidence(fsys vfs.FS, dir, name string, sc *frameScanner, off, n int64) error {
	err := writeFileSynced(fsys, filepath.Join(dir, name), vfs.Fdatasync, true, vfs.File.Sync, func(f vfs.File) error {
		return sc.copyRange(off, n, func(p []byte, at int64) error {
			_, err := f.WriteAt(p, at-off)
			return err
		})
	})
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("wal: repair: evidence file %s appeared meanwhile: %w", name, err)
	}
	if err != nil {
		return fmt.Errorf("wal: repair: writing %s: %w", name, err)
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
