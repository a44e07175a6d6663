package vfs

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasyncFile flushes f's data, and the metadata needed to read it back,
// to stable storage.
func fdatasyncFile(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// fsyncFile flushes f's data and all its metadata (used for directories).
func fsyncFile(f *os.File) error { return unix.Fsync(int(f.Fd())) }

func lockFile(f *os.File) error { return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) }
