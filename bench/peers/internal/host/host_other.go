//go:build !linux

package host

// FSName returns "unknown": the filesystem is named on Linux only.
func FSName(string) string { return "unknown" }

// SyncAll does nothing here.
func SyncAll() {}
