package main

import (
	"sync"

	"github.com/tidwall/wal"
)

func tidwallLib() *lib {
	return &lib{
		name:    "tidwall",
		version: "github.com/tidwall/wal v1.2.1",
		concurrency: "no group commit; outer mutex assigns the consecutive index and calls Write " +
			"(one record, one fsync)",
		relaxed: "Options.NoSync (write per Write, no fsync)",
		open: func(dir string, m mode) (peerLog, error) {
			opts := *wal.DefaultOptions
			opts.NoSync = m == relaxed
			l, err := wal.Open(dir, &opts)
			if err != nil {
				return nil, err
			}
			last, err := l.LastIndex()
			if err != nil {
				l.Close()
				return nil, err
			}
			return &tidwallLog{l: l, next: last + 1}, nil
		},
		fill: func(dir string, n int, rec []byte) error {
			opts := *wal.DefaultOptions
			opts.NoSync = true
			l, err := wal.Open(dir, &opts)
			if err != nil {
				return err
			}
			var b wal.Batch
			idx := uint64(0)
			for i := 0; i < n; i += 1000 {
				b.Clear()
				for j := i; j < n && j < i+1000; j++ {
					idx++
					b.Write(idx, rec)
				}
				if err := l.WriteBatch(&b); err != nil {
					l.Close()
					return err
				}
			}
			return l.Close() // Close fsyncs
		},
		replay: func(dir string, visit func([]byte)) (int, error) {
			l, err := wal.Open(dir, nil)
			if err != nil {
				return 0, err
			}
			defer l.Close()
			first, err := l.FirstIndex()
			if err != nil {
				return 0, err
			}
			last, err := l.LastIndex()
			if err != nil {
				return 0, err
			}
			n := 0
			for i := first; i <= last && first > 0; i++ {
				rec, err := l.Read(i)
				if err != nil {
					return n, err
				}
				visit(rec)
				n++
			}
			return n, nil
		},
	}
}

type tidwallLog struct {
	mu   sync.Mutex // indexes must be consecutive
	l    *wal.Log
	next uint64
}

func (t *tidwallLog) Append(rec []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.l.Write(t.next, rec); err != nil {
		return err
	}
	t.next++
	return nil
}

func (t *tidwallLog) Syncs() int64 { return -1 }
func (t *tidwallLog) Close() error { return t.l.Close() }
