//go:build crashlab_broken

package wal

// A negative control for bench/cmd/crashlab, never for use: built with
// -tags crashlab_broken, the log skips every commit-path sync yet advances
// the synced LSN, so SyncEveryCommit acknowledges commits after the write
// alone. The crash lab must report lost acknowledged commits with this build.
func init() {
	syncHook = func(*Log, *segment) error { return nil }
}
