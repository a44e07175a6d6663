package vfs

import (
	"errors"
	"fmt"
	"strings"
)

// ErrSyncMethodUnsupported is matched by the error an [FS] returns when it
// cannot open a file with the [SyncMethod] asked for: the platform lacks the
// flag (O_DIRECT on darwin), or the filesystem refuses it (open returns
// EINVAL for O_DIRECT on some tmpfs, overlay and FUSE mounts, and on ext4
// with data=journal).
var ErrSyncMethodUnsupported = errors.New("vfs: sync method not supported")

// SyncMethod says how a file opened for writing reaches stable storage:
// which open flags it carries and what [File.Sync] calls. The zero value is
// [Fdatasync]. The names mirror InnoDB's innodb_flush_method and
// PostgreSQL's wal_sync_method (docs/semantics.md: InnoDB redo log,
// PostgreSQL WAL, O_DSYNC, O_DIRECT).
type SyncMethod uint8

const (
	// Fdatasync writes through the page cache and makes the data durable
	// with fdatasync(2) at each Sync (F_FULLFSYNC on darwin). PostgreSQL's
	// Linux default wal_sync_method = fdatasync. Cost: one system call per
	// sync that waits for the device; on preallocated segments it flushes
	// no metadata. Writes return at memory speed.
	Fdatasync SyncMethod = iota
	// Fsync is Fdatasync with fsync(2): it also flushes metadata that is not
	// needed to read the data back (timestamps). InnoDB's default
	// innodb_flush_method = fsync, PostgreSQL wal_sync_method = fsync. Cost:
	// on a preallocated segment usually the same as fdatasync; on some
	// filesystems an extra journal commit per sync.
	Fsync
	// ODsync opens files with O_DSYNC: every write returns only once its
	// data (and the metadata needed to read it) is durable, so no separate
	// sync is needed. InnoDB innodb_flush_method = O_DSYNC, PostgreSQL
	// wal_sync_method = open_datasync. Cost: every write waits for the
	// device, so a write is as slow as write+fdatasync and group commit
	// must batch before the write; the log issues no fsync for commits.
	ODsync
	// ODirect opens files with O_DIRECT, bypassing the page cache, and
	// syncs with fdatasync: the data reaches the device at write time but
	// is durable (past the device's volatile cache) only after the sync.
	// InnoDB innodb_flush_method = O_DIRECT. Cost: buffers, offsets and
	// lengths must be aligned to the device's block (the log pads each
	// write to whole blocks and rewrites the partial last block on the next
	// write), readers of the log read from the device, and writes wait for
	// the device even under policies that do not sync. Errors come back
	// from the write, not later from writeback. Linux only.
	ODirect
	// ODirectODsync opens files with O_DIRECT|O_DSYNC: each aligned write is
	// durable on return and bypasses the page cache; no separate sync.
	// PostgreSQL open_datasync with direct WAL I/O (debug_io_direct = wal,
	// wal_level = minimal in older releases). Cost: the padding of ODirect
	// plus the device latency of ODsync on every write. Linux only.
	ODirectODsync
	numSyncMethods
)

var methodNames = [...]string{
	Fdatasync: "fdatasync", Fsync: "fsync", ODsync: "O_DSYNC",
	ODirect: "O_DIRECT", ODirectODsync: "O_DIRECT|O_DSYNC",
}

// SyncMethods lists every method, default first.
func SyncMethods() []SyncMethod {
	return []SyncMethod{Fdatasync, Fsync, ODsync, ODirect, ODirectODsync}
}

// String returns the method's name as InnoDB and PostgreSQL spell the flag
// or call: "fdatasync", "fsync", "O_DSYNC", "O_DIRECT", "O_DIRECT|O_DSYNC".
func (m SyncMethod) String() string {
	if m < numSyncMethods {
		return methodNames[m]
	}
	return fmt.Sprintf("SyncMethod(%d)", int(m))
}

// Valid reports whether m is one of the defined methods.
func (m SyncMethod) Valid() bool { return m < numSyncMethods }

// Direct reports whether m opens files with O_DIRECT.
func (m SyncMethod) Direct() bool { return m == ODirect || m == ODirectODsync }

// WriteThrough reports whether every write of m is durable on return
// (O_DSYNC), so that no separate sync is needed.
func (m SyncMethod) WriteThrough() bool { return m == ODsync || m == ODirectODsync }

// WithoutDirect returns m without O_DIRECT and with the same durability:
// ODirect becomes Fdatasync, ODirectODsync becomes ODsync; other methods
// are returned as they are.
func (m SyncMethod) WithoutDirect() SyncMethod {
	switch m {
	case ODirect:
		return Fdatasync
	case ODirectODsync:
		return ODsync
	}
	return m
}

