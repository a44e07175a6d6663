package vfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// fdatasyncFile uses F_FULLFSYNC: on darwin a plain fsync leaves the data in
// the drive's volatile cache.
func fdatasyncFile(f *os.File) error {
	_, err := unix.FcntlInt(f.Fd(), unix.F_FULLFSYNC, 0)
	return err
}

func fsyncFile(f *os.File) error { return fdatasyncFile(f) }

func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }

// noFollow makes Lock refuse a symbolic link instead of following it.
const noFollow = unix.O_NOFOLLOW

// methodFlags returns the open flags of m. darwin has no O_DIRECT (F_NOCACHE
// is a hint, not an alignment contract), so the direct methods are refused.
// Its O_DSYNC does not flush the drive's cache as F_FULLFSYNC does.
func methodFlags(m SyncMethod) (int, error) {
	switch m {
	case ODsync:
		return unix.O_DSYNC, nil
	case ODirect, ODirectODsync:
		return 0, fmt.Errorf("%w: %v: darwin has no O_DIRECT", ErrSyncMethodUnsupported, m)
	}
	return 0, nil
}

func dioAlignment(*os.File) (int, string) { return 1, "none" }

func fsTypeName(string) string { return "darwin" }

// writebackFile is a no-op: darwin has no sync_file_range.
func writebackFile(*os.File, int64, int64, bool) error { return nil }

// allocateFile is unsupported: no fallocate on darwin (the caller writes
// zeros instead).
func allocateFile(*os.File, int64) error { return errors.ErrUnsupported }
