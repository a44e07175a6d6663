package wal

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"sync/atomic"

	"github.com/durawal/durawal/wal/vfs"
)

// readWindow is how many bytes a Reader reads from a segment at a time.
const readWindow = 256 << 10

// Reader replays records in LSN order, across segments, from the file
// system: it sees the records written to the OS (up to [Log.WrittenLSN] when
// it reaches them; with [DurableOnly], up to [Log.SyncedLSN]), not those
// still in the log buffer. [Reader.Follow] waits for new records. A Reader is not safe
// for concurrent use; several Readers may run beside appends.
type Reader struct {
	l     *Log
	lsn   LSN // next frame to decode
	from  LSN // frames below it are skipped (NewReader's argument)
	first LSN // first LSN of the open segment
	f     vfs.File
	ff    frameFormat // how the open segment's frames are encoded
	name  string
	win   []byte // bytes of the open segment from winLSN
	wlsn  LSN
	err   error

	// cut is the lowest LSN a TruncateFrom cut the log at since Next last
	// looked (noCut if none): TruncateFrom lowers it, Next takes it.
	cut atomic.Uint64

	durable bool // DurableOnly: stop at the synced LSN
}

// ReaderOption modifies a Reader made by NewReader.
type ReaderOption uint8

const (
	// DurableOnly makes a Reader return only records that are durable (up
	// to [Log.SyncedLSN]) instead of every record written to the OS, so a
	// consumer never passes on a record whose commit then fails with
	// ErrDurabilityUnknown and which a power loss would take. A Log opened
	// with OpenReadOnly cannot tell which records are durable (nothing it
	// reads is guaranteed to be): NewReader refuses DurableOnly there with
	// ErrReadOnly.
	DurableOnly ReaderOption = 1 << iota
)

