//go:build crashlab_broken

package main

// brokenBuild names the negative-control build (wal/crashlab_broken.go):
// SyncEveryCommit acknowledges after the write alone, so the lab must fail.
const brokenBuild = "crashlab_broken: no sync at all"
