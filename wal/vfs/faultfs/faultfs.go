// Package faultfs injects faults into a [vfs.FS]: [Inject] wraps any
// filesystem and asks an [Injector] before each operation whether it fails
// (EIO, ENOSPC, EINTR, a short write or read), and [Counter] merely counts
// the operations, so that a test can check the log's own counters against
// the system calls it made. The rules in rules.go ([OnKind], [Nth],
// [NoSpaceAfter], [ShortWriteOnNth], …) cover the common cases; an
// [InjectorFunc] any other.
//
// It is test and benchmark machinery: package wal never imports it.
package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync/atomic"

	"github.com/durawal/durawal/wal/vfs"
)

// ErrInjected is a ready error for injectors to return; it means "this
// operation failed because a test said so".
var ErrInjected = errors.New("faultfs: injected fault")

// OpKind names one kind of operation that [Inject] can fail.
type OpKind int

// The operations of [vfs.FS] and [vfs.File], one kind per method.
const (
	OpCreate OpKind = iota + 1
	OpOpen
	OpOpenReadWrite
	OpRename
	OpRemove
	OpList
	OpMkdirAll
	OpSyncDir
	OpLock
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpSize
	OpClose
	OpAllocate
	numOpKinds
)

var opNames = [...]string{
	OpCreate: "create", OpOpen: "open", OpOpenReadWrite: "openreadwrite",
	OpRename: "rename", OpRemove: "remove", OpList: "list",
	OpMkdirAll: "mkdirall", OpSyncDir: "syncdir", OpLock: "lock",
	OpRead: "read", OpWrite: "write", OpSync: "sync",
	OpTruncate: "truncate", OpSize: "size", OpClose: "close",
	OpAllocate: "allocate",
}

