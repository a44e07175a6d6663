package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves f's bytes [0, size) with fallocate(2): mode 0, or
// FALLOC_FL_ZERO_RANGE if zeroRange. A filesystem that cannot gives an
// error matching errNoAllocate.
func allocate(f *os.File, size int64, zeroRange bool) error {
	mode := uint32(0)
	if zeroRange {
		mode = unix.FALLOC_FL_ZERO_RANGE
	}
	for {
		err := unix.Fallocate(int(f.Fd()), mode, 0, size)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return fmt.Errorf("%w: fallocate mode %#x: %v", errNoAllocate, mode, err)
		}
		return err
	}
}

// writeback starts writeback of f's bytes [off, off+n) (sync_file_range
// with SYNC_FILE_RANGE_WRITE), as the log hands its zeros ahead to the
// device.
func writeback(f *os.File, off, n int64) error {
	return unix.SyncFileRange(int(f.Fd()), off, n, unix.SYNC_FILE_RANGE_WRITE)
}
