package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// MemFS is an in-memory [FS] that remembers what was synced, so that a test
// can crash it ([MemFS.ProcessCrash], [MemFS.PowerLoss]) and look at what a
// real disk might have kept. Create one with [NewMem]; the zero value is not
// usable. All methods, and the methods of the files it opens, are safe for
// concurrent use (one mutex guards the whole filesystem).
//
// The model:
//
//   - Each file (inode) has its current content, the page cache, and its
//     durable content, as of its last successful [File.Sync]. A Sync makes
//     the current content and size durable, except bytes lost to an earlier
//     failed sync (see [MemFS.FailNextSync]). Truncate and Allocate
//     ([Allocator]), like WriteAt, change only the current content.
//   - Each directory has its current entries (name → inode) and its durable
//     entries. Create, Rename, Remove and the file creation done by Lock
//     change the current entries and are recorded as pending directory
//     changes. [FS.SyncDir] of a directory makes durable every pending change
//     that touches it, together with the earlier pending changes those depend
//     on (the create of a file it renames, a change to the same name), as a
//     journaling filesystem would; other pending changes stay pending.
//   - A renamed file keeps its inode, and an inode removed from its directory
//     lives on while a [File] still has it open.
//   - A directory made by MkdirAll keeps its own entries as any directory
//     does, but its entry in its parent is durable only after [FS.SyncDir]
//     of the parent, as on Linux: a [MemFS.PowerLoss] before that loses the
//     directory and everything under it (DropAll), or may (the random
//     modes). Directories cannot be renamed or removed.
//   - A file opened with a write-through [SyncMethod] (O_DSYNC) makes the
//     bytes of each WriteAt, and the size they reach, durable before WriteAt
//     returns; Sync still works as for any file.
//   - A file opened with O_DIRECT ([SyncMethod.Direct]) has the alignment
//     set by [MemFS.SetDirectIOAlignment] (512 bytes by default): a ReadAt
//     or WriteAt whose offset, length or buffer address is not a multiple
//     of it fails with EINVAL, as Linux fails it, so misaligned direct I/O
//     cannot pass a test. Its writes are not durable before Sync (the
//     device's cache), as with O_DIRECT on a disk.
//
// Names are cleaned with filepath.Clean; "/" and "." exist from the start.
type MemFS struct {
	mu       sync.Mutex
	dirs     map[string]map[string]*inode // current entries per directory
	durable  map[string]map[string]*inode // durable entries per directory
	pending  []dirOp                      // unsynced directory changes, oldest first
	newDirs  map[string]bool              // made by MkdirAll; entry in the parent not yet synced
	locks    map[string]bool
	failNext error
	dioAlign int // alignment of O_DIRECT files; 0: O_DIRECT is refused

	syncs    atomic.Int64
	syncDirs atomic.Int64
}

var _ FS = (*MemFS)(nil)

// inode is one file's content state.
type inode struct {
	data    []byte // current content: the page cache
	durable []byte // content as of the last successful sync
	// lost holds the byte ranges whose writeback failed (FailNextSync) and
	// that were not written again since: a later sync keeps their durable
	// content instead of making data durable. Sorted, disjoint, within data.
	lost []span
}

type span struct{ lo, hi int64 } // [lo, hi)

type dirOpKind int

const (
	dirCreate dirOpKind = iota
	dirRename
	dirRemove
)

// dirOp is one unsynced directory change. For a rename, dir/name is the
// source and newDir/newName the target; ino is the inode it moves, creates
// or removes.
type dirOp struct {
	kind            dirOpKind
	dir, name       string
	newDir, newName string
	ino             *inode
}

// NewMem returns an empty MemFS holding only the root directories "/" and
// ".".
func NewMem() *MemFS {
	m := &MemFS{
		dirs:     map[string]map[string]*inode{},
		durable:  map[string]map[string]*inode{},
		locks:    map[string]bool{},
		newDirs:  map[string]bool{},
		dioAlign: SectorSize,
	}
	for _, d := range []string{"/", "."} {
		m.dirs[d] = map[string]*inode{}
		m.durable[d] = map[string]*inode{}
	}
	return m
}

func pathErr(op, path string, err error) error { return &fs.PathError{Op: op, Path: path, Err: err} }

