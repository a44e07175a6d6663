// Command waldump prints what a durawal log directory holds and what Open
// would make of it, without changing a byte: it reads the files with
// wal.InspectDir and wal.InspectSegment, which also work on a damaged log,
// and takes the verdict of the recovery rule from wal.OpenReadOnly, which
// takes no lock, so it may run beside the log's writer. It opens with the
// segment size the log's own headers record. It prints two verdicts: what a
// default Open does (it trusts sealed segments by their link frames and
// leaves damage inside them to the reader that reaches it), and what Open
// with VerifyOnOpen finds (every frame of every segment checked); the exit
// status follows the second.
//
// It cannot say which policy, sync method or buffer size the log was
// written with: none is recorded in the log (each Open sets them, and a log
// may be reopened with others). A running Log reports them in Stats.Policy,
// Stats.SyncMethod and Log.Options, and promwal's durawal_wal_info metric.
//
// Usage:
//
//	waldump [-frames] [-records N] [-export FILE [-export-format jsonl|binary]] [-json] DIR
//	waldump -repair [-apply] DIR
//
// It lists the segments (name, first LSN, size, format version, records,
// where the chain of valid frames ends, how the segment closes, status:
// sealed, last, below the recorded start, after a pending cut), the
// first-lsn and truncate-lsn records, quarantined torn tails, leftover
// temporary and foreign files, and the verdicts: the end LSN, torn and
// unvouched bytes and whether the log was closed cleanly, or the error Open
// would return. -frames adds every frame (LSN, offset, size, payload
// length, kind, watermark, and why a position is invalid); -records N
// prints the first N records Open would recover, or, when Open would fail,
// the first N of the longest verifiable prefix (wal.Salvage), which is then
// summarised with the LSN where it stops and why; -export FILE writes every
// record of that prefix to a new FILE, as JSON lines ({"lsn", "data":
// base64}) or, with -export-format binary, as an 8-byte LSN, a 4-byte
// length (little-endian) and the record, per record; -json prints all of it
// as one JSON object.
//
// -repair prints what wal.Repair would do to make Open accept a damaged log
// (which prefix it keeps, which LSNs and bytes it drops into evidence files,
// each step) and changes nothing; -repair -apply does it. It refuses while
// a process has the log open. See docs/damaged-log.md.
//
// Exit status: 0 if the log is whole, 1 if not: it follows full
// verification (Options.VerifyOnOpen), so damage inside a sealed segment
// that a default Open trusts without reading gives 1 although that Open
// would succeed (both verdicts are printed; the output says why: damage, a
// missing segment, a foreign file, an unsupported format version), 2 for a usage error or a directory that
// holds no log. With -repair: 0 if the log needs no repair, can be
// repaired (dry run) or was; 1 if it cannot be; 2 for other errors.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/durawal/durawal/wal"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// dump is everything waldump prints, in -json's shape.
type dump struct {
	Dir         string               `json:"dir"`
	FirstLSN    *lsnRecord           `json:"first_lsn"`
	TruncateLSN *lsnRecord           `json:"truncate_lsn"`
	Epoch       *epochRecord         `json:"epoch"`
	Segments    []segment            `json:"segments"`
	Quarantined []wal.QuarantineFile `json:"quarantined"`
	Repairs     []string             `json:"repairs"`
	Temp        []string             `json:"temp"`
	Foreign     []string             `json:"foreign"`
	Verdict     verdict              `json:"verdict"`
	// DefaultOpen is what a default Open (no VerifyOnOpen) does: it trusts
	// sealed segments by their link frames, so it may open a log that
	// Verdict (every frame checked) finds damaged.
	DefaultOpen verdict `json:"default_open"`
	// Salvage says how far wal.Salvage read the log (with -records when
	// Open would fail, and with -export).
	Salvage    *salvage `json:"salvage,omitempty"`
	Records    []record `json:"records,omitempty"`
	RecordsErr string   `json:"records_error,omitempty"` // why reading the records stopped early
}

