//go:build !linux && !darwin

package vfs

import "os"

func fdatasyncFile(f *os.File) error { return f.Sync() }
func fsyncFile(f *os.File) error     { return f.Sync() }
func lockFile(f *os.File) error      { return nil } // no portable advisory lock