// split cleans name and returns its directory and base name.
func split(name string) (clean, dir, base string) {
	clean = filepath.Clean(name)
	return clean, filepath.Dir(clean), filepath.Base(clean)
}

// lookup returns the inode at name in the current entries. It reports
// fs.ErrNotExist for a missing file or directory and EISDIR for a directory.
// m.mu must be held.
func (m *MemFS) lookup(op, name string) (*inode, error) {
	clean, dir, base := split(name)
	if _, ok := m.dirs[clean]; ok {
		return nil, pathErr(op, name, syscall.EISDIR)
	}
	ents, ok := m.dirs[dir]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	ino, ok := ents[base]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	return ino, nil
}

// create adds a new empty file at name, recording a pending create.
// m.mu must be held.
func (m *MemFS) create(op, name string) (*inode, error) {
	clean, dir, base := split(name)
	ents, ok := m.dirs[dir]
	if !ok {
		return nil, pathErr(op, name, fs.ErrNotExist)
	}
	if _, isDir := m.dirs[clean]; isDir {
		return nil, pathErr(op, name, fs.ErrExist)
	}
	if _, ok := ents[base]; ok {
		return nil, pathErr(op, name, fs.ErrExist)
	}
	ino := &inode{}
	ents[base] = ino
	m.pending = append(m.pending, dirOp{kind: dirCreate, dir: dir, name: base, ino: ino})
	return ino, nil
}

// SetDirectIOAlignment sets the alignment in bytes, a power of two, that
// files opened later with O_DIRECT require of their reads and writes (the
// default is 512). 0 makes MemFS refuse O_DIRECT at open with EINVAL, like
// a filesystem without direct I/O. It panics on a value that is neither 0
// nor a power of two.
func (m *MemFS) SetDirectIOAlignment(align int) {
	if align < 0 || align&(align-1) != 0 {
		panic(fmt.Sprintf("vfs: direct-I/O alignment %d is not a power of two", align))
	}
	m.mu.Lock()
	m.dioAlign = align
	m.mu.Unlock()
}

// checkMethod returns the alignment a file opened with sm gets, or the error
// open(2) would give for sm. m.mu must be held.
func (m *MemFS) checkMethod(name string, sm SyncMethod) (align int, err error) {
	switch {
	case !sm.Valid():
		return 0, pathErr("open", name, fmt.Errorf("%w: %v", ErrSyncMethodUnsupported, sm))
	case !sm.Direct():
		return 1, nil
	case m.dioAlign == 0:
		return 0, pathErr("open", name, fmt.Errorf("%w: %v on a MemFS without direct I/O: %w", ErrSyncMethodUnsupported, sm, syscall.EINVAL))
	}
	return m.dioAlign, nil
}

// Create creates name exclusively, as [FS.Create], with method sm. It returns
// a *fs.PathError matching fs.ErrExist if name exists, fs.ErrNotExist if
// its directory does not, and ErrSyncMethodUnsupported and EINVAL for a
// direct method when direct I/O is off ([MemFS.SetDirectIOAlignment]). The
// new entry is durable after SyncDir of its directory, the content after
// [File.Sync] (or each write, for a write-through sm).
func (m *MemFS) Create(name string, sm SyncMethod) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	align, err := m.checkMethod(name, sm)
	if err != nil {
		return nil, err
	}
	ino, err := m.create("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, ino: ino, name: name, method: sm, align: align}, nil
}

// Open opens an existing file read-only, as [FS.Open]. A missing file gives
// a *fs.PathError matching fs.ErrNotExist.
func (m *MemFS) Open(name string) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, ino: ino, name: name, readOnly: true, align: 1}, nil
}

// OpenReadWrite opens an existing file for reading and writing with method
// sm, as [FS.OpenReadWrite]. A missing file gives a *fs.PathError matching
// fs.ErrNotExist; a refused sm, as for Create.
func (m *MemFS) OpenReadWrite(name string, sm SyncMethod) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	align, err := m.checkMethod(name, sm)
	if err != nil {
		return nil, err
	}
	ino, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, ino: ino, name: name, method: sm, align: align}, nil
}

