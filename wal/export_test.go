package wal

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

// The format versions this build writes: for a zero-filled segment and for
// a recycled one.
const (
	SegmentVersion  = segmentVersion
	RecycledVersion = recycledVersion
)
