package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasyncName names the call datasync makes, for the disk table.
const datasyncName = "fdatasync"

// datasync makes f's data durable with fdatasync(2), as the log does.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
