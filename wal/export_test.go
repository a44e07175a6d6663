package wal

import "time"

// WithScanWindow returns o with recovery reading segments through windows
// of n bytes (at least 48) instead of 1 MiB, so that tests on small
// segments make frames and positions straddle windows.
func WithScanWindow(o Options, n int64) Options {
	o.scanWindow = n
	return o
}

// WithUnsafeRetrySync returns o retrying a failed sync, the fsyncgate
// mistake, so a test can show what it loses.
func WithUnsafeRetrySync(o Options) Options {
	o.unsafeRetrySync = true
	return o
}

// TailWaiting reports whether a Reader waits (in Follow) for the log to
// grow: the signal a test waits for instead of sleeping.
func TailWaiting(l *Log) bool { return l.tail.waiting.Load() }

// Closing reports whether Close has begun on l: the signal a test waits
// for before it lets go of what Close must wait for.
func Closing(l *Log) bool {
	l.app.Lock()
	defer l.app.Unlock()
	return l.app.closed
}

// The format versions this build writes: for a zero-filled segment and for
// a recycled one.
const (
	SegmentVersion  = segmentVersion
	RecycledVersion = recycledVersion
)

// AgeUnsynced makes the oldest write of l not yet synced d older, as if the
// flusher had run d late, and reports whether there was one.
func AgeUnsynced(l *Log, d time.Duration) bool {
	since := l.stats.unsyncedSince.Load()
	if since == 0 || l.synced.Load() >= l.written.Load() {
		return false
	}
	return l.stats.unsyncedSince.CompareAndSwap(since, since-int64(d))
}

// AwaitPreparer waits until no goroutine is preparing a segment for l, so
// that a crash image taken next holds no half-made prepare-*.wal.tmp.
func AwaitPreparer(l *Log) {
	l.app.Lock()
	done, busy := l.prep.done, l.prep.busy
	l.app.Unlock()
	if busy {
		<-done
	}
}
