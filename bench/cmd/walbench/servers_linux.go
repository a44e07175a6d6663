package main

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttr makes the kernel send a server SIGTERM when walbench dies, so
// that a killed run leaves no server behind.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM} }

// syncFS writes back every dirty page of the filesystem holding dir
// (syncfs), so that what one cell left in the page cache is not written
// during the next one.
func syncFS(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
