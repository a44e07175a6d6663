package wal

// logBuffer holds frames appended contiguously in LSN order from start.
type logBuffer struct {
	start LSN
	buf   []byte
	seg   *segment // the segment the frames from start go into, up to the first roll
	rolls []roll   // segments that begin inside buf, in LSN order
	// swapped, when not nil, is closed once the buffer stops being the
	// active one (flush swaps it out to write it): appends that found it
	// full wait on it (reserveLocked), and flushed is closed when the
	// write they asked for returned (written or failed). Both under l.app.
	swapped, flushed chan struct{}
}

// roll marks the LSN at which frames move to a new segment.
type roll struct {
	lsn LSN
	seg *segment
}

func (b *logBuffer) reset(start LSN) {
	b.start, b.buf, b.rolls = start, b.buf[:0], b.rolls[:0]
	b.released()
}

// released closes b.swapped, if an append waits on it: b is no longer the
// active half (or was emptied in place). l.app is held.
func (b *logBuffer) released() {
	if b.swapped != nil {
		close(b.swapped)
		b.swapped, b.flushed = nil, nil
	}
}

// bufferPrealloc is the capacity in bytes each log-buffer half gets at Open:
// BufferSize, but no more than two segments' worth, which is all a half can
// hold before a small segment's rolls make frames wait anyway (tests open
// thousands of logs with 4 KiB segments). A half that still needs more, for
// one frame above it, grows then.
func bufferPrealloc(o Options) int {
	return int(min(int64(o.BufferSize), 2*o.SegmentSize))
}

// record returns the payload of the record frame at lsn, inside b, if a
// valid one starts there (checked as on the disk: lsn may be any LSN).
func (b *logBuffer) record(lsn LSN, maxRecord int) ([]byte, bool) {
	seg := b.seg
	for _, r := range b.rolls {
		if r.lsn <= lsn {
			seg = r.seg
		}
	}
	if seg == nil {
		return nil, false
	}
	p, _, _, st := decodeFrame(b.buf[lsn-b.start:], seg.format(), lsn, maxRecord)
	return p, st == frameValid && p != nil
}
