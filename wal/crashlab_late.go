//go:build crashlab_late

package wal

// A negative control for bench/cmd/crashlab, never for use: built with
// -tags crashlab_late, a group that needs a sync is synced before its write
// instead of after it, and reported synced once written. Each acknowledged
// group is then one fsync early: it becomes durable only at the next group's
// sync. The crash lab must report the newest acknowledged commits lost.
const syncBeforeWrite = true
