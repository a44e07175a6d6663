//go:build !unix

package main

// cpuTime returns -1: no getrusage here.
func cpuTime() int64 { return -1 }
