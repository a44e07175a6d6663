//go:build !linux

package main

import "runtime"

// ktracer counts a process's system calls through Linux's tracefs; there
// is none on other systems.
type ktracer struct{}

// openKtracer reports that the kernel cannot be asked outside Linux.
func openKtracer(string) (*ktracer, string) { return nil, "no tracefs on " + runtime.GOOS }

func (k *ktracer) start(int) error                  { return nil }
func (k *ktracer) stop(string) (kernelCount, error) { return kernelCount{}, nil }
func (k *ktracer) close()                           {}