// Rename moves oldname to newname, replacing any file at newname, as
// [FS.Rename]; the file keeps its content state. The change is durable after
// SyncDir. A missing oldname or target directory gives a *fs.PathError
// matching fs.ErrNotExist; directories cannot be renamed.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, err := m.lookup("rename", oldname)
	if err != nil {
		return err
	}
	_, dir, base := split(oldname)
	newClean, newDir, newBase := split(newname)
	if _, isDir := m.dirs[newClean]; isDir {
		return pathErr("rename", newname, syscall.EISDIR)
	}
	ents, ok := m.dirs[newDir]
	if !ok {
		return pathErr("rename", newname, fs.ErrNotExist)
	}
	if dir == newDir && base == newBase {
		return nil
	}
	delete(m.dirs[dir], base)
	ents[newBase] = ino
	m.pending = append(m.pending, dirOp{kind: dirRename, dir: dir, name: base, newDir: newDir, newName: newBase, ino: ino})
	return nil
}

// Remove removes the file name, as [FS.Remove]; open files keep working on
// its content. The removal is durable after SyncDir. A missing file gives a
// *fs.PathError matching fs.ErrNotExist; directories cannot be removed.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino, err := m.lookup("remove", name)
	if err != nil {
		return err
	}
	_, dir, base := split(name)
	delete(m.dirs[dir], base)
	m.pending = append(m.pending, dirOp{kind: dirRemove, dir: dir, name: base, ino: ino})
	return nil
}

// List returns the sorted base names of the files in dir (current entries,
// synced or not), as [FS.List]. A missing dir gives a *fs.PathError matching
// fs.ErrNotExist.
func (m *MemFS) List(dir string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ents, ok := m.dirs[filepath.Clean(dir)]
	if !ok {
		return nil, pathErr("open", dir, fs.ErrNotExist)
	}
	names := make([]string, 0, len(ents))
	for name := range ents {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// MkdirAll creates dir and any missing parents, as [FS.MkdirAll]. perm is
// ignored. Each new directory's entry is durable only after SyncDir of its
// parent; until then a PowerLoss may lose it with all it holds. A file in the way gives a *fs.PathError matching
// syscall.ENOTDIR.
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, ok := m.dirs[d]; ok {
			break
		}
		if ents, ok := m.dirs[filepath.Dir(d)]; ok {
			if _, isFile := ents[filepath.Base(d)]; isFile {
				return pathErr("mkdir", d, syscall.ENOTDIR)
			}
		}
		missing = append(missing, d)
	}
	for _, d := range missing {
		m.dirs[d] = map[string]*inode{}
		m.durable[d] = map[string]*inode{}
		m.newDirs[d] = true
	}
	return nil
}

// SyncDir makes durable the pending changes to dir's entries, and the
// earlier pending changes they depend on, as [FS.SyncDir]. It counts toward
// [MemFS.SyncDirCount]. A missing dir gives a *fs.PathError matching
// fs.ErrNotExist.
func (m *MemFS) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if _, ok := m.dirs[dir]; !ok {
		return pathErr("syncdir", dir, fs.ErrNotExist)
	}
	include := make([]bool, len(m.pending))
	for i, op := range m.pending {
		include[i] = op.dir == dir || (op.kind == dirRename && op.newDir == dir)
	}
	for j := len(m.pending) - 1; j >= 0; j-- {
		if !include[j] {
			continue
		}
		for i := range j {
			if !include[i] && m.pending[i].dependsOn(m.pending[j]) {
				include[i] = true
			}
		}
	}
	kept := m.pending[:0]
	for i, op := range m.pending {
		if include[i] {
			op.apply(m.durable)
		} else {
			kept = append(kept, op)
		}
	}
	clear(m.pending[len(kept):])
	m.pending = kept
	for d := range m.newDirs {
		if filepath.Dir(d) == dir {
			delete(m.newDirs, d) // its entry in dir is durable now
		}
	}
	m.syncDirs.Add(1)
	return nil
}

// dependsOn reports whether ops a and b share an inode or a directory entry,
// so that b cannot be made durable without a.
func (a dirOp) dependsOn(b dirOp) bool {
	if a.ino == b.ino {
		return true
	}
	for _, ka := range a.keys() {
		if slices.Contains(b.keys(), ka) {
			return true
		}
	}
	return false
}

func (a dirOp) keys() []string {
	k := []string{a.dir + "\x00" + a.name}
	if a.kind == dirRename {
		k = append(k, a.newDir+"\x00"+a.newName)
	}
	return k
}