// NewReader returns a Reader positioned at the first record whose LSN is at
// least from. Errors: ErrNotFound if from is below the oldest segment kept
// (see RemoveBefore) or above the appended LSN; ErrClosed; ErrReadOnly for
// DurableOnly on a Log opened with OpenReadOnly. When a record
// starts at from, the Reader starts there directly (one read); otherwise it
// skips the frames of from's segment that lie before it. Close the Reader
// when done: the Log keeps track of open Readers to tell them of
// truncations.
func (l *Log) NewReader(from LSN, opts ...ReaderOption) (*Reader, error) {
	l.app.Lock()
	closed := l.app.closed
	l.app.Unlock()
	if closed {
		return nil, ErrClosed
	}
	l.segs.Lock()
	oldest := l.segs.firsts[0]
	l.segs.Unlock()
	if from < oldest {
		return nil, fmt.Errorf("%w: LSN %d is below the oldest kept segment (LSN %d)", ErrNotFound, from, oldest)
	}
	if appended := LSN(l.appended.Load()); from > appended {
		return nil, fmt.Errorf("%w: LSN %d is beyond the appended LSN %d", ErrNotFound, from, appended)
	}
	r := &Reader{l: l}
	for _, o := range opts {
		r.durable = r.durable || o&DurableOnly != 0
	}
	if r.durable && l.readOnly {
		return nil, fmt.Errorf("%w: DurableOnly: a read-only Log cannot tell which records are durable (its synced LSN is the recovered end, synced or not)", ErrReadOnly)
	}
	r.cut.Store(noCut)
	l.readers.Lock()
	if l.readers.m == nil {
		l.readers.m = make(map[*Reader]struct{})
	}
	l.readers.m[r] = struct{}{}
	l.readers.Unlock()
	if err := r.seek(from); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// seek opens the segment holding from and skips the frames before it.
func (r *Reader) seek(from LSN) error {
	r.l.segs.Lock()
	i := sort.Search(len(r.l.segs.firsts), func(i int) bool { return r.l.segs.firsts[i] > from }) - 1
	first := r.l.segs.firsts[max(i, 0)]
	r.l.segs.Unlock()
	r.from = from // Next skips the frames before it, even those written later
	if err := r.open(first); err != nil {
		return err
	}
	if from <= first || from%frameAlign != 0 {
		return nil
	}
	// Seek directly when a frame starts at from (one read, the window
	// that Next reads anyway); otherwise skip frames from the segment's
	// start.
	end, _, err := r.segmentEnd()
	if err != nil || from > end {
		return nil
	}
	if from == end { // the written LSN or the next segment's start: a frame boundary
		r.lsn = from
		return nil
	}
	if _, _, err := r.frameAt(from, end); err == nil {
		r.lsn = from
		return nil
	}
	r.win, r.wlsn = r.win[:0], first
	return nil
}

func (r *Reader) open(first LSN) error {
	if r.f != nil {
		r.f.Close()
	}
	r.name = segmentName(first)
	h, err := r.l.openSegmentForRead(first)
	if err != nil {
		r.f = nil
		return fmt.Errorf("wal: reader: %w", err)
	}
	f := h.f
	r.ff = h.ff
	r.f, r.first, r.lsn, r.win, r.wlsn = f, first, first, r.win[:0], first
	return nil
}

// segmentEnd returns where the open segment's frames end as far as the
// reader may read now, and the next segment's first LSN (0 if none). If
// RemoveBefore removed the open segment it returns an error matching
// fs.ErrNotExist: the following kept segment no longer marks its end.
func (r *Reader) segmentEnd() (end, next LSN, err error) {
	r.l.segs.Lock()
	defer r.l.segs.Unlock()
	i := sort.Search(len(r.l.segs.firsts), func(i int) bool { return r.l.segs.firsts[i] >= r.first })
	if i == len(r.l.segs.firsts) || r.l.segs.firsts[i] != r.first {
		return 0, 0, fmt.Errorf("wal: reader: %s was removed by RemoveBefore: %w", r.name, fs.ErrNotExist)
	}
	if i+1 < len(r.l.segs.firsts) {
		next := r.l.segs.firsts[i+1]
		if r.durable {
			// A roll lists the next segment before the sealing has
			// synced the finished one: its frames are written, not yet
			// durable.
			return min(next, LSN(r.l.synced.Load())), next, nil
		}
		return next, next, nil
	}
	if r.durable {
		return LSN(r.l.synced.Load()), 0, nil
	}
	return LSN(r.l.written.Load()), 0, nil
}

// Follow is Next that waits for a record instead of returning io.EOF:
// at the end of what has been written (made durable, with DurableOnly) it
// blocks until the log grows, without polling, and returns the next
// record. It returns ctx.Err() if ctx ends first, ErrClosed once the Log
// is closed, an error matching ErrPoisoned after a failed write or sync,
// and Next's other errors.
func (r *Reader) Follow(ctx context.Context) (LSN, []byte, error) {
	for {
		wake := r.l.tailChan() // before Next looks: no advance can be missed
		lsn, rec, err := r.Next()
		if err != io.EOF {
			return lsn, rec, err
		}
		if err := r.l.poisoned(); err != nil {
			return 0, nil, err
		}
		r.l.app.Lock()
		closed := r.l.app.closed
		r.l.app.Unlock()
		if closed {
			return 0, nil, ErrClosed
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		}
	}
}

// tailChan returns a channel that is closed at the next advance of the
// written or synced LSN, or at Close.
func (l *Log) tailChan() <-chan struct{} {
	l.tail.Lock()
	defer l.tail.Unlock()
	if l.tail.ch == nil {
		l.tail.ch = make(chan struct{})
		l.tail.waiting.Store(true)
	}
	return l.tail.ch
}

// notifyTail wakes the Readers waiting in Follow. It costs one atomic
// load while none waits.
func (l *Log) notifyTail() {
	if !l.tail.waiting.Load() {
		return
	}
	l.tail.Lock()
	defer l.tail.Unlock()
	if l.tail.ch != nil {
		close(l.tail.ch)
		l.tail.ch = nil
		l.tail.waiting.Store(false)
	}
}

// Next returns the next record and its LSN. The record's bytes are valid
// until the next call. At the end of what has been written it returns
// io.EOF (bare); a later call may return records written since. Damage
// below the written LSN returns a *CorruptionError (ErrCorrupt); a segment
// removed by RemoveBefore under the Reader returns an error matching
// fs.ErrNotExist.
func (r *Reader) Next() (LSN, []byte, error) {
	if r.err != nil {
		return 0, nil, r.err
	}
	// No TruncateFrom or RemoveBefore changes the files while Next reads
	// them, and a cut is seen before any byte read after it.
	r.l.reads.RLock()
	defer r.l.reads.RUnlock()
	if c := r.cut.Swap(noCut); c != noCut {
		// A TruncateFrom cut the log: what the window holds may be gone.
		r.win, r.wlsn = r.win[:0], r.first
		if max(r.lsn, r.from) > LSN(c) {
			r.err = fmt.Errorf("%w: at LSN %d, cut at LSN %d", ErrTruncated, max(r.lsn, r.from), c)
			return 0, nil, r.err
		}
	}
	for {
		end, next, err := r.segmentEnd()
		if err != nil {
			r.err = err
			return 0, nil, err
		}
		if r.lsn >= end {
			if next == 0 || r.lsn < next {
				return 0, nil, io.EOF
			}
			if err := r.open(next); err != nil {
				r.err = err
				return 0, nil, err
			}
			continue
		}
		lsn := r.lsn
		rec, size, err := r.frameAt(lsn, end)
		if err != nil {
			r.err = err
			return 0, nil, err
		}
		r.lsn += LSN(size)
		if lsn < r.from || rec == nil { // rec == nil: an end frame, not a record
			continue
		}
		r.l.stats.readerRecords.Add(1)
		return lsn, rec, nil
	}
}

// frameAt decodes the frame at lsn, which ends at or before end, reading a
// new window from the file when the frame is not inside the current one.
func (r *Reader) frameAt(lsn, end LSN) ([]byte, int64, error) {
	limit := int(maxRecordFor(MaxSegmentSize)) // the checksum decides, not today's MaxRecordSize
	n := int64(readWindow)
	for attempt := 0; ; attempt++ {
		if lsn >= r.wlsn && lsn < r.wlsn+LSN(len(r.win)) {
			b := r.win[lsn-r.wlsn:]
			rec, _, size, st := decodeFrame(b, r.ff, lsn, limit)
			if st == frameValid && lsn+LSN(size) <= end {
				return rec, size, nil
			}
			if st != frameShort || attempt > 1 {
				if err := reused(r.f, r.first); err != nil {
					return nil, 0, err
				}
				if attempt < 3 && r.replaced() {
					// The empty segment was replaced under the same name
					// (replaceEmpty): read the file the name holds now.
					r.win, r.wlsn = r.win[:0], lsn
					continue
				}
				return nil, 0, &CorruptionError{Segment: r.name, Offset: headerSize(r.ff.Version) + int64(lsn-r.first),
					Reason: fmt.Sprintf("%s at LSN %d below the written LSN %d", st, lsn, end)}
			}
			if len(b) >= frameHeaderSize { // a frame longer than the window: read all of it
				n = max(n, frameSize(int(binary.LittleEndian.Uint32(b[8:12]))))
			}
		}
		n = min(n, int64(end-lsn))
		if int64(cap(r.win)) < n {
			r.win = make([]byte, n)
		}
		r.win = r.win[:n]
		got, err := r.f.ReadAt(r.win, headerSize(r.ff.Version)+int64(lsn-r.first))
		r.l.stats.readerBytes.Add(uint64(max(got, 0)))
		if int64(got) < n {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return nil, 0, fmt.Errorf("wal: reader: reading %s: read %d of %d bytes: %w", r.name, got, n, err)
		}
		r.wlsn = lsn
	}
}

// replaced reports whether the open segment's name now holds another use
// of a segment file at the same first LSN, and if so reads from that one
// from then on.
func (r *Reader) replaced() bool {
	h, err := r.l.openSegmentForRead(r.first)
	if err != nil {
		return false
	}
	if h.ff == r.ff {
		h.f.Close()
		return false
	}
	r.f.Close()
	r.f, r.ff = h.f, h.ff
	return true
}

// Close releases the Reader's file.
func (r *Reader) Close() error {
	r.l.readers.Lock()
	delete(r.l.readers.m, r)
	r.l.readers.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	if r.err == nil {
		r.err = ErrClosed
	}
	return err
}
