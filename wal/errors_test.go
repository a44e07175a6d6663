package wal_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStrayShortSegmentNamed: a 5-byte file named like a segment after a
// healthy one is reported as itself (too short for a header), not as damage
// in the healthy segment before it.
func TestStrayShortSegmentNamed(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{50, 60, 70}) // frames end at LSN 80, 168, 264
	img := w.mem.ProcessCrash()
	const stray = "00000000000000000099.wal"
	f, err := img.Create(filepath.Join(logDir, stray), vfs.Fdatasync)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	setFile(t, img, stray, []byte("hello"))
	ce := corruptOpen(t, img, w.opts)
	assert.Equal(t, stray, ce.Segment)
	assert.Zero(t, ce.Offset)
	assert.Contains(t, ce.Reason, "too short to hold a segment header")
	assert.Contains(t, ce.Error(), stray)
}

// TestUnsupportedSegmentVersion: a segment of a newer format version is not
// damage: Open fails with ErrUnsupportedVersion, naming the file, its
// version and the version this build reads.
func TestUnsupportedSegmentVersion(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{50, 60})
	img := w.mem.ProcessCrash()
	seg := segments(t, img)[0]
	b := fileBytes(t, img, seg)
	binary.LittleEndian.PutUint32(b[8:12], wal.RecycledVersion+1)
	binary.LittleEndian.PutUint64(b[24:32], xxhash.Sum64(b[:24]))
	setFile(t, img, seg, b)
	opts := w.opts
	opts.FS, opts.SegmentSize = img, testSegmentSize
	l, err := wal.Open(logDir, opts)
	require.Nil(t, l)
	require.ErrorIs(t, err, wal.ErrUnsupportedVersion)
	require.NotErrorIs(t, err, wal.ErrCorrupt, "a version error is not damage")
	var ce *wal.CorruptionError
	require.False(t, errors.As(err, &ce))
	msg := err.Error()
	assert.Contains(t, msg, seg)
	assert.Contains(t, msg, fmt.Sprintf("version %d", wal.RecycledVersion+1))
	assert.Contains(t, msg, fmt.Sprintf("reads versions 1 to %d", wal.RecycledVersion))
}

// shortReadFS makes every read of more than min bytes, while on, return one
// byte less than asked with a nil error (a misbehaving io.ReaderAt).
type shortReadFS struct {
	vfs.FS
	on  *bool
	min int
}

func (s shortReadFS) Open(name string) (vfs.File, error) {
	f, err := s.FS.Open(name)
	if err != nil {
		return f, err
	}
	return shortReadFile{f, s}, nil
}

type shortReadFile struct {
	vfs.File
	fs shortReadFS
}

func (f shortReadFile) ReadAt(p []byte, off int64) (int, error) {
	if *f.fs.on && len(p) > f.fs.min {
		n, _ := f.File.ReadAt(p[:len(p)-1], off)
		return n, nil
	}
	return f.File.ReadAt(p, off)
}

// TestShortReadNilErrorMessage: a short read without an error is reported
// as io.ErrUnexpectedEOF, never as "%!w(<nil>)", by Open and by a Reader.
func TestShortReadNilErrorMessage(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{50, 60})
	on := true
	fsys := shortReadFS{FS: w.mem.ProcessCrash(), on: &on, min: 32}
	opts := w.opts
	opts.FS, opts.SegmentSize = fsys, testSegmentSize
	_, err := wal.Open(logDir, opts)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.NotContains(t, err.Error(), "%!")
	assert.Contains(t, err.Error(), "read ")

	on = false
	l, err := wal.Open(logDir, opts)
	require.NoError(t, err)
	defer l.Close()
	r, err := l.NewReader(0)
	require.NoError(t, err)
	defer r.Close()
	on = true
	_, _, err = r.Next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.NotContains(t, err.Error(), "%!")
}

// TestTruncatedSegmentOffset: a truncated segment's CorruptionError gives
// the offset where its valid frames end, not 0.
func TestTruncatedSegmentOffset(t *testing.T) {
	w := writeLog(t, wal.Options{}, []int{50, 60, 70}) // frames at offsets 64, 144, 232; end 328
	for _, tc := range []struct{ cut, want int }{
		{328, 328}, // after the last frame
		{282, 232}, // inside the third frame
		{144, 144}, // between frames
		{72, 64},   // inside the first
	} {
		img := w.mem.ProcessCrash()
		seg := segments(t, img)[0]
		setFile(t, img, seg, fileBytes(t, img, seg)[:tc.cut])
		ce := corruptOpen(t, img, w.opts)
		assert.Equal(t, seg, ce.Segment)
		assert.Equal(t, int64(tc.want), ce.Offset, "cut at %d", tc.cut)
		assert.Contains(t, ce.Reason, "truncated")
	}
}