// apply performs op on tree if it still makes sense there (its source holds
// its inode, its target name is free for a create); otherwise it does
// nothing. Used to replay pending changes onto durable entries.
func (a dirOp) apply(tree map[string]map[string]*inode) {
	ents := tree[a.dir]
	switch a.kind {
	case dirCreate:
		if _, ok := ents[a.name]; !ok && ents != nil {
			ents[a.name] = a.ino
		}
	case dirRemove:
		if ents[a.name] == a.ino {
			delete(ents, a.name)
		}
	case dirRename:
		if target := tree[a.newDir]; ents[a.name] == a.ino && target != nil {
			delete(ents, a.name)
			target[a.newName] = a.ino
		}
	}
}

// Lock takes an exclusive lock on name within this MemFS, creating the file
// if it is missing, as [FS.Lock]. While the lock is held another Lock of the
// same name returns an error matching [ErrLocked]. Closing the returned
// Closer releases the lock; closing it again returns fs.ErrClosed.
func (m *MemFS) Lock(name string) (io.Closer, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	clean := filepath.Clean(name)
	if m.locks[clean] {
		return nil, fmt.Errorf("%w: %s", ErrLocked, name)
	}
	if _, err := m.lookup("lock", name); errors.Is(err, fs.ErrNotExist) {
		if _, err := m.create("lock", name); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	m.locks[clean] = true
	return &memLock{fs: m, name: clean}, nil
}

type memLock struct {
	fs     *MemFS
	name   string
	closed bool
}

func (l *memLock) Close() error {
	l.fs.mu.Lock()
	defer l.fs.mu.Unlock()
	if l.closed {
		return pathErr("unlock", l.name, fs.ErrClosed)
	}
	l.closed = true
	delete(l.fs.locks, l.name)
	return nil
}

// FailNextSync makes the next [File.Sync] of any file of this MemFS fail
// with err, wrapped in a *fs.PathError (so errors.Is(err, syscall.EIO) holds
// when err is syscall.EIO). A nil err cancels a pending failure.
//
// This models Linux's "fsyncgate" behaviour (docs/semantics.md, A failed
// fsync): the failed sync makes nothing durable, and every byte of the file at
// the time of the failure is marked clean but lost. Later syncs of that file
// return nil, but for the lost byte ranges they keep the durable content the
// file had before the failure (zeros beyond its durable size); only the ranges
// written or extended by Truncate after the failure become durable. So a
// PowerLoss after the failure loses those bytes in every mode, even [KeepAll].
// The page cache keeps them: reads, and [MemFS.ProcessCrash], still see them,
// as Linux usually does until the pages are evicted.
func (m *MemFS) FailNextSync(err error) {
	m.mu.Lock()
	m.failNext = err
	m.mu.Unlock()
}

// SyncCount returns the number of [File.Sync] calls on this MemFS's files
// that returned nil. Safe for concurrent use.
func (m *MemFS) SyncCount() int64 { return m.syncs.Load() }

// SyncDirCount returns the number of [MemFS.SyncDir] calls that returned
// nil. Safe for concurrent use.
func (m *MemFS) SyncDirCount() int64 { return m.syncDirs.Load() }

// memFile is an open file of a MemFS. Its fields are guarded by fs.mu.
type memFile struct {
	fs       *MemFS
	ino      *inode
	name     string
	readOnly bool
	closed   bool
	method   SyncMethod
	align    int // 1 unless opened with O_DIRECT
}

// Alignment returns the direct-I/O alignment, or 1 without O_DIRECT.
func (f *memFile) Alignment() int { return f.align }

func (f *memFile) alignmentSource() string {
	if f.align > 1 {
		return "MemFS"
	}
	return "none"
}

// checkAligned returns EINVAL for direct I/O on p at off that is not
// aligned, as Linux does.
func (f *memFile) checkAligned(op string, p []byte, off int64) error {
	if f.align <= 1 {
		return nil
	}
	a := int64(f.align)
	if off%a != 0 || int64(len(p))%a != 0 || (len(p) > 0 && int64(uintptr(unsafe.Pointer(unsafe.SliceData(p))))%a != 0) {
		return pathErr(op, f.name, fmt.Errorf("misaligned direct I/O (offset %d, length %d, alignment %d): %w", off, len(p), a, syscall.EINVAL))
	}
	return nil
}

// check returns the error for op on f, or nil. f.fs.mu must be held.
func (f *memFile) check(op string, write bool) error {
	if f.closed {
		return pathErr(op, f.name, fs.ErrClosed)
	}
	if write && f.readOnly {
		return pathErr(op, f.name, syscall.EBADF)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("read", f.name, syscall.EINVAL)
	}
	if err := f.checkAligned("read", p, off); err != nil {
		return 0, err
	}
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// WriteAt copies p into the page cache at off, zero-filling any gap past the
// end, and then scrambles p (every byte inverted) so that callers that reuse
// a buffer still being written fail fast. With a write-through method the
// bytes are also made durable; with O_DIRECT a misaligned p or off fails
// with EINVAL and writes nothing.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr("write", f.name, syscall.EINVAL)
	}
	if err := f.checkAligned("write", p, off); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if end > int64(len(f.ino.data)) {
		f.ino.data = resize(f.ino.data, end)
	}
	copy(f.ino.data[off:], p)
	f.ino.lost = subtractSpan(f.ino.lost, span{off, end})
	if f.method.WriteThrough() { // O_DSYNC: these bytes and the size they reach are durable
		if end > int64(len(f.ino.durable)) {
			f.ino.durable = resize(f.ino.durable, end)
		}
		copy(f.ino.durable[off:end], p)
	}
	for i := range p {
		p[i] = ^p[i]
	}
	return len(p), nil
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	if err := f.fs.failNext; err != nil {
		f.fs.failNext = nil
		if n := int64(len(f.ino.data)); n > 0 {
			f.ino.lost = []span{{0, n}}
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return err
		}
		return pathErr("sync", f.name, err)
	}
	if len(f.ino.lost) == 0 {
		// Reuse the durable buffer (nothing else aliases it), so that a
		// sync allocates nothing in steady state and the log's zero-alloc
		// commit path can be measured on a MemFS.
		f.ino.durable = append(f.ino.durable[:0], f.ino.data...)
	} else {
		f.ino.durable = f.ino.flushTarget()
	}
	f.fs.syncs.Add(1)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("truncate", f.name, syscall.EINVAL)
	}
	f.ino.data = resize(f.ino.data, size)
	f.ino.lost = subtractSpan(f.ino.lost, span{size, 1<<63 - 1})
	return nil
}

