package wal

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal/vfs"
)

// TestScannerWindowIsBounded: checking a sealed segment frame by frame
// holds at most one window (or one frame, if larger) in memory, never the
// segment, and finds the same frames as a scan of the whole segment.
func TestScannerWindowIsBounded(t *testing.T) {
	const segSize = 8 << 20
	mem := vfs.NewMem()
	l, err := Open("/log", Options{FS: mem, SegmentSize: segSize, MaxRecordSize: 3 << 20, Policy: policy.SyncNever()})
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{7}, 2<<20) // a frame larger than the window
	small := bytes.Repeat([]byte{1}, 1000)
	var n int
	for l.Stats().Rolls < 1 {
		rec := small
		if n%1000 == 500 {
			rec = big
		}
		if _, err := l.Append(rec); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := mem.List("/log")
	var firsts []LSN
	for _, name := range names {
		if first, ok := parseSegmentName(name); ok {
			firsts = append(firsts, first)
		}
	}
	if len(firsts) < 2 {
		t.Fatalf("want 2 segments, got %v", names)
	}
	name := segmentName(firsts[0])
	f, err := mem.Open(filepath.Join("/log", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, _ := f.Size()
	sc := scanFile(f, name, firsts[0], size)
	if err := checkSegment(sc); err != nil {
		t.Fatal(err)
	}
	if err := checkSealed(sc, firsts[1]); err != nil {
		t.Fatal(err)
	}
	if limit := int(frameSize(len(big))); cap(sc.win) > limit {
		t.Errorf("window grew to %d bytes, want at most one frame (%d) in a %d-byte segment", cap(sc.win), limit, size)
	}
	if sc.read < int64(firsts[1]-firsts[0]) || sc.read > 2*size {
		t.Errorf("read %d bytes to check %d bytes of frames", sc.read, firsts[1]-firsts[0])
	}
	// The same frames as a scan of the whole segment.
	whole := make([]byte, size)
	if _, err := f.ReadAt(whole, 0); err != nil {
		t.Fatal(err)
	}
	at, linked, err := scanBytes(whole, name, firsts[0]).linkIn()
	if err != nil || !linked || at != firsts[1] {
		t.Fatalf("whole-segment scan: link at %d (linked %v, %v), want at %d", at, linked, err, firsts[1])
	}
	sc = scanFile(f, name, firsts[0], size)
	at, linked, err = sc.linkIn()
	if err != nil || !linked || at != firsts[1] {
		t.Fatalf("windowed scan: link at %d (linked %v, %v), want at %d", at, linked, err, firsts[1])
	}
	// A frame whose length runs past the file's end is short, not read.
	binary.LittleEndian.PutUint32(whole[segmentHeaderSize+8:], uint32(maxRecordFor(size)))
	if _, _, _, _, st, err := scanBytes(whole, name, firsts[0]).frame(firsts[0], true); err != nil || st == frameValid {
		t.Fatalf("frame with a corrupt length: %v %v", st, err)
	}
}

// TestLastNonZeroFrom compares the chunked search with a byte-by-byte one
// around chunk boundaries and the from bound.
func TestLastNonZeroFrom(t *testing.T) {
	naive := func(b []byte, from int64) int64 {
		for i := int64(len(b)) - 1; i >= from; i-- {
			if b[i] != 0 {
				return i
			}
		}
		return -1
	}
	b := make([]byte, 3*4096+100)
	for _, pos := range []int{-1, 0, 1, 4095, 4096, 4097, 8191, 8192, len(b) - 4097, len(b) - 1} {
		clear(b)
		if pos >= 0 {
			b[pos] = 9
		}
		for _, from := range []int64{0, 1, 4095, 4096, int64(pos), int64(pos) + 1, int64(len(b)) - 1, int64(len(b))} {
			if from < 0 {
				continue
			}
			if got, want := lastNonZeroFrom(b, from), naive(b, from); got != want {
				t.Errorf("non-zero byte at %d, from %d: got %d, want %d", pos, from, got, want)
			}
		}
	}
}