// ParseSyncMethod returns the method named s, as String spells it or in
// lower case with "+" or "|" between flags, e.g. "o_direct+o_dsync".
func ParseSyncMethod(s string) (SyncMethod, error) {
	norm := strings.ToLower(strings.ReplaceAll(strings.TrimSpace(s), "+", "|"))
	for _, m := range SyncMethods() {
		if strings.ToLower(m.String()) == norm {
			return m, nil
		}
	}
	return 0, fmt.Errorf("vfs: unknown sync method %q (want fdatasync, fsync, O_DSYNC, O_DIRECT or O_DIRECT|O_DSYNC)", s)
}

// AlignmentSource says where the alignment f.Alignment() reports came from:
// "statx STATX_DIOALIGN", "sysfs logical_block_size of MAJ:MIN", "default
// 4096" (the OS found neither), "MemFS" for a [MemFS] file, or "none" when f
// was not opened with O_DIRECT. A File that wraps another (a fault
// injector, a test's wrapper) answers for the file it wraps by implementing
// Unwrap() File.
func AlignmentSource(f File) string {
	for {
		if s, ok := f.(interface{ alignmentSource() string }); ok {
			return s.alignmentSource()
		}
		u, ok := f.(interface{ Unwrap() File })
		if !ok {
			break
		}
		f = u.Unwrap()
	}
	if f.Alignment() <= 1 {
		return "none"
	}
	return "unknown"
}

// MarshalText returns [SyncMethod.String] as bytes, so that a SyncMethod is
// written by its name ("O_DIRECT") in JSON, YAML and TOML instead of as a
// number, and can be used with [flag.TextVar]. An undefined method returns
// an error. Safe for concurrent use.
func (m SyncMethod) MarshalText() ([]byte, error) {
	if !m.Valid() {
		return nil, fmt.Errorf("vfs: cannot marshal undefined %s", m)
	}
	return []byte(m.String()), nil
}

// UnmarshalText sets *m to [ParseSyncMethod](string(text)): any spelling
// ParseSyncMethod accepts. On error *m is left unchanged. It writes *m, so
// it must not run concurrently with other uses of the same *m.
func (m *SyncMethod) UnmarshalText(text []byte) error {
	v, err := ParseSyncMethod(string(text))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Writebacker is implemented by files that can start writing a range of
// their dirty pages to the device without making it durable: Linux
// sync_file_range(2), which PostgreSQL's *_flush_after settings and
// RocksDB's bytes_per_sync use to spread writeback out instead of leaving it
// to one large fsync. The files of [OS] implement it on Linux.
type Writebacker interface {
	// Writeback starts writeback of the file's bytes [off, off+n) and
	// returns without waiting for it (SYNC_FILE_RANGE_WRITE); with wait it
	// also waits for writeback of the range, started before or by this
	// call, to complete (SYNC_FILE_RANGE_WAIT_BEFORE|WRITE|WAIT_AFTER),
	// which paces a writer to the device. Neither makes anything durable:
	// only Sync does (no file metadata, no device cache flush).
	Writeback(off, n int64, wait bool) error
}

// Allocator is implemented by files that can reserve their blocks without
// writing them: Linux fallocate(2) with mode 0, which InnoDB
// (innodb_extend_and_initialize=OFF) and etcd's wal use to preallocate
// files. The reserved bytes read as zeros, an allocation fails with ENOSPC
// up front rather than at a later write, and writing into the range later
// needs no block allocation. The extents stay marked unwritten until data
// reaches them, so an fdatasync after such a write also commits that
// marking (a small journal write on ext4 and XFS): cheaper than an append
// that grows the file, dearer than a write into zeros written earlier.
type Allocator interface {
	// Allocate makes the file at least size bytes long and reserves blocks
	// for [0, size); bytes not written before read as zeros. It does not
	// shrink the file, and makes nothing durable: a Sync does.
	Allocate(size int64) error
}

// Allocate reserves blocks for f's bytes [0, size) (see [Allocator]). It
// returns an error matching errors.ErrUnsupported where f does not
// implement Allocator or its filesystem cannot allocate (then the caller
// writes zeros instead), an error matching syscall.ENOSPC or
// syscall.EDQUOT if the space is not there.
func Allocate(f File, size int64) error {
	if a, ok := f.(Allocator); ok {
		return a.Allocate(size)
	}
	return fmt.Errorf("vfs: allocating %d bytes: %w", size, errors.ErrUnsupported)
}

// Writeback asks f to start writeback of its bytes [off, off+n) (see
// [Writebacker]). It is a hint: it returns nil at once where f does not
// implement Writebacker (MemFS, platforms without sync_file_range), and an
// error only from the system call.
func Writeback(f File, off, n int64, wait bool) error {
	if w, ok := f.(Writebacker); ok && n > 0 {
		return w.Writeback(off, n, wait)
	}
	return nil
}
