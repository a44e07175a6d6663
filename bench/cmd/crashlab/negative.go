package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"

	"github.com/durawal/durawal/wal/vfs"
)

// The negative controls: filesystems that break the log's durability from
// outside the library, so the lab can show it catches a log that
// acknowledges what it has not made durable. Each wraps the guest's real
// filesystem (vfs.OS) and changes only what a file's Sync does; everything
// else is passed through.
const (
	// negBroken: Sync does nothing and reports success. SyncEveryCommit
	// then acknowledges after the write alone.
	negBroken = "broken"
	// negLate: each write to a segment is held back and performed only at
	// the file's next Sync, after that Sync has made what was held before
	// durable. Every acknowledged group becomes durable one fsync late, the
	// bug a crash amid back-to-back commits rarely shows (the next group's
	// sync covers it) and a crash in a lull always does. The small record
	// files (epoch and the like), written and synced once, are left alone:
	// held back they would never be durable, and recovery would fail for
	// that cruder reason.
	negLate = "late"
)

// negativeControls describes each control for the lab's header line.
var negativeControls = map[string]string{
	negBroken: "sync does nothing and reports success",
	negLate:   "each write held back until the next sync: every group acknowledged one fsync early",
}

// negativeFS returns fs wrapped for the negative control named mode, fs
// itself for "", and an error for an unknown name. The controls are meant for
// the sync method fdatasync (or fsync): a write-through method (O_DSYNC,
// O_DIRECT) makes writes durable without Sync.
func negativeFS(fs vfs.FS, mode string) (vfs.FS, error) {
	switch mode {
	case "":
		return fs, nil
	case negBroken, negLate:
		return negFS{FS: fs, mode: mode}, nil
	}
	return nil, fmt.Errorf("unknown negative control %q (want %s or %s)", mode, negBroken, negLate)
}

type negFS struct {
	vfs.FS
	mode string
}

func (n negFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	switch {
	case err != nil:
		return nil, err
	case n.mode == negBroken:
		return &brokenFile{File: f}, nil
	case isSegment(name):
		return &lateFile{File: f}, nil
	}
	return f, nil
}

// isSegment reports whether name is one of the log's segment files, by the
// names the library gives them: "<first LSN>.wal", or while being prepared
// or recycled "prepare-*" and "recycle-*".
func isSegment(name string) bool {
	b := filepath.Base(name)
	return strings.HasSuffix(b, ".wal") || strings.HasPrefix(b, "prepare-") || strings.HasPrefix(b, "recycle-")
}

func (n negFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := n.FS.Create(name, m)
	return n.wrap(name, f, err)
}

func (n negFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	f, err := n.FS.OpenReadWrite(name, m)
	return n.wrap(name, f, err)
}

// brokenFile's Sync claims durability and does nothing.
type brokenFile struct{ vfs.File }

func (f *brokenFile) Sync() error { return nil }

// Allocate passes the reservation through (it makes nothing durable).
func (f *brokenFile) Allocate(size int64) error { return vfs.Allocate(f.File, size) }

// lateFile holds every write until the next Sync, which first syncs the
// file (making the writes it performed at the previous Sync durable), then
// performs the held writes and reports success: they stay in the page cache
// until the Sync after.
type lateFile struct {
	vfs.File
	mu   sync.Mutex
	held []heldWrite
}

type heldWrite struct {
	off int64
	b   []byte
}

func (f *lateFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.held = append(f.held, heldWrite{off, append([]byte(nil), p...)})
	return len(p), nil
}

// ReadAt reads the file with the held writes laid over it.
func (f *lateFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.File.ReadAt(p, off)
	end := off + int64(len(p))
	for _, h := range f.held {
		lo, hi := max(off, h.off), min(end, h.off+int64(len(h.b)))
		if lo >= hi {
			continue
		}
		copy(p[lo-off:hi-off], h.b[lo-h.off:hi-h.off])
		if int(hi-off) > n {
			n = int(hi - off)
		}
	}
	if n == len(p) && err == io.EOF {
		err = nil
	}
	return n, err
}

func (f *lateFile) Size() (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.File.Size()
	for _, h := range f.held {
		s = max(s, h.off+int64(len(h.b)))
	}
	return s, err
}

// perform writes what was held. f.mu is held.
func (f *lateFile) perform() error {
	for _, h := range f.held {
		if _, err := f.File.WriteAt(h.b, h.off); err != nil {
			return err
		}
	}
	f.held = f.held[:0]
	return nil
}

func (f *lateFile) Sync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.File.Sync(); err != nil {
		return err
	}
	return f.perform()
}

func (f *lateFile) Truncate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.perform(); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *lateFile) Allocate(size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return vfs.Allocate(f.File, size)
}

func (f *lateFile) Close() error {
	f.mu.Lock()
	err := f.perform()
	f.mu.Unlock()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}
