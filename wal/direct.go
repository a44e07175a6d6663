package wal

import (
	"errors"
	"fmt"
	"syscall"
	"unsafe"

	"github.com/durawal/durawal/wal/vfs"
)

// Direct I/O (docs/semantics.md, O_DIRECT). With O_DIRECT every write must start at a
// multiple of the alignment, cover whole blocks and come from an aligned
// buffer. The log writes frames back to back, so a write usually starts in
// the middle of a block that an earlier write left partial: like InnoDB it
// rewrites that block from its start, with the bytes of the frames already
// there (kept in dio.tail, byte for byte as written: they may belong to
// acknowledged commits) followed by the new frames and zeros up to the next
// block boundary. The zeros read as "no frame here" (an all-zero frame
// header ends the scan), so recovery is unaffected: the next write
// overwrites them with frames.

// dioState is the flush leader's direct-I/O state for the segment
// receiving writes. It is owned by whoever owns write.seg: the leader (writes
// and rolls) and Open.
type dioState struct {
	align   int    // bytes; 1 without O_DIRECT
	source  string // where align came from (vfs.AlignmentSource)
	buf     []byte // aligned staging buffer for one write
	tail    []byte // bytes of the partial last block, from tailOff
	spare   []byte // the next tail, swapped in after a write succeeds
	tailOff int64  // file offset of the partial last block (aligned)
}

// alignedBuf returns a zeroed slice of n bytes whose address is a multiple
// of align, by over-allocating and slicing.
func alignedBuf(n, align int) []byte {
	if align <= 1 {
		return make([]byte, n)
	}
	b := make([]byte, n+align)
	skip := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) % uintptr(align)); r != 0 {
		skip = align - r
	}
	return b[skip : skip+n : skip+n]
}

func alignDown(n int64, align int) int64 { return n &^ (int64(align) - 1) }
func alignUp(n int64, align int) int64   { return alignDown(n+int64(align)-1, align) }

// staging returns the aligned staging buffer with at least n bytes.
func (d *dioState) staging(n int) []byte {
	if cap(d.buf) < n {
		d.buf = alignedBuf(max(n, 2*cap(d.buf)), d.align)
	}
	return d.buf[:n]
}

// setTail records that the block at off holds b (which is copied) as its
// written prefix.
func (d *dioState) setTail(off int64, b []byte) {
	d.tailOff = off
	d.tail = append(d.tail[:0], b...)
}

// writeDirect writes frames p, which go at file offset off, to seg through
// O_DIRECT: it rewrites the partial block before off from dio.tail, pads to
// the next block boundary with zeros, and keeps the new partial block. It
// returns the frame bytes written and the padding bytes.
func (l *Log) writeDirect(seg *segment, p []byte, off int64) (n int, padding int64, err error) {
	d := &l.write.dio
	if d.tailOff+int64(len(d.tail)) != off {
		panic(fmt.Sprintf("wal: direct write at offset %d of %s, but its partial block holds %d bytes from %d",
			off, seg.path, len(d.tail), d.tailOff))
	}
	end := off + int64(len(p))
	wEnd := alignUp(end, d.align)
	if wEnd > seg.size {
		panic(fmt.Sprintf("wal: direct write to %d past the end of %s (%d bytes)", wEnd, seg.path, seg.size))
	}
	buf := d.staging(int(wEnd - d.tailOff))
	k := copy(buf, d.tail)
	k += copy(buf[k:], p)
	clear(buf[k:])
	newTailOff := alignDown(end, d.align)
	d.spare = append(d.spare[:0], buf[newTailOff-d.tailOff:end-d.tailOff]...) // before WriteAt, which may scramble buf
	w, err := seg.f.WriteAt(buf, d.tailOff)
	n = min(max(w-len(d.tail), 0), len(p))
	if err == nil && w < len(buf) {
		err = fmt.Errorf("short write of %d of %d bytes", w, len(buf))
	}
	if err != nil {
		return n, 0, err
	}
	d.tail, d.spare = d.spare, d.tail
	d.tailOff = newTailOff
	return n, wEnd - end, nil
}

// openFile opens a segment file for writing with the log's sync method,
// through create (FS.Create or FS.OpenReadWrite). During Open, if the
// filesystem refuses a method and Options.AllowSyncMethodFallback is set, it
// falls back to the method's buffered twin (vfs.SyncMethod.WithoutDirect,
// then Fdatasync), logs it, and records it for Stats; otherwise the error
// matches ErrSyncMethodUnsupported and names the method and the path. If
// the file was opened but its direct-I/O alignment is unusable, openFile
// returns the open file with the error: the caller closes it.
func (l *Log) openFile(path string, open func(string, vfs.SyncMethod) (vfs.File, error)) (vfs.File, error) {
	for {
		m := l.method
		f, err := open(path, m)
		if err == nil {
			return f, l.learnAlignment(f)
		}
		if !refused(m, err) {
			return nil, err
		}
		next := m.WithoutDirect()
		if next == m {
			next = vfs.Fdatasync
		}
		if !l.opts.AllowSyncMethodFallback || !l.opening || next == m {
			return nil, fmt.Errorf("%w: %v for %s: %w", ErrSyncMethodUnsupported, m, path, err)
		}
		l.opts.Logger.Warn("wal: sync method refused by the filesystem; falling back as Options.AllowSyncMethodFallback allows",
			"dir", l.dir, "method", m.String(), "fallback", next.String(), "err", err)
		l.method = next
		l.fellBack = true
	}
}

// refused reports whether err means the filesystem or the platform refuses
// method m (an explicit vfs sentinel, or open's EINVAL for O_DIRECT).
func refused(m vfs.SyncMethod, err error) bool {
	return errors.Is(err, vfs.ErrSyncMethodUnsupported) || (m.Direct() && errors.Is(err, syscall.EINVAL))
}

// learnAlignment records the direct-I/O alignment of the first file opened
// with a direct method and checks that segments can be written with it.
func (l *Log) learnAlignment(f vfs.File) error {
	if !l.method.Direct() || l.write.dio.align > 1 {
		return nil
	}
	a := f.Alignment()
	if a <= 1 || a&(a-1) != 0 || a > 1<<20 {
		return fmt.Errorf("wal: %v: the filesystem reports a direct-I/O alignment of %d bytes, want a power of two up to 1 MiB", l.method, a)
	}
	if l.opts.SegmentSize%int64(a) != 0 {
		return fmt.Errorf("%w: SegmentSize %d bytes is not a multiple of the direct-I/O alignment %d of %s",
			ErrInvalidOptions, l.opts.SegmentSize, a, l.dir)
	}
	l.write.dio.align, l.write.dio.source = a, vfs.AlignmentSource(f)
	l.opts.Logger.Info("wal: direct I/O", "dir", l.dir, "method", l.method.String(), "alignment", a, "source", l.write.dio.source)
	return nil
}
