package main

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/durawal/durawal/policy"
	"github.com/durawal/durawal/wal"
	"github.com/durawal/durawal/wal/vfs"
	"github.com/durawal/durawal/wal/vfs/faultfs"
)

func durawalLib() *lib {
	return &lib{
		name:        "durawal",
		version:     "github.com/durawal/durawal (this repository)",
		concurrency: "own group commit (leader/follower); Append is safe for concurrent use",
		relaxed:     "policy.SyncNever() (write per commit, no fsync)",
		counter:     "Stats().Fsyncs (cross-checked with a faultfs.Counter)",
		open: func(dir string, m mode) (peerLog, error) {
			pol := policy.SyncEveryCommit()
			if m == relaxed {
				pol = policy.SyncNever()
			}
			c := &faultfs.Counter{}
			l, err := wal.Open(dir, wal.Options{Policy: pol, FS: faultfs.Inject(vfs.OS(), c)})
			if err != nil {
				return nil, err
			}
			return &durawalLog{l: l, c: c}, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			l, err := wal.Open(dir, wal.Options{Policy: policy.SyncNever()})
			if err != nil {
				return err
			}
			batch := make([][]byte, 0, 1000)
			for i := 0; i < n; i += len(batch) {
				batch = batch[:0]
				for j := i; j < n && len(batch) < cap(batch); j++ {
					batch = append(batch, rec)
				}
				if _, err := l.AppendBatchContext(context.Background(), batch); err != nil {
					l.Close()
					return err
				}
			}
			return l.Close()
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			l, err := wal.Open(dir, wal.Options{})
			if err != nil {
				return 0, err
			}
			defer l.Close()
			r, err := l.NewReader(0)
			if err != nil {
				return 0, err
			}
			defer r.Close()
			n := 0
			for {
				_, rec, err := r.Next()
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

type durawalLog struct {
	l *wal.Log
	c *faultfs.Counter
}

func (d *durawalLog) Append(rec []byte) error { _, err := d.l.Append(rec); return err }
func (d *durawalLog) Close() error            { return d.l.Close() }

// Syncs returns the log's own count of segment fdatasyncs plus directory
// fsyncs; vfsSyncs is the same figure as the faultfs.Counter under it saw.
func (d *durawalLog) Syncs() int64 {
	s := d.l.Stats()
	return int64(s.Fsyncs + s.DirSyncs)
}

func (d *durawalLog) vfsSyncs() int64 {
	return d.c.Count(faultfs.OpSync) + d.c.Count(faultfs.OpSyncDir)
}

// openDurawalBuffered opens a durawal log whose commits return once their
// record is in the log buffer (policy.BufferedInterval, InnoDB =0), written
// every second and synced only hourly: the log-buffer append path alone.
// writebackAfter is Options.WritebackAfter (0: the default, -1: off).
func openDurawalBuffered(dir string, writebackAfter int64) (peerLog, error) {
	c := &faultfs.Counter{}
	l, err := wal.Open(dir, wal.Options{Policy: policy.BufferedInterval(time.Hour, time.Second), FS: faultfs.Inject(vfs.OS(), c),
		WritebackAfter: writebackAfter})
	if err != nil {
		return nil, err
	}
	return &durawalLog{l: l, c: c}, nil
}
