package vfs

import "errors"

// ErrLocked is returned by [FS.Lock] when another holder has the lock.
var ErrLocked = errors.New("vfs: lock held by another process")
