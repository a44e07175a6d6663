//go:build !crashlab_late

package wal

// syncBeforeWrite is false except in the crashlab_late negative control
// (crashlab_late.go); the compiler drops the code it guards.
const syncBeforeWrite = false
