//go:build !linux && !darwin

package vfs

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

func fdatasyncFile(f *os.File) error { return f.Sync() }
func fsyncFile(f *os.File) error     { return f.Sync() }
func lockFile(f *os.File) error      { return nil } // no portable advisory lock

// noFollow is 0: no portable O_NOFOLLOW; Lock still refuses a lock file that
// is not a regular file once opened.
const noFollow = 0

// methodFlags returns the open flags of m: O_SYNC stands in for O_DSYNC
// (stronger, never weaker); O_DIRECT is refused.
func methodFlags(m SyncMethod) (int, error) {
	switch m {
	case ODsync:
		return os.O_SYNC, nil
	case ODirect, ODirectODsync:
		return 0, fmt.Errorf("%w: %v on %s", ErrSyncMethodUnsupported, m, runtime.GOOS)
	}
	return 0, nil
}

func dioAlignment(*os.File) (int, string) { return 1, "none" }

func fsTypeName(string) string { return runtime.GOOS }

// writebackFile is a no-op: no sync_file_range on this platform.
func writebackFile(*os.File, int64, int64, bool) error { return nil }

// allocateFile is unsupported: no fallocate on this platform (the caller writes
// zeros instead).
func allocateFile(*os.File, int64) error { return errors.ErrUnsupported }
