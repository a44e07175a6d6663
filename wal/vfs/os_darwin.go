package vfs

import (
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