type lsnRecord struct {
	LSN   wal.LSN `json:"lsn"`
	Error string  `json:"error,omitempty"`
}

type epochRecord struct {
	Epoch uint64  `json:"epoch"`
	Start wal.LSN `json:"start_lsn"`
	Error string  `json:"error,omitempty"`
}

type segment struct {
	Name          string  `json:"name"`
	FirstLSN      wal.LSN `json:"first_lsn"`
	Size          int64   `json:"size"`
	Version       uint32  `json:"version"`
	HeaderError   string  `json:"header_error,omitempty"`
	Records       int     `json:"records"`
	ChainEnd      wal.LSN `json:"chain_end"`
	Closing       string  `json:"closing"`
	MaxWatermark  wal.LSN `json:"max_watermark"`
	TrailingBytes int64   `json:"trailing_bytes"`
	Status        string  `json:"status"`
	Error         string  `json:"error,omitempty"` // why the file could not be inspected
	Frames        []frame `json:"frames,omitempty"`
	Recycled      bool    `json:"recycled,omitempty"` // a version recycled files carry: trailing bytes may be stale
}

type frame struct {
	LSN       wal.LSN `json:"lsn"`
	Offset    int64   `json:"offset"`
	Size      int64   `json:"size"`
	Length    uint32  `json:"length"`
	Kind      string  `json:"kind"`
	Watermark wal.LSN `json:"watermark"`
	Valid     bool    `json:"valid"`
	Problem   string  `json:"problem,omitempty"`
	Stray     bool    `json:"stray,omitempty"`
}

type verdict struct {
	Opens       bool    `json:"opens"`
	Error       string  `json:"error,omitempty"`
	Corrupt     bool    `json:"corrupt,omitempty"`
	Segments    int     `json:"segments"`
	FirstLSN    wal.LSN `json:"first_lsn"`
	EndLSN      wal.LSN `json:"end_lsn"`
	TornBytes   int64   `json:"torn_bytes"`
	Unvouched   int64   `json:"unvouched_bytes"`
	Clean       bool    `json:"clean"`
	RemovedTemp int     `json:"temp_files_to_remove"`
	// Dropped is the segment Open would remove: the roll into it was cut
	// short before the segment it finished was synced.
	Dropped string `json:"dropped_segment,omitempty"`
	// OpenWould lists, in order, what Open would write to make the
	// directory hold this log (wal.RecoveryInfo.Steps).
	OpenWould []string `json:"open_would,omitempty"`
}

