package main

import (
	"errors"
	"io"

	"github.com/rosedblabs/wal"
)

func rosedbLib() *lib {
	return &lib{
		name:    "rosedb",
		version: "github.com/rosedblabs/wal v1.3.8",
		concurrency: "no group commit; Write is safe for concurrent use (its own mutex, held across " +
			"the write and the fsync), so no outer mutex",
		relaxed: "Options.Sync=false, BytesPerSync=0 (write per Write, no fsync)",
		open: func(dir string, m mode) (peerLog, error) {
			opts := wal.DefaultOptions
			opts.DirPath = dir
			opts.Sync = m == durable
			w, err := wal.Open(opts)
			if err != nil {
				return nil, err
			}
			return &rosedbLog{w: w}, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			opts := wal.DefaultOptions
			opts.DirPath = dir
			opts.Sync = false
			w, err := wal.Open(opts)
			if err != nil {
				return err
			}
			for i := 0; i < n; i += 1000 {
				for j := i; j < n && j < i+1000; j++ {
					w.PendingWrites(rec)
				}
				if _, err := w.WriteAll(); err != nil {
					w.Close()
					return err
				}
			}
			if err := w.Sync(); err != nil {
				w.Close()
				return err
			}
			return w.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			opts := wal.DefaultOptions
			opts.DirPath = dir
			w, err := wal.Open(opts)
			if err != nil {
				return 0, err
			}
			defer w.Close()
			r := w.NewReader()
			n := 0
			for {
				rec, _, err := r.Next()
				if errors.Is(err, io.EOF) {
					return n, nil
				}
				if err != nil {
					return n, err
				}
				visit(rec)
				n++
			}
		},
	}
}

type rosedbLog struct{ w *wal.WAL }

func (r *rosedbLog) Append(rec []byte) error { _, err := r.w.Write(rec); return err }
func (r *rosedbLog) Syncs() int64            { return -1 }
func (r *rosedbLog) Close() error            { return r.w.Close() }
