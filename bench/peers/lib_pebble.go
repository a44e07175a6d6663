package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	pebblerecord "github.com/cockroachdb/pebble/record"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/durawal/durawal/bench/peers/internal/pebblewal"
)

func pebbleLib() *lib {
	return &lib{
		name:    "pebble",
		version: "github.com/cockroachdb/pebble v1.1.5 record.LogWriter",
		concurrency: "own group commit: SyncRecord under an outer mutex (pebble's commitPipeline.mu), " +
			"then wait on the WaitGroup its flush goroutine completes, as pebble's commit pipeline does",
		relaxed: "SyncRecord(p, nil, nil) (buffered in the LogWriter, no fsync; pebble's Sync=false)",
		counter: "Sync calls on the vfs.File under the LogWriter (a counting wrapper)",
		open: func(dir string, m mode) (peerLog, error) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			return pebblewal.Create(dir, m == durable, 0)
		},
		fill: func(dir string, n int, rec []byte) error {
			l, err := pebbleLib().open(dir, relaxed)
			if err != nil {
				return err
			}
			for range n {
				if err := l.Append(rec); err != nil {
					l.Close()
					return err
				}
			}
			return l.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			f, err := vfs.Default.Open(filepath.Join(dir, pebblewal.FirstName))
			if err != nil {
				return 0, err
			}
			defer f.Close()
			// pebble's replayWAL: an invalid record at the tail (zeroed or
			// torn chunk, unexpected EOF) ends the log; it is not an error.
			r := pebblerecord.NewReader(f, 1)
			n := 0
			for {
				rr, err := r.Next()
				if err == nil {
					var b []byte
					b, err = io.ReadAll(rr)
					if err == nil {
						visit(b)
						n++
						continue
					}
				}
				if errors.Is(err, io.EOF) || pebblerecord.IsInvalidRecord(err) {
					return n, nil
				}
				return n, err
			}
		},
	}
}

// openRotatingPebble opens a relaxed pebble log that rotates its WAL every
// rotateAt bytes (pebblewal.Create), as pebble's DB does when a memtable
// fills: what a durawal roll does (seal the finished segment, start the
// next) with pebble's timing: durawal seals in the background and makes
// only the next roll wait for it.
func openRotatingPebble(dir string, rotateAt int64) (peerLog, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return pebblewal.Create(dir, false, rotateAt)
}
