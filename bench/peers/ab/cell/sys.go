//go:build unix

package main

import "syscall"

// cpuTime returns the process's user+system CPU time so far in
// nanoseconds (every thread), or -1 where it cannot be read.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return -1
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