// String returns the operation's lower-case name, e.g. "write"; it is the Op
// of the *fs.PathError that [Inject] returns.
func (k OpKind) String() string {
	if k > 0 && k < numOpKinds {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op describes one operation about to run through an [Inject]ed FS.
type Op struct {
	Kind OpKind
	// Path is the name the operation is on: the file's name as it was
	// opened for file operations, the old name for OpRename, the directory
	// for OpList, OpMkdirAll and OpSyncDir.
	Path string
	// Offset is the byte offset for OpRead and OpWrite and the new size for
	// OpTruncate and OpAllocate; 0 otherwise.
	Offset int64
	// Len is len(p) in bytes for OpRead and OpWrite; 0 otherwise.
	Len int
	// Method is the sync method asked for by OpCreate and OpOpenReadWrite,
	// and the one the file was opened with for file operations.
	Method vfs.SyncMethod
	// Index is the 1-based sequence number of this operation among all
	// operations, of every kind, through this injected FS and its files.
	Index int64
}

// Injector decides, before each operation, whether it fails.
// Implementations must be safe for concurrent use: the FS calls MaybeError
// from whatever goroutine runs the operation.
type Injector interface {
	// MaybeError returns nil to let op run, a *ShortOp to run a read or
	// write on a prefix of its buffer, or any other error to skip op and
	// return that error.
	MaybeError(op Op) error
}

// Tracker is an [Injector] that is also told when each operation it let
// run has returned: Finished(op) is called once for every op whose
// MaybeError answer was nil, or a *ShortOp that ran a read or write on part
// of its buffer, after the wrapped FS or file returned (for Close, only
// when MaybeError let it run). An injector that models a crash uses it to
// wait for the operations already under way before it images the
// filesystem, so that no operation it admitted lands after the image and
// still reports success. Finished is called from the operation's
// goroutine and must be safe for concurrent use. [Any] and [Counted] pass
// Finished on to the Trackers they wrap.
type Tracker interface {
	Injector
	Finished(op Op)
}

// InjectorFunc adapts a function to [Injector].
type InjectorFunc func(Op) error

// MaybeError calls f(op).
func (f InjectorFunc) MaybeError(op Op) error { return f(op) }

// ShortOp is an error an [Injector] returns to make a read or write move
// only a prefix of its buffer: [Inject] runs the operation on p[:Keep] and
// returns the count with Err. For a write Err nil becomes io.ErrShortWrite;
// for a read it becomes io.ErrUnexpectedEOF (io.ReaderAt must give an error
// when it returns fewer bytes than asked). Keep is clamped to [0, len(p)];
// if it is len(p) and Err is nil the operation is simply run. For any other
// kind of operation a ShortOp fails it with Err (ErrInjected if nil).
type ShortOp struct {
	Keep int   // bytes to transfer
	Err  error // error to return with them
}

// Error describes the short operation.
func (s *ShortOp) Error() string {
	return fmt.Sprintf("faultfs: short operation (%d bytes): %v", s.Keep, s.Err)
}

// Unwrap returns s.Err.
func (s *ShortOp) Unwrap() error { return s.Err }

// Inject returns an FS that calls inj.MaybeError before each operation on
// fsys or on a file opened through it, and passes every operation whose
// answer is nil on to fsys. A non-nil answer skips the operation and is
// returned, wrapped in a *fs.PathError naming the operation and the path
// unless it already is one; a [*ShortOp] runs a read or write on part of its
// buffer instead. The one exception is Close: the underlying file is closed
// anyway, as close(2) releases the descriptor even when it reports an error.
//
// Inject retries nothing. An injected syscall.EINTR on OpSync is returned to
// the caller as is, so a test can show that the caller retries it. Closing
// the io.Closer that Lock returns is not an operation. The returned FS is
// safe for concurrent use if fsys and inj are.
func Inject(fsys vfs.FS, inj Injector) vfs.FS { return &injectFS{fs: fsys, inj: inj} }

type injectFS struct {
	fs    vfs.FS
	inj   Injector
	index atomic.Int64
}

// check asks the injector about one operation and returns the error to
// report, wrapped, or the *ShortOp for reads and writes.
func (f *injectFS) check(kind OpKind, path string, off int64, n int, m vfs.SyncMethod) (Op, error) {
	op := Op{Kind: kind, Path: path, Offset: off, Len: n, Method: m, Index: f.index.Add(1)}
	err := f.inj.MaybeError(op)
	if err == nil {
		return op, nil
	}
	if short, ok := err.(*ShortOp); ok {
		if kind == OpRead || kind == OpWrite {
			return op, short
		}
		err = short.Err
		if err == nil {
			err = ErrInjected
		}
	}
	return op, wrapOp(kind, path, err)
}

// finish tells a [Tracker] that op, which its MaybeError let run, has
// returned.
func (f *injectFS) finish(op Op) {
	if o, ok := f.inj.(Tracker); ok {
		o.Finished(op)
	}
}

func wrapOp(kind OpKind, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return &fs.PathError{Op: kind.String(), Path: path, Err: err}
}

func (f *injectFS) open(kind OpKind, name string, m vfs.SyncMethod, open func() (vfs.File, error)) (vfs.File, error) {
	op, err := f.check(kind, name, 0, 0, m)
	if err != nil {
		return nil, err
	}
	defer f.finish(op)
	file, err := open()
	if err != nil {
		return nil, err
	}
	return &injectFile{f: file, fs: f, name: name, method: m}, nil
}

func (f *injectFS) Create(name string, m vfs.SyncMethod) (vfs.File, error) {
	return f.open(OpCreate, name, m, func() (vfs.File, error) { return f.fs.Create(name, m) })
}

func (f *injectFS) Open(name string) (vfs.File, error) {
	return f.open(OpOpen, name, vfs.Fdatasync, func() (vfs.File, error) { return f.fs.Open(name) })
}

func (f *injectFS) OpenReadWrite(name string, m vfs.SyncMethod) (vfs.File, error) {
	return f.open(OpOpenReadWrite, name, m, func() (vfs.File, error) { return f.fs.OpenReadWrite(name, m) })
}

func (f *injectFS) Rename(oldname, newname string) error {
	op, err := f.check(OpRename, oldname, 0, 0, 0)
	if err != nil {
		return err
	}
	defer f.finish(op)
	return f.fs.Rename(oldname, newname)
}

func (f *injectFS) Remove(name string) error {
	op, err := f.check(OpRemove, name, 0, 0, 0)
	if err != nil {
		return err
	}
	defer f.finish(op)
	return f.fs.Remove(name)
}

func (f *injectFS) List(dir string) ([]string, error) {
	op, err := f.check(OpList, dir, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	defer f.finish(op)
	return f.fs.List(dir)
}

func (f *injectFS) MkdirAll(dir string, perm fs.FileMode) error {
	op, err := f.check(OpMkdirAll, dir, 0, 0, 0)
	if err != nil {
		return err
	}
	defer f.finish(op)
	return f.fs.MkdirAll(dir, perm)
}

func (f *injectFS) SyncDir(dir string) error {
	op, err := f.check(OpSyncDir, dir, 0, 0, 0)
	if err != nil {
		return err
	}
	defer f.finish(op)
	return f.fs.SyncDir(dir)
}

func (f *injectFS) Lock(name string) (io.Closer, error) {
	op, err := f.check(OpLock, name, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	defer f.finish(op)
	return f.fs.Lock(name)
}

type injectFile struct {
	f      vfs.File
	fs     *injectFS
	name   string
	method vfs.SyncMethod
}

// Alignment returns the wrapped file's alignment; it is not an operation.
func (f *injectFile) Alignment() int { return f.f.Alignment() }

// Unwrap returns the file f wraps, so that [vfs.AlignmentSource] reports the
// underlying file's alignment source.
func (f *injectFile) Unwrap() vfs.File { return f.f }

// Writeback passes the hint through, uninjected: it changes no durability.
func (f *injectFile) Writeback(off, n int64, wait bool) error {
	return vfs.Writeback(f.f, off, n, wait)
}

// short returns the prefix length and error of a *ShortOp, and ok=false for
// any other error.
func short(err error, n int) (keep int, serr error, ok bool) {
	s, ok := err.(*ShortOp)
	if !ok {
		return 0, nil, false
	}
	return max(0, min(s.Keep, n)), s.Err, true
}

func (f *injectFile) ReadAt(p []byte, off int64) (int, error) {
	op, err := f.fs.check(OpRead, f.name, off, len(p), f.method)
	if err == nil {
		defer f.fs.finish(op)
		return f.f.ReadAt(p, off)
	}
	keep, serr, ok := short(err, len(p))
	if !ok {
		return 0, err
	}
	defer f.fs.finish(op)
	if keep == len(p) && serr == nil {
		return f.f.ReadAt(p, off)
	}
	n, rerr := f.f.ReadAt(p[:keep], off)
	if rerr != nil {
		return n, rerr
	}
	if serr == nil {
		return n, io.ErrUnexpectedEOF
	}
	return n, wrapOp(OpRead, f.name, serr)
}

func (f *injectFile) WriteAt(p []byte, off int64) (int, error) {
	op, err := f.fs.check(OpWrite, f.name, off, len(p), f.method)
	if err == nil {
		defer f.fs.finish(op)
		return f.f.WriteAt(p, off)
	}
	keep, serr, ok := short(err, len(p))
	if !ok {
		return 0, err
	}
	defer f.fs.finish(op)
	if keep == len(p) && serr == nil {
		return f.f.WriteAt(p, off)
	}
	n, werr := f.f.WriteAt(p[:keep], off)
	if werr != nil {
		return n, werr
	}
	if serr == nil {
		serr = io.ErrShortWrite
	}
	return n, wrapOp(OpWrite, f.name, serr)
}

func (f *injectFile) Sync() error {
	op, err := f.fs.check(OpSync, f.name, 0, 0, f.method)
	if err != nil {
		return err
	}
	defer f.fs.finish(op)
	return f.f.Sync()
}

func (f *injectFile) Truncate(size int64) error {
	op, err := f.fs.check(OpTruncate, f.name, size, 0, f.method)
	if err != nil {
		return err
	}
	defer f.fs.finish(op)
	return f.f.Truncate(size)
}

// Allocate is an operation (OpAllocate): a rule can fail it like a write,
// e.g. with ENOSPC. Where the wrapped file cannot allocate, it returns the
// wrapped file's error matching errors.ErrUnsupported, as [vfs.Allocate] does.
func (f *injectFile) Allocate(size int64) error {
	op, err := f.fs.check(OpAllocate, f.name, size, 0, f.method)
	if err != nil {
		return err
	}
	defer f.fs.finish(op)
	return vfs.Allocate(f.f, size)
}

func (f *injectFile) Size() (int64, error) {
	op, err := f.fs.check(OpSize, f.name, 0, 0, f.method)
	if err != nil {
		return 0, err
	}
	defer f.fs.finish(op)
	return f.f.Size()
}

func (f *injectFile) Close() error {
	op, err := f.fs.check(OpClose, f.name, 0, 0, f.method)
	if cerr := f.f.Close(); err == nil {
		f.fs.finish(op)
		err = cerr
	}
	return err
}
