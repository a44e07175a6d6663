//go:build crashlab_late

package main

// brokenBuild names the negative-control build (wal/crashlab_late.go): each
// group is acknowledged one fsync early (synced before its write), so the
// lab must find the newest acknowledged commits lost.
const brokenBuild = "crashlab_late: each group acknowledged one fsync early"
