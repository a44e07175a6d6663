package wal

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/durawal/durawal/wal/vfs"
)

// heldDirs counts, by cleaned absolute path, the directories whose lock a
// Log of this process holds, so that a second Open of one says the lock is
// held by this process rather than by another.
var heldDirs struct {
	sync.Mutex
	m map[string]int
}

// heldKey is the key of dir in heldDirs.
func heldKey(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return filepath.Clean(dir)
}

// noteHeld records that this process holds (held) or released the lock of
// dir.
func noteHeld(dir string, held bool) {
	k := heldKey(dir)
	heldDirs.Lock()
	defer heldDirs.Unlock()
	if heldDirs.m == nil {
		heldDirs.m = map[string]int{}
	}
	if held {
		heldDirs.m[k]++
	} else if heldDirs.m[k]--; heldDirs.m[k] <= 0 {
		delete(heldDirs.m, k)
	}
}

// heldHereError is the error of an Open whose lock a Log of this same
// process holds. It matches vfs.ErrLocked.
type heldHereError struct{ dir string }

func (e *heldHereError) Error() string {
	return fmt.Sprintf("wal: open %s: lock held by this process: a Log of this process has the directory open (Close it before opening it again)", e.dir)
}

// Is makes errors.Is(err, vfs.ErrLocked) hold.
func (e *heldHereError) Is(target error) bool { return target == vfs.ErrLocked }

// lockError is the error of an Open whose Lock of dir failed with err.
func lockError(dir string, err error) error {
	if errors.Is(err, vfs.ErrLocked) {
		heldDirs.Lock()
		here := heldDirs.m[heldKey(dir)] > 0
		heldDirs.Unlock()
		if here {
			return &heldHereError{dir: dir}
		}
	}
	return fmt.Errorf("wal: open %s: %w", dir, foreignIfNotRegular(err))
}

// refuseForeign returns the error Open fails with if dir holds a file the
// log did not create, before Open creates anything in it (the lock file): a
// directory Open refuses is left as it was. Recovery checks again under the
// lock.
func (l *Log) refuseForeign(dir string) error {
	names, err := l.fs.List(dir)
	if err != nil {
		return nil // recovery reports it
	}
	if _, err := classifyDir(l.fs, dir, names, true); errors.Is(err, ErrForeignFile) {
		return err
	}
	return nil
}
