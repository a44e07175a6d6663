package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// OS returns the operating system's filesystem. Syncs are fdatasync on Linux
// (F_FULLFSYNC on darwin, fsync elsewhere), or fsync for the [Fsync]
// method; directory syncs are fsync of the directory. [ODsync] opens with
// O_DSYNC (O_SYNC where the platform has no O_DSYNC). [ODirect] and
// [ODirectODsync] open with O_DIRECT on Linux and fail with
// [ErrSyncMethodUnsupported] elsewhere; a filesystem that refuses O_DIRECT
// gives an error matching both ErrSyncMethodUnsupported and syscall.EINVAL
// that names the filesystem type. The direct-I/O alignment is asked of the
// kernel (statx STATX_DIOALIGN, Linux 6.1+), else read from the device's
// logical block size in sysfs, else taken as 4096. OS is safe for
// concurrent use.
func OS() FS { return osFS{} }

type osFS struct{}

func (osFS) Create(name string, m SyncMethod) (File, error) {
	return openOS(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, m)
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return &osFile{f: f, align: 1}, nil
}

func (osFS) OpenReadWrite(name string, m SyncMethod) (File, error) {
	return openOS(name, os.O_RDWR, m)
}

// openOS opens name with flag plus m's flags, and finds the direct-I/O
// alignment for a direct method.
func openOS(name string, flag int, m SyncMethod) (File, error) {
	if !m.Valid() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: %v", ErrSyncMethodUnsupported, m)}
	}
	extra, err := methodFlags(m)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	f, err := os.OpenFile(name, flag|extra, 0o644)
	if err != nil {
		if m.Direct() && errors.Is(err, syscall.EINVAL) {
			if flag&os.O_CREATE != 0 {
				// Some kernels create the file before the filesystem
				// refuses O_DIRECT; O_EXCL says it was ours.
				os.Remove(name)
			}
			return nil, &fs.PathError{Op: "open", Path: name,
				Err: fmt.Errorf("%w: %v on a %s filesystem: %w", ErrSyncMethodUnsupported, m, fsTypeName(name), syscall.EINVAL)}
		}
		return nil, err
	}
	o := &osFile{f: f, method: m, align: 1, alignSrc: "none"}
	if m.Direct() {
		o.align, o.alignSrc = dioAlignment(f)
	}
	return o, nil
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }
func (osFS) Remove(name string) error             { return os.Remove(name) }

func (osFS) List(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		switch t := e.Type(); {
		case t.IsRegular():
			names = append(names, e.Name())
		case t.IsDir():
		default:
			return nil, notRegular(filepath.Join(dir, e.Name()), t)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = retryEINTR(func() error { return fsyncFile(d) })
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	return nil
}

// notRegular is the ErrNotRegular error for path, an entry of mode m that
// is neither a regular file nor a directory, naming what it is.
func notRegular(path string, m fs.FileMode) error {
	kind := "a symbolic link"
	if m&fs.ModeSymlink == 0 {
		kind = "a special file (" + m.Type().String() + ")"
	}
	return fmt.Errorf("%w: %s is %s", ErrNotRegular, path, kind)
}

// Lock opens the lock file without following a symbolic link (where the
// platform can), so that a link named like it is refused (ErrNotRegular)
// rather than followed to create its target elsewhere.
func (osFS) Lock(name string) (io.Closer, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|noFollow, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(name); lerr == nil && !fi.Mode().IsRegular() {
			return nil, notRegular(name, fi.Mode())
		}
		return nil, err
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return nil, notRegular(name, fi.Mode())
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s: %w", ErrLocked, name, err)
	}
	return f, nil // closing the descriptor releases the lock
}

type osFile struct {
	f        *os.File
	method   SyncMethod
	align    int
	alignSrc string
}

func (o *osFile) ReadAt(p []byte, off int64) (int, error)  { return o.f.ReadAt(p, off) }
func (o *osFile) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }
func (o *osFile) Truncate(size int64) error                { return o.f.Truncate(size) }
func (o *osFile) Close() error                             { return o.f.Close() }
func (o *osFile) Alignment() int                           { return o.align }
func (o *osFile) alignmentSource() string                  { return o.alignSrc }

func (o *osFile) Size() (int64, error) {
	st, err := o.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (o *osFile) Sync() error {
	op, sync := "fdatasync", fdatasyncFile
	if o.method == Fsync {
		op, sync = "fsync", fsyncFile
	}
	if err := retryEINTR(func() error { return sync(o.f) }); err != nil {
		return &fs.PathError{Op: op, Path: o.f.Name(), Err: err}
	}
	return nil
}

// retryEINTR retries the system call op while it is interrupted by a signal.
// Only EINTR is retried: it means the call did not run, not that it failed.
func retryEINTR(op func() error) error {
	for {
		err := op()
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Allocate implements [Allocator] (fallocate on Linux; unsupported
// elsewhere).
func (o *osFile) Allocate(size int64) error {
	if err := retryEINTR(func() error { return allocateFile(o.f, size) }); err != nil {
		return &fs.PathError{Op: "fallocate", Path: o.f.Name(), Err: err}
	}
	return nil
}

// Writeback implements [Writebacker] (sync_file_range on Linux; a no-op
// elsewhere).
func (o *osFile) Writeback(off, n int64, wait bool) error {
	if err := retryEINTR(func() error { return writebackFile(o.f, off, n, wait) }); err != nil {
		return &fs.PathError{Op: "sync_file_range", Path: o.f.Name(), Err: err}
	}
	return nil
}
