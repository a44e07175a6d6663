//go:build !linux

package main

import "os"

// datasyncName names the call datasync makes, for the disk table.
const datasyncName = "fsync"

// datasync makes f durable with the platform's (*os.File).Sync.
func datasync(f *os.File) error { return f.Sync() }
