package main

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// openDevCounter resolves the block device holding dir from stat's st_dev
// through /sys/dev/block/MAJ:MIN (the partition, if dir is on one), or
// returns nil and why it cannot.
func openDevCounter(dir string) (*devCounter, string) {
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return nil, "stat: " + err.Error()
	}
	major, minor := unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev))
	target, err := filepath.EvalSymlinks(fmt.Sprintf("/sys/dev/block/%d:%d", major, minor))
	if err != nil {
		return nil, fmt.Sprintf("st_dev %d:%d is not a block device (tmpfs, overlayfs, btrfs, a network filesystem?)", major, minor)
	}
	d := &devCounter{major: major, minor: minor, name: filepath.Base(target)}
	if _, err := d.bytesWritten(); err != nil {
		return nil, err.Error()
	}
	return d, ""
}

// bytesWritten returns the device's sectors written × 512.
func (d *devCounter) bytesWritten() (uint64, error) {
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return 0, err
	}
	l, err := findDiskstats(string(b), d.major, d.minor)
	if err != nil {
		return 0, err
	}
	return l.SectorsWritten * sectorSize, nil
}

// syncAll is sync(2): every filesystem's dirty data to its device.
func syncAll() { unix.Sync() }