type salvage struct {
	StartLSN wal.LSN  `json:"start_lsn"`
	StopLSN  wal.LSN  `json:"stop_lsn"`
	Records  int      `json:"records"`
	Bytes    int64    `json:"bytes"`
	Segment  string   `json:"segment"`
	Offset   int64    `json:"offset"`
	Clean    bool     `json:"clean"`
	Damage   string   `json:"damage,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	Exported string   `json:"exported_to,omitempty"`
}

type record struct {
	LSN     wal.LSN `json:"lsn"`
	Length  int     `json:"length"`
	Payload string  `json:"payload"` // the first bytes, quoted
}

// run is waldump with its arguments and outputs; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fl := flag.NewFlagSet("waldump", flag.ContinueOnError)
	fl.SetOutput(stderr)
	frames := fl.Bool("frames", false, "list every frame of every segment")
	records := fl.Int("records", 0, "print the first `N` records Open would recover")
	asJSON := fl.Bool("json", false, "print one JSON object instead of text")
	export := fl.String("export", "", "write every record of the longest verifiable prefix (wal.Salvage) to `FILE`")
	exportFormat := fl.String("export-format", "jsonl", "`format` of -export: jsonl (one {\"lsn\",\"data\" (base64)} object a line) or binary (per record: LSN as 8 bytes, length as 4 bytes, little-endian, then the record)")
	repair := fl.Bool("repair", false, "say what wal.Repair would do to make Open accept the log (nothing is changed without -apply)")
	apply := fl.Bool("apply", false, "with -repair: do it")
	fl.Usage = func() {
		fmt.Fprintln(stderr, "usage: waldump [-frames] [-records N] [-export FILE [-export-format jsonl|binary]] [-json] DIR\n       waldump -repair [-apply] DIR")
		fl.PrintDefaults()
	}
	if err := fl.Parse(args); err != nil {
		return 2
	}
	if fl.NArg() != 1 || *records < 0 || (*exportFormat != "jsonl" && *exportFormat != "binary") || (*apply && !*repair) {
		fl.Usage()
		return 2
	}
	dir := fl.Arg(0)
	if *repair {
		return runRepair(dir, *apply, stdout, stderr)
	}
	d, err := collect(dir, *frames, *records)
	if err != nil {
		fmt.Fprintf(stderr, "waldump: %v\n", err)
		if errors.Is(err, wal.ErrForeignFile) {
			return 1 // a log directory Open refuses, not a usage error
		}
		return 2
	}
	if *export != "" || !d.Verdict.Opens {
		if err := salvageRecords(d, *records, *export, *exportFormat); err != nil {
			fmt.Fprintf(stderr, "waldump: %v\n", err)
			return 2
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(d); err != nil {
			fmt.Fprintf(stderr, "waldump: %v\n", err)
			return 2
		}
	} else {
		printText(stdout, d)
	}
	if !d.Verdict.Opens {
		return 1
	}
	return 0
}

// collect reads dir: its files, every segment, the verdict, and the first
// n records.
func collect(dir string, withFrames bool, n int) (*dump, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	di, err := wal.InspectDir(nil, dir)
	if err != nil {
		return nil, err
	}
	if len(di.Segments) == 0 {
		msg := fmt.Sprintf("%s holds no durawal log: no segment file (%020d.wal)", dir, 0)
		if len(di.Foreign) > 0 {
			msg += fmt.Sprintf("; it holds %d other files, such as %s", len(di.Foreign), di.Foreign[0])
		}
		return nil, errors.New(msg)
	}
	d := &dump{Dir: dir, Quarantined: di.Quarantined, Repairs: di.Repairs, Temp: di.Temp, Foreign: di.Foreign}
	if di.First.Present {
		d.FirstLSN = &lsnRecord{LSN: di.First.LSN, Error: errString(di.First.Err)}
	}
	if di.Truncate.Present {
		d.TruncateLSN = &lsnRecord{LSN: di.Truncate.LSN, Error: errString(di.Truncate.Err)}
	}
	if di.Epoch.Present {
		d.Epoch = &epochRecord{Epoch: di.Epoch.Epoch, Start: di.Epoch.Start, Error: errString(di.Epoch.Err)}
	}
	createdSize := make([]int64, len(di.Segments))
	for i, first := range di.Segments {
		name := fmt.Sprintf("%020d.wal", uint64(first))
		var fs []frame
		si, err := wal.InspectSegment(nil, filepath.Join(dir, name), func(fi wal.FrameInfo) error {
			if withFrames {
				fs = append(fs, frame{LSN: fi.LSN, Offset: fi.Offset, Size: fi.Size, Length: fi.Length,
					Kind: fi.Kind.String(), Watermark: fi.Watermark, Valid: fi.Problem == "", Problem: fi.Problem, Stray: fi.Stray})
			}
			return nil
		})
		createdSize[i] = si.CreatedSize
		// A file that cannot be inspected (larger than any segment, removed
		// by a live writer since the listing) is reported with the others:
		// the verdict below still says what Open would make of the log.
		d.Segments = append(d.Segments, segment{Name: name, FirstLSN: first, Size: si.Size, Version: si.Version,
			HeaderError: errString(si.HeaderErr), Records: si.Records, ChainEnd: si.ChainEnd,
			Closing: closing(si.Closing), MaxWatermark: si.MaxWatermark, TrailingBytes: si.TrailingBytes,
			Status: status(di, i), Error: errString(err), Frames: fs, Recycled: si.Recycled})
	}

	// The options Open needs the log's own values of come from its
	// headers: the segment size new segments (and kept recycled files)
	// have is the one the last segment was created with.
	opts := wal.Options{}
	for i := len(d.Segments) - 1; i >= 0; i-- {
		if c := createdSize[i]; c > 0 {
			opts.SegmentSize = c
			break
		}
	}
	// What a default Open does: sealed segments trusted by their headers
	// and link frames.
	if dl, err := wal.OpenReadOnly(dir, opts); err != nil {
		d.DefaultOpen = verdict{Error: err.Error(), Corrupt: errors.Is(err, wal.ErrCorrupt)}
	} else {
		d.DefaultOpen = verdictOf(dl.Recovered())
		dl.Close()
	}
	// Every frame of every segment: a dump is where damage in a sealed
	// segment, which a default Open leaves to the reader that reaches it,
	// should show.
	opts.VerifyOnOpen = true
	l, err := wal.OpenReadOnly(dir, opts)
	if err != nil {
		d.Verdict = verdict{Error: err.Error(), Corrupt: errors.Is(err, wal.ErrCorrupt)}
		return d, nil
	}
	defer l.Close()
	d.Verdict = verdictOf(l.Recovered())
	if n > 0 {
		r, err := l.NewReader(l.FirstLSN())
		if err != nil {
			return nil, err
		}
		defer r.Close()
		for len(d.Records) < n {
			lsn, rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil { // a live writer removed or cut what the reader reached
				d.RecordsErr = err.Error()
				break
			}
			p := rec[:min(len(rec), 48)]
			d.Records = append(d.Records, record{LSN: lsn, Length: len(rec), Payload: strconv.QuoteToASCII(string(p))})
		}
	}
	return d, nil
}

// verdictOf is the verdict of an Open that recovered info.
func verdictOf(info wal.RecoveryInfo) verdict {
	return verdict{Opens: true, Segments: info.Segments, FirstLSN: info.FirstLSN, EndLSN: info.EndLSN,
		TornBytes: info.TornBytes, Unvouched: info.Unvouched, Clean: info.Clean, RemovedTemp: info.RemovedTemp,
		Dropped: info.DroppedSegment, OpenWould: info.Steps}
}

// status names a segment's place in the log, from the directory alone.
func status(di wal.DirInfo, i int) string {
	segs := di.Segments
	switch {
	case di.First.Present && di.First.Err == nil && i+1 < len(segs) && segs[i+1] <= di.First.LSN:
		return "below start (an interrupted RemoveBefore left it)"
	case di.Truncate.Present && di.Truncate.Err == nil && segs[i] > di.Truncate.LSN:
		return "after the pending cut"
	case i == len(segs)-1 || (di.Truncate.Present && di.Truncate.Err == nil && segs[i+1] > di.Truncate.LSN):
		return "last"
	}
	return "sealed"
}

func closing(k wal.FrameKind) string {
	if k == wal.FrameInvalid {
		return "none"
	}
	return k.String()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// endFrameBytes is the size of an end or link frame: a frame header and no
// payload (the wal package doc's frame layout).
const endFrameBytes = 24

func printText(w io.Writer, d *dump) {
	fmt.Fprintf(w, "log %s\n", d.Dir)
	fmt.Fprintln(w, "policy and sync method: not recorded in the log (each Open sets them; a running Log's Stats reports them)")
	printRecord(w, "first-lsn", d.FirstLSN, "none (a format-1 log, or one whose creation a crash interrupted)")
	printRecord(w, "truncate-lsn", d.TruncateLSN, "none (no cut pending)")
	if e := d.Epoch; e != nil {
		if e.Error != "" {
			fmt.Fprintf(w, "epoch: damaged: %s\n", e.Error)
		} else {
			fmt.Fprintf(w, "epoch: %d from LSN %d\n", e.Epoch, e.Start)
		}
	} else {
		fmt.Fprintf(w, "epoch: none (a log written before format 6, or one whose creation a crash interrupted)\n")
	}
	fmt.Fprintf(w, "segments: %d\n", len(d.Segments))
	for _, s := range d.Segments {
		// An end or link frame takes no LSN space: the records end where
		// it starts, and that is where the next segment starts.
		end, closing := s.ChainEnd, s.Closing
		if closing == wal.FrameEnd.String() || closing == wal.FrameLink.String() {
			end -= endFrameBytes
			closing += " frame at LSN " + strconv.FormatUint(uint64(end), 10)
		}
		fmt.Fprintf(w, "  %s  first %d  size %d  version %d  records %d  records end at LSN %d  closes with %s  max watermark %d  %s\n",
			s.Name, s.FirstLSN, s.Size, s.Version, s.Records, end, closing, s.MaxWatermark, s.Status)
		if s.Error != "" {
			fmt.Fprintf(w, "    not inspected: %s\n", s.Error)
		}
		if s.HeaderError != "" {
			fmt.Fprintf(w, "    bad header: %s\n", s.HeaderError)
		}
		if s.TrailingBytes > 0 && s.Recycled {
			fmt.Fprintf(w, "    %d non-zero bytes after the frames (a recycled file: stale bytes of its earlier use)\n", s.TrailingBytes)
		} else if s.TrailingBytes > 0 {
			fmt.Fprintf(w, "    %d non-zero bytes after the frames\n", s.TrailingBytes)
		}
		for _, f := range s.Frames {
			state := "valid"
			if !f.Valid {
				state = "INVALID: " + f.Problem
			}
			stray := ""
			if f.Stray {
				stray = "  (stray: past the first invalid position)"
			}
			fmt.Fprintf(w, "    lsn %d  offset %d  size %d  length %d  %s  watermark %d  %s%s\n",
				f.LSN, f.Offset, f.Size, f.Length, f.Kind, f.Watermark, state, stray)
		}
	}
	for _, q := range d.Quarantined {
		fmt.Fprintf(w, "quarantined: %s  LSN %d to %d  %d bytes\n", q.Name, q.FromLSN, q.EndLSN, q.Bytes)
	}
	for _, n := range d.Repairs {
		fmt.Fprintf(w, "repair file: %s\n", n)
	}
	for _, n := range d.Temp {
		fmt.Fprintf(w, "temporary file: %s\n", n)
	}
	for _, n := range d.Foreign {
		fmt.Fprintf(w, "foreign file: %s\n", n)
	}
	for _, r := range d.Records {
		fmt.Fprintf(w, "record lsn %d  length %d  %s\n", r.LSN, r.Length, r.Payload)
	}
	if d.RecordsErr != "" {
		fmt.Fprintf(w, "records: reading stopped: %s\n", d.RecordsErr)
	}
	if sv := d.Salvage; sv != nil {
		for _, n := range sv.Notes {
			fmt.Fprintf(w, "salvage: note: %s\n", n)
		}
		how := "cleanly, where the log ends"
		if !sv.Clean {
			how = "at the first damage: " + sv.Damage
		}
		fmt.Fprintf(w, "salvage: %d records (%d bytes) readable, LSN %d to %d; stopped at %s offset %d %s\n",
			sv.Records, sv.Bytes, sv.StartLSN, sv.StopLSN, sv.Segment, sv.Offset, how)
		if sv.Exported != "" {
			fmt.Fprintf(w, "salvage: exported %d records to %s\n", sv.Records, sv.Exported)
		}
	}
	dv := d.DefaultOpen
	if dv.Opens {
		fmt.Fprintf(w, "default Open (sealed segments trusted by their link frames): would recover LSN %d to %d in %s\n", dv.FirstLSN, dv.EndLSN, plural(dv.Segments, "segment"))
	} else {
		fmt.Fprintf(w, "default Open (sealed segments trusted by their link frames): would fail: %s\n", dv.Error)
	}
	defer fmt.Fprintf(w, "exit status: follows the verdict (Open with VerifyOnOpen: every frame of every segment checked)\n")
	if !d.Verdict.Opens && (dv.Opens || d.Verdict.Corrupt) {
		defer fmt.Fprintf(w, "what now: docs/damaged-log.md; read what can be read with waldump -records N or -export FILE; repair with waldump -repair DIR (a dry run; -apply does it)\n")
	}
	v := d.Verdict
	if !v.Opens {
		kind := "would fail"
		if v.Corrupt {
			kind = "would fail: the log is damaged"
		}
		fmt.Fprintf(w, "verdict: Open %s: %s\n", kind, v.Error)
		return
	}
	clean := "no (ended by a crash or without Close)"
	if v.Clean {
		clean = "yes"
	}
	segs := "segments"
	if v.Segments == 1 {
		segs = "segment"
	}
	fmt.Fprintf(w, "verdict: Open would recover LSN %d to %d in %d %s; torn bytes %d; unvouched bytes %d; clean close %s; temporary files to remove %d (nothing was repaired)\n",
		v.FirstLSN, v.EndLSN, v.Segments, segs, v.TornBytes, v.Unvouched, clean, v.RemovedTemp)
	if v.Dropped != "" {
		fmt.Fprintf(w, "verdict: the last roll was cut short before its sealing was done (the finished segment's tail torn, or this segment's header never written): Open would quarantine the frames of %s and remove it\n", v.Dropped)
	}
	for i, s := range v.OpenWould {
		fmt.Fprintf(w, "open would: %d. %s\n", i+1, s)
	}
}

func printRecord(w io.Writer, name string, r *lsnRecord, none string) {
	switch {
	case r == nil:
		fmt.Fprintf(w, "%s: %s\n", name, none)
	case r.Error != "":
		fmt.Fprintf(w, "%s: damaged: %s\n", name, r.Error)
	default:
		fmt.Fprintf(w, "%s: %d\n", name, r.LSN)
	}
}

// salvageRecords reads the longest verifiable prefix of the log with
// wal.Salvage into d: the first n records (when Open would fail, the reader
// of an opened log cannot), and every record to the file export in format
// ("jsonl" or "binary") when export is not empty.
func salvageRecords(d *dump, n int, export, format string) (err error) {
	var out *bufio.Writer
	if export != "" {
		f, err := os.OpenFile(export, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("export: %w", err)
		}
		defer func() {
			if ferr := out.Flush(); err == nil && ferr != nil {
				err = fmt.Errorf("export: %w", ferr)
			}
			if cerr := f.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("export: %w", cerr)
			}
		}()
		out = bufio.NewWriter(f)
	}
	fill := !d.Verdict.Opens && n > 0
	if fill {
		d.Records = nil
	}
	enc := json.NewEncoder(out)
	var hdr [12]byte
	rep, err := wal.Salvage(d.Dir, wal.Options{}, func(lsn wal.LSN, rec []byte) error {
		if fill && len(d.Records) < n {
			p := rec[:min(len(rec), 48)]
			d.Records = append(d.Records, record{LSN: lsn, Length: len(rec), Payload: strconv.QuoteToASCII(string(p))})
		}
		if out == nil {
			return nil
		}
		if format == "binary" {
			binary.LittleEndian.PutUint64(hdr[:8], uint64(lsn))
			binary.LittleEndian.PutUint32(hdr[8:], uint32(len(rec)))
			if _, err := out.Write(hdr[:]); err != nil {
				return err
			}
			_, err := out.Write(rec)
			return err
		}
		return enc.Encode(struct {
			LSN  wal.LSN `json:"lsn"`
			Data []byte  `json:"data"`
		}{lsn, rec})
	})
	if err != nil {
		return err
	}
	d.Salvage = &salvage{StartLSN: rep.Start, StopLSN: rep.Stop, Records: rep.Records, Bytes: rep.Bytes,
		Segment: rep.Segment, Offset: rep.Offset, Clean: rep.Clean, Damage: errString(rep.Damage), Notes: rep.Notes, Exported: export}
	return nil
}

// plural returns "1 segment", "2 segments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
