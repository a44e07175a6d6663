// Package longtest says whether the tests should run their long sweeps in
// full. The sweeps that crash a log at every filesystem operation or run
// thousands of random power-loss workloads run a smaller, still meaningful
// size by default, so that the README's test command finishes in about two
// minutes on two cores; CI (.ci/run) sets DURAWAL_LONG=1 and runs them in
// full:
//
//	DURAWAL_LONG=1 go test ./wal
//
// It uses only the standard library and is imported only by tests.
package longtest

import "os"

// Env is the environment variable that turns the long sweeps on.
const Env = "DURAWAL_LONG"

// Long reports whether the environment variable DURAWAL_LONG is "1": the
// tests then run every sweep at its full size. It is safe for concurrent
// use.
func Long() bool { return os.Getenv(Env) == "1" }

// Pick returns long when [Long] reports true and short otherwise: the one
// place a test states both sizes of a sweep.
func Pick[T any](long, short T) T {
	if Long() {
		return long
	}
	return short
}
