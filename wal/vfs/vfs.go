// Package vfs is the filesystem seam of the log: every byte package wal reads
// or writes, and every sync it issues, goes through an [FS].
//
// Two implementations ship here:
//
//   - [OS] is the real filesystem, with fdatasync from golang.org/x/sys/unix,
//     and the open flags (O_DSYNC, O_DIRECT) of each [SyncMethod].
//   - [MemFS] is an in-memory filesystem that remembers which bytes and which
//     directory entries were synced, and can lose the rest the way a process
//     crash or a power loss would ([MemFS.ProcessCrash], [MemFS.PowerLoss]).
//
// Package faultfs (wal/vfs/faultfs) wraps any FS to fail chosen operations
// (EIO, ENOSPC, short writes, short reads) or merely count them, for tests
// and for benchmarks that check the log's counters against the system calls
// it made.
//
// # Durability contract
//
// An FS implementation promises what Linux promises, no more:
//
//   - Bytes written with [File.WriteAt] survive a process crash (they are in
//     the page cache, or on the device with O_DIRECT) but survive a power
//     loss only after [File.Sync] returns nil. A sync covers every byte
//     written before it started. A file opened with a write-through
//     [SyncMethod] (O_DSYNC) makes each write durable before WriteAt
//     returns.
//   - A created, renamed or removed directory entry survives a power loss only
//     after [FS.SyncDir] of its directory returns nil.
//   - A failed Sync is final: the bytes it covered may be lost even if a
//     later Sync succeeds (the "fsyncgate" behaviour of Linux).
//
// All names are full paths, joined by the caller with path/filepath.
package vfs

import (
	"io"
	"io/fs"
)

// FS is the set of filesystem operations the log uses. Each method is one
// operation that package faultfs can fail. Implementations must be safe for
// concurrent use.
type FS interface {
	// Create creates name exclusively for reading and writing, with the
	// open flags of m (O_DSYNC, O_DIRECT). It returns an error matching
	// fs.ErrExist if name exists, and one matching ErrSyncMethodUnsupported
	// (or syscall.EINVAL, as open(2) reports it) if the platform or the
	// filesystem refuses m; then no file is left behind. The file's content
	// is durable after File.Sync (or each write, for a write-through m), its
	// directory entry after SyncDir.
	Create(name string, m SyncMethod) (File, error)
	// Open opens an existing file read-only. A missing file gives an error
	// matching fs.ErrNotExist.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing with the
	// open flags of m (used for the recovered last segment). A missing file
	// gives fs.ErrNotExist; a refused m, as for Create.
	OpenReadWrite(name string, m SyncMethod) (File, error)
	// Rename atomically replaces newname with oldname. Durable after SyncDir.
	Rename(oldname, newname string) error
	// Remove removes a file. Durable after SyncDir.
	Remove(name string) error
	// List returns the sorted base names of the regular files in dir,
	// skipping subdirectories; any other entry (a symbolic link, a device)
	// is an error matching ErrNotRegular that names it.
	List(dir string) ([]string, error)
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// SyncDir makes dir's entries (creates, renames, removes) durable.
	SyncDir(dir string) error
	// Lock takes an exclusive lock on the file name (created if missing),
	// held until the returned Closer is closed. A lock held elsewhere gives
	// an error matching [ErrLocked].
	Lock(name string) (io.Closer, error)
}

// File is an open file. Offsets are byte offsets from the start of the file.
// A File is safe for concurrent use by multiple goroutines as long as their
// writes do not overlap.
type File interface {
	// ReadAt reads len(p) bytes at off, as [io.ReaderAt].
	ReadAt(p []byte, off int64) (int, error)
	// WriteAt writes p at off, as [io.WriterAt]: n < len(p) only together
	// with an error. Implementations may scramble p after copying it (MemFS
	// does, to catch callers that reuse a buffer still being written), so the
	// caller must not rely on p's content after WriteAt returns. With
	// O_DIRECT, p's address, len(p) and off must be multiples of
	// Alignment() (EINVAL otherwise); ReadAt has the same rule.
	WriteAt(p []byte, off int64) (int, error)
	// Sync makes every byte written before the call durable: fdatasync on
	// Linux, fsync for the Fsync method. EINTR is retried inside; any other
	// error is final and must be treated as a durability failure.
	Sync() error
	// Alignment returns the alignment in bytes that direct I/O requires of
	// this file's buffers, offsets and lengths (a power of two), or 1 if the
	// file was not opened with O_DIRECT. See [AlignmentSource] for how it
	// was found.
	Alignment() int
	// Truncate changes the file's size in bytes. It is durable after Sync.
	Truncate(size int64) error
	// Size returns the file's current size in bytes.
	Size() (int64, error)
	// Close closes the file. An error from Close may report a lost write and
	// must be treated like a Sync error.
	Close() error
}