// Allocate implements [Allocator]: it grows the file to size bytes of
// zeros (never shrinks it), durable at the next Sync, as a Truncate that
// grows it would.
func (f *memFile) Allocate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("fallocate", true); err != nil {
		return err
	}
	if size < 0 {
		return pathErr("fallocate", f.name, syscall.EINVAL)
	}
	if size > int64(len(f.ino.data)) {
		f.ino.data = resize(f.ino.data, size)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return 0, err
	}
	return int64(len(f.ino.data)), nil
}

// Close closes the file; it does not sync. Closing twice returns an error
// matching fs.ErrClosed.
func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.check("close", false); err != nil {
		return err
	}
	f.closed = true
	return nil
}

// resize returns b cut or zero-extended to n bytes. A cut slice has its
// capacity cut too, so growing it again zero-fills instead of exposing the
// old bytes.
func resize(b []byte, n int64) []byte {
	if n <= int64(len(b)) {
		return b[:n:n]
	}
	out := make([]byte, n)
	copy(out, b)
	return out
}

// flushTarget returns what the inode's content would be once written back:
// the page cache, except the lost ranges, which keep their durable content
// (zeros beyond the durable size). It returns a new slice.
func (ino *inode) flushTarget() []byte {
	t := slices.Clone(ino.data)
	for _, s := range ino.lost {
		for i := s.lo; i < s.hi; i++ {
			t[i] = 0
			if i < int64(len(ino.durable)) {
				t[i] = ino.durable[i]
			}
		}
	}
	return t
}

// subtractSpan removes r from the sorted disjoint spans ss.
func subtractSpan(ss []span, r span) []span {
	var out []span
	for _, s := range ss {
		if s.hi <= r.lo || s.lo >= r.hi {
			out = append(out, s)
			continue
		}
		if s.lo < r.lo {
			out = append(out, span{s.lo, r.lo})
		}
		if s.hi > r.hi {
			out = append(out, span{r.hi, s.hi})
		}
	}
	return out
}
