package vfs

import "errors"

// ErrLocked is returned by [FS.Lock] when another holder has the lock.
var ErrLocked = errors.New("vfs: lock held by another process")

// ErrNotRegular is returned by [FS.List] for an entry of the directory that
// is neither a regular file nor a directory: a symbolic link, a device, a
// pipe or a socket. A log cannot tell what such an entry stands for (a
// segment moved to another disk and linked back, whose target's directory
// the log never syncs, or one whose link dangles because that disk is not
// mounted), so it refuses it rather than skip it: a log directory whose
// files were all skipped would look empty, and Open would start a new log
// over them.
var ErrNotRegular = errors.New("vfs: not a regular file")
